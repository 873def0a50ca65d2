"""A deleted Application: its objects, then its tracker (as read) and revisions, by plans;
what a member away holds stays pending with a backoff; names of no member wait."""

from __future__ import annotations

from typing import Any

import pytest

from federation.contexts import client as kube
from federation.controllers.applications import ApplicationSettings
from tests.unit.controllers.applications.fakes import (
    FakeView,
    World,
    live_copy,
    revision_doc,
)


def tracked(cluster: str, name: str = "web") -> dict[str, Any]:
    return {"cluster": cluster, "apiVersion": "v1", "kind": "ConfigMap", "namespace": "shop",
            "name": name, "revision": 1, "step": "all"}


def tracker_doc(*entries: dict[str, Any], uid: str = "uid-app", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "ResourceTracker",
            "metadata": {"name": "shop", "namespace": "shop", "uid": "uid-rt",
                         "resourceVersion": "41"},
            "spec": {"application": "shop", "applicationUID": uid,
                     "resources": list(entries), "pendingCleanup": [], **spec}}


def ours(name: str = "web") -> dict[str, Any]:
    return live_copy({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": name, "namespace": "shop"}})


async def test_everything_is_deleted_then_the_tracker_as_read_and_the_revisions() -> None:
    view = FakeView([("member1", ours()), ("member2", ours()),
                     ("hub", tracker_doc(tracked("member1"), tracked("member2"))),
                     ("hub", revision_doc(1)), ("hub", revision_doc(2))])
    world = World(view)
    assert await world.reconcile() is None
    assert world.journal[:2] == [("delete", "member1", "ConfigMap/web"),
                                 ("delete", "member2", "ConfigMap/web")]
    assert sorted(world.journal[2:]) == [("delete", "hub", "ApplicationRevision/shop-v1"),
                                         ("delete", "hub", "ApplicationRevision/shop-v2"),
                                         ("delete", "hub", "ResourceTracker/shop")]


async def test_the_tracker_is_deleted_only_as_it_was_read() -> None:
    """Its delete carries the resourceVersion read (and the UID): a tracker changed since
    (a write the cache has not shown) fails the delete and is looked at again."""
    world = World(FakeView([("hub", tracker_doc())]))
    await world.reconcile()
    assert world.writer.sent[0]["metadata"] == {"name": "shop", "namespace": "shop",
                                                "uid": "uid-rt", "resourceVersion": "41"}


async def test_a_hub_refusal_fails_the_reconcile_and_a_gone_one_is_done() -> None:
    world = World(FakeView([("hub", tracker_doc()), ("hub", revision_doc(1))]))
    world.writer.fail[("delete", "ResourceTracker")] = 500
    with pytest.raises(kube.ApiError):
        await world.reconcile()
    world.writer.fail[("delete", "ResourceTracker")] = 404
    assert await world.reconcile() is None


async def test_a_member_away_keeps_its_entries_pending_with_a_backoff() -> None:
    view = FakeView([("member1", ours()), ("member2", ours()),
                     ("hub", tracker_doc(tracked("member1"), tracked("member2")))])
    view.down.add("member2")
    world = World(view)
    result = await world.reconcile()
    assert result is not None and result.requeue_after == 5.0
    assert world.journal == [("delete", "member1", "ConfigMap/web"),
                             ("update", "hub", "ResourceTracker/shop")]
    assert world.recorder.events == []


async def test_the_backoff_grows_and_one_warning_names_the_cluster() -> None:
    """Pending for 200 s: a retry in 50 s (a quarter), the CleanupPending Warning once the
    wait passed (on the tracker); at most a minute apart later on."""
    since = "1970-01-01T00:13:20Z"  # 800 s
    view = FakeView([("member2", ours()),
                     ("hub", tracker_doc(tracked("member2"), pendingSince=since,
                                         applicationDeleted=True))], now=1000.0)
    view.down.add("member2")
    world = World(view)
    world.view._settings = ApplicationSettings(cleanup_wait=190.0)
    result = await world.reconcile()
    assert result is not None and result.requeue_after == 50.0
    assert world.recorder.events == [
        ("Warning", "CleanupPending", "Application shop/shop deleted; 1 object(s) left in "
         "member2 (unreachable for 190s) are deleted when they return")]
    assert world.recorder.on == ["ResourceTracker"]
    view.clock = 100_000.0
    assert (await world.reconcile()).requeue_after == 60.0


async def test_entries_naming_no_member_wait_without_a_timer() -> None:
    """The attack: a tenant's tracker naming fifty clusters that do not exist. No retry
    on a timer, one Warning naming a few, the tracker kept (pending)."""
    entries = [tracked(f"ghost-{n}") for n in range(50)]
    world = World(FakeView([("hub", tracker_doc(*entries))]))
    assert await world.reconcile() is None
    assert world.journal == [("update", "hub", "ResourceTracker/shop"),
                             ("event", "UnknownClusters", "ResourceTracker")]
    [(kind, reason, message)] = world.recorder.events
    assert (kind, reason) == ("Warning", "UnknownClusters")
    assert message.startswith("50 tracked object(s) in 50 cluster(s) that are not members")


async def test_a_tracker_of_no_application_uid_is_just_deleted() -> None:
    """A tracker a tenant wrote with no Application uid: nothing it names is touched."""
    world = World(FakeView([("member1", ours()), ("hub", tracker_doc(tracked("member1"),
                                                                       uid=""))]))
    await world.reconcile()
    assert world.journal == [("delete", "hub", "ResourceTracker/shop")]


async def test_a_deleting_application_is_left_alone() -> None:
    """A deletionTimestamp (some other finalizer holds it): nothing to do yet."""
    body = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": "shop", "namespace": "shop", "deletionTimestamp": "t"}}
    world = World(FakeView([("hub", body)]))
    assert await world.reconcile() is None and world.journal == []
