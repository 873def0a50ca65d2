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


def allocated(workloads: Iterable[Mapping[str, Any]],
              allocations: Allocations | None = None) -> dict[str, float]:
    """What the ``workloads`` (each with its ``kind``) request; ``allocations`` remembers
    each one's share between calls."""
    return (allocations or Allocations()).total(_kinded(workloads))


def _kinded(workloads: Iterable[Mapping[str, Any]]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    return ((str(w.get("kind") or ""), w) for w in workloads)


def share(kind: str, workload: Mapping[str, Any]) -> dict[str, float]:
    """What one workload's ready replicas request (nothing for a Deployment's ReplicaSet:
    its Deployment counts them)."""
    owners = (workload.get("metadata") or {}).get("ownerReferences") or []
    if kind == "ReplicaSet" and any(o.get("kind") == "Deployment" for o in owners):
        return dict.fromkeys(RESOURCES, 0.0)
    ready = int((workload.get("status") or {}).get("readyReplicas") or 0)
    return {name: ready * amount for name, amount in pod_requests(workload).items()}


class Allocations:
    """:func:`allocated` over one member's workloads, again and again: each workload's
    share is remembered by uid and resourceVersion, so a summary looks again only at
    workloads that changed since the last one. Summing 10,000 Deployments' shares from
    their pod templates on every summary (each member every 10 s) was a quarter of a cold
    start's CPU at 10,000 templates, and a stall of the event loop each time."""

    def __init__(self) -> None:
        self._shares: dict[str, tuple[str, dict[str, float]]] = {}

    def total(self, workloads: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, float]:
        """The summed shares of ``(kind, workload)`` pairs; shares of workloads not among
        them are forgotten."""
        found = dict.fromkeys(RESOURCES, 0.0)
        kept: dict[str, tuple[str, dict[str, float]]] = {}
        for kind, workload in workloads:
            meta = workload.get("metadata") or {}
            uid, version = str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")
            known = self._shares.get(uid) if uid and version else None
            amounts = known[1] if known is not None and known[0] == version \
                else share(kind, workload)
            if uid and version:
                kept[uid] = (version, amounts)
            for name, amount in amounts.items():
                found[name] += amount
        self._shares = kept
        return found


def summary(nodes: Iterable[Mapping[str, Any]], workloads: Iterable[Mapping[str, Any]],
            allocations: Allocations | None = None) -> JSON:
    """``status.resourceSummary`` of a MemberCluster (cpu in millicores, memory in bytes)."""
    return member_summary(nodes, _kinded(workloads), allocations or Allocations())


def member_summary(nodes: Iterable[Mapping[str, Any]],
                   workloads: Iterable[tuple[str, Mapping[str, Any]]],
                   allocations: Allocations) -> JSON:
    """:func:`summary` from ``(kind, workload)`` pairs as cached (no copy to add the kind)."""
    return {"allocatable": _format(allocatable(nodes)),
            "allocated": _format(allocations.total(workloads))}


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
