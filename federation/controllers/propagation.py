"""The propagation controller: hub templates to member clusters, as a plan.

One reconcile handles one template (a user object on the hub of any kind a
policy selects). It is the KubeBlocks shape: a chain of transformers, each a
small function that reads (caches, policies, the placement engine) and adds
to a :class:`Build`; then one executor applies the plan. The chain reads like
a table of contents (:data:`TRANSFORMERS`). House rules: one concern per
transformer; transformers never write; writes exist only as plan vertices.

1. ``load_policy``: the winning PropagationPolicy/ClusterPropagationPolicy; an object
   on the deny list (:mod:`federation.controllers.deny`) is skipped as if no policy
   selected it, with a Warning event on the policy.
2. ``load_clusters``: MemberClusters (or the engaged members) as placement input;
   then ``estimate_capacity`` (availableReplicas from each member's resource
   summary) and ``apply_failover`` (NotReady clusters held or evicted per the
   policy's tolerationSeconds, the fleet's disruption budget), see
   :mod:`federation.controllers.failover`.
3. ``schedule``: the placement engine, fed the previous decision.
4. ``render``: per-cluster manifests: replicas, overrides, ownership marks. An
   override policy that would change a protected field (see
   :func:`federation.controllers.overrides.refusals`) stops the template
   (``Applied=False``, ``OverrideRefused``); copy vertices carry the template's
   identity, which the executor checks before writing.
5. ``plan_dependencies``: the namespace (and the CRD of a custom resource) first.
6. ``plan_copies``: create / update / nothing, per cluster, against the member
   cache; foreign objects are conflicts, never overwritten unless the policy
   says ``conflictResolution: Overwrite``.
7. ``plan_removals``: copies on clusters no longer chosen are deleted; an
   unreachable one is remembered (pending cleanup) and retried; then
   ``plan_graceful_eviction`` keeps old copies on an evicted cluster until the
   new copies are ready (they stay pending cleanup meanwhile).
8. ``plan_record``: the template's finalizer and decision annotations, written
   before any member copy (every member vertex depends on it).

After execution a second, small plan writes what was learned: the template's
status (summed replicas, conditions) and its ResourceBinding. Events are
emitted when a condition changes.

Deletion: the finalizer holds the template until its copies are deleted. A
member that cannot be reached is waited for at most ``cleanup_wait`` seconds;
then the finalizer is released with a ``CleanupPending`` condition and event
on the ResourceBinding, which stays behind and is cleaned (by
:mod:`federation.controllers.cleanup`) when the member returns.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import pydantic

from federation.contexts.client import ApiError, ClientError, ClusterUnavailable, Resource
from federation.contexts.clusters import ClusterSet
from federation.contexts.multicluster import PLACEMENT_ANNOTATION, MultiClusterClient
from federation.controllers import (
    api,
    bindings,
    capacity,
    deny,
    events,
    manifests,
    overrides,
    plan,
    scheduling,
    status,
)
from federation.controllers import failover as failover_
from federation.controllers.kinds import KindTracker
from federation.placement import clusters as clusters_
from federation.placement import counts, engine, loader, matching
from federation.placement import decision as decision_
from federation.placement import policy as policy_
from federation.placement import resources as resources_
from federation.runtime.reconcile import Request, Result, group_kind

log = logging.getLogger("federation.propagation")
JSON = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class PropagationSettings:
    cleanup_wait: float = 30.0
    """Seconds a deleted template waits for unreachable members before its finalizer is
    released (the ResourceBinding then carries the pending cleanup). Long enough to ride
    out an API server restart, short enough that `kubectl delete` does not look hung."""
    retry_pending: float = 5.0
    """Seconds between attempts to clean copies on a member that was unreachable."""
    max_backoff: float = 60.0
    """Cap on a failing template's retry backoff (controller-runtime's 1000 s is for keys
    that fail for their own reasons). Propagation mostly fails because a member is away;
    an outage of minutes would otherwise push retries to tens of minutes after it ends.
    The MemberCluster Ready event requeues at once anyway; this bounds every other case."""
    workers: int = 16
    """Concurrent reconciles. A reconcile spends nearly all its time waiting on API
    servers (a handful of sequential writes of tens of milliseconds each), so throughput
    grows with workers until the API servers, not this process, are the limit. The
    clean-up controller uses as many: after an outage it has as many bindings to finish
    as propagation has templates to fix."""
    schedule_budget: float = 5.0
    """Seconds one placement may compute (in a worker thread, off the event loop). The
    engine places a template of a large fleet in milliseconds; one that needs seconds is a
    hostile or broken policy. Past the budget the template is Scheduled=False
    (ScheduleTimeout) and not retried until it or its policy changes."""
    schedule_threads: int = 2
    """Placements computing at once. Placement is CPU-bound and Python runs one thread at
    a time, so more threads place nothing faster; two let a slow placement (which keeps
    its thread until it returns, even past its budget) not stall every other one."""
    deny_list: deny.DenyList = dataclasses.field(default_factory=deny.DenyList)
    """Kinds and objects never propagated. The default list keeps our own API, a
    cluster's records about itself and credentials on the hub, whatever a policy selects
    (``fedctl run --propagation-deny`` changes it; docs/propagation.md lists it)."""


class Problem(Exception):
    """Bad input: shown as a condition and an event, retried only when inputs change."""

    def __init__(self, condition: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.condition = condition
        self.reason = reason


@dataclasses.dataclass
class Build:
    """What the transformers learned and intend for one template."""

    template: JSON
    resource: Resource
    hub: str
    policy: policy_.Policy | None = None
    policy_doc: JSON = dataclasses.field(default_factory=dict)
    clusters: list[clusters_.Cluster] = dataclasses.field(default_factory=list)
    decision: decision_.Decision | None = None
    desired: dict[str, JSON] = dataclasses.field(default_factory=dict)
    live: dict[str, JSON | None] = dataclasses.field(default_factory=dict)
    unreachable: dict[str, str] = dataclasses.field(default_factory=dict)
    causes: dict[str, BaseException] = dataclasses.field(default_factory=dict)
    """The error behind each :attr:`unreachable` entry (an outage, or a real refusal)."""
    inherited: list[str] = dataclasses.field(default_factory=list)
    """Clusters still holding copies of a deleted earlier template of the same name (its
    leftover binding's pending clean-up): this template's record takes them over."""
    conflicts: dict[str, str] = dataclasses.field(default_factory=dict)
    removals: list[str] = dataclasses.field(default_factory=list)
    pending_cleanup: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    dag: plan.Plan = dataclasses.field(default_factory=plan.Plan)
    shared: set[str] = dataclasses.field(default_factory=set)
    """Keys of dependency creates (a Namespace, a CRD) that other templates may make too."""
    record: plan.Vertex | None = None
    binding: JSON | None = None
    """The template's ResourceBinding as cached (previous conditions live there)."""
    failover: failover_.Outcome = dataclasses.field(default_factory=failover_.Outcome)
    """Per-cluster failover judgements and old copies kept by graceful eviction."""
    denied: tuple[JSON, deny.Rule] | None = None
    """The policy that selected a denied object, and the deny rule it matched."""

    @property
    def previous_conditions(self) -> list[JSON]:
        found = bindings.previous_conditions(self.binding)
        if found:
            return found
        return list((self.template.get("status") or {}).get("conditions") or [])

    @property
    def meta(self) -> JSON:
        found: JSON = self.template.setdefault("metadata", {})
        return found

    @property
    def namespace(self) -> str | None:
        return self.meta.get("namespace")

    @property
    def name(self) -> str:
        return str(self.meta["name"])

    @property
    def previous(self) -> dict[str, int]:
        return decision_from(self.template)

    @property
    def targets(self) -> list[str]:
        return sorted(self.decision.clusters) if self.decision else []

    @property
    def pending_before(self) -> list[str]:
        """Clusters whose copies were to be deleted: this template's, and inherited ones."""
        return sorted(set(pending_from(self.template)) | set(self.inherited))

    def note_unreachable(self, cluster: str, exc: BaseException) -> None:
        self.unreachable[cluster] = str(exc)
        self.causes[cluster] = exc


def decision_from(template: Mapping[str, Any]) -> dict[str, int]:
    raw = (template.get("metadata", {}).get("annotations") or {}).get(api.REPLICAS_ANNOTATION)
    try:
        found = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return {str(k): int(v) for k, v in found.items()} if isinstance(found, dict) else {}


def pending_from(template: Mapping[str, Any]) -> list[str]:
    annotations = template.get("metadata", {}).get("annotations") or {}
    try:
        found = json.loads(annotations.get(api.PENDING_CLEANUP_ANNOTATION) or "[]")
    except ValueError:
        return []
    return sorted(str(n) for n in found) if isinstance(found, list) else []


class Reconciler:
    """Reconciles hub templates (requests in the hub cluster, of tracked kinds)."""

    def __init__(self, mc: MultiClusterClient, clusters: ClusterSet, kinds: KindTracker,
                 recorder: events.Recorder,
                 settings: PropagationSettings | None = None) -> None:
        self.mc = mc
        self.clusters = clusters
        self.kinds = kinds
        self.recorder = recorder
        self.settings = settings or PropagationSettings()
        self.hub = clusters.hub.name
        self.writer = Writer(mc, self.hub, self.settings.deny_list)
        self._denials_reported: set[tuple[str, str]] = set()
        """(policy uid, deny rule) pairs already reported by an event on the policy."""
        self.scheduler = scheduling.Scheduler(self.settings.schedule_budget,
                                              self.settings.schedule_threads)
        self.failover = failover_.Failover()
        """Failover state (disruption budget); the wiring sets its requeue."""

    # -- the reconcile -------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        resource = self.kinds.resource(request.kind)
        if resource is None:
            return None
        template = await self.mc.get(resource, request.name, request.namespace or None,
                                     cluster=self.hub)
        if template is None:
            return None
        build = Build(template=template, resource=resource, hub=self.hub)
        build.binding = await self.mc.get(bindings.binding_resource(template),
                                          bindings.binding_name(template),
                                          request.namespace or None, cluster=self.hub)
        build.inherited = bindings.leftover(build.binding, template)
        if template["metadata"].get("deletionTimestamp"):
            return await self._finalize(build)
        try:
            for transformer in TRANSFORMERS:
                await transformer(self, build)
        except Problem as problem:
            return await self._report_problem(build, problem)
        if build.policy is None:
            if build.denied is not None:
                await self._report_denied(build, *build.denied)
            return await self._unpropagate(build)
        report = await plan.execute(build.dag, SharedCreates(self.writer, build.shared))
        return await self._after(build, report)

    # -- after execution: what was learned -----------------------------------------------

    async def _after(self, build: Build, report: plan.Report) -> Result | None:
        failed = {o.vertex.cluster: o.error or "failed" for o in report.failed()
                  if o.vertex.cluster != self.hub}
        hub_failed = [o for o in report.failed() if o.vertex.cluster == self.hub]
        if hub_failed:
            raise hub_failed[0].exception or RuntimeError(hub_failed[0].error)
        removed = [c for c in build.removals if c not in failed
                   and c not in build.unreachable and c not in build.failover.held]
        still_pending = sorted(set(build.pending_cleanup) - set(removed))
        if still_pending != pending_from(build.template) or removed:
            recorded = report.result(build.record)
            await self._write_pending(build, recorded or build.template, still_pending)
        await self._write_status(build, failed, still_pending)
        refused = {o.vertex.cluster for o in report.failed() if o.refused}
        if (set(failed) - refused) or build.unreachable:
            # A refused write cannot succeed on a retry; only a change of inputs requeues it.
            raise copies_failed(build, report, self.hub)
        if still_pending:
            return Result(requeue_after=self.settings.retry_pending)
        return None

    async def _write_pending(self, build: Build, current: JSON, pending: list[str]) -> None:
        """Record clusters still holding copies, so the placement annotation keeps routing."""
        annotations = current["metadata"].setdefault("annotations", {})
        set_json(annotations, api.PENDING_CLEANUP_ANNOTATION, pending)
        annotations[PLACEMENT_ANNOTATION] = json.dumps(sorted(set(build.targets) | set(pending)))
        build.template = await self.writer.update(self.hub, current)

    async def _write_status(self, build: Build, failed: Mapping[str, str],
                            pending: Sequence[str]) -> None:
        copies = await self._copies(build, build.targets)
        conditions = self._conditions(build, failed, pending, copies)
        binding = bindings.binding(build.template, build.decision, build.policy, conditions,
                                   copies, failed, build.unreachable, pending)
        await self._emit_transitions(build, conditions)
        writes = plan.Plan()
        add_binding(writes, self.hub, binding, build.binding)
        template_status = status.template_status(build.template, copies, conditions)
        if template_status is not None and not status.same_status(
                build.template.get("status"), template_status):
            writes.add(plan.Vertex(self.hub, plan.Action.STATUS,
                                   status_patch(build.template, template_status)))
        (await plan.execute(writes, self.writer)).raise_for_failure()

    async def _copies(self, build: Build, names: Sequence[str]) -> dict[str, JSON | None]:
        copies: dict[str, JSON | None] = {}
        for name in names:
            if name in build.live and name not in build.unreachable:
                copies[name] = await self._live(build, name)
            else:
                copies[name] = None
        return copies

    def _conditions(self, build: Build, failed: Mapping[str, str], pending: Sequence[str],
                    copies: Mapping[str, JSON | None]) -> list[JSON]:
        previous = build.previous_conditions
        decision = build.decision
        assert decision is not None
        placed = decision_.counts_text(decision.clusters) if decision.clusters else "no cluster"
        problems = {**build.unreachable, **failed,
                    **{c: f"conflict: {m}" for c, m in build.conflicts.items()}}
        applied_ok = not problems
        applied_message = "applied to " + ", ".join(build.targets) if applied_ok else \
            "; ".join(f"{c}: {m}" for c, m in sorted(problems.items()))
        refused = any(m.startswith(plan.REFUSED) for m in failed.values())
        unhealthy = {c: status.health(copy) for c, copy in copies.items()
                     if status.health(copy) != "Healthy"}
        result = [
            status.condition("Scheduled", True, "Scheduled", f"placed {placed}", previous),
            status.condition("Applied", applied_ok, "Applied" if applied_ok else
                             "OverrideRefused" if refused else "ApplyFailed",
                             applied_message, previous),
            status.condition("Healthy", not unhealthy and applied_ok,
                             "Healthy" if not unhealthy else "NotHealthy",
                             "all copies healthy" if not unhealthy else ", ".join(
                                 f"{c}: {h}" for c, h in sorted(unhealthy.items())), previous),
        ]
        if build.conflicts:
            result.append(status.condition("Conflict", True, "ObjectNotManaged", "; ".join(
                f"{c}: {m}" for c, m in sorted(build.conflicts.items())), previous))
        if pending:
            result.append(status.condition("CleanupPending", True, "MemberUnreachable",
                                           "copies still to delete in " + ", ".join(pending),
                                           previous))
        return result

    async def _emit_transitions(self, build: Build, conditions: Sequence[JSON]) -> None:
        before = {c.get("type"): c for c in build.previous_conditions}
        decision = build.decision
        assert decision is not None
        if decision.clusters != build.previous or "Scheduled" not in before:
            await self.recorder.emit(build.template, "Normal", "Scheduled",
                                     f"placed {decision_.counts_text(decision.clusters)} "
                                     f"by {api_ref(build.policy)}")
        for condition in conditions:
            old = before.get(condition["type"])
            changed = old is None or old.get("status") != condition["status"] \
                or old.get("message") != condition["message"]
            if not changed:
                continue
            bad = (condition["type"] in ("Conflict", "CleanupPending")) == \
                (condition["status"] == "True")
            if condition["type"] == "Applied" and condition["status"] == "True" and old:
                await self.recorder.emit(build.template, "Normal", "Applied",
                                         condition["message"])
            elif bad and condition["type"] != "Healthy":
                await self.recorder.emit(build.template, "Warning", condition["reason"],
                                         condition["message"])

    async def _report_problem(self, build: Build, problem: Problem) -> Result | None:
        """Bad input: a condition and an event; no copy is written or changed. The template
        keeps our finalizer (its binding goes with it) and its pending clean-up goes on."""
        log.info("%s %s/%s: %s", build.resource.kind, build.namespace or "", build.name,
                 problem)
        await self.recorder.emit(build.template, "Warning", problem.reason, str(problem))
        if build.policy is None and build.inherited:
            return None  # nothing of ours to record: the leftover stays the clean-up's
        pending = await self._keep_cleaning(build) if build.policy is not None \
            else pending_from(build.template)
        previous = build.previous_conditions
        conditions = [status.condition(problem.condition, False, problem.reason, str(problem),
                                       previous)]
        if pending:
            conditions.append(status.condition(
                "CleanupPending", True, "MemberUnreachable",
                "copies still to delete in " + ", ".join(pending), previous))
        binding = bindings.binding(build.template, build.decision, build.policy, conditions,
                                   {}, {}, build.unreachable, pending)
        writes = plan.Plan()
        add_binding(writes, self.hub, binding, build.binding)
        template_status = status.template_status(build.template, {}, conditions)
        if template_status is not None:
            template_status = {**(build.template.get("status") or {}),
                               "conditions": template_status["conditions"]}
            writes.add(plan.Vertex(self.hub, plan.Action.STATUS,
                                   status_patch(build.template, template_status)))
        (await plan.execute(writes, self.writer)).raise_for_failure()
        return Result(requeue_after=self.settings.retry_pending) if pending else None

    async def _keep_cleaning(self, build: Build) -> list[str]:
        """Record our finalizer and the pending clean-up (this template's and an earlier
        one's) on a template placement refused, then delete the copies that can be reached.
        Copies of the last decision stay: bad input changes nothing that runs."""
        pending = sorted(set(build.pending_before) - set(decision_from(build.template)))
        await self._hold(build, pending)
        if not pending:
            return []
        removal = plan.Plan()
        for cluster in pending:
            vertex = await self._delete_vertex(build, cluster)
            if vertex is not None:
                removal.add(vertex)
        report = await plan.execute(removal, self.writer)
        left = sorted((set(build.unreachable) & set(pending)) |
                      {o.vertex.cluster for o in report.failed()})
        await self._hold(build, left)
        return left

    async def _hold(self, build: Build, pending: Sequence[str]) -> None:
        """Our finalizer and ``pending`` on the template; a hub write only when they change."""
        meta = build.meta
        annotations = dict(meta.get("annotations") or {})
        wanted = dict(annotations)
        set_json(wanted, api.PENDING_CLEANUP_ANNOTATION, list(pending))
        holders = set(decision_from(build.template)) | set(pending)
        if holders:
            wanted[PLACEMENT_ANNOTATION] = json.dumps(sorted(holders))
        finalizers = list(meta.get("finalizers") or [])
        if api.FINALIZER in finalizers and wanted == annotations:
            return
        if api.FINALIZER not in finalizers:
            finalizers.append(api.FINALIZER)
        meta["annotations"] = wanted
        meta["finalizers"] = finalizers
        build.template = await self.writer.update(self.hub, build.template)

    async def _report_denied(self, build: Build, policy_doc: JSON, rule: deny.Rule) -> None:
        """A Warning event on the policy, once per (policy, rule): the first object it skips."""
        key = (str(policy_doc["metadata"].get("uid")), str(rule))
        if key in self._denials_reported:
            return
        if len(self._denials_reported) >= 10000:
            self._denials_reported.clear()
        self._denials_reported.add(key)
        where = f"{build.namespace}/" if build.namespace else ""
        message = (f"{build.resource.kind} {where}{build.name} is not propagated: deny list "
                   f"rule {rule} ({rule.describe()}); every object it matches is skipped")
        log.info("%s %s: %s", policy_doc.get("kind"), policy_doc["metadata"].get("name"),
                 message)
        await self.recorder.emit(policy_doc, "Warning", "Denied", message)

    # -- unpropagate and delete ------------------------------------------------------------

    async def _unpropagate(self, build: Build) -> Result | None:
        """No policy selects the template (any more): remove copies, then our marks."""
        if api.FINALIZER not in (build.meta.get("finalizers") or []):
            return None
        return await self._remove_everywhere(build, release=True, reason="no policy")

    async def _finalize(self, build: Build) -> Result | None:
        if api.FINALIZER not in (build.meta.get("finalizers") or []):
            return None
        orphan = (build.meta.get("annotations") or {}).get(api.ORPHAN_ANNOTATION) == "true"
        if orphan:
            return await self._release(build, [], orphaned=True)
        return await self._remove_everywhere(build, release=True, reason="template deleted")

    async def _remove_everywhere(self, build: Build, release: bool, reason: str
                                 ) -> Result | None:
        holders = sorted(set(decision_from(build.template)) | set(build.pending_before))
        removal = plan.Plan()
        for cluster in holders:
            vertex = await self._delete_vertex(build, cluster)
            if vertex is not None:
                removal.add(vertex)
        report = await plan.execute(removal, self.writer)
        causes = {**build.unreachable,
                  **{o.vertex.cluster: o.error or "delete failed" for o in report.failed()}}
        pending = sorted(causes)
        for cluster in pending:
            # Every retry of an outage: DEBUG (the cluster's transition is logged once).
            log.debug("%s %s: copy in %s not removed yet (%s)", build.resource.kind,
                      build.name, cluster, causes[cluster])
        deleting_since = build.meta.get("deletionTimestamp")
        waited = _age(deleting_since) if deleting_since else 0.0
        if pending and waited < self.settings.cleanup_wait:
            return Result(requeue_after=min(self.settings.retry_pending,
                                                      self.settings.cleanup_wait - waited + 0.1))
        if pending and not deleting_since:
            return Result(requeue_after=self.settings.retry_pending)
        return await self._release(build, pending, orphaned=False, reason=reason)

    async def _release(self, build: Build, pending: list[str], orphaned: bool,
                       reason: str = "template deleted") -> Result | None:
        """Drop our finalizer and marks; the binding keeps whatever is still pending."""
        resource = bindings.binding_resource(build.template)
        name = bindings.binding_name(build.template)
        if pending:
            message = (f"{reason}; copies left in {', '.join(pending)} (unreachable for "
                       f"{self.settings.cleanup_wait:.0f}s) are deleted when they return")
            log.info("%s %s: %s", build.resource.kind, build.name, message)
            await self.recorder.emit(build.template, "Warning", "CleanupPending", message)
            await self._mark_binding_pending(build, pending, message)
        else:
            try:
                await self.mc.cluster(self.hub).delete(resource, name, build.namespace)
            except ApiError as exc:
                if exc.status != 404:
                    raise
            if orphaned:
                await self.recorder.emit(build.template, "Normal", "Orphaned",
                                         "member copies kept (federation.io/orphan)")
        fresh = await self.mc.get(build.resource, build.name, build.namespace, cluster=self.hub)
        if fresh is None:
            return None
        meta = fresh["metadata"]
        meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != api.FINALIZER]
        annotations = meta.get("annotations") or {}
        for key in (api.REPLICAS_ANNOTATION, api.PENDING_CLEANUP_ANNOTATION,
                    api.POLICY_ANNOTATION, PLACEMENT_ANNOTATION):
            annotations.pop(key, None)
        await self.writer.update(self.hub, fresh)
        self.recorder.forget(fresh)
        return None

    async def _mark_binding_pending(self, build: Build, pending: list[str], message: str
                                    ) -> None:
        previous = build.previous_conditions
        conditions = [status.condition("CleanupPending", True, "MemberUnreachable", message,
                                       previous)]
        binding = bindings.binding(build.template, None, build.policy, conditions, {}, {},
                                   build.unreachable, pending, orphan_of_deleted=True)
        writes = plan.Plan()
        add_binding(writes, self.hub, binding, build.binding)
        (await plan.execute(writes, self.writer)).raise_for_failure()

    async def _delete_vertex(self, build: Build, cluster: str) -> plan.Vertex | None:
        """A delete of our copy in ``cluster``; None when there is none (or not ours)."""
        try:
            live = await self._live(build, cluster)
        except ClientError as exc:
            build.note_unreachable(cluster, exc)
            return None
        if live is None or not manifests.is_ours(live):
            return None
        return plan.Vertex(cluster, plan.Action.DELETE, live, reason="copy no longer wanted")

    async def _live(self, build: Build, cluster: str) -> JSON | None:
        kind = group_kind(build.resource)
        resource = self.kinds.member_resource(cluster, kind)
        if resource is None:
            await self.kinds.track_members(build.resource, [self.clusters.get(cluster)])
            resource = self.kinds.member_resource(cluster, kind)
        if resource is None:
            # The member does not serve this kind (yet): no copy can exist there.
            self.clusters.get(cluster).check_writable()
            return None
        return await self.mc.get(resource, build.name, build.namespace, cluster=cluster)


