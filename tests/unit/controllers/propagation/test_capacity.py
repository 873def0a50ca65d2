"""The capacity transformer: availableReplicas from a MemberCluster's resource summary."""

from __future__ import annotations

from typing import Any

from federation.contexts import client as kube
from federation.controllers import propagation
from federation.controllers.propagation.capacity import estimate_capacity
from federation.placement import clusters as clusters_
from tests.unit.controllers.fakes import FakeContext, config_map

# 2 cores allocatable, half a core taken: room for three replicas of half a core each.
SUMMARY = {"allocatable": {"cpu": "2000m", "memory": "0", "pods": "110"},
           "allocated": {"cpu": "500m", "memory": "0", "pods": "0"}}


def deployment() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1"},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}}}


def build(template: dict[str, Any], docs: dict[str, Any],
          clusters: list[clusters_.Cluster]) -> propagation.Build:
    found = propagation.Build(template=template, resource=kube.DEPLOYMENTS, hub="hub")
    found.member_docs = docs
    found.clusters = clusters
    return found


async def test_resource_summary_becomes_available_replicas() -> None:
    """A member with a summary and no stated number gets the estimate for this workload."""
    b = build(deployment(), {"member1": {"status": {"resourceSummary": SUMMARY}}},
              [clusters_.Cluster(name="member1")])
    assert await estimate_capacity(FakeContext(), b) is None
    assert [c.available_replicas for c in b.clusters] == [3]


async def test_number_the_member_states_wins_over_the_summary() -> None:
    """status.availableReplicas already on the cluster is kept, not re-estimated."""
    b = build(deployment(), {"member1": {"status": {"resourceSummary": SUMMARY}}},
              [clusters_.Cluster(name="member1", available_replicas=7)])
    await estimate_capacity(FakeContext(), b)
    assert b.clusters[0].available_replicas == 7


async def test_member_without_a_usable_summary_stays_unknown() -> None:
    """No MemberCluster, or a summary that is not an object: capacity stays None
    (unlimited to placement), never a guessed zero."""
    b = build(deployment(), {"member2": {"status": {"resourceSummary": "lots"}}},
              [clusters_.Cluster(name="member1"), clusters_.Cluster(name="member2")])
    await estimate_capacity(FakeContext(), b)
    assert [c.available_replicas for c in b.clusters] == [None, None]


async def test_summary_with_no_room_estimates_zero() -> None:
    """A full member is estimated at zero replicas, not left unknown."""
    full = {"allocatable": {"cpu": "1", "pods": "10"}, "allocated": {"cpu": "1", "pods": "2"}}
    b = build(deployment(), {"member1": {"status": {"resourceSummary": full}}},
              [clusters_.Cluster(name="member1")])
    await estimate_capacity(FakeContext(), b)
    assert b.clusters[0].available_replicas == 0


async def test_non_workload_kind_is_left_alone() -> None:
    """A ConfigMap has no replicas: the clusters are not touched even with a summary."""
    clusters = [clusters_.Cluster(name="member1")]
    b = build(config_map("a"), {"member1": {"status": {"resourceSummary": SUMMARY}}}, clusters)
    assert await estimate_capacity(FakeContext(), b) is None
    assert b.clusters is clusters and b.clusters[0].available_replicas is None
