"""The propagation reconciler: Init -> Build -> Execute -> Record.

Init reads the template and its binding (the record) from the caches. Build runs the
transformer chain (:data:`TRANSFORMERS`) against a read-only
:class:`~.context.TransformContext`; each adds to the :class:`~.build.Build` and its plan
and answers with a verdict. Execute hands the plan to the executor, the only writer.
Record builds a second, small plan from what the execution reported: the binding and
the template's status, each only when it changed. A gone template, or one no policy
selects any more, goes to finalisation (:mod:`.finalise`), whose deletes and record are
plans too; one a ``policy.karmada.io`` policy had claimed keeps its copies
(:mod:`.unclaimed`).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from federation.contexts.cache import ReadOnly
from federation.contexts.client import (
    ApiError,
    ClientError,
    ClusterUnavailable,
    NotLeader,
    Resource,
)
from federation.contexts.clusters import ClusterSet
from federation.contexts.multicluster import MultiCluster
from federation.contexts.scoped import NotGranted
from federation.controllers.kit import chain, events, executor, expectations, plan
from federation.controllers.kit.chain import Problem
from federation.controllers.kit.interpreting import Interpreting
from federation.controllers.kit.kinds import Kinds
from federation.controllers.propagation import (
    activation,
    application_failover,
    capacity,
    copies,
    customized,
    dependencies,
    dependent_overrides,
    disruption,
    eviction,
    eviction_tasks,
    failover,
    fastpath,
    finalise,
    interpret,
    load_clusters,
    load_policy,
    observations,
    preserve,
    priority,
    propagate_deps,
    record,
    removals,
    render,
    report_only,
    rollouts,
    schedule,
    scheduler_name,
    scheduling,
    suspension,
    unclaimed,
)
from federation.controllers.propagation.build import Build, template_resource
from federation.controllers.propagation.context import CacheContext, TransformContext
from federation.controllers.propagation.settings import PropagationSettings
from federation.hub import api, bindings, deny, preservation, status
from federation.interpreter.customizations import Operation
from federation.placement import engine
from federation.runtime.reconcile import Request, Result, group_kind

log = logging.getLogger("federation.propagation")

Transformer = chain.Step[TransformContext, Build]

TRANSFORMERS: tuple[Transformer, ...] = (
    load_policy.load_policy,          # the winning policy; none (or denied): stop
    activation.lazy_activation,       # Lazy: the recorded spec until the template changes
    scheduler_name.check_scheduler_name,  # another scheduler's policy: not ours to place
    priority.resolve_priority,        # schedulePriority: the PriorityClass's value, recorded
    dependent_overrides.wait_for_overrides,  # the named override policies exist first
    preserve.record_preservation,     # preserveResourcesOnDeletion, kept in the binding
    unclaimed.record_rule,            # policy.karmada.io: copies stay when unclaimed
    load_clusters.load_clusters,      # the ClusterSet as placement input
    capacity.estimate_capacity,       # availableReplicas from resource summaries
    failover.apply_failover,          # ready / held / evicted, per policy
    application_failover.apply_application_failover,  # unhealthy copies; eviction tasks
    interpret.interpret_replicas,     # a customization's InterpretReplica, if any
    schedule.schedule,                # the placement engine, off the loop, on a budget
    render.render,                    # per-cluster manifests, overrides, identity
    eviction_tasks.inject_preserved_state,  # statePreservation labels on the new copy
    rollouts.stamp_restarts,          # governed workloads: restartVersion per cluster
    dependencies.plan_dependencies,   # Namespace and CRD first
    copies.plan_copies,               # create / update / nothing; conflicts
    propagate_deps.propagate_deps,    # propagateDeps: ConfigMaps, Secrets... follow
    rollouts.hold_config,             # governed config: no update until released there
    removals.plan_removals,           # copies on clusters no longer chosen
    eviction.plan_graceful_eviction,  # old copies kept until the new ones are ready
    eviction_tasks.plan_eviction_tasks,  # tasks assessed; Gracefully/Never keep old copies
    suspension.apply_suspension,      # suspended clusters: no create or update
    report_only.report_only,          # applyStrategy ReportDiff: differences, no writes
)
"""The chain, in order. House rules: one concern per transformer; transformers read
(through the context) and add to the build; they never write, never queue, never change
process state (the disruption budget is settled after the plan ran) and never import one
another (what several need is a fact on the build, :mod:`.lookups`, ``hub/`` or the kit)."""

CHAIN: chain.Chain[TransformContext, Build] = chain.Chain(TRANSFORMERS)
"""The kit's runner over :data:`TRANSFORMERS`."""

