"""``preserveResourcesOnDeletion``: deleting the template keeps its member copies.

As Karmada: the binding records the policy's choice (``spec.preserveResourcesOnDeletion``,
so the choice survives the template and the policy), and when the template is deleted
each copy is *released* rather than deleted: our ownership marks (the
``federation.io/managed-by`` label, the template-uid and applied-hash annotations) are
removed, as Karmada's execution controller removes its claim labels and annotations,
and the copy becomes an ordinary object of its cluster that nothing of ours updates or
deletes (a template re-created later meets it as a conflict, unless its policy says
``conflictResolution: Overwrite``). It applies to the template's deletion only: a
cluster the template leaves still loses its copy (what a policy that stops selecting a
template does is propagation's ``unclaimed`` module's), and so does a cluster it had left while that
cluster was away (pending clean-up, not in the decision) when the deletion comes. A member
of the decision away at the deletion gets its copy released by the clean-up controller
when it returns; the deleted binding lists the pending clusters whose copies go instead
(:data:`LEFT`). The dependencies the workload carried with ``propagateDeps`` are released
with it where it is released (unless another binding still carries them there), so no
copy of ours is left for a later clean-up of another workload to delete.

These are the rules (pure): propagation's ``preserve`` transformer records the choice,
and both propagation's finalisation and the clean-up controller release by them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from federation.hub import manifests
from federation.hub.bindings import LEFT_BEFORE_DELETION, BindingRecord

JSON = dict[str, Any]

FIELD = "preserveResourcesOnDeletion"
LEFT = LEFT_BEFORE_DELETION
"""A deleted, preserving binding's spec field: the pending clusters the template had left
before its deletion (their copies are deleted when they return, not released). Kept apart
from ``spec.clusters``, which a deleted binding empties (readers of placements ignore it)."""


def preserves(record: BindingRecord) -> bool:
    return record.behaviour.preserve_resources_on_deletion


def released(live: Mapping[str, Any]) -> JSON:
    """``live`` without our ownership marks (its resourceVersion kept: a PUT that fails
    on a concurrent change)."""
    obj: JSON = copy.deepcopy(dict(live))
    meta = obj.setdefault("metadata", {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items()
              if k != manifests.MANAGED_BY_LABEL}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k not in (manifests.TEMPLATE_UID_ANNOTATION,
                                manifests.APPLIED_HASH_ANNOTATION)}
    for key, values in (("labels", labels), ("annotations", annotations)):
        if values:
            meta[key] = values
        else:
            meta.pop(key, None)
    return obj


def released_on(record: BindingRecord) -> set[str]:
    """Where the template's deletion releases copies instead of deleting them: the clusters
    of its decision when it preserves (a cluster only pending was left earlier, while it
    was away: its copy goes, as any cluster left loses its copy)."""
    return set(record.decision()) if preserves(record) else set()


def releases(record: BindingRecord, cluster: str) -> bool:
    """Whether a deleted template's pending copy (and dependencies) in ``cluster`` is to be
    released rather than deleted: it preserves, and the cluster is not :data:`LEFT` (a
    record without that field, from before it existed, releases every pending copy:
    keeping an object is the mistake that loses nothing)."""
    return preserves(record) and cluster not in (record.left_before_deletion or ())