# -- transformers: read only; they add to the build and its plan ---------------------------


def template_resource(build: Build) -> resources_.Resource:
    """The template as the placement engine sees it; a template the engine cannot take
    (replicas that are not an int32, a kind that is not a string) is bad input, shown as a
    condition, not an exception retried for ever."""
    try:
        return resources_.from_manifest(build.template)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "template"
        raise Problem("Scheduled", "InvalidTemplate",
                      f"{where}: {first['msg']}") from None


async def load_policy(r: Reconciler, build: Build) -> None:
    resource = template_resource(build)
    found: list[tuple[policy_.Policy, JSON]] = []
    for kind in (api.PROPAGATION_POLICIES, api.CLUSTER_PROPAGATION_POLICIES):
        namespace = build.namespace if kind.namespaced else None
        if kind.namespaced and namespace is None:
            continue
        listing = await r.mc.list(kind, namespace, clusters=[r.hub])
        for doc in listing.items.get(r.hub, []):
            policy = parse_policy(doc)
            if policy is not None and matching.matches(policy, resource):
                found.append((policy, doc))
    if not found:
        return
    found.sort(key=lambda pair: matching.precedence(pair[0]))
    rule = await denied_by(r, build.template)
    if rule is not None:
        build.denied = (found[0][1], rule)
        return
    build.policy, build.policy_doc = found[0]
    build.notes.append(matching.describe(found[0][0], [p for p, _ in found[1:]]))


