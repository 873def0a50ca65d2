"""ResourceBindings: the hub's record of one template's placement and status.

Every propagated template gets a binding in the hub, named ``<name>-<kind>``
(lower case), in the template's namespace (a ``ClusterResourceBinding`` for a
cluster-scoped template). Its spec is the decision (policy, replicas per
cluster, the explanation); its status holds the conditions (Scheduled,
Applied, Healthy, Conflict, CleanupPending) for every kind, and
``aggregatedStatus``: per cluster whether the copy was applied, the error
when not, its health and the member's own status fields.

A binding never outlives its template by accident: every template that gets
one carries our finalizer, failed placements included, and the finalizer goes
only once the binding is deleted. It stays behind on purpose only when copies
could not be deleted (a member was unreachable past the wait): then
``spec.templateDeleted`` is true, ``spec.pendingCleanup`` lists those clusters,
and the cleanup controller finishes the job when they return.

Such a leftover is never overwritten. A template re-created under the same
name inherits its pending clean-up (:func:`leftover`): the new template's
reconcile records those clusters on the template (its own pending clean-up,
before any member write) and only then rewrites the binding, so at every moment
one record holds the list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from federation.contexts.client import Resource
from federation.controllers import api, status
from federation.placement import decision as decision_
from federation.placement import policy as policy_

JSON = dict[str, Any]


def binding_name(template: Mapping[str, Any]) -> str:
    name = f"{template['metadata']['name']}-{str(template.get('kind', '')).lower()}"
    return re.sub(r"[^a-z0-9.-]", "-", name.lower())[:253]


def binding_resource(template: Mapping[str, Any]) -> Resource:
    namespaced = bool(template.get("metadata", {}).get("namespace"))
    return api.RESOURCE_BINDINGS if namespaced else api.CLUSTER_RESOURCE_BINDINGS


def previous_conditions(binding: Mapping[str, Any] | None) -> list[JSON]:
    return list(((binding or {}).get("status") or {}).get("conditions") or [])


def leftover(binding: Mapping[str, Any] | None, template: Mapping[str, Any]) -> list[str]:
    """Clusters holding copies of a deleted earlier template of the same name: the pending
    clean-up of ``binding`` when it is the leftover of another template (another UID)."""
    spec = (binding or {}).get("spec") or {}
    if not spec.get("templateDeleted"):
        return []
    uid = (spec.get("resource") or {}).get("uid")
    if uid and uid == (template.get("metadata") or {}).get("uid"):
        return []  # this template's own record: its deletion is under way
    return sorted(str(c) for c in spec.get("pendingCleanup") or [])


def binding(template: Mapping[str, Any], decision: decision_.Decision | None,
            policy: policy_.Policy | None, conditions: Sequence[JSON],
            copies: Mapping[str, JSON | None], failed: Mapping[str, str],
            unreachable: Mapping[str, str], pending: Sequence[str],
            orphan_of_deleted: bool = False) -> dict[str, JSON]:
    """The binding object (for server-side apply) and its status (for the subresource)."""
    meta = template["metadata"]
    resource = binding_resource(template)
    identity: JSON = {"apiVersion": resource.api_version, "kind": resource.kind,
                      "metadata": {"name": binding_name(template),
                                   "labels": {api.BINDING_LABEL: str(template["kind"]).lower()}}}
    if meta.get("namespace"):
        identity["metadata"]["namespace"] = meta["namespace"]
    spec: JSON = {
        "resource": {k: v for k, v in (("apiVersion", template.get("apiVersion")),
                                       ("kind", template.get("kind")),
                                       ("namespace", meta.get("namespace")),
                                       ("name", meta.get("name")), ("uid", meta.get("uid")))
                     if v},
        "templateDeleted": orphan_of_deleted,
    }
    if orphan_of_deleted:
        # In the spec, written in one request with templateDeleted: the cleanup controller
        # must never see a deleted template's binding without its list of pending clusters.
        spec["pendingCleanup"] = list(pending)
    if policy is not None:
        spec["policy"] = f"{policy.kind} {policy.ref}"
    if decision is not None:
        spec["replicas"] = decision.replicas
        spec["clusters"] = [{"name": n, "replicas": r} for n, r in decision.clusters.items()]
        spec["summary"] = summary(decision)
        spec["explanation"] = list(decision.explanation)
        if decision.pending:
            spec["pendingReplicas"] = decision.pending
    new_status: JSON = {"conditions": list(conditions), "pendingCleanup": list(pending),
                        "aggregatedStatus": aggregated(copies, failed, unreachable)}
    return {"object": {**identity, "spec": spec},
            "status": {**identity, "status": new_status}}


def summary(decision: decision_.Decision) -> str:
    """One line for ``kubectl get``: ``member1=6,member2=4`` (names only without replicas)."""
    if any(decision.clusters.values()):
        return ",".join(f"{n}={r}" for n, r in decision.clusters.items())
    return ",".join(decision.clusters)


def aggregated(copies: Mapping[str, JSON | None], failed: Mapping[str, str],
               unreachable: Mapping[str, str]) -> list[JSON]:
    entries = []
    for cluster in sorted(set(copies) | set(failed) | set(unreachable)):
        copy = copies.get(cluster)
        error = failed.get(cluster) or unreachable.get(cluster)
        entry: JSON = {"cluster": cluster, "applied": error is None and copy is not None,
                       "health": status.health(copy) if error is None else "Unknown"}
        if error:
            entry["error"] = error[:1024]
        if copy is not None and copy.get("status"):
            entry["status"] = {k: v for k, v in copy["status"].items() if k != "conditions"}
        entries.append(entry)
    return entries
