"""Member capacity: what a cluster has, what is taken, and how many more replicas fit.

The health controller publishes, on each MemberCluster's status,
``resourceSummary``: ``allocatable`` (cpu, memory, pods summed over the
member's Ready, schedulable Nodes) and ``allocated`` (what running replicas
request). Placement then turns it into ``availableReplicas`` for the workload
being placed: the largest ``n`` such that ``n`` more pods of its template fit
in what is left, on every resource it requests (pods always count one each),
which is Karmada's general estimator on a resource summary.

What counts as *allocated*: ``readyReplicas`` x pod requests, summed over the
member's Deployments, StatefulSets and ReplicaSets (ReplicaSets owned by a
Deployment are skipped: their Deployment already counts them). This is read
from the workload objects the control plane caches anyway, not from Pods,
because the local fleet's simulator runs no Pods; it matches what the
simulator packs onto its nodes. On a real cluster it leaves out bare Pods and
DaemonSets, and replicas that are scheduled but not yet ready, so it errs on
the side of room. The estimate is a whole-cluster sum, not per node: it can
say a replica fits when every node is too fragmented to take it; the replica
then stays unready in that member, as it would on a real scheduler.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from federation.placement import counts

JSON = dict[str, Any]
RESOURCES = ("cpu", "memory", "pods")
_SUFFIXES = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "P": 1e15, "E": 1e18,
}


def quantity(value: Any) -> float:
    """A Kubernetes quantity as a float (cpu in cores, memory in bytes); 0 when unreadable."""
    return _parse_quantity(str(value).strip())


@functools.lru_cache(maxsize=4096)
def _parse_quantity(text: str) -> float:
    # Memoised: every placement reads each member's summary again, and a fleet has few
    # distinct quantities (parsing them was a tenth of a burst's placement CPU).
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            text, scale = text[: -len(suffix)], _SUFFIXES[suffix]
            break
    else:
        scale = 1.0
    try:
        return float(text) * scale
    except ValueError:
        return 0.0


def pod_requests(workload: Mapping[str, Any]) -> dict[str, float]:
    """cpu, memory and pods (1) requested by one replica of a workload's pod template."""
    spec = (((workload.get("spec") or {}).get("template") or {}).get("spec")) or {}
    found = {"cpu": 0.0, "memory": 0.0, "pods": 1.0}
    for container in spec.get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        for name in ("cpu", "memory"):
            found[name] += quantity(requests.get(name, 0))
    return found


def allocatable(nodes: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    total = dict.fromkeys(RESOURCES, 0.0)
    for node in nodes:
        node_status = node.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in node_status.get("conditions") or [])
        if not ready or (node.get("spec") or {}).get("unschedulable"):
            continue
        for name in RESOURCES:
            total[name] += quantity((node_status.get("allocatable") or {}).get(name, 0))
    return total


def allocated(workloads: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    total = dict.fromkeys(RESOURCES, 0.0)
    for workload in workloads:
        owners = workload.get("metadata", {}).get("ownerReferences") or []
        if workload.get("kind") == "ReplicaSet" and any(o.get("kind") == "Deployment"
                                                        for o in owners):
            continue
        ready = int((workload.get("status") or {}).get("readyReplicas") or 0)
        for name, amount in pod_requests(workload).items():
            total[name] += ready * amount
    return total


def summary(nodes: Iterable[Mapping[str, Any]], workloads: Iterable[Mapping[str, Any]]) -> JSON:
    """``status.resourceSummary`` of a MemberCluster (cpu in millicores, memory in bytes)."""
    return {"allocatable": _format(allocatable(nodes)), "allocated": _format(allocated(workloads))}


def _format(amounts: Mapping[str, float]) -> JSON:
    return {"cpu": f"{round(amounts['cpu'] * 1000)}m", "memory": str(round(amounts["memory"])),
            "pods": str(round(amounts["pods"]))}


def free(resource_summary: Mapping[str, Any]) -> dict[str, float]:
    have = resource_summary.get("allocatable") or {}
    used = resource_summary.get("allocated") or {}
    return {name: max(quantity(have.get(name, 0)) - quantity(used.get(name, 0)), 0.0)
            for name in RESOURCES}


def estimate(resource_summary: Mapping[str, Any], requests: Mapping[str, float]) -> int:
    """How many more replicas with ``requests`` fit in what the summary leaves."""
    left = free(resource_summary)
    fits = [int(left[name] // amount + 1e-9) for name, amount in requests.items()
            if amount > 0 and name in left]
    # A summary claiming absurd room is capped at what a replica count can hold.
    return min(max(min(fits), 0), counts.INT32_MAX) if fits else 0