async def denied_by(r: Reconciler, template: JSON) -> deny.Rule | None:
    """The deny rule the template matches (Secrets also: a namespace holding a joined
    cluster's kubeconfig, wherever a MemberCluster points), or None."""
    rules = r.settings.deny_list
    if deny.group_kind_of(template) == deny.SECRET:
        listing = await r.mc.list(api.MEMBER_CLUSTERS, clusters=[r.hub])
        rules = rules.with_rules(deny.credential_rules(listing.items.get(r.hub, [])))
    return rules.object_rule(template)


def parse_policy(doc: Mapping[str, Any]) -> policy_.Policy | None:
    """A hub policy object as a placement policy; invalid ones are skipped (they carry a
    Valid=False condition of their own, see :mod:`federation.controllers.policies`)."""
    body = {k: v for k, v in doc.items() if k != "status"}
    try:
        return loader.parse_policy(body, f"{doc.get('kind')} {doc['metadata'].get('name')}")
    except loader.LoadError:
        return None


async def load_clusters(r: Reconciler, build: Build) -> None:
    if build.policy is None:
        return
    listing = await r.mc.list(api.MEMBER_CLUSTERS, clusters=[r.hub])
    registered = listing.items.get(r.hub, [])
    build.clusters = placement_clusters(registered, r.clusters)