LEGACY_FINALIZER = api.FINALIZER
LEGACY_ANNOTATIONS = (api.REPLICAS_ANNOTATION, api.POLICY_ANNOTATION,
                      api.PENDING_CLEANUP_ANNOTATION, api.PLACEMENT_ANNOTATION)
"""What earlier versions put on templates; removed (once) from a template that has it."""


class Reconciler:
    """Reconciles hub templates (requests in the hub cluster, of tracked kinds)."""

    def __init__(self, mc: MultiCluster, clusters: ClusterSet, kinds: Kinds,
                 recorder: events.EventSink,
                 settings: PropagationSettings | None = None,
                 on_drift: Callable[[str, str], None] | None = None,
                 interpreting: Interpreting | None = None) -> None:
        self.kinds = kinds
        self.interpreting = interpreting or Interpreting()
        """The manager's resource interpreter (the wiring shuts its threads down with the
        manager); a reconciler made alone has its own."""
        self.on_drift = on_drift
        """Told (cluster, kind) of each drift we reverted: the metric that makes a fight
        with a member's controller visible (a revert at every reconcile)."""
        self.recorder = recorder
        self.settings = settings or PropagationSettings()
        self.hub = clusters.hub.name
        self.clusters = clusters
        self.writer: plan.Writer = executor.Writer(mc, self.hub, self.settings.deny_list,
                                                   kinds.own_writes.wrote)
        self.scheduler = scheduling.Scheduler(self.settings.schedule_budget,
                                              self.settings.schedule_threads)
        self.failover = disruption.Failover()
        self.context: TransformContext = CacheContext(mc, clusters, kinds, self.settings,
                                                      self.scheduler, self.failover,
                                                      self.interpreting)
        self.expectations = expectations.Expectations(self.failover.clock)
        """Our hub writes the cache has not shown yet (see :mod:`.expectations`)."""
        self.waiting_for_room: dict[Request, int] = {}
        """Templates the engine could not place for want of room (or placed in part), by
        arrival: retried when a member's summary changes (:mod:`.room`), not on a timer."""
        self._arrivals = itertools.count()
        self._denials_reported: set[tuple[str, str]] = set()
        """(policy uid, deny rule) pairs already reported by an event on the policy."""
        self.static = fastpath.static_value(self.settings, self.hub)
        """The code and settings every fingerprint covers (:mod:`.fastpath`)."""
        self.unchanged = 0
        """Reconciles that stopped on the fast path: nothing they read had changed."""
        self.on_unchanged: Callable[[], None] | None = None
        """Told of each (the metric)."""

    async def execute(self, dag: plan.Plan, shared: set[str] | None = None) -> plan.Report:
        report = await executor.execute(dag, self.writer, shared or ())
        self.expectations.observe(report, self.hub)
        return report

    # -- Init -------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        arrived = self.waiting_for_room.get(request)
        resource = self.kinds.resource(request.kind)
        if resource is None:
            return None
        ctx = self.context
        namespace = request.namespace or None
        try:
            template = await ctx.get(resource, request.name, namespace, self.hub)
        except NotGranted as exc:
            # Not readable now (its namespace lost its grant): not gone either, so nothing
            # is deleted; the grant's return lists the namespace again and requeues it.
            # The policy that selects it says so (SecretsReadable, policy validation).
            log.info("%s %s/%s left as it is: %s", resource.kind, request.namespace,
                     request.name, exc)
            return None
        binding_resource = api.RESOURCE_BINDINGS if namespace else api.CLUSTER_RESOURCE_BINDINGS
        binding_name = bindings.binding_name(request.name, resource.kind)
        binding = await ctx.get(binding_resource, binding_name, namespace, self.hub)
        # The cache still shows what one of our own writes replaced (either record).
        if self.expectations.behind(expectations.key_of(resource, request.name, namespace),
                                    template) or \
                self.expectations.behind(
                    expectations.key_of(binding_resource, binding_name, namespace), binding):
            return Result(requeue_after=expectations.RECHECK)
        if template is None or template["metadata"].get("deletionTimestamp"):
            self.waiting_for_room.pop(request, None)
            await self._release_legacy(template)
            if template is None:
                return await self.template_gone(resource, request.name, namespace, binding)
            return None  # its delete, seen by the watch, brings it back here
        if arrived is None and await self._unchanged(request, resource, binding):
            return None
        build = Build(template=template, resource=resource, hub=self.hub, binding=binding)
        try:
            build.recorded  # noqa: B018  (read once, here: an unreadable record stops all)
        except bindings.BindingError as exc:
            return await self._report_unreadable(build, exc)
        self.waiting_for_room.pop(request, None)  # until this round says otherwise
        recording = fastpath.Recording(ctx, resource, template, self.hub)
        try:
            outcome = await CHAIN.run(recording, build)
        except Problem as problem:
            self._note_room(request, build, arrived)
            return await self._report_problem(build, problem)
        self._note_room(request, build, arrived)
        if build.policy is None:
            if build.denied is not None:
                await self._report_denied(build, *build.denied)
            elif unclaimed.keeps(build.own_record):
                return await self._unclaim(build)
            return await self._unpropagate(build)
        reservation = self.failover.budget.reserve(build.budget_key, build.budget)
        if reservation is None:  # another template's move took the budget since the build
            return Result(requeue_after=self.failover.settings.budget_retry)
        report = await self.execute(build.dag, build.shared)
        reverted = self._count_drift(report)
        self._settle_budget(build, report, reservation)
        return await self._record(build, report, outcome.requeue_after, reverted, recording)

    async def _unchanged(self, request: Request, resource: Resource,
                         binding: ReadOnly | None) -> bool:
        """The fast path: nothing the last settled round read has changed since
        (:mod:`.fastpath`), so a full reconcile would write nothing."""
        if not await fastpath.unchanged(self.context, binding, resource,
                                        request.namespace or None, request.name, self.static):
            return False
        self.unchanged += 1
        if self.on_unchanged is not None:
            self.on_unchanged()
        return True

    def _note_room(self, request: Request, build: Build, arrived: int | None) -> None:
        """Remember a template short of room (unschedulable, or pending replicas), keeping
        the place it had among those waiting."""
        decision = build.decision
        if decision is not None and (decision.unschedulable > 0 or decision.pending > 0):
            self.waiting_for_room[request] = next(self._arrivals) if arrived is None \
                else arrived

    def _count_drift(self, report: plan.Report) -> dict[str, int]:
        """The drift reverts of this round by cluster: logged, counted on the metric, and
        added to the binding's ``status.driftReverts`` by the record."""
        reverted: dict[str, int] = {}
        for outcome in report.outcomes.values():
            vertex = outcome.vertex
            if outcome.ok and outcome.attempted and \
                    vertex.action in (plan.Action.UPDATE, plan.Action.APPLY) \
                    and vertex.reason.startswith("drift at "):
                log.info("reverted drift in %s: %s (%s)", vertex.cluster, vertex.describe(),
                         vertex.reason)
                reverted[vertex.cluster] = reverted.get(vertex.cluster, 0) + 1
                if self.on_drift is not None:
                    self.on_drift(vertex.cluster, str(vertex.obj.get("kind")))
        return reverted

    def _settle_budget(self, build: Build, report: plan.Report,
                       reservation: disruption.Reservation) -> None:
        """The disruption budget, after the plan ran (never while it was built): a move
        reserved before the writes is given back when they failed (a failed write on an
        evicted cluster, the one that went away, does not count), a finished one too."""
        written = all(o.vertex.cluster in build.failover.evicted for o in report.failed())
        self.failover.budget.settle(reservation, build.budget, written)

    # -- Record -----------------------------------------------------------------------------

    async def _record(self, build: Build, report: plan.Report,
                      requeue_after: float | None, reverted: Mapping[str, int] | None = None,
                      recording: fastpath.Recording | None = None) -> Result | None:
        failed = {o.vertex.cluster: o.error or "failed" for o in report.failed()
                  if o.vertex.cluster != self.hub}
        removed = [c for c in build.removals if c not in failed
                   and c not in build.unreachable and c not in build.failover.held]
        pending = sorted((set(build.pending_before) | set(build.removals))
                         - set(build.targets) - set(removed))
        copies_now = record.copies_after(build, report)
        unfollowed = await self._follow_new_copies(build, copies_now)
        observed = await observations.observe(recording or self.context, build.template,
                                              copies_now, failed)
        conds = record.conditions(build, failed, pending, copies_now, observed)
        assert build.decision is not None
        groups = engine.affinity_groups(build.policy, template_resource(build)) \
            if build.policy is not None else (None, None)
        wanted = bindings.BindingRecord(
            resource=bindings.TemplateRef.of(build.template), pending_cleanup=tuple(pending),
            clusters=record.placed(build.decision.clusters),
            orphan=bindings.orphaned(build.template), policy=build.policy_ref,
            groups=groups, behaviour=record.behaviour(build),
            decided=bindings.Decided.of(build.decision), conditions=tuple(conds),
            aggregated=bindings.aggregated(copies_now, failed, build.unreachable,
                                           observed.copy_states(),
                                           build.own_record.aggregated
                                           if build.own_record is not None else ()),
            drift_reverts=(build.own_record or bindings.BindingRecord()).reverted(
                reverted or {}, build.targets))
        # A script that timed out (a busy machine) is asked again: no event may come.
        # So is a copy whose member's watch could not start yet (its discovery lagged).
        retry = self.settings.retry_pending if pending or observed.timed_out or unfollowed \
            else None
        settled = recording if requeue_after is None and retry is None and \
            fastpath.settled(build, report) else None
        await self._write_record(build, wanted,
                                 record.template_status_write(build.template, copies_now,
                                                              conds, observed.aggregated),
                                 report, settled)
        # Only now: an event never claims a transition the record does not hold.
        await record.emit_transitions(self.recorder, build, conds)
        refused = {o.vertex.cluster for o in report.failed() if o.refused}
        if (set(failed) - refused) or build.unreachable:
            # A refused write cannot succeed on a retry; only a change of inputs requeues it.
            raise copies_failed(build, report, self.hub)
        after = [t for t in (requeue_after, retry) if t is not None]
        return Result(requeue_after=min(after)) if after else None

    async def _write_record(self, build: Build, built: bindings.BindingRecord,
                            template_status: bindings.JSON | None, report: plan.Report,
                            settled: fastpath.Recording | None) -> None:
        """The template's status and the binding. A settled round (``settled``: its reads)
        writes the template's status first, so that the binding's fingerprint holds the
        version that write left (:mod:`.fastpath`); any other writes both at once and
        leaves no fingerprint (a binding it rewrites loses the old one)."""
        wanted = bindings.binding_for(build.template, built)
        # Parsed back once for both uses (it was up to three times): same_record and the
        # fingerprint compare what a reader of the written binding parses. Comparing the
        # record as built, with no parse, was undone together with a list memo after a CI
        # failure (docs/runtime.md, "More cuts"); which of the two caused it is untested.
        try:
            wanted_record: bindings.BindingRecord | None = bindings.BindingRecord.of(wanted)
        except bindings.BindingError:
            wanted_record = None  # as before: not the same record, and no fingerprint
        same = bindings.same_record(build.binding, wanted, wanted_record)
        writes = self._legacy_marks(build.template)
        if template_status is not None:
            record.add_template_status(writes, self.hub, build.template, template_status)
        if settled is not None and build.policy is not None and not same:
            # (the same record: no binding write, so nothing to annotate)
            done = plan.Report({})
            if writes.vertices:
                done = await self.execute(writes)
                raise_for_hub_failure(done)
                writes = plan.Plan()
            room = engine.room_matters(build.policy.spec.placement)
            self._fingerprint(build, wanted, wanted_record, settled, room, (report, done))
        record.add_binding(writes, self.hub, wanted, build.binding, same)
        raise_for_hub_failure(await self.execute(writes))

    def _fingerprint(self, build: Build, wanted: bindings.JSON,
                     wanted_record: bindings.BindingRecord | None,
                     settled: fastpath.Recording,
                     room: bool, reports: Sequence[plan.Report]) -> None:
        """Annotate ``wanted`` with the fingerprint of what this round leaves."""
        try:
            found = fastpath.fingerprint(
                settled, room, self.static,
                fastpath.template_key(self.hub, build.resource, build.namespace, build.name),
                wanted, wanted_record, reports)
        except fastpath.Unsafe as exc:
            log.debug("%s %s: no fingerprint: %s", build.resource.kind, build.name, exc)
            return
        meta = wanted["metadata"]
        meta["annotations"] = {**(meta.get("annotations") or {}),
                               fastpath.ANNOTATION: found.annotation()}

    async def _follow_new_copies(self, build: Build,
                                 copies: Mapping[str, ReadOnly | None]) -> bool:
        """Follow the template's kind in each member where a copy now is but the kind was
        not served when this reconcile read the copies (its CRD came with this plan).
        Without an informer there, the member's own changes to the copy (its status, a
        drift) would reconcile nothing until some other event came, and the template's
        health would stay as first recorded. True when some member is still not followed
        (its discovery lags its CRD): the template is then looked at again soon."""
        kind = group_kind(build.resource)
        late = [self.clusters.clusters[cluster] for cluster, copy in copies.items()
                if copy is not None and cluster in self.clusters.clusters
                and cluster != self.hub and self.kinds.member_resource(cluster, kind) is None]
        if not late:
            return False
        await self.kinds.track_members(build.resource, late)
        return any(self.kinds.member_resource(c.name, kind) is None for c in late)

    def _legacy_marks(self, template: ReadOnly) -> plan.Plan:
        """A template an earlier version marked: drop its finalizer and annotations, once."""
        writes = plan.Plan()
        meta = template["metadata"]
        annotations = meta.get("annotations") or {}
        if LEGACY_FINALIZER not in (meta.get("finalizers") or []) and \
                not any(key in annotations for key in LEGACY_ANNOTATIONS):
            return writes
        cleaned = {**template, "metadata": {
            **meta, "finalizers": [f for f in meta.get("finalizers") or []
                                   if f != LEGACY_FINALIZER],
            "annotations": {k: v for k, v in annotations.items()
                            if k not in LEGACY_ANNOTATIONS}}}
        writes.add(plan.Vertex(self.hub, plan.Action.UPDATE, cleaned, reason="legacy marks"))
        return writes

    async def _release_legacy(self, template: ReadOnly | None) -> None:
        if template is not None:
            raise_for_hub_failure(await self.execute(self._legacy_marks(template)))

    # -- bad input ----------------------------------------------------------------------------

    async def _report_problem(self, build: Build, problem: Problem) -> Result | None:
        """Bad input: a condition and an event; no copy of the last decision is changed (bad
        input changes nothing that runs), while pending clean-up goes on."""
        log.info("%s %s/%s: %s", build.resource.kind, build.namespace or "", build.name,
                 problem)
        if build.policy is None and build.inherited:
            await self._warn_problem(build, problem)
            return None  # nothing of ours to record: the leftover stays the clean-up's
        previous = build.previous
        unreachable = dict(build.unreachable)
        cleaning = sorted(set(build.pending_before) - set(previous))
        dag = await finalise.removal_plan(self.context, build.resource, build.name,
                                          build.namespace, cleaning, None, unreachable,
                                          dependencies=finalise.dependencies(build.recorded))
        report = await self.execute(dag)
        pending = sorted(finalise.left_after(report, unreachable))
        before = build.previous_conditions
        conds = [status.condition(problem.condition, False, problem.reason, str(problem),
                                  before)]
        if pending:
            conds.append(record.pending_condition(pending, before))
        # Without a policy (it is the problem) the record keeps the claim it had.
        decided = build.decision if build.decision and build.decision.ok else None
        wanted = bindings.BindingRecord(
            resource=bindings.TemplateRef.of(build.template), pending_cleanup=tuple(pending),
            clusters=record.placed(previous), orphan=bindings.orphaned(build.template),
            policy=build.policy_ref if build.policy
            else load_policy.claimed_by(build), behaviour=record.behaviour(build),
            decided=bindings.Decided.of(decided) if decided is not None else None,
            conditions=tuple(conds), aggregated=bindings.aggregated({}, {}, unreachable),
            drift_reverts=build.own_record.drift_reverts if build.own_record else ())
        writes = self._legacy_marks(build.template)
        record.add_binding(writes, self.hub, bindings.binding_for(build.template, wanted),
                           build.binding)
        current = build.template.get("status") or {}
        scripted = await customized.chosen(self.context, Operation.AGGREGATE_STATUS,
                                           build.template)  # its template has our conditions
        template_status = status.template_status(build.template, {}, conds,
                                                 current if scripted else None)
        if template_status is not None:
            template_status = {**current, "conditions": template_status["conditions"]}
            if record.template_status_write(build.template, {}, conds) is not None or \
                    not status.same_status(build.template.get("status"), template_status):
                record.add_template_status(writes, self.hub, build.template, template_status)
        raise_for_hub_failure(await self.execute(writes))
        await self._warn_problem(build, problem)  # after the record that states it
        return Result(requeue_after=self.settings.retry_pending) if pending else None

    async def _warn_problem(self, build: Build, problem: Problem) -> None:
        if not already_reported(build.previous_conditions, problem):
            # The binding's condition outlives this process: a restart does not repeat it.
            await self.recorder.emit(build.template, "Warning", problem.reason, str(problem))

    async def _report_denied(self, build: Build, policy_doc: ReadOnly, rule: deny.Rule) -> None:
        """A Warning event on the policy, once per (policy, rule): the first object it skips."""
        key = (str(policy_doc["metadata"].get("uid")), str(rule))
        if key in self._denials_reported or policy_says_denied(policy_doc, rule):
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

    # -- finalisation ---------------------------------------------------------------------------

    async def _unpropagate(self, build: Build) -> Result | None:
        """No policy selects the template (any more): remove its copies (not those of a
        template marked orphan), then its binding."""
        binding, own = build.own_binding, build.own_record
        writes = self._legacy_marks(build.template)
        if binding is None or own is None:
            raise_for_hub_failure(await self.execute(writes))
            return None
        # The live template says whether it is orphaned (the binding may not know yet).
        unreachable: dict[str, str] = {}
        dag = await finalise.removal_plan(self.context, build.resource, build.name,
                                          build.namespace, own.pending()
                                          if bindings.orphaned(build.template)
                                          else own.holders(),
                                          build.uid, unreachable,
                                          dependencies=finalise.dependencies(own))
        left = finalise.left_after(await self.execute(dag), unreachable)
        self.failover.budget.release(build.budget_key)  # nothing of it moves any more
        for vertex in finalise.record_plan(self.hub, binding, own, left, deleted=False):
            writes.add(vertex)
        raise_for_hub_failure(await self.execute(writes))
        return Result(requeue_after=self.settings.retry_pending) if left else None

    async def _unclaim(self, build: Build) -> Result | None:
        """No policy selects a template a ``policy.karmada.io`` policy claimed: its copies
        stay, the binding loses its claim (see :mod:`.unclaimed`); only pending clean-up
        goes on."""
        binding, own = build.own_binding, build.own_record
        assert binding is not None and own is not None
        placed = own.decision()
        unreachable: dict[str, str] = {}
        dag = await finalise.removal_plan(self.context, build.resource, build.name,
                                          build.namespace,
                                          [c for c in own.pending() if c not in placed],
                                          build.uid, unreachable,
                                          dependencies=finalise.dependencies(own))
        pending = sorted(finalise.left_after(await self.execute(dag), unreachable))
        previous = build.previous_conditions
        conds = [status.condition("Scheduled", False, unclaimed.REASON,
                                  unclaimed.message(own), previous)]
        if pending:
            conds.append(record.pending_condition(pending, previous))
        writes = self._legacy_marks(build.template)
        record.add_binding(writes, self.hub, unclaimed.unclaimed_binding(
            binding, own, build.template, pending, conds), binding)
        current = build.template.get("status") or {}
        if status.template_status(build.template, {}, conds) is not None:
            wanted = {**current, "conditions": status.merge_conditions(
                current.get("conditions") or [], conds, drop=("CleanupPending",))}
            if not status.same_status(current, wanted):
                record.add_template_status(writes, self.hub, build.template, wanted)
        raise_for_hub_failure(await self.execute(writes))
        if own.policy:  # the claim went just now: say so once
            await self.recorder.emit(build.template, "Normal", unclaimed.REASON,
                                     unclaimed.message(own))
        return Result(requeue_after=self.settings.retry_pending) if pending else None

    async def template_gone(self, resource: Resource, name: str, namespace: str | None,
                            binding: ReadOnly | None) -> Result | None:
        """The template is gone: its copies, then its binding (see :mod:`.finalise`)."""
        own = readable_record(binding)
        if binding is None or own is None or own.template_deleted or \
                not own.records(resource.kind, name):
            return None
        unreachable: dict[str, str] = {}
        released = preservation.released_on(own)  # the decision's: a cluster left still loses
        dag = await finalise.removal_plan(self.context, resource, name, namespace,
                                          finalise.holders(own), own.resource.uid or None,
                                          unreachable, release=released,
                                          dependencies=finalise.dependencies(own))
        left = finalise.left_after(await self.execute(dag), unreachable)
        self.failover.budget.release(disruption.move_key(resource, namespace, name))
        for cluster, why in sorted(left.items()):
            # Every retry of an outage: DEBUG (the cluster's transition is logged once).
            log.debug("%s %s: copy in %s not removed yet (%s)", resource.kind, name, cluster,
                      why)
        raise_for_hub_failure(await self.execute(
            finalise.record_plan(self.hub, binding, own, left, deleted=True,
                                 released=released)))
        return None

    async def _report_unreadable(self, build: Build, error: bindings.BindingError
                                 ) -> Result | None:
        """A binding nobody can read (its spec or status written by someone else, in a
        shape we never write): a Warning event on the template, once, and nothing else. No
        copy is written or deleted on its word, and it is not overwritten: it may list
        copies still to delete. Looked at again every ``retry_pending`` seconds, so fixing
        or deleting it is taken up soon (the event is not repeated: the recorder drops it)."""
        message = (f"ResourceBinding {build_binding_name(build)} cannot be read: {error}; "
                   "nothing is propagated or deleted until it is fixed or deleted")
        log.debug("%s %s/%s: %s", build.resource.kind, build.namespace or "", build.name,
                  message)
        await self.recorder.emit(build.template, "Warning", "BindingUnreadable", message)
        return Result(requeue_after=self.settings.retry_pending)


