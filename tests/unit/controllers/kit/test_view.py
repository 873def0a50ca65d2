"""The view's helpers: the ClusterSet's members as values, and the members as the
placement engine's clusters (each described by its MemberCluster when it has one)."""

from __future__ import annotations

from typing import Any

from federation.controllers.kit.view import Member, members_of, placement_clusters
from tests.unit.controllers.fakes import cluster_set


def member_cluster(name: str, ready: str = "True", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"region": "eu-west-1"},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}


def test_members_are_values_and_reachable_means_engaged_and_answering() -> None:
    clusters = cluster_set("member1", "member2")
    clusters.get("member2").available = False
    found = members_of(clusters)
    assert Member("member1", False, True) in found
    assert Member("member2", False, False) in found


def test_a_member_is_described_by_its_member_cluster() -> None:
    found = placement_clusters([member_cluster("member1", tier="gold")],
                               [Member("member1", False, True)])
    assert [(c.name, c.ready, c.region, c.labels) for c in found] == [
        ("member1", True, "eu-west-1", {"tier": "gold"})]


def test_a_member_without_one_is_placed_on_bare_and_one_naming_no_member_is_no_target(
) -> None:
    found = placement_clusters([member_cluster("elsewhere")],
                               [Member("member1", False, False)])
    assert [(c.name, c.ready, c.labels) for c in found] == [("member1", False, {})]


def test_ready_false_or_unreachable_is_not_ready() -> None:
    found = placement_clusters([member_cluster("member1", ready="False"),
                                member_cluster("member2")],
                               [Member("member1", False, True), Member("member2", False, False)])
    assert {c.name: c.ready for c in found} == {"member1": False, "member2": False}


def test_the_hub_is_a_target_only_when_it_has_a_member_cluster() -> None:
    hub = Member("hub", True, True)
    assert placement_clusters([], [hub]) == []
    assert [c.name for c in placement_clusters([member_cluster("hub")], [hub])] == ["hub"]


def test_a_joined_member_whose_member_cluster_is_gone_or_going_is_no_target() -> None:
    """It is leaving: membership has not processed the delete yet. Placed bare, it would
    lose the taints it was leaving under and get replicas divided back to it."""
    going = member_cluster("edge")
    going["metadata"]["deletionTimestamp"] = "2026-11-27T11:12:09Z"
    static, joined = Member("member1", False, True), Member("edge", False, True, joined=True)
    assert [c.name for c in placement_clusters([], [static, joined])] == ["member1"]
    assert [c.name for c in placement_clusters([going], [static, joined])] == ["member1"]
    assert [c.name for c in placement_clusters([member_cluster("edge")], [joined])] == ["edge"]


def test_leaving_is_gone_or_being_deleted_and_nothing_else() -> None:
    from federation.hub.clusters import leaving
    assert leaving(None)
    assert leaving({"metadata": {"name": "m", "deletionTimestamp": "2026-11-27T00:00:00Z"}})
    assert not leaving({"metadata": {"name": "m"}})
    assert not leaving({"metadata": {"name": "m", "deletionTimestamp": None}})
    assert not leaving({})