def placement_clusters(registered: Sequence[Mapping[str, Any]], clusters: ClusterSet
                       ) -> list[clusters_.Cluster]:
    """The members of the ClusterSet, each described by its MemberCluster when it has one.

    The ClusterSet is the one source of truth for which clusters exist: the static
    members (``fedctl run --contexts``) and those joined from a MemberCluster's Secret
    alike. A MemberCluster adds what placement reads (labels, location, taints,
    conditions, capacity) to the member of its name; one naming no member of the set is
    no placement target (nothing here can reach it). A member without one is placed on
    bare. A member is ready when it is engaged, answers, and its MemberCluster (if any)
    does not say Ready=False; a disabled or misconfigured member is known but not ready.
    """
    docs = {str(doc["metadata"]["name"]): doc for doc in registered}
    found = []
    for cluster in clusters.members:
        if cluster.is_hub and cluster.name not in docs:
            continue
        reachable = cluster.engaged and cluster.available is not False
        doc = docs.get(cluster.name)
        found.append(member_cluster(doc, reachable) if doc is not None
                     else clusters_.Cluster(name=cluster.name, ready=reachable))
    return found


def member_cluster(doc: Mapping[str, Any], reachable: bool) -> clusters_.Cluster:
    spec = doc.get("spec") or {}
    conditions = {c.get("type"): c.get("status")
                  for c in (doc.get("status") or {}).get("conditions") or []}
    ready = reachable and conditions.get("Ready", "True") != "False"
    available = (doc.get("status") or {}).get("availableReplicas")
    return clusters_.Cluster.model_validate({
        "name": doc["metadata"]["name"],
        "labels": doc["metadata"].get("labels") or {},
        "region": spec.get("region") or None, "zone": spec.get("zone") or None,
        "provider": spec.get("provider") or None,
        "taints": [{k: t[k] for k in ("key", "value", "effect") if k in t}
                   for t in spec.get("taints") or []],
        "available_replicas": available if counts.is_replicas(available) else None,
        "ready": ready,
    })


