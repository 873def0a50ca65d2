"""Installing the hub API (CRDs) and registering member clusters.

``fedctl install`` and ``fedctl run`` both call :func:`install_crds`: a
server-side apply of every CRD in ``federation/crds/crds.yaml`` and
``federation/crds/karmada.yaml`` (Karmada's policy kinds, served next to ours; idempotent,
and an upgrade when the file changed), then a wait until each is Established
so that the informers started next do not begin with a 404. Each applied CRD
carries the digest of its document (``federation.io/crd-digest``); ``fedctl run``
applies only the CRDs whose digest differs, so a restart with nothing to upgrade
sends no write to the hub (a no-op apply is still a mutating request the hub
serves and counts). ``fedctl install`` applies every CRD whatever its digest, so
an admin's install also reverts hand edits of our CRDs.

:func:`install_rbac` applies the control plane's least-privilege RBAC
(:mod:`federation.rbac.roles`) to one cluster, the same way: server-side apply,
creating the namespaces the Roles live in first. ``fedctl install`` applies the
hub's and each registered member's; ``fedctl join --create-service-account``
a joining member's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from federation.contexts.client import NAMESPACES, ApiError, ObjectClient, Resource
from federation.hub import api
from federation.rbac import roles
from federation.untrusted import documents

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
    """The shipped CRDs, parsed with libyaml where PyYAML has it: the pure-Python parser
    took about a second of every start's CPU on these files (three replicas starting
    together pay it three times on the same cores)."""
    return [doc for path in api.CRD_FILES
            for doc in yaml.load_all(path.read_text(), Loader=documents.LOADER) if doc]


CRD_DIGEST_ANNOTATION = "federation.io/crd-digest"
INSTALL_ANNOTATION = "federation.io/install"
"""``if-absent`` on a shipped CRD of another project's API (KubeBlocks' ConfigConstraint and
ParametersDefinition): installed where none exists, never applied over that project's own
CRD (which has other versions and a stricter schema its controllers depend on)."""


def crd_digest(doc: Mapping[str, Any]) -> str:
    """A digest of a CRD document as shipped (before the digest annotation is added)."""
    encoded = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def with_digest(doc: JSON) -> JSON:
    meta = doc.get("metadata") or {}
    annotations = {**(meta.get("annotations") or {}), CRD_DIGEST_ANNOTATION: crd_digest(doc)}
    return {**doc, "metadata": {**meta, "annotations": annotations}}


async def install_crds(client: ObjectClient, *, only_changed: bool = False) -> list[str]:
    """Apply every CRD (with ``only_changed``, those whose live digest differs from the
    shipped document's, or that are not established) and wait until all are established;
    their names."""
    docs = crd_documents()
    names = [doc["metadata"]["name"] for doc in docs]
    # One round trip for all (a replica starting beside two others that list the fleet
    # read 27 CRDs one by one, twice, for 11 s); a CRD found current is established.
    current = await asyncio.gather(*(_current(client, name, crd_digest(doc))
                                     for doc, name in zip(docs, names, strict=True))
                                   ) if only_changed else [False] * len(docs)
    waiting = []
    for doc, name, done in zip(docs, names, current, strict=True):
        if done:
            continue
        waiting.append(name)
        if await _foreign(client, doc):
            continue
        await client.apply(api.CRDS, with_digest(doc), FIELD_MANAGER, force=True)
    deadline = time.monotonic() + ESTABLISH_TIMEOUT
    for name in waiting:
        while not _established(await client.get(api.CRDS, name)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not established after {ESTABLISH_TIMEOUT:.0f}s")
            await asyncio.sleep(0.2)
    return names


async def _current(client: ObjectClient, name: str, digest: str) -> bool:
    """The live CRD is the shipped one (same digest) and is served."""
    try:
        live = await client.get(api.CRDS, name)
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    return annotations.get(CRD_DIGEST_ANNOTATION) == digest and _established(live)


async def _foreign(client: ObjectClient, doc: Mapping[str, Any]) -> bool:
    """An ``if-absent`` CRD that exists and is not ours (no digest of ours): left alone."""
    annotations = (doc.get("metadata") or {}).get("annotations") or {}
    if annotations.get(INSTALL_ANNOTATION) != "if-absent":
        return False
    try:
        live = await client.get(api.CRDS, doc["metadata"]["name"])
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    live_annotations = (live.get("metadata") or {}).get("annotations") or {}
    return CRD_DIGEST_ANNOTATION not in live_annotations


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


async def register_clusters(client: ObjectClient, entries: Sequence[Mapping[str, Any]]
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


async def ensure_namespace(client: ObjectClient, name: str) -> None:
    """Create namespace ``name`` unless it exists (an existing one is left as it is)."""
    try:
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": name}})
    except ApiError as exc:
        if exc.status != 409:
            raise


async def install_rbac(client: ObjectClient, manifests: Sequence[roles.Manifest]) -> list[str]:
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


async def install_service_account(client: ObjectClient, settings: roles.Settings,
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
