"""ResourceBindings: the hub's one record of a template's placement and status.

Every propagated template gets a binding in the hub, named ``<name>-<kind>``
(lower case), in the template's namespace (a ``ClusterResourceBinding`` for a
cluster-scoped template). It is the only place the control plane remembers
anything about the template: its spec is the decision (policy, replicas per
cluster, the explanation), ``pendingCleanup`` (clusters still holding a copy to
delete), ``orphan`` and ``templateDeleted``, and what Karmada's behaviour fields need
remembered (``dependencies`` carried by propagateDeps and ``awaitedDependencies`` named but
not on the hub yet, ``preserveResourcesOnDeletion``,
the ``activation`` a Lazy policy was applied with, the policy's ``suspension``, and
``whenUnclaimed``: ``Keep`` when a ``policy.karmada.io`` policy claimed it); its
status holds the conditions (Scheduled, Applied, Healthy, Conflict, CleanupPending,
Dispatching) and ``aggregatedStatus``:
per cluster whether the copy was applied, the error when not, its health and the
member's own status fields. Templates carry no finalizer and no annotation of ours.

A binding never outlives its template: when the template is gone (its delete is
seen by the watch; at start, by the clean-up controller listing bindings), its
copies are deleted and then the binding. It stays behind only while copies could
not be deleted (a member was unreachable): then ``spec.templateDeleted`` is true,
``spec.pendingCleanup`` lists those clusters, and the cleanup controller finishes
the job when they return.

Such a leftover is never overwritten by accident. A template re-created under the
same name inherits its pending clean-up (:func:`leftover`): the new template's
binding takes the list over in the same write that makes it its own, so at every
moment one record holds the list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from federation.contexts.client import Resource
from federation.hub import api, records, status
from federation.placement import decision as decision_

JSON = dict[str, Any]


class BindingError(ValueError):
    """A binding's spec field has the wrong shape (the CRD leaves the spec schemaless, so
    anyone allowed to write a binding can write anything there)."""


def _mapping(value: Any, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BindingError(f"spec.{field} is not an object" if field else "spec is not an object")
    return value


def _items(value: Any, field: str) -> Sequence[Any]:
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise BindingError(f"spec.{field} is not a list")
    return value


def _string(value: Any, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BindingError(f"spec.{field} is not a string")
    return value


def _flag(value: Any, field: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BindingError(f"spec.{field} is not true or false")
    return value


_REF_KEYS = (("api_version", "apiVersion"), ("kind", "kind"), ("namespace", "namespace"),
             ("name", "name"), ("uid", "uid"))


@dataclasses.dataclass(frozen=True)
class TemplateRef:
    """``spec.resource``: the template a binding records ("" where a field is absent)."""

    api_version: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""

    @classmethod
    def from_obj(cls, obj: Any) -> TemplateRef:
        fields = _mapping(obj, "resource")
        unknown = sorted(set(fields) - {key for _, key in _REF_KEYS})
        if unknown:
            raise BindingError(f"spec.resource has unknown field {unknown[0]!r}")
        return cls(**{attr: _string(fields.get(key), f"resource.{key}")
                      for attr, key in _REF_KEYS})

    def to_obj(self) -> JSON:
        """The fields that are set, as the writer (:func:`binding`) leaves out empty ones."""
        return {key: getattr(self, attr) for attr, key in _REF_KEYS if getattr(self, attr)}


@dataclasses.dataclass(frozen=True)
class Placed:
    """One entry of ``spec.clusters``: a chosen cluster and its replicas (0: a kind
    without replicas, or a decision that names clusters only)."""

    name: str
    replicas: int = 0

    @classmethod
    def from_obj(cls, obj: Any) -> Placed:
        entry = _mapping(obj, "clusters[]")
        unknown = sorted(set(entry) - {"name", "replicas"})
        if unknown:
            raise BindingError(f"spec.clusters[] has unknown field {unknown[0]!r}")
        name = _string(entry.get("name"), "clusters[].name")
        replicas = entry.get("replicas", 0)
        if not name:
            raise BindingError("spec.clusters[] has no name")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise BindingError("spec.clusters[].replicas is not a whole number >= 0")
        return cls(name, replicas)

    def to_obj(self) -> JSON:
        return {"name": self.name, "replicas": self.replicas}


_TYPED = frozenset({"resource", "templateDeleted", "pendingCleanup", "clusters", "orphan",
                    "policy"})


@dataclasses.dataclass(frozen=True)
class BindingRecord:
    """A ResourceBinding's spec, typed: what the controllers act on, read once.

    The fields every reader shares are typed here; the rest (the decision's summary and
    explanation, affinity groups, what Karmada's behaviour fields need remembered) belong to
    the modules that write them and are kept verbatim in :attr:`others`, so
    ``from_obj(spec).to_obj()`` loses nothing the writer put there. A field of the wrong
    shape raises :class:`BindingError` naming it: a record nobody can read is never acted on.
    """

    resource: TemplateRef = TemplateRef()
    template_deleted: bool = False
    """The template is gone; the binding stays only until :attr:`pending_cleanup` is empty."""
    pending_cleanup: tuple[str, ...] = ()
    """Clusters still holding a copy to delete, in the order recorded."""
    clusters: tuple[Placed, ...] = ()
    """The decision: where the template is placed and with how many replicas."""
    orphan: bool = False
    """Copies stay when the template (or its policy) goes."""
    policy: str | None = None
    """The placing policy as the writer names it (``<kind> <reference>``)."""
    others: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Every other spec field, as written."""

    @classmethod
    def of(cls, binding: Mapping[str, Any] | None) -> BindingRecord:
        """The record of a whole binding object (an absent binding: the empty record)."""
        return cls.from_obj((binding or {}).get("spec"))

    @classmethod
    def from_obj(cls, spec: Any) -> BindingRecord:
        """The record of a binding's ``spec``; raises :class:`BindingError` naming a
        malformed field."""
        fields = _mapping(spec, "")
        policy = fields.get("policy")
        return cls(
            resource=TemplateRef.from_obj(fields.get("resource")),
            template_deleted=_flag(fields.get("templateDeleted"), "templateDeleted"),
            pending_cleanup=tuple(_string(c, "pendingCleanup[]") for c in
                                  _items(fields.get("pendingCleanup"), "pendingCleanup")),
            clusters=tuple(Placed.from_obj(c) for c in
                           _items(fields.get("clusters"), "clusters")),
            orphan=_flag(fields.get("orphan"), "orphan"),
            policy=None if policy is None else _string(policy, "policy"),
            others={k: v for k, v in fields.items() if k not in _TYPED})

    def to_obj(self) -> JSON:
        """The spec as :func:`binding` writes it: ``orphan`` and ``policy`` only when set."""
        spec: JSON = {"resource": self.resource.to_obj(),
                      "templateDeleted": self.template_deleted,
                      "pendingCleanup": list(self.pending_cleanup),
                      "clusters": [placed.to_obj() for placed in self.clusters]}
        if self.orphan:
            spec["orphan"] = True
        if self.policy is not None:
            spec["policy"] = self.policy
        spec.update(self.others)
        return spec


def binding_name(template: Mapping[str, Any]) -> str:
    return records.binding_name(str(template["metadata"]["name"]), str(template.get("kind", "")))


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


def orphaned(template: Mapping[str, Any]) -> bool:
    """The template is annotated ``federation.io/orphan: "true"``: its copies stay when
    it (or its policy) goes."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(api.ORPHAN_ANNOTATION) == "true")


def binding(template: Mapping[str, Any], policy: str | None, placed: Mapping[str, int],
            decision: decision_.Decision | None, conditions: Sequence[JSON],
            copies: Mapping[str, Mapping[str, Any] | None], failed: Mapping[str, str],
            unreachable: Mapping[str, str], pending: Sequence[str],
            deleted: bool = False,
            groups: tuple[str | None, str | None] = (None, None),
            extra: Mapping[str, Any] | None = None) -> JSON:
    """The whole binding, spec and status: the CRD has no status subresource, so one POST
    or PUT carries both (see docs/propagation.md, the write budget)."""
    meta = template["metadata"]
    resource = binding_resource(template)
    obj: JSON = {"apiVersion": resource.api_version, "kind": resource.kind,
                 "metadata": {"name": binding_name(template),
                              "labels": {api.BINDING_LABEL: str(template["kind"]).lower()}}}
    if meta.get("namespace"):
        obj["metadata"]["namespace"] = meta["namespace"]
    spec: JSON = {
        "resource": {k: v for k, v in (("apiVersion", template.get("apiVersion")),
                                       ("kind", template.get("kind")),
                                       ("namespace", meta.get("namespace")),
                                       ("name", meta.get("name")), ("uid", meta.get("uid")))
                     if v},
        "templateDeleted": deleted,
        "pendingCleanup": list(pending),
        "clusters": [{"name": n, "replicas": r} for n, r in placed.items()],
    }
    if orphaned(template):
        spec["orphan"] = True
    if policy is not None:
        spec["policy"] = policy
    if any(groups):  # read by the workload-affinity filters of the template's peers
        spec[records.AFFINITY_GROUPS] = {key: value for key, value in
                                         zip(("affinityGroup", "antiAffinityGroup"), groups,
                                             strict=True) if value}
    spec.update(extra or {})  # what the policy's behaviour fields need remembered
    if decision is not None:
        spec["replicas"] = decision.replicas
        spec["summary"] = summary(decision)
        spec["explanation"] = list(decision.explanation)
        if decision.pending:
            spec["pendingReplicas"] = decision.pending
    obj["spec"] = spec
    obj["status"] = {"conditions": list(conditions),
                     "aggregatedStatus": aggregated(copies, failed, unreachable)}
    return obj


def same_record(current: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    """Whether writing ``wanted`` over ``current`` would change what anyone acts on: the
    spec, the labels, each condition's type, status and reason, and per cluster whether the
    copy is applied and its error. Members' status fields and messages alone never cause a
    write (they are refreshed with the next write that happens): see the write budget."""
    if current is None:
        return False
    if current.get("spec") != wanted.get("spec") or \
            (current.get("metadata", {}).get("labels") or {}) != wanted["metadata"]["labels"]:
        return False
    return _significant(current.get("status")) == _significant(wanted.get("status"))


def _significant(state: Mapping[str, Any] | None) -> tuple[Any, ...]:
    state = state or {}
    conditions = sorted((str(c.get("type")), c.get("status"), c.get("reason"))
                        for c in state.get("conditions") or [])
    clusters = sorted((str(e.get("cluster")), e.get("applied"), e.get("error"))
                      for e in state.get("aggregatedStatus") or [])
    return tuple(conditions), tuple(clusters)


def summary(decision: decision_.Decision) -> str:
    """One line for ``kubectl get``: ``member1=6,member2=4`` (names only without replicas)."""
    if any(decision.clusters.values()):
        return ",".join(f"{n}={r}" for n, r in decision.clusters.items())
    return ",".join(decision.clusters)


def aggregated(copies: Mapping[str, Mapping[str, Any] | None], failed: Mapping[str, str],
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
