"""A template's own status write does not reconcile it again; every other change does."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

from federation.controllers.kit import kinds


def deployment() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "1",
                         "generation": 1, "labels": {"app": "web"}},
            "spec": {"replicas": 3}, "status": {}}


def test_a_status_write_is_status_only() -> None:
    """Our status write changes status and resourceVersion: nothing to reconcile."""
    old = deployment()
    new = copy.deepcopy(old)
    new["status"] = {"readyReplicas": 3}
    new["metadata"]["resourceVersion"] = "2"
    new["metadata"]["managedFields"] = [{"manager": "fedctl"}]
    assert kinds.status_only(old, new)


def test_spec_labels_annotations_and_deletion_are_changes() -> None:
    """A scale, a relabel, an annotation (orphan) or a delete is reconciled."""
    changes: tuple[Callable[[dict[str, Any]], object], ...] = (
        lambda d: d["spec"].update(replicas=4),
        lambda d: d["metadata"]["labels"].update(tier="x"),
        lambda d: d["metadata"].setdefault("annotations", {}).update(
            {"federation.io/orphan": "true"}),
        lambda d: d["metadata"].update(deletionTimestamp="2026-11-23T00:00:00Z"),
    )
    for change in changes:
        old = deployment()
        new = copy.deepcopy(old)
        change(new)
        assert not kinds.status_only(old, new)


def test_a_delete_is_always_reconciled() -> None:
    """Templates carry no finalizer: the DELETED event looks like the last state (status
    only differs), and must still reach the queue, or copies would never be removed."""
    from federation.contexts import client as kube
    from federation.contexts.cache import Event
    from tests.unit.controllers.fakes import cluster_set

    queued: list[Any] = []

    def enqueue(request: Any, priority: int = 0) -> None:
        queued.append(request)

    tracker = kinds.KindTracker(cluster_set("member1"), enqueue)
    old = deployment()
    gone = copy.deepcopy(old)
    gone["metadata"]["resourceVersion"] = "2"
    tracker._template_event(Event("DELETED", "hub", kube.DEPLOYMENTS, gone, old))
    assert [r.name for r in queued] == ["web"]
    tracker._template_event(Event("MODIFIED", "hub", kube.DEPLOYMENTS, gone, old))
    assert len(queued) == 1  # a status-only modification is not queued


def test_member_events_queue_after_template_changes() -> None:
    """A copy's event (status, drift) is queued at low priority; a template's own change
    at the default one, so first propagation goes first in a burst."""
    from federation.contexts import client as kube
    from federation.contexts.cache import Event
    from federation.runtime import queue
    from tests.unit.controllers.fakes import cluster_set

    queued: list[tuple[str, int]] = []

    def enqueue(request: Any, priority: int = 0) -> None:
        queued.append((request.cluster, priority))

    tracker = kinds.KindTracker(cluster_set("member1"), enqueue)
    copy_of = deployment()
    tracker._copy_event(Event("MODIFIED", "member1", kube.DEPLOYMENTS, copy_of, copy_of))
    changed = copy.deepcopy(copy_of)
    changed["spec"]["replicas"] = 5
    tracker._template_event(Event("MODIFIED", "hub", kube.DEPLOYMENTS, changed, copy_of))
    assert queued == [("hub", queue.LOW_PRIORITY), ("hub", queue.DEFAULT_PRIORITY)]


def test_our_own_member_write_coming_back_is_not_queued() -> None:
    """The watch event showing exactly the version our write made is our write's echo: no
    reconcile. Any other version of the copy (the data plane's status, drift, someone's
    edit) is queued as before, and so is the same version seen a second time."""
    from federation.contexts import client as kube
    from federation.contexts.cache import Event
    from tests.unit.controllers.fakes import cluster_set

    queued: list[str] = []

    def enqueue(request: Any, priority: int = 0) -> None:
        queued.append(request.name)

    tracker = kinds.KindTracker(cluster_set("member1", "member2"), enqueue)
    answer = deployment()
    answer["metadata"]["resourceVersion"] = "7"
    tracker.own_writes.wrote("member1", answer)

    tracker._copy_event(Event("ADDED", "member2", kube.DEPLOYMENTS, answer))
    assert queued == ["web"], "the same version in another member is not our write there"
    tracker._copy_event(Event("ADDED", "member1", kube.DEPLOYMENTS, answer))
    assert queued == ["web"], "our create's echo was queued"
    status = copy.deepcopy(answer)
    status["metadata"]["resourceVersion"] = "8"
    status["status"] = {"readyReplicas": 3}
    tracker._copy_event(Event("MODIFIED", "member1", kube.DEPLOYMENTS, status, answer))
    tracker._copy_event(Event("MODIFIED", "member1", kube.DEPLOYMENTS, answer, status))
    assert queued == ["web", "web", "web"]


def test_own_writes_are_bounded_and_ignore_deletes() -> None:
    from federation.contexts import client as kube
    from federation.contexts.cache import Event

    own = kinds.OwnWrites(limit=2)
    written = []
    for index in range(3):
        obj = deployment()
        obj["metadata"].update(name=f"web{index}", resourceVersion=str(index + 10))
        own.wrote("member1", obj)
        written.append(obj)
    oldest, *newer = written
    assert not own.echo(Event("ADDED", "member1", kube.DEPLOYMENTS, oldest)), \
        "the oldest entry was not dropped at the limit"
    assert not own.echo(Event("DELETED", "member1", kube.DEPLOYMENTS, newer[0]))
    assert all(own.echo(Event("MODIFIED", "member1", kube.DEPLOYMENTS, o)) for o in newer)


def _version(doc: dict[str, Any], version: str) -> dict[str, Any]:
    changed = copy.deepcopy(doc)
    changed["metadata"]["resourceVersion"] = version
    return changed


def test_a_new_template_is_handed_out_twice_drift_and_status_still_come() -> None:
    """On virtual time, a template's events as a burst brings them (the bench measured 2.00
    propagation reconciles per template): its ADDED is handed out once (the create); our
    three creates' echoes are not; the three members' status reports, within the member
    delay of one another, are handed out once, after it (the status round); our status
    write on the template is not. A member's drift afterwards and a later status change
    still reach the queue: coalescing delays news by at most the member delay, never
    drops it."""
    from federation.contexts import client as kube
    from federation.contexts.cache import Event
    from federation.runtime import queue
    from tests.unit.controllers.fakes import MEMBERS, cluster_set
    from tests.unit.runtime.virtual import run

    async def main() -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        work: queue.WorkQueue[Any] = queue.WorkQueue("propagation")
        tracker = kinds.KindTracker(cluster_set(*MEMBERS), work.add, work.add_after)
        handed: list[tuple[str, float]] = []

        async def drain() -> None:
            while len(work) or work.waiting:
                request = await work.get()
                handed.append((request.name, loop.time()))
                work.done(request)

        template = deployment()
        tracker._template_event(Event("ADDED", "hub", kube.DEPLOYMENTS, template))
        await drain()
        copies = {m: _version(template, f"1{i}") for i, m in enumerate(MEMBERS)}
        for member, copy_of in copies.items():
            tracker.own_writes.wrote(member, copy_of)  # our create's answer
            tracker._copy_event(Event("ADDED", member, kube.DEPLOYMENTS, copy_of))
        assert len(work) == 0 and work.waiting == 0, "an echo of our create was queued"
        started = loop.time()
        for index, (member, copy_of) in enumerate(copies.items()):
            await asyncio.sleep(0.1)  # the members report one after another
            ready = _version(copy_of, f"2{index}")
            ready["status"] = {"readyReplicas": 3}
            tracker._copy_event(Event("MODIFIED", member, kube.DEPLOYMENTS, ready, copy_of))
            copies[member] = ready
        await drain()
        status_written = _version(template, "5")
        status_written["status"] = {"readyReplicas": 9}
        tracker._template_event(Event("MODIFIED", "hub", kube.DEPLOYMENTS, status_written,
                                      template))
        assert len(work) == 0 and work.waiting == 0, "our status write was queued"
        drifted = _version(copies["member2"], "30")
        drifted["spec"]["replicas"] = 7
        tracker._copy_event(Event("MODIFIED", "member2", kube.DEPLOYMENTS, drifted,
                                  copies["member2"]))
        await drain()
        assert handed[1][1] - started <= kinds.MEMBER_EVENT_DELAY + 0.15
        return handed

    handed = run(main())
    assert [name for name, _ in handed] == ["web", "web", "web"], handed
