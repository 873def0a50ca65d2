"""ResourceBindings: the hub's one record of a template's placement and status.

Every propagated template gets a binding in the hub, named ``<name>-<kind>``
(lower case, :func:`binding_name`), in the template's namespace (a
``ClusterResourceBinding`` for a cluster-scoped template). It is the only place the control
plane remembers anything about the template: its spec is the decision (policy, replicas per
cluster, the explanation), ``pendingCleanup`` (clusters still holding a copy to delete),
``orphan`` and ``templateDeleted``, and what Karmada's behaviour fields need remembered
(:class:`Behaviour`); its status holds the conditions (Scheduled, Applied, Healthy,
Conflict, CleanupPending, Dispatching) and ``aggregatedStatus``: per cluster whether the
copy was applied, the error when not, its health and the member's own status fields.
Templates carry no finalizer and no annotation of ours.

Read once, typed: :class:`BindingRecord` is the binding's spec and status as a frozen
value. Every reader (propagation's transformers, clean-up, ``fedctl get clusters``,
``fedctl plan --live``, unjoin, the rollout controller) asks the record, and every writer
builds one and writes :meth:`BindingRecord.to_obj`; nobody reads the spec as a raw dict.
This module is the binding's whole vocabulary (its name, its record, the writer's helpers):
it was two (``records`` for the readers, ``bindings`` for the writer), which read and wrote
the same fields with two ideas of their shape.

The CRD leaves spec and status schemaless, so whoever may write a binding may write
anything there. :meth:`BindingRecord.from_obj` refuses a field of the wrong shape, and any
field it does not know, with :class:`BindingError` naming the field (never quoting the
value): a record nobody can read is never acted on, and never overwritten (it may list
copies still to delete). It tolerates what earlier versions wrote: absent fields are their
defaults, and ``status.pendingCleanup`` (where versions before the one-record binding kept a
live template's pending clean-up) still counts as pending clean-up.

A binding never outlives its template: when the template is gone (its delete is seen by the
watch; at start, by the clean-up controller listing bindings), its copies are deleted and
then the binding. It stays behind only while copies could not be deleted (a member was
unreachable): then ``spec.templateDeleted`` is true, ``spec.pendingCleanup`` lists those
clusters, and the cleanup controller finishes the job when they return. A template
re-created under the same name inherits that pending clean-up: the new template's binding
takes the list over in the same write that makes it its own, so at every moment one record
holds the list.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from federation.contexts.client import Resource
from federation.hub import api, parsed, status
from federation.placement import decision as decision_

JSON = dict[str, Any]
T = TypeVar("T")

AFFINITY_GROUPS = "workloadAffinityGroups"
"""The binding's spec field naming the template's workload (anti-)affinity groups, with
Karmada's name and keys (``affinityGroup``, ``antiAffinityGroup``: ``key=value``)."""
LEFT_BEFORE_DELETION = "leftBeforeDeletion"
"""A deleted, preserving binding's spec field: the pending clusters the template had left
before its deletion (their copies are deleted when they return, not released)."""


class BindingError(ValueError):
    """A binding's field has the wrong shape or is unknown (the CRD leaves spec and status
    schemaless, so anyone allowed to write a binding can write anything there)."""


# -- shapes ----------------------------------------------------------------------------------