async def schedule(r: Reconciler, build: Build) -> None:
    if build.policy is None:
        return
    unknown = unknown_cluster_names(build.policy, {c.name for c in build.clusters})
    if unknown:
        raise Problem("Scheduled", "UnknownCluster",
                      f"{api_ref(build.policy)} names unknown cluster(s) "
                      f"{', '.join(unknown)} (known: "
                      f"{', '.join(sorted(c.name for c in build.clusters))})")
    resource = template_resource(build)
    key = schedule_key(build, resource)
    why = r.scheduler.timed_out(key)
    if why is None:
        try:
            decision = await r.scheduler.run(engine.place, resource, build.policy,
                                             build.clusters, build.previous, key=key)
        except scheduling.BudgetExceeded as exc:
            why = str(exc)
    if why is not None:
        raise Problem("Scheduled", "ScheduleTimeout",
                      f"{api_ref(build.policy)}: {why}; not tried again until the template "
                      "or the policy changes")
    decision = dataclasses.replace(decision, explanation=(*build.notes, *decision.explanation))
    build.decision = decision
    if not decision.ok:
        raise Problem("Scheduled", "ScheduleFailed", f"{decision.error}")


def schedule_key(build: Build, resource: resources_.Resource) -> tuple[str, ...]:
    """What a placement that ran out of budget is remembered by: the template as the engine
    sees it and the policy's version. Cluster changes (capacity, readiness) are left out on
    purpose: they requeue every template, and must not rerun a hopeless placement each time."""
    policy_meta = build.policy_doc.get("metadata") or {}
    return (str(build.meta.get("uid")), resource.model_dump_json(),
            str(policy_meta.get("uid")), str(policy_meta.get("resourceVersion")),
            api_ref(build.policy))


