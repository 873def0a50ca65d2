"""engine.place with numbers far beyond what validation lets in: exact, and at once.

The loader refuses counts above int32, but the control plane also builds
clusters without it (a capacity estimate from a MemberCluster's resource
summary is copied in unchecked), so the engine itself must stay fast and
exact for any integer. Each test is bounded by pytest-timeout.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from federation.placement import clusters, engine, resources

from .builders import aggregated, cluster, deployment, duplicated, dynamic, make_policy, static

HUGE = [2**31 - 1, 2**63, 10**30]


def unchecked(replicas: int) -> resources.Resource:
    """A resource whose replicas skipped validation (model_copy does not validate)."""
    return deployment(replicas=1).model_copy(update={"replicas": replicas})


def fleet(size: int, seed: int) -> list[clusters.Cluster]:
    rng = random.Random(seed)
    found = []
    for i in range(size):
        room = rng.choice([None, 0, rng.randint(0, 2**31 - 1), rng.randint(0, 2**70)])
        member = cluster(f"c{i:04}", region=f"r{i % 7}", labels={"tier": str(i % 3)})
        found.append(member.model_copy(update={"available_replicas": room}))
    return found


TIER_1 = {"labelSelector": {"matchLabels": {"tier": "1"}}}
PLACEMENTS: dict[str, dict[str, Any]] = {
    "duplicated": duplicated(),
    "static": static({f"c{i:04}": 1 + i % 5 for i in range(0, 1000, 3)}),
    "static-huge-weights": static({f"c{i:04}": 2**40 + i for i in range(0, 1000, 7)}),
    "static-bounds": static(
        {f"c{i:04}": 1 + i % 3 for i in range(1000)},
        replicaBounds=[{"targetCluster": TIER_1, "minReplicas": 1000, "maxReplicas": 2**31 - 1}],
        allowPartial=True,
    ),
    "dynamic": dynamic(allowPartial=True),
    "dynamic-bounds": dynamic(
        replicaBounds=[{"targetCluster": TIER_1, "maxReplicas": 2**31 - 1}], allowPartial=True
    ),
    "aggregated": aggregated(allowPartial=True),
    "spread": {
        **dynamic(allowPartial=True),
        "spreadConstraints": [
            {"spreadByField": "region", "minGroups": 2, "maxGroups": 3},
            {"spreadByField": "cluster", "minGroups": 2, "maxGroups": 40},
        ],
    },
}


@pytest.mark.timeout(20)
@pytest.mark.parametrize("replicas", HUGE)
@pytest.mark.parametrize("mode", PLACEMENTS)
def test_huge_replicas_over_a_thousand_clusters(replicas: int, mode: str) -> None:
    """Every mode, 1,000 clusters with rooms up to 2**70: placed or pending, exactly."""
    policy = make_policy(PLACEMENTS[mode])
    decision = engine.place(unchecked(replicas), policy, fleet(1000, replicas))
    assert decision.ok, decision.error
    if mode == "duplicated":
        assert set(decision.clusters.values()) == {replicas}
    else:
        assert decision.placed + decision.pending == replicas


@pytest.mark.timeout(30)
@pytest.mark.parametrize("replicas", [10**8, 5 * 10**8, 10**9, 2**31 - 1, 2**63])
def test_room_333333333_next_to_unlimited(replicas: int) -> None:
    """The reported hang: dynamic weights over rooms 333333333 / unlimited / unlimited."""
    members = [cluster("a", 333333333), cluster("b"), cluster("c")]
    decision = engine.place(unchecked(replicas), make_policy(dynamic()), members)
    assert decision.ok and decision.placed == replicas
    assert decision.clusters["a"] <= 333333333


@pytest.mark.timeout(30)
def test_a_sticky_scale_down_from_huge_previous_counts() -> None:
    """Previous decisions in the billions and a scale-down: current replicas are the weights."""
    members = [cluster("a"), cluster("b"), cluster("c")]
    previous = {"a": 2**62, "b": 2**61, "c": 3}
    decision = engine.place(unchecked(2**31 - 1), make_policy(dynamic()), members, previous)
    assert decision.ok and decision.placed == 2**31 - 1
    assert decision.clusters["a"] > decision.clusters["b"] > decision.clusters.get("c", 0)
