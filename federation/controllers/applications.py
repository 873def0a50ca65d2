"""The applications controller: Application -> revision -> workflow -> member resources.

One reconcile handles one Application (``core.oam.dev/v1beta1``) on the hub:

1. **Revision**: the content hash of its spec and the external Policies it names
   (:mod:`federation.apps.revision`); a new ``ApplicationRevision`` ``<app>-vN`` only
   when the content changed; revisions past the garbage-collect policy's limit are
   deleted (never the current one nor one a cluster still runs).
2. **Compile** (:mod:`federation.apps.compile`): render components and traits, place
   each deploy step's topology through the placement engine, apply overrides. An
   Application that cannot be honoured gets ``status.status: renderFailed`` and a
   condition naming the field; nothing is written to a member.
3. **Workflow** (:mod:`federation.apps.workflow`): the state stored in
   ``status.workflow`` is advanced with what the member caches show (each deployed
   workload's readiness, of the content we wrote) and the clock.
4. **Deploy**: what every (deploy step, cluster) the workflow has reached must hold,
   diffed against the ResourceTracker (:mod:`federation.apps.tracker`), becomes a plan
   (namespaces first, then each object create/update/nothing, and deletes of what is
   no longer rendered) executed by propagation's executor through the multi-cluster
   client: the only writer. Member copies are written directly (``mc.cluster(name)``),
   not through hub templates and bindings, because a staged rollout holds *different*
   revisions of one object in different clusters at once, which one hub template
   cannot express.
5. **Record**: the ResourceTracker ``<app>`` (every object placed, with its cluster and
   revision; what could not be deleted yet is still listed, under ``pendingCleanup``),
   then the Application's status, each written only when it changed.

Deletion works like propagation's: Applications carry no finalizer; when one is gone its
tracker says what to delete; a member that cannot be reached keeps its entries in the
tracker (``pendingCleanup``) and the tracker is retried until that member returns (at once
when it does, else with a backoff growing from ``pending_retry`` to ``pending_backoff``
seconds), then deleted, along with the Application's revisions. An entry naming a cluster
that is no member at all (a tenant may write trackers, so how many is theirs to choose) is
not retried on a timer: it is kept, reported once (a ``UnknownClusters`` Warning, and a
condition on a live Application) and retried when a member of that name becomes available.

Notification steps: once the status recording the step as done is written, the Event is
emitted and one message per URL is handed to the notification sender
(:mod:`federation.controllers.notifications`), which POSTs off the reconcile; each step
execution is submitted once (remembered by Application uid, revision, workflow start and
step, so a reconcile on a cache behind our own status write does not send it again).

User requests come as annotations (``fedctl app resume|restart|rollback``), each with a
nonce the status records once handled, so a request is acted on exactly once.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import functools
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from federation.apps import compile as compile_
from federation.apps import model, revision, scope, tracker, workflow
from federation.apps.render import APP_LABEL, WORKLOAD_KINDS
from federation.contexts import client as kube
from federation.contexts import egress
from federation.contexts.cache import Event
from federation.contexts.client import ClientError, ClusterUnavailable
from federation.contexts.clusters import Cluster, ClusterSet
from federation.contexts.multicluster import MultiClusterClient
from federation.controllers import kinds, notifications
from federation.controllers.kit import events, plan
from federation.controllers.kit import executor as executor_
from federation.controllers.kit.copies import copy_vertex
from federation.controllers.kit.view import members_of, placement_clusters
from federation.hub import api, deny, failover, manifests
from federation.runtime import controller, manager, queue
from federation.runtime.reconcile import Request, Result, group_kind

log = logging.getLogger("federation.applications")
JSON = dict[str, Any]
Desired = dict[tuple[str, str], list[tuple[JSON, int]]]
"""(cluster, deploy step) -> the manifests it must hold, each with its revision."""

APP_KIND = group_kind(api.APPLICATIONS)
APP_ANNOTATION = manifests.APPLICATION_ANNOTATION
"""On member objects: ``namespace/name`` of the Application that placed them."""
RESUME = "federation.io/resume"
RESTART = "federation.io/restart"
ROLLBACK = "federation.io/rollback"
"""``N@nonce``: go back to revision N (``fedctl app rollback``)."""
FAIL_ANNOTATION = "federation.io/simulate-unhealthy"


@dataclasses.dataclass(frozen=True)
class ApplicationSettings:
    local_cluster: str | None = None
    """The member KubeVela's ``local`` names (``--app-local-cluster``). None: the hub is
    KubeVela's local cluster, but ours runs no workloads, so ``local`` is refused."""
    pending_retry: float = 5.0
    """Seconds between the first retries of a deletion a member that is away keeps
    pending (a member coming back is also retried at once, from its availability event)."""
    pending_backoff: float = 60.0
    """The longest wait between retries of a deleted Application's pending clean-up: the
    wait grows with how long it has been pending (a quarter of it), so a member away for a
    day costs a retry a minute per tracker, not twelve."""
    workers: int = 4
    """Applications reconciled at once: each waits mostly on member API servers."""
    cleanup_wait: float = 30.0
    """Seconds a deleted Application's objects may stay pending on an away member before
    a Warning event says so (``--cleanup-wait``, as for propagated templates): a member
    restarting is not news, one gone for half a minute is."""
    sender: notifications.SenderSettings = dataclasses.field(
        default_factory=notifications.SenderSettings)
    """The notification sender's concurrency and backlogs (see its module)."""
    remembered_steps: int = 10_000
    """Notification step executions remembered as submitted (a few hundred bytes each):
    enough for every step a busy hub runs between two cache resyncs."""


