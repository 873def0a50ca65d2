"""The applications reconciler: Init -> Build -> Execute -> Record.

Init reads the Application and its ResourceTracker from the hub's cache; a gone
Application goes to :mod:`.finalise`. Build runs :data:`STEPS`, a
:class:`~federation.controllers.kit.chain.Chain` over a read-only
:class:`~.view.ApplicationView`; each step adds to the :class:`~.build.Build`. An
Application that cannot be honoured stops the chain with a Problem: ``renderFailed`` and
its condition, nothing planned is written. Execute hands the plan (the new revision, then
member namespaces, copies and deletes) to the kit's executor, the only writer. Record
plans the tracker and the revisions' bookkeeping from what was done (:mod:`.record`),
executes that, then writes the Application's status (the one direct write, and only when
it changed). Events and notifications follow the records they describe.
"""

from __future__ import annotations

from collections.abc import Iterable

from federation.applications import tracker, workflow
from federation.contexts.cache import ReadOnly
from federation.controllers.applications import (
    calls,
    compilation,
    dependencies,
    deploy,
    evaluation,
    health,
    notifications,
    prune,
    record,
    requests,
    revisions,
    rollback,
    stores,
)
from federation.controllers.applications.build import JSON, Build
from federation.controllers.applications.finalise import Finalisation, unknown
from federation.controllers.applications.notify import Notifier
from federation.controllers.applications.settings import ApplicationSettings
from federation.controllers.applications.status import (
    failed_step,
    newly_failed,
    refused,
    status_of,
    status_patch,
    unknown_message,
)
from federation.controllers.applications.view import ApplicationView, Recorder, StatusWriter
from federation.controllers.kit import executor, plan
from federation.controllers.kit.chain import Chain, Outcome, Problem
from federation.hub import api
from federation.runtime.reconcile import Request, Result

STEPS = Chain[ApplicationView, Build]((
    revisions.load_revision,       # content hash; a new revision is planned, first of all
    compilation.compile_app,       # render and place; an invalid Application: Problem
    requests.take_requests,        # restart, rollback, resume: each nonce once
    rollback.roll_back,            # a recorded rollback: its revision, everywhere
    health.observe_health,         # the reached clusters' objects, from the caches
    evaluation.evaluate_workflow,  # the pure state machine; what each cluster holds
    deploy.plan_deploy,            # namespaces first, then create / update / nothing
    prune.plan_prune,              # what is no longer rendered where it is
))
"""The chain, in order. House rules: one concern per step; steps read (through the view)
and add to the build; they never write, never emit, never queue."""