def build_binding_name(build: Build) -> str:
    return bindings.binding_name(build.name, build.resource.kind)


def readable_record(binding: ReadOnly | None) -> bindings.BindingRecord | None:
    """The record of ``binding``, None (logged) when it cannot be read: then nothing is
    deleted on its word."""
    if binding is None:
        return None
    try:
        return bindings.cached(binding)
    except bindings.BindingError as exc:
        log.warning("%s: not finalised: %s", binding["metadata"].get("name"), exc)
        return None


def copies_failed(build: Build, report: plan.Report, hub: str) -> ClientError:
    """The error a reconcile with failed member writes raises: the fence's
    :class:`NotLeader` when this process no longer leads (the controller then stops
    retrying), :class:`ClusterUnavailable` (retried quietly: the cluster's outage is logged
    once, by its probe) when every cause is a cluster being away, else
    :class:`CopiesFailed` (logged as an error)."""
    failed = [o for o in report.failed() if o.vertex.cluster != hub]
    messages = {**build.unreachable, **{o.vertex.cluster: o.error or "failed" for o in failed}}
    causes = [*build.causes.values(), *(o.exception for o in failed if o.attempted)]
    fenced = next((c for c in causes if isinstance(c, NotLeader)), None)
    if fenced is not None:
        return fenced
    names = ",".join(sorted(messages))
    short = {name: message.removeprefix(f"{name}: ") for name, message in messages.items()}
    text = "; ".join(message if len(short) == 1 else f"{name}: {message}"
                     for name, message in sorted(short.items()))
    if all(isinstance(cause, ClusterUnavailable) for cause in causes):
        return ClusterUnavailable(names, text)
    return CopiesFailed(names, text)


