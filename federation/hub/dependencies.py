"""The dependencies a workload carries with ``propagateDeps``, as a binding records them.

Karmada's dependencies distributor copies the ConfigMaps, Secrets, ServiceAccounts and
PersistentVolumeClaims a workload's pod template names to the workload's clusters
(propagation's ``propagate_deps`` transformer). The binding records what was carried
(``spec.dependencies``) and what was named but missing (``spec.awaitedDependencies``).
These are the pure rules both the propagation controller and the clean-up controller
read: which kinds, how a reference is written, who else still carries one where.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from federation.contexts.client import CONFIGMAPS, Resource

AWAITED = "awaitedDependencies"
"""The binding's spec field naming the dependencies the pod template names that do not
exist on the hub yet: the wiring requeues the workload when one appears. Never read by
a deletion (only ``spec.dependencies``, what was copied, is)."""

SECRETS = Resource("", "v1", "secrets", "Secret")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
KINDS: Mapping[str, Resource] = {r.kind: r for r in (CONFIGMAPS, SECRETS, SERVICE_ACCOUNTS,
                                                      PVCS)}
"""The kinds a dependency can be (Karmada's pod template dependencies)."""

_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
"""A Kubernetes object name (DNS-1123 subdomain)."""

@dataclasses.dataclass(frozen=True, order=True)
class Ref:
    """One dependency: a kind of :data:`KINDS` and a name, in the workload's namespace."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> Ref | None:
        kind, _, name = str(text).partition("/")
        return cls(kind, name) if kind in KINDS and _NAME.fullmatch(name) else None


def valid_name(name: str) -> bool:
    """Whether ``name`` is a Kubernetes object name (a reference that is not could name no
    object and must never reach a URL)."""
    return _NAME.fullmatch(name) is not None


def dependencies(binding: Mapping[str, Any] | None) -> list[Ref]:
    """The dependencies a binding records as carried (unparseable entries ignored: the
    record is ours, and a name we could not have written is never acted on)."""
    return _refs(binding, "dependencies")


def awaited(binding: Mapping[str, Any] | None) -> list[Ref]:
    """The dependencies a binding records as named but missing on the hub (:data:`AWAITED`)."""
    return _refs(binding, AWAITED)


def _refs(binding: Mapping[str, Any] | None, field: str) -> list[Ref]:
    found = ((binding or {}).get("spec") or {}).get(field) or []
    refs = [Ref.parse(str(text)) for text in found] if isinstance(found, list) else []
    return sorted(r for r in refs if r is not None)


def owned_clusters(binding: Mapping[str, Any] | None) -> set[str]:
    """Clusters where the dependency's own binding (its own policy) places it."""
    spec = (binding or {}).get("spec") or {}
    if spec.get("templateDeleted"):
        return set()
    return {str(c.get("name")) for c in spec.get("clusters") or []}



def is_own_binding(ref: Ref, binding: Mapping[str, Any] | None) -> bool:
    """Whether ``binding`` (found by the dependency's binding name) is the dependency's own
    (its ``spec.resource`` names it), not another object's that happens to have the name."""
    target = ((binding or {}).get("spec") or {}).get("resource") or {}
    return target.get("kind") == ref.kind and target.get("name") == ref.name


def carried_by_another(ref: Ref, cluster: str, bindings: Iterable[Mapping[str, Any]],
                       carrier: str) -> bool:
    """Whether a binding of the namespace other than ``carrier`` (and not a deleted
    template's) still carries ``ref`` to ``cluster``."""
    for binding in bindings:
        if (binding.get("metadata") or {}).get("name") == carrier:
            continue
        spec = binding.get("spec") or {}
        if ref in dependencies(binding) and not spec.get("templateDeleted") and \
                cluster in {str(c.get("name")) for c in spec.get("clusters") or []}:
            return True
    return False
