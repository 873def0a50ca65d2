"""Small constructors for placement tests: policies, clusters and resources from short specs."""

from __future__ import annotations

from typing import Any

from federation.placement import clusters, policy, resources


def cluster(name: str, available: int | None = None, **fields: Any) -> clusters.Cluster:
    return clusters.Cluster(name=name, available_replicas=available, **fields)


def deployment(
    name: str = "web", replicas: int = 10, namespace: str = "default", **labels: str
) -> resources.Resource:
    return resources.Resource(
        api_version="apps/v1",
        kind="Deployment",
        name=name,
        namespace=namespace,
        labels=labels,
        replicas=replicas,
    )


def make_policy(
    placement: dict[str, Any] | None = None,
    *,
    name: str = "p",
    namespace: str | None = "default",
    kind: str = "PropagationPolicy",
    priority: int = 0,
    selectors: list[dict[str, Any]] | None = None,
    api_version: str = policy.GROUP_VERSION,
) -> policy.Policy:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None and kind == "PropagationPolicy":
        metadata["namespace"] = namespace
    return policy.Policy.model_validate(
        {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": metadata,
            "spec": {
                "priority": priority,
                "resourceSelectors": selectors or [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                "placement": placement or {},
            },
        }
    )


def static(weights: dict[str, int], **extra: Any) -> dict[str, Any]:
    """A placement dividing by static weights, one rule per cluster name."""
    rules = [{"targetCluster": {"clusterNames": [n]}, "weight": w} for n, w in weights.items()]
    return {
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Weighted",
            "weightPreference": {"staticWeightList": rules},
            **extra,
        }
    }


def dynamic(**extra: Any) -> dict[str, Any]:
    return {
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Weighted",
            "weightPreference": {"dynamicWeight": "AvailableReplicas"},
            **extra,
        }
    }


def aggregated(**extra: Any) -> dict[str, Any]:
    return {
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Aggregated",
            **extra,
        }
    }


def duplicated(**extra: Any) -> dict[str, Any]:
    return {"replicaScheduling": {"replicaSchedulingType": "Duplicated", **extra}}
