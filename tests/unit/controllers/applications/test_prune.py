"""Plan prune: what is no longer rendered where it is, deleted only when this Application
placed it; a forged tracker entry deletes nothing."""

from __future__ import annotations

from typing import Any

from federation.applications import tracker
from federation.controllers.applications import prune
from federation.controllers.kit import plan
from tests.unit.controllers.applications.fakes import FakeView, live_copy


def entry(cluster: str, name: str = "old") -> tracker.Entry:
    return tracker.Entry(cluster, "v1", "ConfigMap", "shop", name, 1, "canary")


def config_map(name: str = "old") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "shop"}, "data": {"a": "b"}}


async def test_our_object_is_deleted_with_its_uid_as_the_precondition() -> None:
    view = FakeView([("member1", live_copy(config_map()))])
    found = await prune.plan_removals(view, [entry("member1")], "shop/shop")
    [(vertex, which)] = found.deletes
    assert which == entry("member1") and found.gone == []
    assert (vertex.cluster, vertex.action) == ("member1", plan.Action.DELETE)
    assert vertex.obj == {"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "old", "namespace": "shop",
                                       "uid": "uid-ConfigMap-old"}}


async def test_a_forged_entry_deletes_nothing() -> None:
    """The attack: a tenant writes its tracker naming another team's object (or one
    nobody manages). Neither is deleted; the entry counts as gone, so it is dropped."""
    theirs = live_copy(config_map("theirs"), owner="other/app")
    plain = config_map("plain")
    view = FakeView([("member1", theirs), ("member1", plain)])
    found = await prune.plan_removals(
        view, [entry("member1", "theirs"), entry("member1", "plain"),
               entry("member1", "never")], "shop/shop")
    assert found.deletes == []
    assert found.gone == [entry("member1", "theirs"), entry("member1", "plain"),
                          entry("member1", "never")]


async def test_an_unreadable_member_keeps_its_entries_pending() -> None:
    """Away (ClusterUnavailable) or any other read failure: neither deleted nor gone."""
    view = FakeView([("member2", live_copy(config_map()))])
    view.down.add("member1")
    view.unserved.add("ConfigMap")
    found = await prune.plan_removals(view, [entry("member1"), entry("member2")],
                                      "shop/shop")
    assert found.deletes == [] and found.gone == []


async def test_a_cluster_scoped_entry_is_referenced_without_a_namespace() -> None:
    assert prune.reference(tracker.Entry("member1", "v1", "Namespace", "", "shop")) == {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