def policy_says_denied(policy_doc: ReadOnly, rule: deny.Rule) -> bool:
    """The policy's own Denied condition (policy-validation, with its event) names the rule
    already: a restart of ours does not repeat it."""
    return any(c.get("type") == "Denied" and c.get("status") == "True"
               and f"[{rule}]" in str(c.get("message"))
               for c in (policy_doc.get("status") or {}).get("conditions") or [])


def already_reported(previous: Sequence[Mapping[str, Any]], problem: Problem) -> bool:
    """The recorded conditions already state this problem (same type, reason, message)."""
    return any(c.get("type") == problem.condition and c.get("status") == "False"
               and c.get("reason") == problem.reason and c.get("message") == str(problem)
               for c in previous)


class StaleRecord(ClientError):
    """A hub write met a newer object than our cache held (409: another reconcile or a
    user wrote first). Level-triggered: the next attempt reads the fresh object."""

    retryable = True


def raise_for_hub_failure(report: plan.Report) -> None:
    """Raise the first failed hub write; an optimistic-concurrency 409 (AlreadyExists on a
    create our cache did not see yet, Conflict on an update) is a quiet retry, not a bug."""
    for outcome in report.failed():
        exc = outcome.exception
        if isinstance(exc, ApiError) and exc.status == 409:
            raise StaleRecord(outcome.vertex.cluster,
                              f"{outcome.vertex.describe()}: {exc.reason}, cache behind; "
                              "retrying") from None
    report.raise_for_failure()


class CopiesFailed(ClientError):
    """Some member writes failed for a reason other than an outage (each cause is named)."""

    retryable = True
