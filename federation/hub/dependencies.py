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
from federation.hub.bindings import BindingRecord, readable

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


def dependencies(record: BindingRecord | None) -> list[Ref]:
    """The dependencies a binding records as carried (unparseable entries ignored: the
    record is ours, and a name we could not have written is never acted on)."""
    return _refs(record.behaviour.dependencies if record is not None else ())


def awaited(record: BindingRecord | None) -> list[Ref]:
    """The dependencies a binding records as named but missing on the hub (:data:`AWAITED`)."""
    return _refs(record.behaviour.awaited_dependencies if record is not None else ())


def _refs(found: Iterable[str]) -> list[Ref]:
    return sorted(r for r in (Ref.parse(text) for text in found) if r is not None)


def owned_clusters(record: BindingRecord | None) -> set[str]:
    """Clusters where the dependency's own binding (its own policy) places it."""
    return set(record.placements()) if record is not None else set()


def own_record(ref: Ref, binding: Mapping[str, Any] | None) -> BindingRecord | None:
    """The record of ``binding`` (found by the dependency's binding name) when it is the
    dependency's own (its ``spec.resource`` names it), None when there is none or it is
    another object's that happens to have the name; raises
    :class:`~federation.hub.bindings.BindingError` when it cannot be read."""
    if binding is None:
        return None
    record = BindingRecord.of(binding)
    return record if record.records(ref.kind, ref.name) else None


def carried_by_another(ref: Ref, cluster: str, items: Iterable[Mapping[str, Any]],
                       carrier: str) -> bool:
    """Whether a binding of the namespace other than ``carrier`` (and not a deleted
    template's) still carries ``ref`` to ``cluster``. One that cannot be read counts as
    carrying it: nothing is deleted on the word of a record nobody can read."""
    for binding, record in readable(items):
        if (binding.get("metadata") or {}).get("name") == carrier:
            continue
        if record is None or (ref in dependencies(record) and cluster in record.placements()):
            return True
    return False