def _stamp(value: float) -> str:
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Reconciler:
    def __init__(self, mc: MultiClusterClient, clusters: ClusterSet, recorder: events.Recorder,
                 settings: ApplicationSettings, denied: deny.DenyList | None = None,
                 clock: Any = time.time, outbox: notifications.Outbox | None = None) -> None:
        self.mc = mc
        self.clusters = clusters
        self.hub = clusters.hub.name
        self.recorder = recorder
        self.settings = settings
        self.writer = executor_.Writer(mc, self.hub, denied)
        self.clock = clock
        self.outbox: notifications.Outbox = outbox or notifications.Sender(
            egress.EgressPolicy(), functools.partial(notification_failed, recorder),
            settings.sender)
        self._submitted: collections.OrderedDict[tuple[str, int, float, str], None] = \
            collections.OrderedDict()
        """Notification step executions already submitted (oldest first, bounded)."""

    async def reconcile(self, request: Request) -> Result | None:
        ns, name = request.namespace, request.name
        app = await self.mc.get(api.APPLICATIONS, name, ns, cluster=self.hub)
        rt = await self.mc.get(api.RESOURCE_TRACKERS, name, ns, cluster=self.hub)
        if app is None or app["metadata"].get("deletionTimestamp"):
            if app is None:
                return await self.finalise(ns, name, rt)
            return None
        return await self.run(app, rt)

    # -- the Application is gone --------------------------------------------------------

    async def finalise(self, ns: str, name: str, rt: JSON | None) -> Result | None:
        if rt is not None:
            entries = _entries(rt)
            if rt["spec"].get("applicationUID") and entries:
                diff = tracker.diff(entries, {}, final={e.cluster for e in entries})
                deleted = await self._delete(diff.delete, f"{ns}/{name}", plan.Plan())
                left = [e for e in entries if e not in deleted]
                if left:
                    return await self._still_pending(rt, ns, name, left)
            await self._delete_from_hub(api.RESOURCE_TRACKERS, name, ns,
                                        rt["metadata"].get("resourceVersion"))
        for rev in await self._revisions(ns, name):
            await self._delete_from_hub(api.APPLICATION_REVISIONS, rev["metadata"]["name"], ns)
        return None

    async def _still_pending(self, rt: JSON, ns: str, name: str,
                             left: Sequence[tracker.Entry]) -> Result | None:
        """A deleted Application's objects not deleted yet: kept in the tracker; those on a
        member that is away are retried with a backoff (and at once when it returns),
        those naming no member wait for one of that name (no timer: their number is the
        tracker author's to choose)."""
        since = str(rt["spec"].get("pendingSince") or _stamp(self.clock()))
        await self._write_tracker(rt, ns, name, str(rt["spec"]["applicationUID"]),
                                  left, left, deleted_app=True, since=since)
        unknown = self._unknown(left)
        if unknown:
            await self.recorder.emit(rt, "Warning", "UnknownClusters",
                                     _unknown_message(unknown))
        away = [e for e in left if e not in unknown]
        if not away:
            return None
        await self._warn_if_lasting(rt, f"{ns}/{name}", away, since)
        started = failover.parse_time(since)
        return Result(requeue_after=self._backoff(
            self.clock() - started if started is not None else 0.0))

    def _unknown(self, entries: Iterable[tracker.Entry]) -> list[tracker.Entry]:
        """Entries naming a cluster that is not in the set (no member, nor the hub)."""
        return [e for e in entries if e.cluster not in self.clusters.clusters]

    def _backoff(self, pending_for: float) -> float:
        """Seconds until the next retry of a clean-up pending for ``pending_for`` seconds:
        a quarter of that, between ``pending_retry`` and ``pending_backoff``."""
        return min(max(self.settings.pending_retry, pending_for / 4),
                   self.settings.pending_backoff)

    async def _delete_from_hub(self, resource: kube.Resource, name: str, ns: str,
                               version: str | None = None) -> None:
        """Gone already is done; any other failure is raised and the deletion retried (a
        tracker or revision must not outlive its Application quietly)."""
        try:
            await self.mc.cluster(self.hub).delete(resource, name, ns, resource_version=version)
        except kube.ApiError as exc:
            if exc.status != 404:
                raise

    async def _warn_if_lasting(self, rt: JSON, app: str, left: Sequence[tracker.Entry],
                               since: str) -> None:
        """One Warning on the tracker once objects have been pending ``cleanup_wait``
        seconds (:func:`~federation.controllers.kit.events.overdue_once`, with the retry period
        of that moment, so a few looks fall in its window)."""
        wait = self.settings.cleanup_wait
        if not events.overdue_once(failover.parse_time(since), self.clock(), wait,
                                   self._backoff(wait)):
            return
        where = ", ".join(sorted({e.cluster for e in left}))
        await self.recorder.emit(rt, "Warning", "CleanupPending",
                                 f"Application {app} deleted; {len(left)} object(s) left in "
                                 f"{where} (unreachable for {wait:.0f}s) are deleted when "
                                 "they return")

    # -- one reconcile of a live Application --------------------------------------------

    async def run(self, app: JSON, rt: JSON | None) -> Result | None:
        meta = app["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        status = copy.deepcopy(app.get("status") or {})
        now = float(self.clock())
        spec = app.get("spec") or {}
        try:
            external = await self._external(ns, spec)
            snapshot = revision.content(spec, external)
            digest = revision.content_hash(snapshot)
            revisions = await self._revisions(ns, name)
            numbers = [(int(r["spec"]["revision"]), str(r["spec"]["revisionHash"]))
                       for r in revisions]
            number, new = revision.next_revision(numbers, digest)
            fleet = placement_clusters(
                [o for o in (await self.mc.list_view(api.MEMBER_CLUSTERS,
                                                     clusters=[self.hub])).items.get(
                    self.hub, [])], members_of(self.clusters))
            grant = await self._grant(ns)
            compiled = compile_.compile_app(spec, name, ns, external, fleet,
                                            self.settings.local_cluster, grant)
        except model.AppError as exc:
            return await self._refuse(app, status, str(exc))
        if new:
            await self._create_revision(app, number, digest, snapshot)
            revisions = await self._revisions(ns, name)
        handled = dict(status.get("handledRequests") or {})
        annotations = meta.get("annotations") or {}
        state = workflow.from_status(status.get("workflow"))
        restart = annotations.get(RESTART)
        if state is None or state.revision != number or \
                (restart and restart != handled.get(RESTART)):
            state = workflow.initial(number, compiled.steps, now)
            status.pop("rollback", None)
        if restart:
            handled[RESTART] = restart
        rollback = _rollback_request(annotations.get(ROLLBACK), handled.get(ROLLBACK))
        if rollback is not None:
            handled[ROLLBACK] = annotations[ROLLBACK]
            target = rollback or _last_good(revisions, number)
            if target is None:
                await self.recorder.emit(app, "Warning", "RollbackFailed",
                                         "no earlier revision succeeded")
            else:
                status["rollback"] = {"revision": target, "from": number,
                                      "time": _stamp(now)}
        resume = annotations.get(RESUME)
        obs_resume = bool(resume) and resume != handled.get(RESUME)
        if resume:
            handled[RESUME] = resume
        entries = _entries(rt) if rt is not None else []
        rolled_back = status.get("rollback")
        actions: list[workflow.Action] = []
        if rolled_back:
            target_rev = int(rolled_back["revision"])
            try:
                desired, final, targets = await self._revision_targets(
                    revisions, target_rev, ns, name, external, fleet, entries, grant)
            except model.AppError as exc:
                return await self._refuse(app, status, str(exc))
            health = await self._health(targets, uid, f"{ns}/{name}")
        else:
            targets = {(step, c): list(compiled.targets[step].clusters.get(c, ()))
                       for step in compiled.targets for c in compiled.targets[step].clusters}
            health = await self._health(
                {k: v for k, v in targets.items()
                 if k[1] in workflow.assignments(state).get(k[0], ())}, uid, f"{ns}/{name}")
            obs = workflow.Observations(health, obs_resume, compiled.health.window,
                                        compiled.health.probe_interval)
            state, actions = workflow.evaluate(state, compiled.steps, obs, now)
            desired, final = self._desired(state, compiled, number, entries)
            for action in actions:
                if isinstance(action, workflow.Rollback):
                    good = _last_good(revisions, number)
                    if good is not None:
                        status["rollback"] = {"revision": good, "from": number,
                                              "time": _stamp(now)}
        diff = tracker.diff(entries, desired, compiled.gc.keep_legacy, final)
        written, deleted, problems = await self._apply(diff, uid, f"{ns}/{name}")
        after = tracker.record([e for e in entries if e not in deleted],
                               written, deleted)
        pending = [e for e in diff.delete if e not in deleted]
        await self._write_tracker(rt, ns, name, uid, after, pending)
        unknown = self._unknown(pending)
        if unknown:
            await self.recorder.emit(app, "Warning", "UnknownClusters",
                                     _unknown_message(unknown))
        if state.end is not None and state.phase in ("succeeded", "failed"):
            await self._mark_revision(revisions, number, state.phase == "succeeded")
        await self._prune(revisions, compiled.gc.revision_limit, number, after)
        new_status = self._status(name, status, state, number, digest, health, handled, after,
                                  problems, now, unknown)
        if new_status != (app.get("status") or {}):
            await self.mc.cluster(self.hub).patch_status(
                api.APPLICATIONS, name, {"status": new_status}, namespace=ns)
        # Only now that the status says the step was taken: a raise above retries the
        # reconcile, which takes the step again, and must not have sent anything yet.
        for action in actions:
            if isinstance(action, workflow.Notify):
                await self._notify(app, compiled, state, action)
        if state.phase == "failed" and (app.get("status") or {}).get("status") != \
                "workflowFailed":
            failed = next((s for s in state.steps if s.phase == "failed"), None)
            if failed is not None:
                await self.recorder.emit(app, "Warning", "WorkflowFailed",
                                         f"step {failed.name}: {failed.reason}: "
                                         f"{failed.message}")
        waits = [a.seconds for a in actions if isinstance(a, workflow.Wait)]
        if len(pending) > len(unknown) or problems:
            waits.append(self.settings.pending_retry)
        if state.phase == "running" and not waits:
            waits.append(compiled.health.probe_interval)
        return Result(requeue_after=max(min(waits), 0.5)) if waits else None

    # -- inputs -------------------------------------------------------------------------

    async def _external(self, ns: str, spec: Mapping[str, Any]) -> dict[str, JSON]:
        inline = {p.get("name") for p in spec.get("policies") or [] if isinstance(p, dict)}
        wanted = {str(n) for s in (spec.get("workflow") or {}).get("steps") or []
                  if isinstance(s, dict)
                  for n in ((s.get("properties") or {}).get("policies") or [])
                  if isinstance(n, str)} - inline
        found: dict[str, JSON] = {}
        for name in sorted(wanted):
            doc = await self.mc.get(api.OAM_POLICIES, name, ns, cluster=self.hub)
            if doc is not None:
                found[name] = {k: doc[k] for k in ("apiVersion", "kind", "type", "properties")
                               if k in doc} | {"metadata": {"name": name, "namespace": ns}}
        return found

    async def _grant(self, ns: str) -> scope.Grant:
        """The member namespaces this hub namespace's Applications may write: their own,
        plus what an admin listed on the hub Namespace (cluster-scoped, so no author in
        ``ns`` can set it). Read from the cache; a Namespace not seen grants nothing."""
        found = await self.mc.view(kube.NAMESPACES, ns, cluster=self.hub)
        meta = (found.get("metadata") or {}) if found is not None else {}
        return scope.grant_of(ns, meta.get("annotations"))

    async def _revisions(self, ns: str, name: str) -> list[JSON]:
        listing = await self.mc.list(api.APPLICATION_REVISIONS, ns, clusters=[self.hub],
                                     label_selector={APP_LABEL: name})
        if self.hub in listing.errors:
            raise listing.errors[self.hub]
        return sorted(listing.items.get(self.hub, []),
                      key=lambda r: int((r.get("spec") or {}).get("revision") or 0))

    async def _create_revision(self, app: JSON, number: int, digest: str, snapshot: JSON
                               ) -> None:
        meta = app["metadata"]
        body: JSON = {"apiVersion": api.APPLICATION_REVISIONS.api_version,
                "kind": "ApplicationRevision",
                "metadata": {"name": revision.revision_name(meta["name"], number),
                             "namespace": meta["namespace"],
                             "labels": {APP_LABEL: meta["name"]}},
                "spec": {"application": {"metadata": {"name": meta["name"],
                                                      "namespace": meta["namespace"]},
                                         "spec": snapshot["spec"]},
                         "externalPolicies": snapshot["externalPolicies"],
                         "revision": number, "revisionHash": digest},
                "status": {}}
        try:
            await self.mc.cluster(self.hub).create(body, resource=api.APPLICATION_REVISIONS)
        except kube.ApiError as exc:
            if exc.status != 409:
                raise
        await self.recorder.emit(app, "Normal", "Revision",
                                 f"revision {body['metadata']['name']} created")

    async def _revision_targets(self, revisions: Sequence[JSON], number: int, ns: str,
                                name: str, external: Mapping[str, JSON], fleet: Any,
                                entries: Sequence[tracker.Entry], grant: scope.Grant
                                ) -> tuple[Desired, set[str],
                                           dict[tuple[str, str], list[JSON]]]:
        """A rollback: revision ``number`` fully deployed to every cluster it targets;
        every cluster is final (nothing of another revision stays). The namespace grant
        is today's: a revision made under a grant since withdrawn is refused."""
        doc = next((r for r in revisions if int(r["spec"]["revision"]) == number), None)
        if doc is None:
            raise model.AppError(f"rollback: revision {number} is not kept any more")
        old = compile_.compile_app(doc["spec"]["application"]["spec"], name, ns,
                                   doc["spec"].get("externalPolicies") or external, fleet,
                                   self.settings.local_cluster, grant)
        desired: Desired = {}
        targets: dict[tuple[str, str], list[JSON]] = {}
        for step, target in old.targets.items():
            for cluster, objects in target.clusters.items():
                desired[(cluster, step)] = [(o, number) for o in objects]
                targets[(step, cluster)] = list(objects)
        return desired, {e.cluster for e in entries} | {c for c, _ in desired}, targets

    def _desired(self, state: workflow.State, compiled: compile_.Compiled, number: int,
                 entries: Sequence[tracker.Entry]) -> tuple[Desired, set[str]]:
        """What each reached (cluster, step) holds, and the final clusters: once the
        workflow succeeded, every cluster (those the release no longer targets too)."""
        desired: Desired = {}
        for step, clusters in workflow.assignments(state).items():
            for cluster in clusters:
                objects = compiled.targets[step].clusters.get(cluster, ())
                desired[(cluster, step)] = [(o, number) for o in objects]
        final = {e.cluster for e in entries} if state.phase == "succeeded" else set()
        return desired, final

    async def _health(self, targets: Mapping[tuple[str, str], Sequence[JSON]], uid: str,
                      owner: str) -> dict[tuple[str, str], tuple[workflow.HealthState, str]]:
        found: dict[tuple[str, str], tuple[workflow.HealthState, str]] = {}
        for (step, cluster), objects in targets.items():
            verdict: tuple[workflow.HealthState, str] = ("healthy", "")
            for obj in objects:
                one = await self._object_health(cluster, obj, uid, owner)
                if one[0] == "failed":
                    verdict = one
                    break
                if one[0] == "progressing" and verdict[0] == "healthy":
                    verdict = one
            found[(step, cluster)] = verdict
        return found

    async def _object_health(self, cluster: str, obj: JSON, uid: str, owner: str
                             ) -> tuple[workflow.HealthState, str]:
        meta = obj["metadata"]
        try:
            resource = await self.mc.cluster(cluster).resource(obj)
            live = await self.mc.view(resource, meta["name"], meta.get("namespace"),
                                      cluster=cluster)
        except ClientError as exc:
            return "progressing", f"{cluster}: {exc}"
        what = f"{obj['kind']} {meta.get('namespace')}/{meta['name']}"
        if live is None:
            return "progressing", f"{what} not created yet"
        wanted = manifests.digest(_marked(obj, uid, owner))
        annotations = live["metadata"].get("annotations") or {}
        if annotations.get(manifests.APPLIED_HASH_ANNOTATION) != wanted:
            return "progressing", f"{what} not updated yet"
        if obj["kind"] not in WORKLOAD_KINDS:
            return "healthy", ""
        status = live.get("status") or {}
        for condition in status.get("conditions") or []:
            if condition.get("type") == "Progressing" and condition.get("status") == "False":
                return "failed", f"{what}: {condition.get('reason')}: " \
                                 f"{condition.get('message', '')}"
        replicas = int((live.get("spec") or {}).get("replicas", 1))
        if int(status.get("observedGeneration") or 0) < int(live["metadata"].get(
                "generation") or 0):
            return "progressing", f"{what}: generation not observed yet"
        ready = int(status.get("readyReplicas") or 0)
        updated = int(status.get("updatedReplicas") or 0)
        if ready < replicas or updated < replicas:
            return "progressing", f"{what}: {ready}/{replicas} ready"
        return "healthy", ""

    # -- writes -------------------------------------------------------------------------

    async def _apply(self, diff: tracker.Diff, uid: str, owner: str
                     ) -> tuple[list[tracker.Entry], list[tracker.Entry], list[str]]:
        dag = plan.Plan()
        problems: list[str] = []
        by_vertex: dict[str, tracker.Entry] = {}
        for entry, manifest in diff.write:
            desired = _marked(manifest, uid, owner)
            try:
                writer = self.mc.cluster(entry.cluster)
                resource = await writer.resource(desired)
                live = await self.mc.get(resource, entry.name, entry.namespace or None,
                                         cluster=entry.cluster)
                namespace_vertex = await self._namespace(dag, entry)
            except ClientError as exc:
                problems.append(f"{entry}: {exc}")
                continue
            vertex = copy_vertex(entry.cluster, desired, live, overwrite=False,
                                 expect=plan.Identity.of(manifest))
            if vertex is None:
                assert live is not None
                problems.append(f"{entry}: exists and {manifests.placer(live)}")
                continue
            vertex = dag.add(vertex)
            if namespace_vertex is not None:
                dag.depend(vertex, namespace_vertex)
            by_vertex[vertex.key] = entry
        deleted = await self._delete(diff.delete, owner, dag, by_vertex)
        report = await executor_.execute(dag, self.writer,
                                         [v.key for v in dag if v.obj.get("kind") ==
                                          "Namespace"])
        written = []
        for key, outcome in report.outcomes.items():
            found = by_vertex.get(key)
            if found is None:
                continue
            entry = found
            if outcome.vertex.action is plan.Action.DELETE:
                if outcome.ok or _not_found(outcome):
                    deleted.append(entry)
            elif outcome.ok:
                written.append(entry)
            else:
                problems.append(f"{entry}: {outcome.error}")
        return written, deleted, problems

    async def _namespace(self, dag: plan.Plan, entry: tracker.Entry) -> plan.Vertex | None:
        if not entry.namespace:
            return None
        live = await self.mc.view(kube.NAMESPACES, entry.namespace, cluster=entry.cluster)
        if live is not None:
            return None
        return dag.add(plan.Vertex(entry.cluster, plan.Action.CREATE,
                                   {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": entry.namespace}},
                                   reason="namespace missing"))

    async def _delete(self, entries: Iterable[tracker.Entry], owner: str, dag: plan.Plan,
                      by_vertex: dict[str, tracker.Entry] | None = None
                      ) -> list[tracker.Entry]:
        """Plan the deletes (into ``dag``); entries already gone are returned as deleted.
        Without ``by_vertex`` the plan is executed here (finalisation). Only objects this
        Application placed (``owner`` in our annotation) are deleted: the tracker lives
        in the author's namespace, and a forged entry must not delete another team's
        objects."""
        own = by_vertex is None
        mapping: dict[str, tracker.Entry] = {} if by_vertex is None else by_vertex
        gone: list[tracker.Entry] = []
        for entry in entries:
            body: JSON = {"apiVersion": entry.api_version, "kind": entry.kind,
                          "metadata": {"name": entry.name, "namespace": entry.namespace}}
            if not entry.namespace:
                del body["metadata"]["namespace"]
            try:
                resource = await self.mc.cluster(entry.cluster).resource(body)
                live = await self.mc.view(resource, entry.name, entry.namespace or None,
                                          cluster=entry.cluster)
            except ClusterUnavailable:
                continue
            except ClientError as exc:
                log.debug("%s: %s", entry, exc)
                continue
            placed_by = (live["metadata"].get("annotations") or {}).get(APP_ANNOTATION) \
                if live is not None else None
            if live is None or not manifests.is_ours(live) or placed_by != owner:
                gone.append(entry)  # never there, deleted already, or someone else's now
                continue
            body["metadata"]["uid"] = live["metadata"].get("uid")
            vertex = dag.add(plan.Vertex(entry.cluster, plan.Action.DELETE, body,
                                         reason="no longer rendered"))
            mapping[vertex.key] = entry
        if own:
            report = await executor_.execute(dag, self.writer)
            gone += [mapping[k] for k, o in report.outcomes.items()
                     if o.ok or _not_found(o)]
        return gone

    async def _write_tracker(self, rt: JSON | None, ns: str, name: str, uid: str,
                             entries: Sequence[tracker.Entry],
                             pending: Sequence[tracker.Entry], deleted_app: bool = False,
                             since: str | None = None) -> None:
        spec: JSON = {"application": name, "applicationUID": uid,
                      "resources": [e.as_json() for e in entries], "count": len(entries),
                      "pendingCleanup": [e.as_json() for e in pending],
                      "applicationDeleted": deleted_app}
        if since is not None:
            spec["pendingSince"] = since  # when the deleted Application's clean-up stalled
        if rt is not None and rt.get("spec") == spec:
            return
        if rt is None and not entries:
            return
        body: JSON = {"apiVersion": api.RESOURCE_TRACKERS.api_version,
                      "kind": "ResourceTracker",
                "metadata": {"name": name, "namespace": ns, "labels": {APP_LABEL: name}},
                "spec": spec}
        writer = self.mc.cluster(self.hub)
        if rt is None:
            await writer.create(body, resource=api.RESOURCE_TRACKERS)
        else:
            body["metadata"]["resourceVersion"] = rt["metadata"]["resourceVersion"]
            await writer.update(body, resource=api.RESOURCE_TRACKERS)

    async def _mark_revision(self, revisions: Sequence[JSON], number: int, ok: bool) -> None:
        doc = next((r for r in revisions if int(r["spec"]["revision"]) == number), None)
        if doc is None or (doc.get("status") or {}).get("succeeded") == ok:
            return
        doc = copy.deepcopy(doc)
        doc["status"] = {**(doc.get("status") or {}), "succeeded": ok, "workflowFinished": True}
        with contextlib.suppress(kube.ApiError):
            await self.mc.cluster(self.hub).update(doc, resource=api.APPLICATION_REVISIONS)

    async def _prune(self, revisions: Sequence[JSON], limit: int, current: int,
                     entries: Sequence[tracker.Entry]) -> None:
        numbers = [int(r["spec"]["revision"]) for r in revisions]
        keep = {current} | {e.revision for e in entries}
        for number in revision.to_prune(numbers, limit, sorted(keep)):
            doc = next(r for r in revisions if int(r["spec"]["revision"]) == number)
            with contextlib.suppress(kube.ApiError):
                await self.mc.cluster(self.hub).delete(
                    api.APPLICATION_REVISIONS, doc["metadata"]["name"],
                    doc["metadata"]["namespace"])

    async def _notify(self, app: JSON, compiled: compile_.Compiled, state: workflow.State,
                      action: workflow.Notify) -> None:
        """The Event, then one message per URL the step names to the sender, which POSTs
        off the reconcile (at most once, best effort). Once per step execution: a
        reconcile that read a cache behind our own status write takes the step again,
        and is recognised here."""
        execution = (str(app["metadata"].get("uid")), state.revision, state.start,
                     action.step)
        if execution in self._submitted:
            return
        self._submitted[execution] = None
        while len(self._submitted) > self.settings.remembered_steps:
            self._submitted.popitem(last=False)
        text = action.message or f"Application {app['metadata']['name']}: step " \
                                 f"{action.step}"
        await self.recorder.emit(app, "Normal", "Notification", text)
        found = compiled.notifications.get(action.step)
        for url in found.urls if found is not None else ():
            admission = self.outbox.submit(
                notifications.Message(_reference(app), action.step, url, text))
            if admission.warn:
                await self.recorder.emit(
                    app, "Warning", "NotificationDropped",
                    f"step {action.step}: not sent: too many notifications of this "
                    "namespace are waiting to be sent (later ones are dropped until "
                    "they are)")

    async def _refuse(self, app: JSON, status: JSON, message: str) -> Result | None:
        new = {**status, "status": "renderFailed",
               "conditions": [{"type": "Rendered", "status": "False",
                               "reason": "InvalidApplication", "message": message}]}
        if new != (app.get("status") or {}):
            await self.recorder.emit(app, "Warning", "InvalidApplication", message)
            meta = app["metadata"]
            await self.mc.cluster(self.hub).patch_status(
                api.APPLICATIONS, meta["name"], {"status": new}, namespace=meta["namespace"])
        return None

    def _status(self, name: str, status: JSON, state: workflow.State, number: int,
                digest: str,
                health: Mapping[tuple[str, str], tuple[str, str]], handled: JSON,
                entries: Sequence[tracker.Entry], problems: Sequence[str], now: float,
                unknown: Sequence[tracker.Entry] = ()) -> JSON:
        phase = {"running": "runningWorkflow", "suspended": "workflowSuspending",
                 "failed": "workflowFailed", "succeeded": "running"}[state.phase]
        if status.get("rollback"):
            phase = "rolledBack"
        clusters = sorted({e.cluster for e in entries})
        healthy = all(h[0] == "healthy" for h in health.values()) and bool(health)
        services = [{"step": step, "cluster": cluster, "healthy": h[0] == "healthy",
                     "message": h[1]} for (step, cluster), h in sorted(health.items())]
        conditions = [{"type": "Rendered", "status": "True", "reason": "Rendered"},
                      {"type": "Applied", "status": "False" if problems else "True",
                       "reason": "ApplyFailed" if problems else "Applied",
                       "message": "; ".join(problems[:5])}]
        failed = next((s for s in state.steps if s.phase == "failed"), None)
        conditions.append({"type": "WorkflowFailed" if failed else "Workflow",
                           "status": "True" if failed else "False" if
                           state.phase != "succeeded" else "True",
                           "reason": failed.reason if failed else state.phase,
                           "message": f"step {failed.name}: {failed.message}" if failed
                           else ""})
        if unknown:
            conditions.append({"type": "UnknownClusters", "status": "True",
                               "reason": "UnknownCluster",
                               "message": _unknown_message(unknown)})
        out = {**status, "status": phase, "healthy": healthy,
               "latestRevision": {"name": revision.revision_name(name, number),
                                  "revision": number, "revisionHash": digest},
               "workflow": workflow.to_status(state, _stamp),
               "services": services, "clusters": ",".join(clusters),
               "appliedResources": [e.as_json() for e in entries],
               "handledRequests": handled, "conditions": conditions}
        return out

    # -- wiring helpers -----------------------------------------------------------------


def _marked(manifest: JSON, uid: str, owner: str) -> JSON:
    """What we write: the rendered object, its owner Application and our marks (health
    compares the live object's applied-hash with the digest of exactly this)."""
    body = copy.deepcopy(manifest)
    body.setdefault("metadata", {}).setdefault("annotations", {})[APP_ANNOTATION] = owner
    return manifests.mark(body, uid)


def _not_found(outcome: plan.Outcome) -> bool:
    return isinstance(outcome.exception, kube.ApiError) and outcome.exception.status == 404


def _entries(rt: Mapping[str, Any]) -> list[tracker.Entry]:
    return [tracker.Entry.from_json(e) for e in (rt.get("spec") or {}).get("resources") or []]


def _rollback_request(value: str | None, handled: str | None) -> int | None:
    """A new rollback request: its revision (0 = the last good one), or None."""
    if not value or value == handled:
        return None
    number, _, _ = value.partition("@")
    return int(number) if number.isdigit() else 0


def _last_good(revisions: Sequence[JSON], current: int) -> int | None:
    good = [int(r["spec"]["revision"]) for r in revisions
            if (r.get("status") or {}).get("succeeded") and int(r["spec"]["revision"]) < current]
    return max(good) if good else None


async def notification_failed(recorder: events.Recorder, message: notifications.Message,
                              why: str) -> None:
    """The sender's report of a message not delivered: a Warning on the Application,
    worded for the tenant (``why`` names no address, port or server text)."""
    await recorder.emit(message.app, "Warning", "NotificationFailed",
                        f"step {message.step}: not delivered: {why}")


def _reference(app: Mapping[str, Any]) -> JSON:
    """What a later Event on ``app`` needs (not the whole object: it waits in a queue)."""
    meta = app.get("metadata") or {}
    return {"apiVersion": app.get("apiVersion"), "kind": app.get("kind"),
            "metadata": {k: meta.get(k) for k in ("name", "namespace", "uid")}}


def _unknown_message(unknown: Sequence[tracker.Entry]) -> str:
    """The Warning and condition about tracked objects in clusters that are no member:
    a few names (tenant text, shortened), how many, and what will happen."""
    names = sorted({e.cluster for e in unknown})
    shown = ", ".join(repr(n[:63]) for n in names[:5]) + (", ..." if len(names) > 5 else "")
    return (f"{len(unknown)} tracked object(s) in {len(names)} cluster(s) that are not "
            f"members ({shown}): kept, and deleted if a member of that name joins")


def app_of(hub: str, event: Event) -> Iterable[Request]:
    """A member object's event -> its Application (by our owner annotation)."""
    annotations = (event.obj.get("metadata") or {}).get("annotations") or {}
    owner = annotations.get(APP_ANNOTATION)
    if not owner or "/" not in owner:
        return ()
    ns, _, name = owner.partition("/")
    return (Request(hub, APP_KIND, ns, name),)


def tracker_app(hub: str, event: Event) -> Iterable[Request]:
    """A tracker's event -> the Application of the same name (gone ones are finalised)."""
    meta = event.obj.get("metadata") or {}
    return (Request(hub, APP_KIND, meta.get("namespace", ""), meta.get("name", "")),)


def apps_in_namespace(clusters: ClusterSet, hub: str, event: Event) -> Iterable[Request]:
    """An external Policy changed: every Application of its namespace (a deploy step may
    name it; the revision hash says whether it does)."""
    return _apps_in(clusters, hub, (event.obj.get("metadata") or {}).get("namespace") or "")


def _apps_in(clusters: ClusterSet, hub: str, namespace: str) -> list[Request]:
    cache = clusters.hub.cache
    informer = cache.informers.get(api.APPLICATIONS) if cache is not None else None
    if informer is None:
        return []
    return [Request(hub, APP_KIND, namespace, str(app["metadata"]["name"]))
            for app in informer.store.list(namespace, None)]


def grant_changed(event: Event) -> bool:
    """A hub Namespace's grant annotation changed (an admin granted or withdrew)."""
    if event.type != "MODIFIED" or event.old is None:
        return False

    def value(obj: Mapping[str, Any]) -> Any:
        return ((obj.get("metadata") or {}).get("annotations") or {}).get(
            scope.TARGETS_ANNOTATION)
    return bool(value(event.old) != value(event.obj))


def apps_of_namespace(clusters: ClusterSet, hub: str, event: Event) -> Iterable[Request]:
    """A hub Namespace's grant changed: every Application in it, so a refused one is
    tried again at once and a withdrawn grant stops further writes."""
    return _apps_in(clusters, hub, (event.obj.get("metadata") or {}).get("name") or "")


def trackers_in(clusters: ClusterSet, hub: str, cluster: str) -> list[Request]:
    """The Applications (live or gone) whose tracker lists an object in ``cluster``."""
    cache = clusters.hub.cache
    informer = cache.informers.get(api.RESOURCE_TRACKERS) if cache is not None else None
    if informer is None:
        return []
    found = []
    for rt in informer.store.list(None, None):
        spec = rt.get("spec") or {}
        entries = [*(spec.get("resources") or []), *(spec.get("pendingCleanup") or [])]
        if any(isinstance(e, Mapping) and e.get("cluster") == cluster for e in entries):
            meta = rt.get("metadata") or {}
            found.append(Request(hub, APP_KIND, str(meta.get("namespace") or ""),
                                 str(meta.get("name") or "")))
    return found


def on_member_available(clusters: ClusterSet, hub: str, ctl: controller.Controller,
                        cluster: Cluster) -> None:
    """A member became available (back, or joined for the first time): the trackers with
    objects there are retried now (their clean-up waited for it, some with no timer)."""
    if cluster.available:
        for request in trackers_in(clusters, hub, cluster.name):
            ctl.queue.add(request, queue.LOW_PRIORITY)


def install(mgr: manager.Manager, recorder: events.Recorder, settings: ApplicationSettings,
            denied: deny.DenyList | None = None,
            policy: egress.EgressPolicy | None = None) -> None:
    """Register the applications controller and its notification sender with ``mgr``;
    ``policy``: where notifications may be sent (``fedctl run --notification-allow``)."""
    hub = mgr.clusters.hub.name
    sender = notifications.Sender(policy or egress.EgressPolicy(),
                                  functools.partial(notification_failed, recorder),
                                  settings.sender)
    reconciler = Reconciler(mgr.client, mgr.clusters, recorder, settings, denied,
                            outbox=sender)
    ctl = controller.Controller("applications", reconciler.reconcile, workers=settings.workers)
    mgr.add_runnable("notification sender", sender.run)
    mgr.clusters.on_member_availability(
        functools.partial(on_member_available, mgr.clusters, hub, ctl))
    # Our own status writes are not a reason to reconcile again (the workflow requeues
    # itself while it waits); spec, annotation (user requests) and delete events are.
    ctl.watch(api.APPLICATIONS, clusters="hub",
              predicate=lambda e: not (e.type == "MODIFIED" and e.old is not None and
                                       kinds.status_only(e.old, e.obj)))
    ctl.watch(api.RESOURCE_TRACKERS, clusters="hub", map=functools.partial(tracker_app, hub))
    ctl.watch(kube.DEPLOYMENTS, clusters="members", map=functools.partial(app_of, hub))
    ctl.watch(api.OAM_POLICIES, clusters="hub",
              map=functools.partial(apps_in_namespace, mgr.clusters, hub))
    ctl.watch(kube.NAMESPACES, clusters="hub", predicate=grant_changed,
              map=functools.partial(apps_of_namespace, mgr.clusters, hub))
    mgr.cache(api.APPLICATION_REVISIONS, "hub")
    mgr.add(ctl)


__all__ = ["ApplicationSettings", "Reconciler", "install"]
