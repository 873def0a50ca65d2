"""A deleted Application: its objects, then its tracker and revisions, removed by plans.

Applications carry no finalizer (propagation's rule): when one is gone its tracker says
what to delete (:func:`~.prune.plan_removals`: only what it placed). What a member that
cannot be reached still holds stays in the tracker (``pendingCleanup``,
``applicationDeleted``, ``pendingSince``) and is retried with a backoff growing from
``pending_retry`` to ``pending_backoff`` seconds (and at once when the member returns);
after ``cleanup_wait`` seconds one ``CleanupPending`` Warning names the clusters. An entry
naming a cluster that is no member at all (a tenant may write trackers, so how many is
theirs to choose) is not retried on a timer: it is kept, reported once
(``UnknownClusters``) and retried when a member of that name becomes available. Once
nothing is left the tracker (only as it was read: a tracker changed since is looked at
again) and the revisions are deleted; a delete the hub refuses (anything but 404) fails
the reconcile, so neither outlives its Application quietly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from federation.applications import tracker
from federation.contexts.cache import ReadOnly
from federation.controllers.applications import prune, record, revisions
from federation.controllers.applications.build import entries_of
from federation.controllers.applications.settings import stamp
from federation.controllers.applications.status import unknown_message
from federation.controllers.applications.view import ApplicationView, Recorder
from federation.controllers.kit import events, plan
from federation.hub import failover
from federation.runtime.reconcile import Result

Execute = Callable[[plan.Plan], Awaitable[plan.Report]]


def unknown(view: ApplicationView, entries: Sequence[tracker.Entry]) -> list[tracker.Entry]:
    """Entries naming a cluster that is not in the set (no member, nor the hub)."""
    known = {m.name for m in view.members()} | {view.hub}
    return [e for e in entries if e.cluster not in known]


def raise_unless_gone(report: plan.Report) -> None:
    """Gone already is done; any other failure is raised (the reconcile is retried)."""
    for result in report.outcomes.values():
        if not result.ok and not record.not_found(result):
            raise result.exception or RuntimeError(result.error)


class Finalisation:
    """The clean-up of one deleted Application (reads through the view, writes through
    ``execute``, the kit's executor)."""

    def __init__(self, view: ApplicationView, execute: Execute, recorder: Recorder) -> None:
        self.view = view
        self.execute = execute
        self.recorder = recorder

    async def finalise(self, namespace: str, name: str, rt: ReadOnly | None) -> Result | None:
        dag = plan.Plan()
        if rt is not None:
            entries = entries_of(rt)
            if (rt.get("spec") or {}).get("applicationUID") and entries:
                left = await self.remove(entries, f"{namespace}/{name}")
                if left:
                    return await self.still_pending(rt, namespace, name, left)
            # Only as read: a tracker rewritten since (a new deploy) is looked at again.
            dag.add(plan.Vertex(self.view.hub, plan.Action.DELETE,
                                plan.reference(rt, exact=True), reason="Application deleted"))
        for doc in await revisions.revisions_of(self.view, namespace, name):
            dag.add(plan.Vertex(self.view.hub, plan.Action.DELETE,
                                record.revision_reference(doc), reason="Application deleted"))
        raise_unless_gone(await self.execute(dag))
        return None

    async def remove(self, entries: Sequence[tracker.Entry], owner: str
                     ) -> list[tracker.Entry]:
        """Delete what the entries name; the entries not deleted yet."""
        removals = await prune.plan_removals(self.view, sorted(set(entries)), owner)
        dag = plan.Plan()
        mapping = {dag.add(vertex).key: entry for vertex, entry in removals.deletes}
        report = await self.execute(dag)
        deleted = set(removals.gone) | {mapping[k] for k, o in report.outcomes.items()
                                        if o.ok or record.not_found(o)}
        return [e for e in entries if e not in deleted]

    async def still_pending(self, rt: ReadOnly, namespace: str, name: str,
                            left: Sequence[tracker.Entry]) -> Result | None:
        """Objects not deleted yet: kept in the tracker; those on a member that is away
        are retried with a backoff (and at once when it returns), those naming no member
        wait for one of that name (no timer: their number is the tracker author's)."""
        spec = rt.get("spec") or {}
        since = str(spec.get("pendingSince") or stamp(self.view.now()))
        body = record.tracker_spec(name, str(spec["applicationUID"]), left, left,
                                   deleted_app=True, since=since)
        vertex = record.tracker_vertex(self.view.hub, rt, namespace, name, body)
        if vertex is not None:
            dag = plan.Plan()
            dag.add(vertex)
            (await self.execute(dag)).raise_for_failure()
        lost = unknown(self.view, left)
        if lost:
            await self.recorder.emit(rt, "Warning", "UnknownClusters", unknown_message(lost))
        away = [e for e in left if e not in lost]
        if not away:
            return None
        await self.warn_if_lasting(rt, f"{namespace}/{name}", away, since)
        started = failover.parse_time(since)
        pending_for = self.view.now() - started if started is not None else 0.0
        return Result(requeue_after=self.view.settings.backoff(pending_for))

    async def warn_if_lasting(self, rt: ReadOnly, app: str, left: Sequence[tracker.Entry],
                              since: str) -> None:
        """One Warning on the tracker once objects have been pending ``cleanup_wait``
        seconds (:func:`~federation.controllers.kit.events.overdue_once`, with the retry
        period of that moment, so a few looks fall in its window)."""
        settings = self.view.settings
        wait = settings.cleanup_wait
        if not events.overdue_once(failover.parse_time(since), self.view.now(), wait,
                                   settings.backoff(wait)):
            return
        where = ", ".join(sorted({e.cluster for e in left}))
        await self.recorder.emit(rt, "Warning", "CleanupPending",
                                 f"Application {app} deleted; {len(left)} object(s) left in "
                                 f"{where} (unreachable for {wait:.0f}s) are deleted when "
                                 "they return")
