"""overflowAffinities and the effective replica scheduling mode: Karmada allows overflow
with Divided/Aggregated or a dynamic weight, and Divided without a
replicaDivisionPreference is Weighted (docs/placement.md), so a dynamic weight with no
explicit preference is allowed, validated and placed like the explicit Weighted one."""

from __future__ import annotations

from typing import Any

import pytest

from federation.placement import clusters, engine, resources
from federation.placement import policy as policy_

from .builders import make_policy

OVERFLOW_PATH = "spec.placement.clusterAffinities[0].overflowAffinities"
DYNAMIC = {"dynamicWeight": "AvailableReplicas"}
STRATEGIES: dict[str, dict[str, Any] | None] = {
    "aggregated": {"replicaSchedulingType": "Divided",
                   "replicaDivisionPreference": "Aggregated"},
    "weighted-dynamic": {"replicaSchedulingType": "Divided",
                         "replicaDivisionPreference": "Weighted",
                         "weightPreference": DYNAMIC},
    "defaulted-dynamic": {"replicaSchedulingType": "Divided", "weightPreference": DYNAMIC},
    "absent": None,
    "duplicated": {"replicaSchedulingType": "Duplicated"},
    "defaulted-weighted": {"replicaSchedulingType": "Divided"},
    "weighted-static": {"replicaSchedulingType": "Divided",
                        "replicaDivisionPreference": "Weighted",
                        "weightPreference": {"staticWeightList": [
                            {"targetCluster": {"clusterNames": ["a"]}, "weight": 1}]}},
    "defaulted-static": {"replicaSchedulingType": "Divided",
                         "weightPreference": {"staticWeightList": [
                             {"targetCluster": {"clusterNames": ["a"]}, "weight": 1}]}},
}
ALLOWED = {"aggregated", "weighted-dynamic", "defaulted-dynamic"}


def overflow_policy(strategy: dict[str, Any] | None) -> policy_.Policy:
    placement: dict[str, Any] = {"clusterAffinities": [{
        "affinityName": "first", "clusterNames": ["a"],
        "overflowAffinities": [{"affinityName": "spill", "clusterNames": ["b"]}]}]}
    if strategy is not None:
        placement["replicaScheduling"] = strategy
    return make_policy(placement)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_overflow_is_allowed_exactly_for_aggregated_or_an_effective_dynamic_weight(
        name: str) -> None:
    """The rule follows :func:`policy.mode`, not the literal preference: the defaulted
    dynamic weight is accepted, the static and Duplicated modes are still refused."""
    loaded = overflow_policy(STRATEGIES[name])
    refused = [m for p, m in policy_.problems(loaded) if p == OVERFLOW_PATH]
    if name in ALLOWED:
        assert refused == []
    else:
        assert refused == ["can only be used with Divided replicas and Aggregated or a "
                           "dynamic weight (the next tier takes what the previous cannot "
                           "hold, which needs room estimates)"]
    assert policy_.overflow_allowed(loaded.spec.placement.replica_scheduling) == \
        (name in ALLOWED)


def test_a_defaulted_dynamic_weight_overflows_as_the_explicit_one_does() -> None:
    """The engine gate is the same rule: 5 replicas, room for 2 in the first tier, so 3
    spill into the second, identically with and without ``Weighted`` spelled out."""
    fleet = [clusters.Cluster(name="a", available_replicas=2),
             clusters.Cluster(name="b", available_replicas=10)]
    workload = resources.Resource(api_version="apps/v1", kind="Deployment", name="w",
                                  namespace="default", replicas=5)
    placed = {name: engine.place(workload, overflow_policy(STRATEGIES[name]), fleet)
              for name in ("weighted-dynamic", "defaulted-dynamic")}
    for decision in placed.values():
        assert decision.ok, decision.error
        assert dict(decision.clusters) == {"a": 2, "b": 3}
        assert any("overflow tier 1 'spill'" in line for line in decision.explanation)
    assert placed["weighted-dynamic"].explanation == placed["defaulted-dynamic"].explanation
