"""What the transformers learn and intend for one template.

A transformer is a step of the kit's :class:`~federation.controllers.kit.chain.Chain`: it
reads (through a :class:`~.context.TransformContext`) and adds to a :class:`Build`: facts
(the policy, the clusters, the decision, the live copies) and vertices of its plan. It
answers with the kit's :class:`~federation.controllers.kit.chain.Verdict`: go on
(``None``), stop the chain (nothing more to decide: no policy selects the template), or
go on and look again after some seconds (a held cluster's toleration ends, the
disruption budget frees). Bad input (a policy naming an unknown cluster, a refused
override) raises the kit's :class:`~federation.controllers.kit.chain.Problem`: shown as a
condition and an event, retried only when inputs change.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import pydantic

from federation.contexts.cache import ReadOnly
from federation.contexts.client import Resource
from federation.controllers.kit import plan
from federation.controllers.kit.chain import Problem
from federation.controllers.propagation import disruption
from federation.hub import bindings, deny
from federation.hub import eviction_tasks as eviction_tasks_
from federation.hub import failover as failover_
from federation.placement import clusters as clusters_
from federation.placement import decision as decision_
from federation.placement import policy as policy_
from federation.placement import resources as resources_

JSON = dict[str, Any]


@dataclasses.dataclass
class Build:
    """What the transformers learned and intend for one template."""

    template: ReadOnly
    """The template as cached (read-only: shared with the cache; what is written is a
    rendered copy, see :mod:`.render`)."""
    resource: Resource
    hub: str
    binding: ReadOnly | None = None
    """The template's ResourceBinding as cached (read-only): the previous round's record."""
    policy: policy_.Policy | None = None
    policy_doc: ReadOnly = dataclasses.field(default_factory=dict)
    """The winning policy as cached (read-only: shared with the cache, never changed)."""
    member_docs: dict[str, ReadOnly] = dataclasses.field(default_factory=dict)
    """MemberClusters as cached, by name (read-only, shared with the cache), read once
    per reconcile (by load_clusters)."""
    clusters: list[clusters_.Cluster] = dataclasses.field(default_factory=list)
    decision: decision_.Decision | None = None
    desired: dict[str, JSON] = dataclasses.field(default_factory=dict)
    report_only: bool = False
    """``applyStrategy.type: ReportDiff``: nothing was planned for the members but deletes."""
    interpreted_replicas: int | None = None
    """Replicas a ResourceInterpreterCustomization's InterpretReplica gave (None: the
    built-in interpreter's, read from the template)."""
    live: dict[str, ReadOnly | None] = dataclasses.field(default_factory=dict)
    """Each chosen cluster's copy as cached (read-only), None where there is none."""
    unreachable: dict[str, str] = dataclasses.field(default_factory=dict)
    causes: dict[str, BaseException] = dataclasses.field(default_factory=dict)
    """The error behind each :attr:`unreachable` entry (an outage, or a real refusal)."""
    conflicts: dict[str, str] = dataclasses.field(default_factory=dict)
    removals: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    dag: plan.Plan = dataclasses.field(default_factory=plan.Plan)
    shared: set[str] = dataclasses.field(default_factory=set)
    """Keys of dependency creates (a Namespace, a CRD) that other templates may make too."""
    failover: failover_.Outcome = dataclasses.field(default_factory=failover_.Outcome)
    """Per-cluster failover judgements and old copies kept by graceful eviction."""
    eviction_tasks: list[eviction_tasks_.Task] = dataclasses.field(default_factory=list)
    """The binding's graceful-eviction tasks as this round leaves them (Karmada's)."""
    budget: disruption.Claim = dataclasses.field(default_factory=disruption.Claim)
    """What this round asks of the disruption budget: settled after the plan ran, never
    while it is built."""
    denied: tuple[ReadOnly, deny.Rule] | None = None
    """The policy that selected a denied object, and the deny rule it matched."""
    suspended: list[str] = dataclasses.field(default_factory=list)
    """Targets whose writes the policy's ``suspension`` held back (nothing was written)."""
    record: JSON = dataclasses.field(default_factory=dict)
    """Extra binding spec fields transformers decided (:data:`~.record.RECORD_KEYS`)."""

    @property
    def meta(self) -> ReadOnly:
        found: ReadOnly = self.template.get("metadata") or {}
        return found

    @property
    def namespace(self) -> str | None:
        return self.meta.get("namespace")

    @property
    def name(self) -> str:
        return str(self.meta["name"])

    @property
    def uid(self) -> str:
        return str(self.meta.get("uid") or "")

    @functools.cached_property
    def recorded(self) -> bindings.BindingRecord:
        """The binding's record, read once (the empty record when there is none); raises
        :class:`~federation.hub.bindings.BindingError` for one nobody can read (the
        reconciler asks first, before any transformer)."""
        return bindings.cached(self.binding)  # the cached binding: memoised by version

    @property
    def own_record(self) -> bindings.BindingRecord | None:
        """The record when it is this template's (not a deleted predecessor's)."""
        if self.binding is None or not self.recorded.owned_by(self.uid):
            return None
        return self.recorded

    @property
    def budget_key(self) -> str:
        """The template's key in the disruption budget."""
        return disruption.move_key(self.resource, self.namespace, self.name)

    @property
    def own_binding(self) -> ReadOnly | None:
        """The binding object when it is this template's record."""
        return self.binding if self.own_record is not None else None

    @property
    def previous(self) -> dict[str, int]:
        """The last decision, from the binding (the next round's *previous*)."""
        return self.own_record.decision() if self.own_record is not None else {}

    @property
    def inherited(self) -> list[str]:
        """Clusters still holding copies of a deleted earlier template of the same name:
        its leftover binding's pending clean-up, which this template's record takes over."""
        if self.binding is None or self.own_record is not None:
            return []
        if self.recorded.template_deleted:
            return self.recorded.pending()
        return self.recorded.holders()  # deleted while nobody watched: all it had

    @property
    def pending_before(self) -> list[str]:
        """Clusters whose copies were to be deleted: this template's, and inherited ones."""
        own = self.own_record.pending() if self.own_record is not None else []
        return sorted(set(own) | set(self.inherited))

    @property
    def targets(self) -> list[str]:
        return sorted(self.decision.clusters) if self.decision else []

    @property
    def previous_conditions(self) -> list[Mapping[str, Any]]:
        return list(self.own_record.conditions) if self.own_record is not None else []

    def note_unreachable(self, cluster: str, exc: BaseException) -> None:
        self.unreachable[cluster] = str(exc)
        self.causes[cluster] = exc

    @property
    def policy_ref(self) -> str:
        """``KIND REF`` of the winning policy, as the binding records it."""
        return policy_ref(self.policy)


def policy_ref(policy: policy_.Policy | None) -> str:
    """``KIND REF`` of a parsed policy (``no policy`` for None)."""
    return f"{policy.kind} {policy.ref}" if policy is not None else "no policy"


def template_resource(build: Build) -> resources_.Resource:
    """The template as the placement engine sees it; a template the engine cannot take
    (replicas that are not an int32, a kind that is not a string) is bad input, shown as a
    condition, not an exception retried for ever."""
    try:
        resource = resources_.from_manifest(build.template)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "template"
        raise Problem("Scheduled", "InvalidTemplate", f"{where}: {first['msg']}") from None
    if build.interpreted_replicas is not None:
        return resource.model_copy(update={"replicas": build.interpreted_replicas})
    return resource
