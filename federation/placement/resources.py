"""The resource being placed, reduced to what placement needs.

Placement looks at a Kubernetes object only for its identity (apiVersion,
kind, namespace, name), its labels (policies select by label) and its replica
count. The count follows Karmada's default resource interpreter: ``spec.replicas``
for Deployments, StatefulSets and ReplicaSets (1 when absent, as the API
server defaults it), ``spec.parallelism`` for Jobs, 1 for a Pod, and for any
other kind ``spec.replicas`` when it is an integer, else 0. A resource with 0
replicas (a ConfigMap, or a Deployment scaled to zero) is propagated to every
selected cluster with no replicas to divide.

The object's ``metadata.uid`` is kept too: Karmada breaks ties in replica
division by a hash of it, so the same object divides the same way here.

Namespaces: a namespaced object without ``metadata.namespace`` is in
``default`` (kubectl's rule); a handful of well-known cluster-scoped kinds
have no namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from federation.placement import counts

ResourceKey = tuple[str, str, str | None, str]
"""(apiVersion, kind, namespace or None, name): how decisions are keyed."""

CLUSTER_SCOPED_KINDS = frozenset(
    {
        "Namespace",
        "Node",
        "PersistentVolume",
        "StorageClass",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "PriorityClass",
        "IngressClass",
        "RuntimeClass",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "APIService",
    }
)
_SCALABLE_KINDS = frozenset({"Deployment", "StatefulSet", "ReplicaSet"})


class Resource(BaseModel):
    """The identity, labels and replica count of an object to place."""

    model_config = ConfigDict(frozen=True)

    api_version: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    replicas: counts.Replicas = 0
    #: ``metadata.uid``; its hash breaks Webster's ties as Karmada does. Empty when the
    #: manifest has none (a file for ``fedctl plan``): ties then go to the first name,
    #: Karmada's rule for an empty UID.
    uid: str = Field(default="", max_length=128, strict=True)

    @property
    def key(self) -> ResourceKey:
        return (self.api_version, self.kind, self.namespace, self.name)

    @property
    def ref(self) -> str:
        """``Kind namespace/name`` (or ``Kind name``) for tables and messages."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


def replicas_of(kind: str, spec: Mapping[str, Any]) -> Any:
    """The replica count field of a manifest's spec, per Karmada's default interpreter."""
    if kind in _SCALABLE_KINDS:
        return spec.get("replicas", 1)
    if kind == "Job":
        return spec.get("parallelism", 1)
    if kind == "Pod":
        return 1
    value = spec.get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def from_manifest(manifest: Mapping[str, Any]) -> Resource:
    """A :class:`Resource` from a Kubernetes manifest (raises pydantic's ValidationError)."""
    metadata = manifest.get("metadata") or {}
    spec = manifest.get("spec") or {}
    kind = manifest.get("kind")
    # A kind that is not a string (a mapping, a list) is refused by validation below.
    cluster_scoped = isinstance(kind, str) and kind in CLUSTER_SCOPED_KINDS
    namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    if not cluster_scoped:
        namespace = namespace or "default"
    return Resource.model_validate(
        {
            "api_version": manifest.get("apiVersion"),
            "kind": kind,
            "name": metadata.get("name") if isinstance(metadata, Mapping) else None,
            "namespace": None if cluster_scoped else namespace,
            "labels": metadata.get("labels") or {} if isinstance(metadata, Mapping) else {},
            "replicas": replicas_of(str(kind), spec) if isinstance(spec, Mapping) else 0,
            "uid": (metadata.get("uid") or "") if isinstance(metadata, Mapping) else "",
        }
    )
