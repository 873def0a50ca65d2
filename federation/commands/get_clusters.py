"""``fedctl get clusters``: member clusters as the hub sees them.

One row per MemberCluster: Ready and Reachable (the health controller's
conditions), taints, capacity left (``status.resourceSummary``: free /
allocatable cpu, memory and pods) and what runs there (workloads and replicas
from the ResourceBindings' decisions). Reads only the hub.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from rich.table import Table

from federation.contexts import client as kube
from federation.contexts import kubeconfig
from federation.hub import api, capacity
from federation.hub import bindings as bindings_

JSON = dict[str, Any]
KINDS = frozenset({"cluster", "clusters", "membercluster", "memberclusters", "mc"})


async def read(context: kubeconfig.Context) -> tuple[list[JSON], list[JSON]]:
    async with kube.connect(context) as hub:
        members = (await hub.list(api.MEMBER_CLUSTERS)).get("items", [])
        bindings: list[JSON] = []
        for resource in (api.RESOURCE_BINDINGS, api.CLUSTER_RESOURCE_BINDINGS):
            bindings += (await hub.list(resource)).get("items", [])
    return members, bindings


def workloads(bindings: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """Cluster -> (objects placed there, replicas placed there)."""
    found: dict[str, tuple[int, int]] = {}
    for _, record in bindings_.readable(bindings):
        for name, placed in (record.placements() if record is not None else {}).items():
            count, replicas = found.get(name, (0, 0))
            found[name] = (count + 1, replicas + placed)
    return found


def _condition(doc: Mapping[str, Any], kind: str) -> str:
    for condition in (doc.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return "Unknown"


def _room(summary: Mapping[str, Any] | None) -> tuple[str, str, str]:
    if not summary:
        return "-", "-", "-"
    left = capacity.free(summary)
    have = {k: capacity.quantity(v) for k, v in (summary.get("allocatable") or {}).items()}
    gib = 2.0**30
    return (f"{left['cpu']:.1f}/{have.get('cpu', 0):.1f}",
            f"{left['memory'] / gib:.0f}Gi/{have.get('memory', 0) / gib:.0f}Gi",
            f"{left['pods']:.0f}/{have.get('pods', 0):.0f}")


def table(members: Iterable[Mapping[str, Any]], bindings: Iterable[Mapping[str, Any]]) -> Table:
    placed = workloads(bindings)
    out = Table(box=None, pad_edge=False)
    for column in ("NAME", "READY", "REACHABLE", "TAINTS", "CPU FREE", "MEMORY FREE",
                   "PODS FREE", "WORKLOADS", "REPLICAS", "REGION"):
        out.add_column(column, no_wrap=True)
    for doc in sorted(members, key=lambda d: str(d["metadata"]["name"])):
        name = str(doc["metadata"]["name"])
        taints = ",".join(f"{t.get('key')}:{t.get('effect')}"
                          for t in (doc.get("spec") or {}).get("taints") or []) or "-"
        count, replicas = placed.get(name, (0, 0))
        out.add_row(name, _condition(doc, "Ready"), _condition(doc, "Reachable"), taints,
                    *_room((doc.get("status") or {}).get("resourceSummary")), str(count),
                    str(replicas), (doc.get("spec") or {}).get("region") or "-")
    return out


def show(context: kubeconfig.Context) -> Table:
    members, bindings = asyncio.run(read(context))
    return table(members, bindings)
