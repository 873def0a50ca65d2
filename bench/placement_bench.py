"""Placement throughput: placements per second for 10,000 workloads over 100 and 1,000 clusters.

Run: ``python bench/placement_bench.py`` (``--workloads N`` to change the count).

The fleet is synthetic but shaped like a real one: 10 regions of 3 zones, four
providers, three tiers, a few clusters not ready or tainted, room for 0-200
replicas (some unlimited). Eight policies cover every mode and feature: a
Duplicated policy for one region, static weights by tier, dynamic weights over
the whole fleet, Aggregated over the whole fleet, spread over regions and
clusters, bounds, and an affinity fallback. Workloads (1-50 replicas) are
spread evenly over the policies by label.

Each size is measured twice through :func:`engine.plan` (policy matching plus
placement, what a controller does per reconcile): a first placement, then a
re-plan with the first round as the previous decisions (the sticky path).
A :class:`clusters.Fleet` is built once per round, as a controller would per
cluster-list change.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from federation.placement import clusters, engine, policy, resources

SEED = 20240601


def make_fleet(size: int, rng: random.Random) -> list[clusters.Cluster]:
    fleet = []
    for i in range(size):
        region = f"r{i % 10}"
        taints = [{"key": "maintenance", "effect": "NoSchedule"}] if rng.random() < 0.05 else []
        fleet.append(
            clusters.Cluster.model_validate(
                {
                    "name": f"c{i:04}",
                    "region": region,
                    "zone": f"{region}-{'abc'[i // 10 % 3]}",
                    "provider": ("aws", "gcp", "azure", "onprem")[i % 4],
                    "labels": {"tier": ("gold", "silver", "bronze")[i % 3], "env": "prod"},
                    "availableReplicas": None if rng.random() < 0.1 else rng.randint(0, 200),
                    "ready": rng.random() >= 0.05,
                    "taints": taints,
                }
            )
        )
    return fleet


def divided(preference: str, **extra: Any) -> dict[str, Any]:
    return {"replicaSchedulingType": "Divided", "replicaDivisionPreference": preference, **extra}


def field_in(key: str, *values: str) -> dict[str, Any]:
    """An affinity selecting clusters whose ``key`` field is one of ``values``."""
    return {
        "fieldSelector": {"matchExpressions": [{"key": key, "operator": "In", "values": values}]}
    }


DYNAMIC = {"dynamicWeight": "AvailableReplicas"}
TIERS = [
    {"targetCluster": {"labelSelector": {"matchLabels": {"tier": t}}}, "weight": w}
    for t, w in (("gold", 3), ("silver", 2), ("bronze", 1))
]
PLACEMENTS: dict[str, dict[str, Any]] = {
    "duplicated": {
        "clusterAffinity": field_in("region", "r0"),
        "clusterTolerations": [{"key": "maintenance", "operator": "Exists"}],
        "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
    },
    "static": {
        "clusterAffinity": field_in("region", "r1", "r2", "r3"),
        "replicaScheduling": divided("Weighted", weightPreference={"staticWeightList": TIERS}),
    },
    "dynamic": {"replicaScheduling": divided("Weighted", weightPreference=DYNAMIC)},
    "aggregated": {"replicaScheduling": divided("Aggregated")},
    "spread": {
        "spreadConstraints": [
            {"spreadByField": "region", "minGroups": 2, "maxGroups": 3},
            {"spreadByField": "cluster", "minGroups": 2, "maxGroups": 6},
        ],
        "replicaScheduling": divided("Weighted", weightPreference=DYNAMIC),
    },
    "bounds": {
        "clusterAffinity": {"labelSelector": {"matchLabels": {"tier": "gold"}}},
        "replicaScheduling": divided(
            "Weighted",
            weightPreference={"staticWeightList": TIERS},
            replicaBounds=[{"targetCluster": {}, "maxReplicas": 2}],
            allowPartial=True,
        ),
    },
    "fallback": {
        "clusterAffinities": [
            {"affinityName": "nowhere", "clusterNames": ["no-such-cluster"]},
            {"affinityName": "zone-a", **field_in("zone", "r4-a", "r5-a")},
        ],
        "replicaScheduling": divided("Aggregated"),
    },
    "label-spread": {
        "spreadConstraints": [{"spreadByLabel": "tier", "minGroups": 3, "maxGroups": 3}],
        "replicaScheduling": divided("Weighted"),
    },
}


def make_policies() -> list[policy.Policy]:
    return [
        policy.Policy.model_validate(
            {
                "apiVersion": policy.GROUP_VERSION,
                "kind": "ClusterPropagationPolicy",
                "metadata": {"name": name},
                "spec": {
                    "resourceSelectors": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "labelSelector": {"matchLabels": {"placement": name}},
                        }
                    ],
                    "placement": placement,
                },
            }
        )
        for name, placement in PLACEMENTS.items()
    ]


def make_workloads(count: int, rng: random.Random) -> list[resources.Resource]:
    names = list(PLACEMENTS)
    return [
        resources.Resource(
            api_version="apps/v1",
            kind="Deployment",
            namespace=f"team-{i % 50}",
            name=f"w{i:05}",
            labels={"placement": names[i % len(names)]},
            replicas=rng.randint(1, 50),
        )
        for i in range(count)
    ]


def timed_plan(
    workloads: list[resources.Resource],
    policies: list[policy.Policy],
    fleet: list[clusters.Cluster],
    previous: dict[resources.ResourceKey, dict[str, int]] | None,
) -> tuple[float, list[engine.Planned]]:
    start = time.perf_counter()
    planned = engine.plan(workloads, policies, clusters.Fleet(fleet), previous)
    return time.perf_counter() - start, planned


def report(label: str, seconds: float, planned: list[engine.Planned]) -> None:
    failed = sum(1 for p in planned if p.decision.error)
    rate = len(planned) / seconds
    print(f"  {label:<22} {seconds:7.2f} s  {rate:9,.0f} placements/s  ({failed} with an error)")


def bench(size: int, count: int) -> None:
    rng = random.Random(SEED + size)
    fleet, policies, workloads = make_fleet(size, rng), make_policies(), make_workloads(count, rng)
    print(f"{count:,} workloads over {size:,} clusters ({len(policies)} policies):")
    seconds, first = timed_plan(workloads, policies, fleet, None)
    report("first placement", seconds, first)
    previous = {p.resource.key: dict(p.decision.clusters) for p in first}
    seconds, again = timed_plan(workloads, policies, fleet, previous)
    report("re-plan with previous", seconds, again)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--clusters", type=int, nargs="+", default=[100, 1000])
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}")
    for size in args.clusters:
        bench(size, args.workloads)


if __name__ == "__main__":
    main()
