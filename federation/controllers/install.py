"""Installing the hub API (CRDs) and registering member clusters.

``fedctl install`` and ``fedctl run`` both call :func:`install_crds`: a
server-side apply of every CRD in ``federation/crds/crds.yaml`` (idempotent,
and an upgrade when the file changed), then a wait until each is Established
so that the informers started next do not begin with a 404.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from federation.contexts.client import ApiError, ClusterClient
from federation.controllers import api

JSON = dict[str, Any]
FIELD_MANAGER = "federation"
ESTABLISH_TIMEOUT = 30.0
"""Seconds to wait for CRDs to be served: a hub establishes a CRD within a second or two."""


def crd_documents() -> list[JSON]:
    return [doc for doc in yaml.safe_load_all(api.CRD_FILE.read_text()) if doc]


async def install_crds(client: ClusterClient) -> list[str]:
    """Apply every CRD and wait until all are established; their names."""
    names = []
    for doc in crd_documents():
        await client.apply(api.CRDS, doc, FIELD_MANAGER, force=True)
        names.append(doc["metadata"]["name"])
    deadline = time.monotonic() + ESTABLISH_TIMEOUT
    for name in names:
        while not _established(await client.get(api.CRDS, name)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not established after {ESTABLISH_TIMEOUT:.0f}s")
            await asyncio.sleep(0.2)
    return names


def _established(crd: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])


def member_cluster(entry: Mapping[str, Any]) -> JSON:
    """A MemberCluster from a ``fedctl plan --clusters`` entry (name, labels, location, taints)."""
    spec: JSON = {"context": entry.get("context") or entry["name"]}
    for key in ("region", "zone", "provider"):
        if entry.get(key):
            spec[key] = entry[key]
    if entry.get("taints"):
        spec["taints"] = list(entry["taints"])
    return {"apiVersion": api.MEMBER_CLUSTERS.api_version, "kind": "MemberCluster",
            "metadata": {"name": entry["name"], "labels": dict(entry.get("labels") or {})},
            "spec": spec}


async def register_clusters(client: ClusterClient, entries: Sequence[Mapping[str, Any]]
                            ) -> list[str]:
    names = []
    for entry in entries:
        body = member_cluster(entry)
        try:
            await client.apply(api.MEMBER_CLUSTERS, body, FIELD_MANAGER, force=True)
        except ApiError as exc:
            raise ApiError(client.name, exc.status, exc.reason,
                           f"MemberCluster {entry['name']}: {exc}") from None
        names.append(body["metadata"]["name"])
    return names