def _mapping(value: Any, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BindingError(f"{field} is not an object")
    return value


def _known(fields: Mapping[str, Any], known: Iterable[str], where: str) -> None:
    unknown = sorted(str(key) for key in set(fields) - set(known))
    if unknown:
        raise BindingError(f"{where} has unknown field {unknown[0][:64]!r}")


def _items(value: Any, field: str) -> Sequence[Any]:
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise BindingError(f"{field} is not a list")
    return value


def _each(value: Any, field: str, read: Callable[[Any, str], T]) -> tuple[T, ...]:
    return tuple(read(item, f"{field}[]") for item in _items(value, field))


def _string(value: Any, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BindingError(f"{field} is not a string")
    return value


def _optional_string(value: Any, field: str) -> str | None:
    return None if value is None else _string(value, field)


def _flag(value: Any, field: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BindingError(f"{field} is not true or false")
    return value


def _count(value: Any, field: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BindingError(f"{field} is not a whole number >= 0")
    return value


def _object(value: Any, field: str) -> Mapping[str, Any] | None:
    return None if value is None else _mapping(value, field)


# -- the parts -------------------------------------------------------------------------------


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
    def of(cls, template: Mapping[str, Any]) -> TemplateRef:
        """The reference to a template object."""
        meta = template.get("metadata") or {}
        found = {"apiVersion": template.get("apiVersion"), "kind": template.get("kind"),
                 "namespace": meta.get("namespace"), "name": meta.get("name"),
                 "uid": meta.get("uid")}
        return cls(**{attr: str(found[key] or "") for attr, key in _REF_KEYS})

    @classmethod
    def from_obj(cls, obj: Any) -> TemplateRef:
        fields = _mapping(obj, "spec.resource")
        _known(fields, (key for _, key in _REF_KEYS), "spec.resource")
        return cls(**{attr: _string(fields.get(key), f"spec.resource.{key}")
                      for attr, key in _REF_KEYS})

    def to_obj(self) -> JSON:
        """The fields that are set (the writer leaves out empty ones)."""
        return {key: getattr(self, attr) for attr, key in _REF_KEYS if getattr(self, attr)}

    def describe(self) -> str:
        """``Kind namespace/name`` for people."""
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


@dataclasses.dataclass(frozen=True)
class Placed:
    """One entry of ``spec.clusters``: a chosen cluster and its replicas (0: a kind
    without replicas, or a decision that names clusters only)."""

    name: str
    replicas: int = 0

    @classmethod
    def from_obj(cls, obj: Any, field: str = "spec.clusters[]") -> Placed:
        entry = _mapping(obj, field)
        _known(entry, ("name", "replicas"), field)
        name = _string(entry.get("name"), f"{field}.name")
        if not name:
            raise BindingError(f"{field} has no name")
        return cls(name, _count(entry.get("replicas"), f"{field}.replicas"))

    def to_obj(self) -> JSON:
        return {"name": self.name, "replicas": self.replicas}


@dataclasses.dataclass(frozen=True)
class Decided:
    """The decision's account, beside ``spec.clusters``: ``replicas`` asked for, the
    one-line ``summary`` (``kubectl get``), the ``explanation`` and ``pendingReplicas``
    (partial mode: replicas that did not fit)."""

    replicas: int
    summary: str = ""
    explanation: tuple[str, ...] = ()
    pending_replicas: int = 0

    @classmethod
    def of(cls, decision: decision_.Decision) -> Decided:
        return cls(decision.replicas, summary(decision), tuple(decision.explanation),
                   decision.pending)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Decided | None:
        if all(spec.get(key) is None for key in _DECIDED):
            return None
        return cls(_count(spec.get("replicas"), "spec.replicas"),
                   _string(spec.get("summary"), "spec.summary"),
                   _each(spec.get("explanation"), "spec.explanation", _string),
                   _count(spec.get("pendingReplicas"), "spec.pendingReplicas"))

    def to_obj(self) -> JSON:
        found: JSON = {"replicas": self.replicas, "summary": self.summary,
                       "explanation": list(self.explanation)}
        if self.pending_replicas:
            found["pendingReplicas"] = self.pending_replicas
        return found


_DECIDED = ("replicas", "summary", "explanation", "pendingReplicas")


@dataclasses.dataclass(frozen=True)
class Behaviour:
    """What the policy's behaviour fields need remembered, one field each (written only
    when set, in this order). Their meaning belongs to the transformers that decide them
    (``federation/controllers/propagation``); the shapes are checked here."""

    dependencies: tuple[str, ...] = ()
    """``propagateDeps``: the dependencies carried, ``Kind/name``."""
    awaited_dependencies: tuple[str, ...] = ()
    """``propagateDeps``: named but missing on the hub (never read by a deletion)."""
    preserve_resources_on_deletion: bool = False
    activation: Mapping[str, Any] | None = None
    """``activationPreference: Lazy``: the policy spec applied and the template's digest."""
    suspension: Mapping[str, Any] | None = None
    """The policy's ``suspension``, as Karmada's binding carries it."""
    config_held: tuple[Mapping[str, str], ...] = ()
    """Copies a ReconfigurePolicy holds: ``{cluster, kind, name, policy}``."""
    when_unclaimed: str | None = None
    """``Keep``: a ``policy.karmada.io`` policy claimed it (copies stay when unclaimed)."""
    reported_differences: Mapping[str, Any] | None = None
    """``applyStrategy.type: ReportDiff``: per cluster, the paths where the member's object
    differs from the copy we would write (nothing is written)."""
    schedule_priority: int | None = None
    """``schedulePriority``: the value of the policy's PriorityClass (written as Karmada's
    binding carries it, ``{priority: N}``); the work queue hands higher ones out first."""
    reschedule_triggered_at: str | None = None
    """Karmada's ``rescheduleTriggeredAt``: set by the WorkloadRebalancer controller (the
    rebalancer's creation time) to ask for a fresh division; propagation keeps it as is."""
    fresh_scheduled_for: str | None = None
    """The ``rescheduleTriggeredAt`` the last fresh division answered (Karmada compares it
    with ``status.lastScheduledTime``): a later trigger asks again."""
    eviction_tasks: tuple[Mapping[str, Any], ...] = ()
    """Karmada's ``gracefulEvictionTasks``: clusters a failover evicted the template from,
    read and checked by :mod:`federation.hub.eviction_tasks`."""
    unhealthy_since: Mapping[str, Any] | None = None
    """Application failover: per cluster, when its copy was first seen unhealthy."""

    @classmethod
    def from_obj(cls, fields: Mapping[str, Any]) -> Behaviour:
        """From a spec (or the transformers' :attr:`~...Build.record`), by spec key."""
        get = fields.get
        return cls(_each(get("dependencies"), "spec.dependencies", _string),
                   _each(get("awaitedDependencies"), "spec.awaitedDependencies", _string),
                   _flag(get("preserveResourcesOnDeletion"),
                         "spec.preserveResourcesOnDeletion"),
                   _object(get("activation"), "spec.activation"),
                   _object(get("suspension"), "spec.suspension"),
                   _each(get("configHeld"), "spec.configHeld", _held),
                   _optional_string(get("whenUnclaimed"), "spec.whenUnclaimed"),
                   _object(get("reportedDifferences"), "spec.reportedDifferences"),
                   _priority(get("schedulePriority")),
                   _optional_string(get("rescheduleTriggeredAt"), "spec.rescheduleTriggeredAt"),
                   _optional_string(get("freshScheduledFor"), "spec.freshScheduledFor"),
                   _each(get("gracefulEvictionTasks"), "spec.gracefulEvictionTasks", _mapping),
                   _object(get("unhealthySince"), "spec.unhealthySince"))

    def to_obj(self) -> JSON:
        values = (list(self.dependencies), list(self.awaited_dependencies),
                  self.preserve_resources_on_deletion, self.activation, self.suspension,
                  list(self.config_held), self.when_unclaimed, self.reported_differences,
                  None if self.schedule_priority is None else
                  {"priority": self.schedule_priority},
                  self.reschedule_triggered_at, self.fresh_scheduled_for,
                  list(self.eviction_tasks), self.unhealthy_since)
        return {key: value for key, value in zip(BEHAVIOUR_KEYS, values, strict=True)
                if value not in (None, False, [], {})}


BEHAVIOUR_KEYS = ("dependencies", "awaitedDependencies", "preserveResourcesOnDeletion",
                  "activation", "suspension", "configHeld", "whenUnclaimed",
                  "reportedDifferences", "schedulePriority", "rescheduleTriggeredAt",
                  "freshScheduledFor", "gracefulEvictionTasks", "unhealthySince")
"""The spec keys of :class:`Behaviour`, in the order they are written."""


def _priority(value: Any) -> int | None:
    """``spec.schedulePriority.priority`` (Karmada's binding field), an int32."""
    field = "spec.schedulePriority"
    if value is None:
        return None
    entry = _mapping(value, field)
    _known(entry, ("priority",), field)
    priority = entry.get("priority")
    if isinstance(priority, bool) or not isinstance(priority, int) or \
            not -2**31 <= priority < 2**31:
        raise BindingError(f"{field}.priority is not an int32")
    return priority


def _held(value: Any, field: str) -> Mapping[str, str]:
    entry = _mapping(value, field)
    _known(entry, ("cluster", "kind", "name", "policy"), field)
    for key in ("cluster", "kind", "name", "policy"):
        if not _string(entry.get(key), f"{field}.{key}"):
            raise BindingError(f"{field} has no {key}")
    return entry


@dataclasses.dataclass(frozen=True)
class CopyState:
    """One entry of ``status.aggregatedStatus``: a cluster's copy as last seen."""

    cluster: str
    applied: bool
    health: str
    error: str | None = None
    status: Mapping[str, Any] | None = None
    """The member's own status fields (its conditions left out)."""

    @classmethod
    def from_obj(cls, obj: Any, field: str = "status.aggregatedStatus[]") -> CopyState:
        entry = _mapping(obj, field)
        _known(entry, ("cluster", "applied", "health", "error", "status"), field)
        return cls(_string(entry.get("cluster"), f"{field}.cluster"),
                   _flag(entry.get("applied"), f"{field}.applied"),
                   _string(entry.get("health"), f"{field}.health"),
                   _optional_string(entry.get("error"), f"{field}.error"),
                   _object(entry.get("status"), f"{field}.status"))

    def to_obj(self) -> JSON:
        entry: JSON = {"cluster": self.cluster, "applied": self.applied,
                       "health": self.health}
        if self.error:
            entry["error"] = self.error
        if self.status is not None:
            entry["status"] = self.status
        return entry


def _condition(value: Any, field: str) -> Mapping[str, Any]:
    return _mapping(value, field)  # anyone's conditions: kept as written


def _reverts(value: Any) -> tuple[tuple[str, int], ...]:
    counts = _mapping(value, f"status.{DRIFT_REVERTS}")
    return tuple(sorted((str(cluster), _count(count, f"status.{DRIFT_REVERTS}.{cluster}"))
                        for cluster, count in counts.items() if count))


# -- the record ------------------------------------------------------------------------------


_SPEC_KEYS = frozenset({"resource", "templateDeleted", "pendingCleanup", "clusters", "orphan",
                        "policy", AFFINITY_GROUPS, LEFT_BEFORE_DELETION, *BEHAVIOUR_KEYS,
                        *_DECIDED})
DRIFT_REVERTS = "driftReverts"
"""``status.driftReverts``: per cluster, how many times we put back a copy a member had
changed (drift reverted). A count that keeps growing is a fight with a member's own
controller (retain the field, or ignore it: docs/interpreter.md)."""
_STATUS_KEYS = frozenset({"conditions", "aggregatedStatus", "pendingCleanup", DRIFT_REVERTS})
_GROUP_KEYS = ("affinityGroup", "antiAffinityGroup")


@dataclasses.dataclass(frozen=True)
class BindingRecord:
    """A ResourceBinding's spec and status, typed: what everyone acts on, read once.

    ``from_obj(obj).to_obj()`` gives back the spec and status as the writer wrote them;
    :func:`binding_for` wraps a record in the binding object of its template.
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
    """The claiming policy as the writer names it (``<kind> <reference>``)."""
    groups: tuple[str | None, str | None] = (None, None)
    """Workload (affinity group, anti-affinity group): read by the template's peers."""
    behaviour: Behaviour = Behaviour()
    left_before_deletion: tuple[str, ...] | None = None
    """:data:`LEFT_BEFORE_DELETION`; None in a record from before the field existed."""
    decided: Decided | None = None
    conditions: tuple[Mapping[str, Any], ...] = ()
    aggregated: tuple[CopyState, ...] = ()
    drift_reverts: tuple[tuple[str, int], ...] = ()
    """:data:`DRIFT_REVERTS`, (cluster, count) sorted by cluster, counts above 0 only."""

    @classmethod
    def of(cls, binding: Mapping[str, Any] | None) -> BindingRecord:
        """The record of a binding object (an absent one: the empty record); raises
        :class:`BindingError` naming a malformed or unknown field."""
        return cls.from_obj(binding) if binding is not None else cls()

    @classmethod
    def from_obj(cls, obj: Any) -> BindingRecord:
        """The record of a binding object's spec and status (its metadata is the object's
        identity, not the record's)."""
        whole = _mapping(obj, "binding")
        spec = _mapping(whole.get("spec"), "spec")
        state = _mapping(whole.get("status"), "status")
        _known(spec, _SPEC_KEYS, "spec")
        _known(state, _STATUS_KEYS, "status")
        pending = _each(spec.get("pendingCleanup"), "spec.pendingCleanup", _string)
        legacy = _each(state.get("pendingCleanup"), "status.pendingCleanup", _string)
        left = spec.get(LEFT_BEFORE_DELETION)
        return cls(
            resource=TemplateRef.from_obj(spec.get("resource")),
            template_deleted=_flag(spec.get("templateDeleted"), "spec.templateDeleted"),
            pending_cleanup=(*pending, *(c for c in legacy if c not in pending)),
            clusters=_each(spec.get("clusters"), "spec.clusters", Placed.from_obj),
            orphan=_flag(spec.get("orphan"), "spec.orphan"),
            policy=_optional_string(spec.get("policy"), "spec.policy"),
            groups=_groups(spec.get(AFFINITY_GROUPS)),
            behaviour=Behaviour.from_obj(spec),
            left_before_deletion=None if left is None else _each(
                left, f"spec.{LEFT_BEFORE_DELETION}", _string),
            decided=Decided.from_spec(spec),
            conditions=_each(state.get("conditions"), "status.conditions", _condition),
            aggregated=_each(state.get("aggregatedStatus"), "status.aggregatedStatus",
                             CopyState.from_obj),
            drift_reverts=_reverts(state.get(DRIFT_REVERTS)))

    def to_obj(self) -> JSON:
        """``{"spec": ..., "status": ...}``, as the writer has always written them:
        ``orphan``, ``policy``, the groups, behaviour fields and the decision's account
        only when set; the status always with its two lists."""
        return {"spec": self.spec_obj(), "status": self.status_obj()}

    def spec_obj(self) -> JSON:
        spec: JSON = {"resource": self.resource.to_obj(),
                      "templateDeleted": self.template_deleted,
                      "pendingCleanup": list(self.pending_cleanup),
                      "clusters": [placed.to_obj() for placed in self.clusters]}
        if self.orphan:
            spec["orphan"] = True
        if self.policy is not None:
            spec["policy"] = self.policy
        if any(self.groups):
            spec[AFFINITY_GROUPS] = {key: value for key, value in
                                     zip(_GROUP_KEYS, self.groups, strict=True) if value}
        spec.update(self.behaviour.to_obj())
        if self.left_before_deletion is not None:
            spec[LEFT_BEFORE_DELETION] = list(self.left_before_deletion)
        if self.decided is not None:
            spec.update(self.decided.to_obj())
        return spec

    def status_obj(self) -> JSON:
        state: JSON = {"conditions": list(self.conditions),
                       "aggregatedStatus": [entry.to_obj() for entry in self.aggregated]}
        if self.drift_reverts:
            state[DRIFT_REVERTS] = dict(self.drift_reverts)
        return state

    def reverted(self, counts: Mapping[str, int], clusters: Iterable[str]) -> tuple[
            tuple[str, int], ...]:
        """The drift revert counts after this round's ``counts``, kept for ``clusters``
        (a cluster the workload left takes its count with it)."""
        total = dict(self.drift_reverts)
        for cluster, count in counts.items():
            total[cluster] = total.get(cluster, 0) + count
        return tuple(sorted((c, n) for c, n in total.items() if n and c in set(clusters)))

    # -- what the readers ask ----------------------------------------------------------------

    def decision(self) -> dict[str, int]:
        """The recorded decision, cluster -> replicas (empty when there is none)."""
        return {placed.name: placed.replicas for placed in self.clusters}

    def pending(self) -> list[str]:
        """Clusters still holding a copy that must be deleted, sorted."""
        return sorted(self.pending_cleanup)

    def holders(self) -> list[str]:
        """Every cluster that may hold a copy: the decision and the pending clean-up."""
        return sorted({placed.name for placed in self.clusters} | set(self.pending_cleanup))

    def placements(self) -> dict[str, int]:
        """Where the template runs now: the decision of a live template (a deleted one's
        record places nothing)."""
        return {} if self.template_deleted else self.decision()

    def owned_by(self, uid: str | None) -> bool:
        """Whether this is the record of the live template of ``uid`` (not of a deleted
        predecessor of the same name; a record or template without a UID matches)."""
        if self.template_deleted:
            return False
        return not self.resource.uid or not uid or self.resource.uid == uid

    def records(self, kind: str, name: str) -> bool:
        """Whether the record is of the template ``kind``/``name`` (not another object's
        binding that happens to share the name)."""
        return self.resource.kind == kind and self.resource.name == name


def _groups(value: Any) -> tuple[str | None, str | None]:
    field = f"spec.{AFFINITY_GROUPS}"
    groups = _mapping(value, field)
    _known(groups, _GROUP_KEYS, field)
    group, anti = (_string(groups.get(key), f"{field}.{key}") for key in _GROUP_KEYS)
    return group or None, anti or None


_MEMO: parsed.Memo[BindingRecord] = parsed.Memo(BindingRecord.from_obj, limit=1 << 17,
                                                latest_only=True)
"""One record per binding (its last version read): with the default limit of 4,096
versions, a fleet of 10,000 templates re-parsed every binding at every read (2.3 parses
per template at a cold start; a reconcile reads its binding twice)."""


def read(binding: Mapping[str, Any]) -> BindingRecord | None:
    """The record of a cached ``binding``, None when it cannot be read (the caller says
    what an unreadable binding means where it is: never a copy deleted on its word).
    Memoised by the object's version (:mod:`.parsed`): readers of every binding of a
    namespace read each version once. Only for objects as the server returned them (a
    binding we are about to write may carry the version it replaces)."""
    try:
        return _MEMO(binding)
    except BindingError:
        return None


def cached(binding: Mapping[str, Any] | None) -> BindingRecord:
    """:meth:`BindingRecord.of` of a binding as the server returned it (a cached object),
    memoised by its version as :func:`read` is: the propagation, clean-up and rollout
    controllers each read every version of a binding, and parsing it was a tenth of the
    control plane's CPU in a burst. Raises :class:`BindingError` as ``of`` does (an error
    is never memoised). Never for an object we built or changed: one carrying the uid and
    resourceVersion of the binding it replaces (:func:`replaced`) would be answered with
    the old record."""
    return _MEMO(binding) if binding is not None else BindingRecord()


def readable(items: Iterable[Mapping[str, Any]]
             ) -> Iterator[tuple[Mapping[str, Any], BindingRecord | None]]:
    """Each binding with its record (see :func:`read`)."""
    for binding in items:
        yield binding, read(binding)


# -- the object ------------------------------------------------------------------------------


def binding_name(name: str, kind: str) -> str:
    """``<name>-<kind>`` in lower case, as a valid object name."""
    return re.sub(r"[^a-z0-9.-]", "-", f"{name}-{kind}".lower())[:253]


def name_of(template: Mapping[str, Any]) -> str:
    """The binding name of a template object."""
    return binding_name(str(template["metadata"]["name"]), str(template.get("kind", "")))


def binding_resource(template: Mapping[str, Any]) -> Resource:
    namespaced = bool(template.get("metadata", {}).get("namespace"))
    return api.RESOURCE_BINDINGS if namespaced else api.CLUSTER_RESOURCE_BINDINGS


def orphaned(template: Mapping[str, Any]) -> bool:
    """The template is annotated ``federation.io/orphan: "true"``: its copies stay when
    it (or its policy) goes."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(api.ORPHAN_ANNOTATION) == "true")


def binding_for(template: Mapping[str, Any], record: BindingRecord) -> JSON:
    """The whole binding of ``template`` holding ``record``: the CRD has no status
    subresource, so one POST or PUT carries spec and status (docs/propagation.md, the
    write budget)."""
    meta = template["metadata"]
    resource = binding_resource(template)
    obj: JSON = {"apiVersion": resource.api_version, "kind": resource.kind,
                 "metadata": {"name": name_of(template),
                              "labels": {api.BINDING_LABEL: str(template["kind"]).lower()}}}
    if meta.get("namespace"):
        obj["metadata"]["namespace"] = meta["namespace"]
    obj.update(record.to_obj())
    return obj


def replaced(binding: Mapping[str, Any], record: BindingRecord) -> JSON:
    """``binding`` (its metadata and version kept) holding ``record`` instead."""
    return {**binding, **record.to_obj()}


def same_record(current: Mapping[str, Any] | None, wanted: Mapping[str, Any],
                wanted_record: BindingRecord | None = None) -> bool:
    """Whether writing ``wanted`` over ``current`` would change what anyone acts on: the
    spec, the labels, each condition's type, status and reason, and per cluster whether the
    copy is applied and its error, and the drift revert counts (a revert is news: the
    write of the copy happened already). Members' status fields and messages alone never cause a
    write (they are refreshed with the next write that happens): see the write budget.
    ``wanted_record``: ``wanted`` already parsed (:meth:`BindingRecord.of`) by a caller
    that needs the parse too; else it is parsed here."""
    if current is None:
        return False
    if (current.get("metadata", {}).get("labels") or {}) != wanted["metadata"]["labels"]:
        return False
    try:
        # ``current`` is the cached binding (memoised); ``wanted`` is new, parsed here.
        have = cached(current)
        want = wanted_record if wanted_record is not None else BindingRecord.of(wanted)
    except BindingError:
        return False  # never reached by propagation, which stops on an unreadable record
    return have.spec_obj() == want.spec_obj() and _significant(have) == _significant(want)


def _significant(record: BindingRecord) -> tuple[Any, ...]:
    conditions = sorted((str(c.get("type")), c.get("status"), c.get("reason"))
                        for c in record.conditions)
    clusters = sorted((e.cluster, e.applied, e.error) for e in record.aggregated)
    return tuple(conditions), tuple(clusters), record.drift_reverts  # a revert is news


def summary(decision: decision_.Decision) -> str:
    """One line for ``kubectl get``: ``member1=6,member2=4`` (names only without replicas)."""
    if any(decision.clusters.values()):
        return ",".join(f"{n}={r}" for n, r in decision.clusters.items())
    return ",".join(decision.clusters)


def aggregated(copies: Mapping[str, Mapping[str, Any] | None], failed: Mapping[str, str],
               unreachable: Mapping[str, str],
               observed: Mapping[str, tuple[str, Mapping[str, Any] | None]] | None = None,
               before: Sequence[CopyState] = ()) -> tuple[CopyState, ...]:
    """Per cluster: the copy applied or the error, its health, the member's status (as
    ``observed`` gives them by cluster, the resource interpreter's answer: else the
    built-in health and the status without its conditions). An unreachable cluster keeps
    the status last observed there (``before``): state preservation reads it when a
    cluster failover evicts the copy."""
    last = {entry.cluster: entry.status for entry in before}
    entries = []
    for cluster in sorted(set(copies) | set(failed) | set(unreachable)):
        copy = copies.get(cluster)
        error = failed.get(cluster) or unreachable.get(cluster)
        state = copy.get("status") if copy is not None else None
        health, reflected = observed[cluster] if observed and cluster in observed else (
            status.health(copy),
            {k: v for k, v in state.items() if k != "conditions"} if state else None)
        if copy is None and cluster in unreachable:
            reflected = last.get(cluster)
        entries.append(CopyState(
            cluster, applied=error is None and copy is not None,
            health=health if error is None else "Unknown",
            error=error[:1024] if error else None, status=reflected))
    return tuple(entries)