def unknown_cluster_names(policy: policy_.Policy, known: set[str]) -> list[str]:
    placement = policy.spec.placement
    named: list[str] = []
    for _, affinity in policy_.affinity_terms(placement):
        if affinity is not None:
            named += affinity.cluster_names
    strategy = placement.replica_scheduling
    if strategy and strategy.weight_preference:
        for rule in strategy.weight_preference.static_weight_list:
            named += rule.target_cluster.cluster_names
    return sorted(set(named) - known)


async def render(r: Reconciler, build: Build) -> None:
    if build.policy is None or build.decision is None:
        return
    resource = template_resource(build)
    policies = await load_overrides(r, build.namespace)
    chosen = overrides.applicable(policies, resource)
    for policy in chosen:
        found = overrides.refusals(policy)
        if found:
            raise Problem("Applied", "OverrideRefused",
                          f"{policy.kind} {policy.ref} is refused: {found[0]}")
    divided = policy_.mode(build.policy.spec.placement) is not policy_.Mode.DUPLICATED
    by_name = {c.name: c for c in build.clusters}
    uid = str(build.meta.get("uid"))
    for cluster, replicas in build.decision.clusters.items():
        manifest = manifests.render(build.template, replicas, divided)
        try:
            applied = overrides.apply_all(manifest, by_name[cluster], chosen)
        except overrides.OverrideRefused as exc:
            raise Problem("Applied", "OverrideRefused", f"{cluster}: {exc}") from None
        except overrides.OverrideError as exc:
            raise Problem("Applied", "OverrideFailed", f"{cluster}: {exc}") from None
        build.desired[cluster] = manifests.mark(applied.manifest, uid)


async def load_overrides(r: Reconciler, namespace: str | None
                         ) -> list[overrides.OverridePolicy]:
    found = []
    for kind in (api.OVERRIDE_POLICIES, api.CLUSTER_OVERRIDE_POLICIES):
        if kind.namespaced and namespace is None:
            continue
        listing = await r.mc.list(kind, namespace if kind.namespaced else None,
                                  clusters=[r.hub])
        for doc in listing.items.get(r.hub, []):
            try:
                found.append(overrides.parse({k: v for k, v in doc.items() if k != "status"}))
            except overrides.OverrideError:
                continue  # reported on the policy itself
    return found