class Reconciler:
    """Reconciles Applications (requests in the hub cluster)."""

    def __init__(self, view: ApplicationView, writer: plan.Writer, status: StatusWriter,
                 recorder: Recorder, outbox: notifications.Outbox,
                 caller: calls.Caller | None = None) -> None:
        self.view = view
        self.caller = caller or calls.Caller({}, view.now)
        self.writer = writer
        self.status = status
        self.recorder = recorder
        self.notifier = Notifier(recorder, outbox, view.settings.remembered_steps)
        self.finalisation = Finalisation(view, self.execute, recorder)

    @property
    def settings(self) -> ApplicationSettings:
        return self.view.settings

    async def execute(self, dag: plan.Plan, shared: Iterable[str] = ()) -> plan.Report:
        return await executor.execute(dag, self.writer, shared)

    async def reconcile(self, request: Request) -> Result | None:
        view, ns, name = self.view, request.namespace, request.name
        app = await view.get(api.APPLICATIONS, name, ns, view.hub)
        rt = await view.get(api.RESOURCE_TRACKERS, name, ns, view.hub)
        if app is None:
            return await self.finalisation.finalise(ns, name, rt)
        if (app.get("metadata") or {}).get("deletionTimestamp"):
            return None
        return await self.run(Build(app, rt))

    async def run(self, build: Build) -> Result | None:
        try:
            outcome = await STEPS.run(self.view, build)
        except Problem as problem:
            await self.refuse(build, str(problem))
            if isinstance(problem, compilation.RetryLater):
                return Result(requeue_after=problem.retry_after)
            return None
        report = await self.execute(build.plan, shared_creates(build))
        revision_on_record(build, report)
        dependencies.created(build, report)
        stores.written(build, report)
        done = record.outcome(build, report)
        record.raise_for_tracker(await self.execute(
            record.plan_record(self.view.hub, build, report, done)))
        lost = unknown(self.view, done.pending)
        await self.write_status(build, status_of(build, done.entries, lost))
        await self.after_status(build, lost)
        retry = len(done.pending) > len(lost) or bool(build.problems)
        return requeue(build, outcome, self.view.settings.pending_retry if retry else None)

    async def refuse(self, build: Build, message: str) -> None:
        """``renderFailed``, with the condition naming the field; then the Warning."""
        if await self.write_status(build, refused(build.status, message)):
            await self.recorder.emit(build.app, "Warning", compilation.INVALID, message)

    async def write_status(self, build: Build, new: JSON) -> bool:
        """The one direct write: what changed of the Application's status, only when
        something did (compared as the hub keeps it: a restart, which computes the same
        status from the same stored state, writes nothing). True when written."""
        patch = status_patch(build.app.get("status") or {}, new)
        if patch is None:
            return False
        await self.status.application_status(build.namespace, build.name, patch)
        return True

    async def after_status(self, build: Build, lost: list[tracker.Entry]) -> None:
        """What follows the status write: the Events of this reconcile, then the
        notification steps it took, then a newly failed workflow's Warning (once: not
        again while it stays failed, rolled back or not, nor after a restart)."""
        app: ReadOnly = build.app
        for kind, reason, message in build.events:
            await self.recorder.emit(app, kind, reason, message)
        if lost:
            await self.recorder.emit(app, "Warning", "UnknownClusters",
                                     unknown_message(lost))
        assert build.compiled is not None and build.state is not None
        for action in build.actions:
            if isinstance(action, workflow.Notify):
                await self.notifier.notify(app, build.compiled, build.state, action)
        for step in calls.waiting(build.state):
            call = build.compiled.calls.get(step.name)
            if call is not None:
                self.caller.ensure(app, calls.key_of(app, build.state, step), call)
        failed = failed_step(build.state)
        if failed is not None and newly_failed(app.get("status") or {}, build.state):
            await self.recorder.emit(app, "Warning", "WorkflowFailed",
                                     f"step {failed.name}: {failed.reason}: {failed.message}")


def revision_on_record(build: Build, report: plan.Report) -> None:
    """A new revision must be on record before anything of it counts: its create failing
    fails the reconcile (the member writes waiting for it were not attempted); made, or
    made already by an earlier try, its Event follows the status."""
    vertex = build.revision_vertex
    created = report.outcomes.get(vertex.key) if vertex is not None else None
    if created is None:
        return
    if not created.ok:
        raise created.exception or RuntimeError(created.error)
    name = created.vertex.obj["metadata"]["name"]
    build.events.insert(0, ("Normal", "Revision", f"revision {name} created"))


def shared_creates(build: Build) -> list[str]:
    """Creates another reconcile may have made first (a member Namespace, the revision, an
    Application a depends-on-app step creates): 409 AlreadyExists is done."""
    keys = [v.key for v in build.plan if v.obj.get("kind") == "Namespace"]
    if build.revision_vertex is not None:
        keys.append(build.revision_vertex.key)
    return keys + dependencies.shared(build)


def requeue(build: Build, outcome: Outcome, retry: float | None) -> Result | None:
    """The soonest look-again: a step waiting, a retry of what failed or waits for an
    away member, or the next health probe of a running workflow."""
    assert build.compiled is not None and build.state is not None
    waits = [outcome.requeue_after] if outcome.requeue_after is not None else []
    if retry is not None:
        waits.append(retry)
    if build.state.phase == "running" and not waits:
        waits.append(build.compiled.health.probe_interval)
    return Result(requeue_after=max(min(waits), 0.5)) if waits else None
