"""Installing the hub API (CRDs) and registering member clusters.

``fedctl install`` and ``fedctl run`` both call :func:`install_crds`: a
server-side apply of every CRD in ``federation/crds/crds.yaml`` (idempotent,
and an upgrade when the file changed), then a wait until each is Established
so that the informers started next do not begin with a 404.

:func:`install_rbac` applies the control plane's least-privilege RBAC
(:mod:`federation.rbac.roles`) to one cluster, the same way: server-side apply,
creating the namespaces the Roles live in first. ``fedctl install`` applies the
hub's and each registered member's; ``fedctl join --create-service-account``
a joining member's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from federation.contexts.client import NAMESPACES, ApiError, ClusterClient, Resource
from federation.controllers import api
from federation.rbac import roles

JSON = dict[str, Any]
FIELD_MANAGER = "federation"
ESTABLISH_TIMEOUT = 30.0
"""Seconds to wait for CRDs to be served: a hub establishes a CRD within a second or two."""


RBAC_RESOURCES = {
    "ClusterRole": Resource(roles.RBAC_GROUP, "v1", "clusterroles", "ClusterRole",
                            namespaced=False),
    "ClusterRoleBinding": Resource(roles.RBAC_GROUP, "v1", "clusterrolebindings",
                                   "ClusterRoleBinding", namespaced=False),
    "Role": Resource(roles.RBAC_GROUP, "v1", "roles", "Role"),
    "RoleBinding": Resource(roles.RBAC_GROUP, "v1", "rolebindings", "RoleBinding"),
}


def crd_documents() -> list[JSON]:
    return [doc for doc in yaml.safe_load_all(api.CRD_FILE.read_text()) if doc]


async def install_crds(client: ClusterClient) -> list[str]:
    """Apply every CRD and wait until all are established; their names."""
    names = []
    for doc in crd_documents():
        name = doc["metadata"]["name"]
        # Skip a CRD the hub already serves as ours: a restart of the control plane then
        # writes nothing to the hub (even a no-op apply is a PATCH the server must process).
        if not contains(await _served(client, name), doc):
            await client.apply(api.CRDS, doc, FIELD_MANAGER, force=True)
        names.append(name)
    deadline = time.monotonic() + ESTABLISH_TIMEOUT
    for name in names:
        while not _established(await client.get(api.CRDS, name)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not established after {ESTABLISH_TIMEOUT:.0f}s")
            await asyncio.sleep(0.2)
    return names


async def _served(client: ClusterClient, name: str) -> JSON | None:
    try:
        return await client.get(api.CRDS, name)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def contains(live: Any, wanted: Any) -> bool:
    """True when ``live`` holds every field of ``wanted`` with the same value (the server adds
    defaults, so a live object is a superset of what we applied; lists match item by item)."""
    if isinstance(wanted, Mapping):
        return isinstance(live, Mapping) and all(
            key in live and contains(live[key], value) for key, value in wanted.items())
    if isinstance(wanted, list):
        return isinstance(live, list) and len(live) == len(wanted) and all(
            contains(have, want) for have, want in zip(live, wanted, strict=True))
    return bool(live == wanted)


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


async def ensure_namespace(client: ClusterClient, name: str) -> None:
    """Create namespace ``name`` unless it exists (an existing one is left as it is)."""
    try:
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": name}})
    except ApiError as exc:
        if exc.status != 409:
            raise


async def install_rbac(client: ClusterClient, manifests: Sequence[roles.Manifest]) -> list[str]:
    """Apply ``manifests`` (roles before their bindings, as listed); ``Kind/name`` of each."""
    for namespace in roles.namespaces(manifests):
        await ensure_namespace(client, namespace)
    applied = []
    for manifest in manifests:
        try:
            await client.apply(RBAC_RESOURCES[manifest.kind], manifest.body, FIELD_MANAGER,
                               force=True)
        except ApiError as exc:
            detail = str(exc.body.get("message") or exc.reason)
            raise ApiError(client.name, exc.status, exc.reason,
                           f"{manifest.kind} {manifest.name}: {detail}") from None
        applied.append(f"{manifest.kind}/{manifest.name}")
    return applied


SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")


async def install_service_account(client: ClusterClient, settings: roles.Settings,
                                  expiration_seconds: int) -> tuple[str, str]:
    """In a member: the control plane's ServiceAccount and the member RBAC bound to it, then
    a token for it from the TokenRequest API; (token, its expiry as the server states it).

    TokenRequest rather than a token Secret: a cluster without kube-controller-manager
    (the local fleet) never fills such Secrets, and requested tokens expire."""
    await ensure_namespace(client, settings.namespace)
    account = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": settings.service_account, "namespace": settings.namespace,
                            "labels": dict(roles.LABELS)},
               "automountServiceAccountToken": False}
    await client.apply(SERVICE_ACCOUNTS, account, FIELD_MANAGER, force=True)
    await install_rbac(client, roles.member(settings))
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"expirationSeconds": expiration_seconds}}
    path = SERVICE_ACCOUNTS.path(settings.namespace, settings.service_account, "token")
    answer = await client.request("POST", path, body=request)
    status = answer.get("status") or {}
    token = status.get("token")
    if not isinstance(token, str) or not token:
        raise ApiError(client.name, 500, "NoToken",
                       f"TokenRequest for ServiceAccount {settings.namespace}/"
                       f"{settings.service_account} returned no token")
    return token, str(status.get("expirationTimestamp") or "unknown")
