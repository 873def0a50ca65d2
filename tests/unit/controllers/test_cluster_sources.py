"""Which clusters exist for placement: the ClusterSet, static and joined members alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from federation.contexts import kubeconfig
from federation.controllers.kit import view
from tests.unit.controllers.fakes import cluster_set


def registered(name: str, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"region": "eu"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def joined_config(name: str) -> kubeconfig.KubeConfig:
    return kubeconfig.merge(
        [
            (
                Path("secret"),
                {
                    "clusters": [{"name": name, "cluster": {"server": "https://127.0.0.1:1"}}],
                    "users": [{"name": name, "user": {"token": "t"}}],
                    "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
                },
            )
        ]
    )


def test_static_members_stay_known_when_a_cluster_joins() -> None:
    """`fedctl run --contexts member1,member2` with no MemberClusters for them, then member3
    joins (its MemberCluster): all three are placement clusters, member3 with its labels."""
    clusters = cluster_set("member1", "member2")
    joined = clusters.join("member3", joined_config("member3"))
    joined.available = True
    found = {
        c.name: c
        for c in view.placement_clusters(
            [registered("member3", tier="edge")], view.members_of(clusters)
        )
    }
    assert sorted(found) == ["member1", "member2", "member3"]
    assert found["member3"].labels == {"tier": "edge"} and found["member3"].region == "eu"
    assert found["member1"].ready and not found["member1"].labels


def test_a_member_cluster_not_yet_engaged_hides_nobody() -> None:
    """The moment between `fedctl join` writing its MemberCluster and the control plane
    engaging it: the static members are still there (never `known: ` nothing)."""
    clusters = cluster_set("member1", "member2")
    found = view.placement_clusters(
        [registered("member3")], view.members_of(clusters)
    )
    assert [c.name for c in found] == ["member1", "member2"]


def test_unreachable_and_disabled_members_are_known_but_not_ready() -> None:
    """A member that does not answer, or is disabled, is still a cluster a policy may name;
    placement sees it not ready (so nothing new goes there)."""
    clusters = cluster_set("member1", "member2", "member3")
    clusters.get("member2").available = False
    clusters.get("member3").disabled = True
    found = {
        c.name: c.ready
        for c in view.placement_clusters([], view.members_of(clusters))
    }
    assert found == {"member1": True, "member2": False, "member3": False}


def test_the_hub_is_a_target_only_when_registered() -> None:
    """The hub is no member unless a MemberCluster names it."""
    clusters = cluster_set("member1")
    clusters.get("hub").is_member = True
    assert [
        c.name for c in view.placement_clusters([], view.members_of(clusters))
    ] == ["member1"]
    assert [
        c.name
        for c in view.placement_clusters(
            [registered("hub")], view.members_of(clusters)
        )
    ] == ["hub", "member1"]
