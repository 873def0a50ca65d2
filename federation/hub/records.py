"""The ResourceBinding as the one record of a template's placement.

A template carries nothing of ours but its status; everything the control plane must
remember about it is in its binding's spec: the decision (``clusters``: name and
replicas), ``pendingCleanup`` (clusters still holding a copy to delete), ``orphan``
(copies stay when the template goes) and ``templateDeleted``. These readers are what
the propagation controller, ``fedctl plan --live`` and ``fedctl get`` share.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def binding_name(name: str, kind: str) -> str:
    """``<name>-<kind>`` in lower case, as a valid object name."""
    return re.sub(r"[^a-z0-9.-]", "-", f"{name}-{kind}".lower())[:253]


def owned_by(binding: Mapping[str, Any] | None, uid: str | None) -> bool:
    """Whether ``binding`` is the record of the template of ``uid`` (not of a deleted
    predecessor of the same name)."""
    spec = (binding or {}).get("spec") or {}
    if binding is None or spec.get("templateDeleted"):
        return False
    recorded = (spec.get("resource") or {}).get("uid")
    return not recorded or not uid or recorded == uid


def decision(binding: Mapping[str, Any] | None) -> dict[str, int]:
    """The recorded decision, cluster -> replicas (empty when there is none)."""
    found: dict[str, int] = {}
    for entry in ((binding or {}).get("spec") or {}).get("clusters") or []:
        if isinstance(entry, Mapping) and entry.get("name"):
            replicas = entry.get("replicas")
            found[str(entry["name"])] = replicas if isinstance(replicas, int) else 0
    return found


def pending(binding: Mapping[str, Any] | None) -> list[str]:
    """Clusters still holding a copy that must be deleted."""
    spec = (binding or {}).get("spec") or {}
    return sorted(str(c) for c in spec.get("pendingCleanup") or [])


def holders(binding: Mapping[str, Any] | None) -> list[str]:
    """Every cluster that may hold a copy: the decision and the pending clean-up."""
    return sorted(set(decision(binding)) | set(pending(binding)))


AFFINITY_GROUPS = "workloadAffinityGroups"
"""The binding's spec field naming the template's workload (anti-)affinity groups, with
Karmada's name and keys (``affinityGroup``, ``antiAffinityGroup``: ``key=value``)."""


def affinity_groups(binding: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """(affinity group, anti-affinity group) the binding's template belongs to."""
    groups = ((binding or {}).get("spec") or {}).get(AFFINITY_GROUPS) or {}
    if not isinstance(groups, Mapping):
        return None, None
    group, anti = (groups.get(k) for k in ("affinityGroup", "antiAffinityGroup"))
    return (group if isinstance(group, str) and group else None,
            anti if isinstance(anti, str) and anti else None)