async def plan_record(r: Reconciler, build: Build) -> None:
    """Finalizer and decision on the template, before any member is touched."""
    if build.policy is None or build.decision is None:
        return
    template = build.template
    meta = template["metadata"]
    annotations = dict(meta.get("annotations") or {})
    # A chosen cluster's copy is (re)written by this plan: it is no longer pending clean-up.
    pending = sorted((set(build.pending_before) | set(build.removals)) - set(build.targets))
    wanted = dict(annotations)
    set_json(wanted, api.REPLICAS_ANNOTATION, dict(build.decision.clusters))
    wanted[api.POLICY_ANNOTATION] = api_ref(build.policy)
    wanted[PLACEMENT_ANNOTATION] = json.dumps(sorted(set(build.targets) | set(pending)))
    set_json(wanted, api.PENDING_CLEANUP_ANNOTATION, pending)
    finalizers = list(meta.get("finalizers") or [])
    if api.FINALIZER not in finalizers:
        finalizers.append(api.FINALIZER)
    action = plan.Action.NOOP
    if wanted != annotations or finalizers != (meta.get("finalizers") or []):
        action = plan.Action.UPDATE
        meta["annotations"] = wanted
        meta["finalizers"] = finalizers
    build.pending_cleanup = pending
    build.record = build.dag.add(plan.Vertex(r.hub, action, template,
                                              reason="record decision"))
    for vertex in list(build.dag):
        if vertex is not build.record:
            build.dag.depend(vertex, on=build.record)


async def plan_dependencies(r: Reconciler, build: Build) -> None:
    """The namespace of a namespaced template, and the CRD of a custom resource."""
    for cluster in build.desired:
        if build.namespace:
            await _namespace_vertex(r, build, cluster)
        await _crd_vertex(r, build, cluster)


async def _namespace_vertex(r: Reconciler, build: Build, cluster: str) -> None:
    from federation.contexts.client import NAMESPACES

    try:
        live = await r.mc.get(NAMESPACES, str(build.namespace), cluster=cluster)
    except ClientError as exc:
        build.note_unreachable(cluster, exc)
        return
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": build.namespace,
                              "labels": {"federation.io/created-for": "propagation"}}}
    vertex = build.dag.add(plan.Vertex(cluster, plan.Action.NOOP if live else plan.Action.CREATE,
                                       namespace, reason="namespace of a propagated object"))
    build.shared.add(vertex.key)


async def _crd_vertex(r: Reconciler, build: Build, cluster: str) -> None:
    """A custom resource needs its CRD in the member: propagate it along when absent."""
    group = build.resource.group
    if not group or build.resource.kind == "CustomResourceDefinition":
        return
    crd_name = f"{build.resource.plural}.{group}"
    hub_crd = await r.mc.get(api.CRDS, crd_name, cluster=r.hub)
    if hub_crd is None:
        return  # a built-in kind (or an aggregated API): nothing to propagate
    try:
        live = await r.mc.get(api.CRDS, crd_name, cluster=cluster)
    except ClientError as exc:
        build.note_unreachable(cluster, exc)
        return
    if live is not None:
        return
    desired = manifests.mark(manifests.render(hub_crd, None, False),
                             str(hub_crd["metadata"].get("uid")))
    vertex = build.dag.add(plan.Vertex(cluster, plan.Action.CREATE, desired,
                                       reason=f"CRD of {build.resource.kind}"))
    build.shared.add(vertex.key)


async def plan_copies(r: Reconciler, build: Build) -> None:
    overwrite = str((build.policy_doc.get("spec") or {}).get("conflictResolution")) == "Overwrite"
    for cluster, desired in build.desired.items():
        if cluster in build.unreachable:
            continue
        try:
            live = await r._live(build, cluster)
        except ClientError as exc:
            build.note_unreachable(cluster, exc)
            continue
        build.live[cluster] = live
        vertex = copy_vertex(cluster, desired, live, overwrite,
                             expect=plan.Identity.of(build.template))
        if vertex is None:
            build.conflicts[cluster] = (
                f"{build.resource.kind} {build.namespace + '/' if build.namespace else ''}"
                f"{build.name} exists and is not managed by federation "
                "(set conflictResolution: Overwrite in the policy to take it over)")
            continue
        added = build.dag.add(vertex)
        for other in list(build.dag):
            if other.cluster == cluster and other is not added and \
                    other.obj.get("kind") in ("Namespace", "CustomResourceDefinition"):
                build.dag.depend(added, on=other)


def copy_vertex(cluster: str, desired: JSON, live: JSON | None, overwrite: bool,
                expect: plan.Identity | None = None) -> plan.Vertex | None:
    """Create, update or nothing for one copy; None for a foreign object we may not touch.
    ``expect`` (the template's identity) is what the executor checks before writing."""
    if live is None:
        return plan.Vertex(cluster, plan.Action.CREATE, desired, reason="missing", expect=expect)
    if not manifests.is_ours(live) and not overwrite:
        return None
    why = manifests.needs_write(desired, live) if manifests.is_ours(live) else "taking over"
    if why is None:
        return plan.Vertex(cluster, plan.Action.NOOP, desired, reason="up to date")
    return plan.Vertex(cluster, plan.Action.UPDATE, manifests.retain(desired, live), reason=why,
                       expect=expect)


async def plan_removals(r: Reconciler, build: Build) -> None:
    """Copies on clusters that held the template before and are not chosen now."""
    holders = set(build.previous) | set(build.pending_before)
    for cluster in sorted(holders - set(build.targets)):
        if cluster not in r.clusters.clusters:
            continue
        vertex = await r._delete_vertex(build, cluster)
        build.removals.append(cluster)
        if vertex is not None:
            build.dag.add(vertex)


TRANSFORMERS: tuple[Callable[[Reconciler, Build], Awaitable[None]], ...] = (
    load_policy,
    load_clusters,
    capacity.estimate_capacity,
    failover_.apply_failover,
    schedule,
    render,
    plan_dependencies,
    plan_copies,
    plan_removals,
    failover_.plan_graceful_eviction,
    plan_record,
)


# -- helpers ---------------------------------------------------------------------------------


