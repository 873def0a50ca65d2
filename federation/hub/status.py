"""Status that flows back from members to the hub.

Where it goes:

- The template's own ``status``, for workload kinds (Deployment, StatefulSet,
  ReplicaSet): replica counts summed over the member copies, so
  ``kubectl get deploy`` on the hub reads ``12/12`` like a single cluster would,
  with ``observedGeneration`` set to the template's generation only once every
  copy has observed the generation we wrote. Its conditions gain
  ``Scheduled``, ``Applied`` and ``Healthy``.
- The template's ResourceBinding (``work.federation.io``, named
  ``<name>-<kind>``): the decision, the same conditions for every kind
  (a ConfigMap has no status of its own), and ``aggregatedStatus``: per
  cluster, whether the copy was applied (with the error when not), its health
  and the member's status fields.

Health of one copy: a workload is Healthy when the member has observed its
generation and all its replicas are ready, Progressing before that; any other
kind is Healthy once it exists. A cluster we could not read is Unknown. These are
the built-in answers: a ResourceInterpreterCustomization's InterpretHealth and
AggregateStatus answer first for its kind (propagation's ``observations``).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any, Literal

JSON = dict[str, Any]
Health = Literal["Healthy", "Progressing", "Unhealthy", "Unknown"]
"""Unhealthy: a customization's InterpretHealth said false (the built-in says
Progressing until a workload is ready)."""

WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "ReplicaSet"})
SUMMED_FIELDS = ("replicas", "readyReplicas", "availableReplicas", "updatedReplicas",
                 "currentReplicas", "unavailableReplicas")


OUR_CONDITIONS = ("Scheduled", "Applied", "Healthy", "Conflict", "CleanupPending",
                  "Dispatching", "StatusInterpreted")
"""The conditions propagation writes on bindings and templates (others are left alone;
one of ours that a round no longer states is removed, so a cleared problem goes)."""


def now(at: datetime.datetime | None = None) -> str:
    """``at`` (default: the wall clock) as a condition's transition time."""
    return (at or datetime.datetime.now(datetime.UTC)).astimezone(datetime.UTC) \
        .strftime("%Y-%m-%dT%H:%M:%SZ")


def health(copy: Mapping[str, Any] | None) -> Health:
    if copy is None:
        return "Unknown"
    if copy.get("kind") not in WORKLOAD_KINDS:
        return "Healthy"
    status = copy.get("status") or {}
    generation = copy.get("metadata", {}).get("generation", 0)
    if status.get("observedGeneration", 0) < generation:
        return "Progressing"
    wanted = (copy.get("spec") or {}).get("replicas", 1)
    return "Healthy" if status.get("readyReplicas", 0) >= wanted else "Progressing"


def summed(copies: Mapping[str, Mapping[str, Any] | None]) -> JSON:
    """Replica counts added up over the copies that exist."""
    total: JSON = {}
    for copy in copies.values():
        status = (copy or {}).get("status") or {}
        for field in SUMMED_FIELDS:
            if isinstance(status.get(field), int):
                total[field] = total.get(field, 0) + status[field]
    return total


def all_observed(copies: Mapping[str, Mapping[str, Any] | None]) -> bool:
    return all(copy is not None and health(copy) != "Unknown"
               and (copy.get("status") or {}).get("observedGeneration", 0)
               >= copy.get("metadata", {}).get("generation", 0)
               for copy in copies.values())


def condition(kind: str, ok: bool, reason: str, message: str,
              previous: Sequence[Mapping[str, Any]] = (),
              at: datetime.datetime | None = None) -> JSON:
    """A condition whose lastTransitionTime moves only when its status changes (to ``at``,
    default the wall clock: controllers on a fake clock pass theirs)."""
    status = "True" if ok else "False"
    before = next((c for c in previous if c.get("type") == kind), None)
    since = before.get("lastTransitionTime") if before and before.get("status") == status \
        else now(at)
    return {"type": kind, "status": status, "reason": reason, "message": message[:1024],
            "lastTransitionTime": since}


def merge_conditions(existing: Sequence[Mapping[str, Any]], ours: Sequence[JSON],
                     drop: Sequence[str] = ()) -> list[JSON]:
    """Replace our condition types in ``existing``, keep everyone else's, drop ``drop``."""
    replaced = {c["type"] for c in ours} | set(drop)
    kept = [dict(c) for c in existing if c.get("type") not in replaced]
    return kept + list(ours)


def template_status(template: Mapping[str, Any], copies: Mapping[str, Mapping[str, Any] | None],
                    conditions: Sequence[JSON],
                    aggregated: Mapping[str, Any] | None = None) -> JSON | None:
    """The hub template's new status, for kinds that have one we may fill; else None.

    ``aggregated``: the status a customization's AggregateStatus gave (any kind), which
    then stands for the summed counts; our conditions are merged into it all the same."""
    if aggregated is not None:
        scripted = {k: v for k, v in aggregated.items() if k != "conditions"}
        scripted["conditions"] = merge_conditions(aggregated.get("conditions") or [],
                                                  list(conditions), drop=OUR_CONDITIONS)
        return scripted
    if template.get("kind") not in WORKLOAD_KINDS:
        return None
    current = dict(template.get("status") or {})
    status: JSON = {field: 0 for field in SUMMED_FIELDS if field in current}
    status.update(summed(copies))
    generation = template.get("metadata", {}).get("generation")
    if generation is not None and all_observed(copies):
        status["observedGeneration"] = generation
    elif "observedGeneration" in current:
        status["observedGeneration"] = current["observedGeneration"]
    status["conditions"] = merge_conditions(current.get("conditions") or [], list(conditions),
                                            drop=OUR_CONDITIONS)
    return status


def same_status(current: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    """Equal apart from condition timestamps: no write needed."""
    def strip(status: Mapping[str, Any] | None) -> JSON:
        result = dict(status or {})
        result["conditions"] = sorted(
            ((c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
             for c in result.get("conditions") or []), key=str)
        return result
    return strip(current) == strip(wanted)
