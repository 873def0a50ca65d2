"""Applying the control plane's objects to the hub: ``fedctl install --control-plane``.

Server-side apply (field manager ``federation``, forced, as ``fedctl install`` applies CRDs
and RBAC), so a second install of a newer version upgrades the Deployment, Services and
the rest in place, and fields other managers own (an HPA's replicas, an operator's extra
annotations) are left to them. CRDs and RBAC come first (:mod:`federation.controllers.install`),
then these.
"""

from __future__ import annotations

from collections.abc import Sequence

from federation.contexts.client import ApiError, ObjectClient, Resource
from federation.deploy.manifests import JSON

FIELD_MANAGER = "federation"

RESOURCES = {
    ("v1", "Namespace"): Resource("", "v1", "namespaces", "Namespace", namespaced=False),
    ("v1", "ServiceAccount"): Resource("", "v1", "serviceaccounts", "ServiceAccount"),
    ("v1", "ConfigMap"): Resource("", "v1", "configmaps", "ConfigMap"),
    ("v1", "Secret"): Resource("", "v1", "secrets", "Secret"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): Resource(
        "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): Resource(
        "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
        namespaced=False),
    ("rbac.authorization.k8s.io/v1", "Role"): Resource(
        "rbac.authorization.k8s.io", "v1", "roles", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): Resource(
        "rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    ("v1", "Service"): Resource("", "v1", "services", "Service"),
    ("apps/v1", "Deployment"): Resource("apps", "v1", "deployments", "Deployment"),
    ("policy/v1", "PodDisruptionBudget"): Resource("policy", "v1", "poddisruptionbudgets",
                                                   "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "NetworkPolicy"): Resource("networking.k8s.io", "v1",
                                                        "networkpolicies", "NetworkPolicy"),
}
"""Every kind :func:`federation.deploy.manifests.control_plane` has besides CRDs and RBAC
(which ``fedctl install`` applies first), and every kind of the pull agent's objects
(:func:`federation.deploy.manifests.agent_for_member`, RBAC included: ``fedctl join
--mode pull --apply-agent`` applies them all to the member)."""

PDB_V1BETA1 = Resource("policy", "v1beta1", "poddisruptionbudgets", "PodDisruptionBudget")
"""Hubs before Kubernetes 1.21 serve PodDisruptionBudgets only as policy/v1beta1 (the same
fields we use); v1beta1 was removed in 1.25, so v1 is what we ship and try first."""


def resource(body: JSON) -> Resource:
    key = (str(body.get("apiVersion")), str(body.get("kind")))
    if key not in RESOURCES:
        raise ValueError(f"no REST resource known for {key[1]} {key[0]}")
    return RESOURCES[key]


async def apply_objects(client: ObjectClient, objects: Sequence[JSON]) -> list[str]:
    """Apply each object in order; ``Kind/name`` of each. A refusal names the object."""
    applied = []
    for body in objects:
        name = f"{body['kind']}/{body['metadata']['name']}"
        try:
            await _apply(client, body)
        except ApiError as exc:
            detail = str(exc.body.get("message") or exc.reason)
            raise ApiError(client.name, exc.status, exc.reason, f"{name}: {detail}") from None
        applied.append(name)
    return applied


async def _apply(client: ObjectClient, body: JSON) -> None:
    target = resource(body)
    try:
        await client.apply(target, body, FIELD_MANAGER, force=True)
    except ApiError as exc:
        if exc.status != 404 or target.kind != "PodDisruptionBudget":
            raise
        # The namespace was applied first: a 404 is policy/v1 itself missing, an older hub.
        older = {**body, "apiVersion": PDB_V1BETA1.api_version}
        await client.apply(PDB_V1BETA1, older, FIELD_MANAGER, force=True)