def add_binding(writes: plan.Plan, hub: str, binding: Mapping[str, JSON],
                current: Mapping[str, Any] | None) -> None:
    """The binding object, then its status (the status subresource needs the object);
    either is left out when the cached binding already says the same."""
    wanted, wanted_status = binding["object"], binding["status"]["status"]
    if current is None:
        spec = writes.add(plan.Vertex(hub, plan.Action.CREATE, wanted))
    elif current.get("spec") == wanted["spec"] and \
            (current["metadata"].get("labels") or {}) == wanted["metadata"]["labels"]:
        spec = writes.add(plan.Vertex(hub, plan.Action.NOOP, wanted))
    else:
        # A PUT with the cached version: cheaper for the hub than server-side apply, and
        # a concurrent change is a 409 and a retry.
        version = current["metadata"].get("resourceVersion")
        replacement = {**wanted, "metadata": {**wanted["metadata"], "resourceVersion": version}}
        spec = writes.add(plan.Vertex(hub, plan.Action.UPDATE, replacement))
    have = dict((current or {}).get("status") or {})
    if current is not None and status.same_status(have, wanted_status):
        return
    writes.depend(writes.add(plan.Vertex(hub, plan.Action.STATUS, binding["status"])), on=spec)


def copies_failed(build: Build, report: plan.Report, hub: str) -> ClientError:
    """The error a reconcile with failed member writes raises: :class:`ClusterUnavailable`
    (retried quietly: the cluster's outage is logged once, by its probe) when every cause
    is a cluster being away, else :class:`CopiesFailed` (logged as an error)."""
    failed = [o for o in report.failed() if o.vertex.cluster != hub]
    messages = {**build.unreachable, **{o.vertex.cluster: o.error or "failed" for o in failed}}
    causes = [*build.causes.values(), *(o.exception for o in failed if o.attempted)]
    names = ",".join(sorted(messages))
    short = {name: message.removeprefix(f"{name}: ") for name, message in messages.items()}
    text = "; ".join(message if len(short) == 1 else f"{name}: {message}"
                     for name, message in sorted(short.items()))
    if all(isinstance(cause, ClusterUnavailable) for cause in causes):
        return ClusterUnavailable(names, text)
    return CopiesFailed(names, text)


class CopiesFailed(ClientError):
    """Some member writes failed for a reason other than an outage (each cause is named)."""

    retryable = True


class SharedCreates:
    """The executor's writer for one plan: creating a dependency several templates share
    (their Namespace, a CRD) counts as done when it already exists (409 AlreadyExists:
    another template's reconcile made it first). Other writes pass through unchanged."""

    def __init__(self, writer: plan.Writer, shared: set[str]) -> None:
        self.writer = writer
        self.shared = shared

    async def create(self, cluster: str, obj: JSON) -> JSON:
        try:
            return await self.writer.create(cluster, obj)
        except ApiError as exc:
            if exc.status == 409 and exc.reason == "AlreadyExists" and \
                    plan.vertex_key(cluster, obj) in self.shared:
                return obj
            raise

    async def update(self, cluster: str, obj: JSON) -> JSON:
        return await self.writer.update(cluster, obj)

    async def apply(self, cluster: str, obj: JSON) -> JSON:
        return await self.writer.apply(cluster, obj)

    async def patch_status(self, cluster: str, obj: JSON) -> JSON:
        return await self.writer.patch_status(cluster, obj)

    async def delete(self, cluster: str, obj: JSON) -> JSON:
        return await self.writer.delete(cluster, obj)


def api_ref(policy: policy_.Policy | None) -> str:
    return f"{policy.kind} {policy.ref}" if policy is not None else "no policy"


def set_json(annotations: JSON, key: str, value: Any) -> None:
    if value:
        annotations[key] = json.dumps(value, sort_keys=True)
    else:
        annotations.pop(key, None)


def status_patch(template: Mapping[str, Any], new_status: JSON) -> JSON:
    meta = template["metadata"]
    body: JSON = {"apiVersion": template["apiVersion"], "kind": template["kind"],
                  "metadata": {"name": meta["name"]}, "status": new_status}
    if meta.get("namespace"):
        body["metadata"]["namespace"] = meta["namespace"]
    return body


def _age(timestamp: str) -> float:
    import datetime

    when = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.UTC)
    return (datetime.datetime.now(datetime.UTC) - when).total_seconds()


class Writer:
    """The executor's writes, through the multi-cluster client only. A create, update or
    apply of a denied object in a member is refused here too, whatever planned it."""

    def __init__(self, mc: MultiClusterClient, hub: str,
                 denied: deny.DenyList | None = None) -> None:
        self.mc = mc
        self.hub = hub
        self.denied = denied if denied is not None else deny.DenyList()

    def _check(self, cluster: str, obj: JSON) -> None:
        if cluster == self.hub:
            return
        rule = self.denied.object_rule(obj)
        if rule is not None:
            raise deny.Denied(f"{plan.REFUSED} {plan.Identity.of(obj)} in {cluster} is on "
                              f"the propagation deny list ({rule})")

    async def create(self, cluster: str, obj: JSON) -> JSON:
        self._check(cluster, obj)
        return await self.mc.cluster(cluster).create(obj)

    async def update(self, cluster: str, obj: JSON) -> JSON:
        self._check(cluster, obj)
        return await self.mc.cluster(cluster).update(obj)

    async def apply(self, cluster: str, obj: JSON) -> JSON:
        self._check(cluster, obj)
        return await self.mc.cluster(cluster).apply(obj)

    async def patch_status(self, cluster: str, obj: JSON) -> JSON:
        writer = self.mc.cluster(cluster)
        resource = await writer.resource(obj)
        meta = obj["metadata"]
        return await writer.patch_status(resource, meta["name"], {"status": obj["status"]},
                                         namespace=meta.get("namespace"))

    async def delete(self, cluster: str, obj: JSON) -> JSON:
        writer = self.mc.cluster(cluster)
        meta = obj["metadata"]
        return await writer.delete(await writer.resource(obj), meta["name"],
                                   meta.get("namespace"), uid=meta.get("uid"))

