"""MemberCluster objects as placement clusters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.placement import clusters as clusters_
from federation.placement import counts


def leaving(doc: Mapping[str, Any] | None) -> bool:
    """A MemberCluster gone or being deleted: its member is leaving the fleet."""
    return doc is None or bool((doc.get("metadata") or {}).get("deletionTimestamp"))


def member_cluster(doc: Mapping[str, Any], reachable: bool) -> clusters_.Cluster:
    """A MemberCluster as the engine sees it: ready when reachable and not Ready=False."""
    spec = doc.get("spec") or {}
    conditions = {c.get("type"): c.get("status")
                  for c in (doc.get("status") or {}).get("conditions") or []}
    ready = reachable and conditions.get("Ready", "True") != "False"
    available = (doc.get("status") or {}).get("availableReplicas")
    return clusters_.Cluster.model_validate({
        "name": doc["metadata"]["name"],
        "labels": doc["metadata"].get("labels") or {},
        "region": spec.get("region") or None, "zone": spec.get("zone") or None,
        "provider": spec.get("provider") or None,
        "taints": [{k: t[k] for k in ("key", "value", "effect") if k in t}
                   for t in spec.get("taints") or []],
        "available_replicas": available if counts.is_replicas(available) else None,
        "ready": ready,
    })
