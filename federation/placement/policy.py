"""The placement policy schema: Karmada's PropagationPolicy, field for field.

A Karmada user's policy loads unchanged, with ``policy.karmada.io/v1alpha1`` or
ours; the placement fields of Karmada v1.17/v1.18 (``workloadAffinity``,
``clusterAffinities[].overflowAffinities``) are typed and honoured by the engine,
and ``clusterTolerations`` are validated exactly as Karmada's webhook does (only
``Lt``/``Gt`` refused). Models use Karmada's camelCase names as
aliases over snake_case attributes and forbid unknown fields, so a typo such as
``clusterAfinity`` is an error naming its path rather than a silently ignored
key. ``failover`` (cluster and application failover, state preservation) and
``conflictResolution`` are typed here for the controllers that honour them, and
validated as Karmada's webhook does (:func:`problems`). Karmada's behaviour fields (``suspension``,
``preserveResourcesOnDeletion``, ``propagateDeps``, ``schedulerName``,
``activationPreference``, ``preemption``, ``dependentOverrides``, ``schedulePriority``)
are typed here and honoured by propagation (docs/propagation.md, "Karmada policy
fields"); ``association`` (deprecated, no effect in Karmada) is refused by
:func:`problems`.

Our extensions live under ``placement.replicaScheduling`` and are documented in
docs/placement.md: ``replicaBounds`` (per-cluster minReplicas/maxReplicas, for
every division mode) and ``allowPartial`` (place what fits, report the rest as
pending, instead of failing as unschedulable).

Pydantic checks types and single-field ranges. Rules that relate several fields
(Karmada's webhook rules plus ours) are in :func:`problems`, which returns every
violation with the field path it belongs to, so the loader can report
``file: spec.placement.spreadConstraints[1].maxGroups: ...``.
"""

from __future__ import annotations

import enum
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from federation.placement import counts, jsonpath

GROUP_VERSION = "policy.federation.io/v1alpha1"
KARMADA_GROUP_VERSION = "policy.karmada.io/v1alpha1"
API_VERSIONS = (GROUP_VERSION, KARMADA_GROUP_VERSION)
KINDS = ("PropagationPolicy", "ClusterPropagationPolicy")

Problem = tuple[str, str]
"""A validation problem: (field path such as ``spec.placement.x[0].y``, what is wrong)."""


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class LabelSelectorRequirement(_Model):
    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class LabelSelector(_Model):
    """A Kubernetes label selector: matchLabels AND every matchExpression."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class FieldSelectorRequirement(_Model):
    key: Literal["provider", "region", "zone"]
    operator: Literal["In", "NotIn"]
    values: list[str] = Field(default_factory=list)


class FieldSelector(_Model):
    match_expressions: list[FieldSelectorRequirement] = Field(default_factory=list)


class ClusterAffinity(_Model):
    """Which clusters may be used; every part that is set must match."""

    label_selector: LabelSelector | None = None
    field_selector: FieldSelector | None = None
    cluster_names: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)


class OverflowClusterAffinity(ClusterAffinity):
    """One entry of ``overflowAffinities`` (Karmada v1.18): a further group of clusters the
    replicas spill into when the groups before it are full."""

    affinity_name: str = Field(min_length=1, max_length=32)


class ClusterAffinityTerm(ClusterAffinity):
    """One entry of ``clusterAffinities``: a named fallback affinity."""

    affinity_name: str = Field(min_length=1, max_length=32)
    overflow_affinities: list[OverflowClusterAffinity] | None = None
    """Tiers after this term's own clusters, filled in order (see
    :mod:`federation.placement.engine`); None and ``[]`` differ as in Karmada's
    validation (``[]`` still needs a divided dynamic or Aggregated mode)."""


class Toleration(_Model):
    """A Kubernetes toleration. An empty operator means Equal; Lt and Gt load so that the
    refusal names them as Karmada's webhook does (see :func:`problems`)."""

    key: str = ""
    operator: Literal["", "Equal", "Exists", "Lt", "Gt"] = ""
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: counts.Seconds | None = None


class SpreadConstraint(_Model):
    """Spread over groups of clusters; 0 for maxGroups means no limit."""

    spread_by_field: Literal["cluster", "region", "zone", "provider"] | None = None
    spread_by_label: str | None = None
    max_groups: counts.Groups = 0
    min_groups: counts.Groups = 0

    @property
    def key(self) -> str:
        """``cluster``/``region``/... or ``label:<name>``; cluster when neither is set."""
        if self.spread_by_label:
            return f"label:{self.spread_by_label}"
        return self.spread_by_field or "cluster"

    @property
    def floor(self) -> int:
        """minGroups with Karmada's default of 1."""
        return max(self.min_groups, 1)


class StaticClusterWeight(_Model):
    target_cluster: ClusterAffinity
    weight: counts.Weight


class ClusterPreferences(_Model):
    static_weight_list: list[StaticClusterWeight] = Field(default_factory=list)
    dynamic_weight: Literal["AvailableReplicas"] | None = None


class ReplicaBound(_Model):
    """Our extension: replicas a matching cluster must get at least / may get at most."""

    target_cluster: ClusterAffinity = Field(default_factory=ClusterAffinity)
    min_replicas: counts.Replicas = 0
    max_replicas: counts.Replicas | None = None


class ReplicaSchedulingStrategy(_Model):
    replica_scheduling_type: Literal["Duplicated", "Divided"] = "Divided"
    replica_division_preference: Literal["Aggregated", "Weighted"] | None = None
    weight_preference: ClusterPreferences | None = None
    replica_bounds: list[ReplicaBound] = Field(default_factory=list)
    allow_partial: counts.Flag = False


class WorkloadAffinityTerm(_Model):
    """Workloads whose ``groupByLabelKey`` label has the same value form one group."""

    group_by_label_key: str


class WorkloadAffinity(_Model):
    """Karmada v1.17: workloads of one affinity group go to the clusters the group's
    placed members use; those of one anti-affinity group never share a cluster."""

    affinity: WorkloadAffinityTerm | None = None
    anti_affinity: WorkloadAffinityTerm | None = None


class Placement(_Model):
    cluster_affinity: ClusterAffinity | None = None
    cluster_affinities: list[ClusterAffinityTerm] = Field(default_factory=list)
    cluster_tolerations: list[Toleration] = Field(default_factory=list)
    spread_constraints: list[SpreadConstraint] = Field(default_factory=list)
    replica_scheduling: ReplicaSchedulingStrategy | None = None
    workload_affinity: WorkloadAffinity | None = None


class ResourceSelector(_Model):
    api_version: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    namespace: str | None = None
    name: str | None = None
    label_selector: LabelSelector | None = None


class ClusterFailoverBehavior(_Model):
    """``spec.failover.cluster``: what happens to the old copies when a cluster's replicas
    move (the move itself is opted into with a not-ready ``clusterTolerations`` entry)."""

    purge_mode: Literal["Gracefully", "Directly"] = "Gracefully"
    """Gracefully: old copies go once the new ones are ready (or the grace period ends);
    Directly: at once. Karmada's names and default."""
    grace_period_seconds: counts.PositiveSeconds | None = None
    """Our extension: the longest a graceful eviction waits (None: the controller's
    default, 600 s as Karmada's graceful eviction timeout)."""
    state_preservation: StatePreservation | None = None
    """Karmada's: each rule's ``jsonPath`` read from the evicted copy's last observed
    status, injected as the ``aliasLabelName`` label into the new copy
    (:mod:`federation.hub.eviction_tasks`)."""


class DecisionConditions(_Model):
    toleration_seconds: counts.Int32 = 300
    """Seconds a copy stays unhealthy before it is evicted (Karmada's default, 300)."""


class StatePreservationRule(_Model):
    alias_label_name: str
    json_path: str = Field(min_length=1)
    """Read from the copy's ``status`` (``{.jobStatus.jobID}``), never the whole object."""


class StatePreservation(_Model):
    rules: list[StatePreservationRule]


APPLICATION_GRACE_PERIOD = 600
"""Karmada's mutating webhook sets ``gracePeriodSeconds`` to 600 for ``Gracefully``."""


class ApplicationFailoverBehavior(_Model):
    """Karmada's ``spec.failover.application``: a copy unhealthy for ``tolerationSeconds``
    on a cluster that is itself fine is evicted and placed elsewhere; the old copy goes
    at once (Directly), once the new ones are healthy or the grace period ends
    (Gracefully), or never (Never: kept until a user clears the eviction task's
    ``suppressDeletion``). Karmada's values and defaults; the webhook's rules are in
    :func:`problems`."""

    decision_conditions: DecisionConditions
    purge_mode: Literal["Directly", "Gracefully", "Never"] = "Gracefully"
    grace_period_seconds: counts.Int32 | None = None
    state_preservation: StatePreservation | None = None

    @property
    def grace_period(self) -> int | None:
        """The grace period in force: Karmada's webhook default of 600 s for Gracefully."""
        if self.purge_mode != "Gracefully":
            return None
        if self.grace_period_seconds is None:
            return APPLICATION_GRACE_PERIOD
        return self.grace_period_seconds


class FailoverBehavior(_Model):
    """``spec.failover``: Karmada's FailoverBehavior."""

    application: ApplicationFailoverBehavior | None = None
    cluster: ClusterFailoverBehavior | None = None


DEFAULT_SCHEDULER = "default-scheduler"
"""Our scheduler's name, as Karmada's default scheduler: a policy naming any other
scheduler is left to that scheduler."""


class SuspendClusters(_Model):
    cluster_names: list[str] = Field(default_factory=list)


class Suspension(_Model):
    """Karmada's ``spec.suspension``: dispatching (writes to members) stopped for every
    cluster (``dispatching: true``) or for the named ones."""

    dispatching: counts.Flag | None = None
    dispatching_on_clusters: SuspendClusters | None = None

    def suspends(self, cluster: str) -> bool:
        """Karmada's shouldSuspendDispatching: all clusters, or this one by name."""
        if self.dispatching:
            return True
        return self.dispatching_on_clusters is not None and \
            cluster in self.dispatching_on_clusters.cluster_names


class SchedulePriority(_Model):
    """Karmada's ``spec.schedulePriority``: the priority of the hub's Kubernetes PriorityClass
    of that name orders scheduling (the only source Karmada implements, and its CRD's only
    enum value; the name may be empty, as Karmada's CRD allows: no such class exists then,
    and the template is not scheduled, saying so)."""

    priority_class_source: Literal["KubePriorityClass"]
    priority_class_name: str


class ApplyStrategy(_Model):
    """How copies are written and compared (kubefleet's names): ``type`` ClientSideApply
    (our full writes), ServerSideApply (server-side apply under our field manager; fields
    another field manager owns are neither applied nor drift) or ReportDiff (nothing
    written; differences recorded in the binding),
    ``whenToTakeOver`` a member object that exists before us (Always, IfNoDiff: only when
    it already equals the copy, Never), ``ignoredFields`` JSON pointers (``*`` for one list
    index or key) never compared nor reverted."""

    type: Literal["ClientSideApply", "ServerSideApply", "ReportDiff"] = "ClientSideApply"
    when_to_take_over: Literal["Always", "IfNoDiff", "Never"] | None = None
    ignored_fields: list[str] = Field(default_factory=list, max_length=64)


class PropagationSpec(_Model):
    resource_selectors: list[ResourceSelector]
    placement: Placement = Field(default_factory=Placement)
    priority: counts.Int32 = 0
    failover: FailoverBehavior | None = None
    """How replicas move off a NotReady cluster; None: Karmada's defaults (see
    :mod:`federation.hub.failover`)."""
    conflict_resolution: Literal["Abort", "Overwrite"] = "Abort"
    """What propagation does with a member object it did not create: Abort (leave it,
    report the conflict) or Overwrite (take it over). Karmada's values and default."""
    propagate_deps: counts.Flag = False
    """Karmada's dependencies distributor: the ConfigMaps, Secrets, ServiceAccounts and
    PersistentVolumeClaims a workload's pod template names follow it to its clusters
    (:mod:`federation.controllers.propagation.propagate_deps`)."""
    association: counts.Flag = False
    """Karmada's deprecated name for propagateDeps, without effect in Karmada itself:
    ``true`` is refused by :func:`problems` (never loaded and ignored)."""
    preemption: Literal["Always", "Never"] = "Never"
    """Always: this policy takes a template over from the lower-priority policy that
    claimed it (Karmada's rules, :mod:`federation.placement.matching`)."""
    dependent_overrides: list[str] = Field(default_factory=list)
    """OverridePolicies (in the policy's namespace) that must exist before it propagates."""
    scheduler_name: str = DEFAULT_SCHEDULER
    """Which scheduler places the templates; a policy for another one is not placed here."""
    activation_preference: Literal["", "Lazy"] = ""
    """Lazy: a change of this policy reaches a template only when the template changes."""
    suspension: Suspension | None = None
    """Writes to members stopped, everywhere or per cluster; deletions still happen."""
    preserve_resources_on_deletion: counts.Flag = False
    """Deleting the template leaves its member copies, released from our ownership."""
    schedule_priority: SchedulePriority | None = None
    """Karmada's priority-based scheduling (beta): templates of higher priority are
    scheduled first (:mod:`federation.controllers.propagation.priority`)."""
    apply_strategy: ApplyStrategy | None = None
    """Takeover, report-only and ignored fields (docs/interpreter.md, apply strategies)."""

    def take_over(self) -> str:
        """Always, IfNoDiff or Never: ``whenToTakeOver``, else ``conflictResolution``."""
        chosen = self.apply_strategy.when_to_take_over if self.apply_strategy else None
        return chosen or ("Always" if self.conflict_resolution == "Overwrite" else "Never")

    def ignored_fields(self) -> tuple[str, ...]:
        return tuple(self.apply_strategy.ignored_fields) if self.apply_strategy else ()

    def report_only(self) -> bool:
        return self.apply_strategy is not None and self.apply_strategy.type == "ReportDiff"

    def server_side_apply(self) -> bool:
        return self.apply_strategy is not None and \
            self.apply_strategy.type == "ServerSideApply"


class ObjectMeta(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(min_length=1)
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class Policy(_Model):
    """A PropagationPolicy (namespaced) or ClusterPropagationPolicy."""

    api_version: Literal["policy.federation.io/v1alpha1", "policy.karmada.io/v1alpha1"]
    kind: Literal["PropagationPolicy", "ClusterPropagationPolicy"]
    metadata: ObjectMeta
    spec: PropagationSpec

    @property
    def namespaced(self) -> bool:
        return self.kind == "PropagationPolicy"

    @property
    def namespace(self) -> str | None:
        """The policy's namespace (``default`` when a namespaced file omits it)."""
        return (self.metadata.namespace or "default") if self.namespaced else None

    @property
    def ref(self) -> str:
        """``NAMESPACE/NAME`` for namespaced policies, ``NAME`` for cluster-scoped ones."""
        return f"{self.namespace}/{self.metadata.name}" if self.namespaced else self.metadata.name


class Mode(enum.Enum):
    """The effective replica scheduling mode after Karmada's defaulting."""

    DUPLICATED = "Duplicated"
    STATIC = "Divided/Weighted (static weights)"
    DYNAMIC = "Divided/Weighted (dynamic weight: AvailableReplicas)"
    AGGREGATED = "Divided/Aggregated"


def mode(placement: Placement) -> Mode:
    """Karmada's defaults: no replicaScheduling is Duplicated; Divided defaults to Weighted."""
    return strategy_mode(placement.replica_scheduling)


def strategy_mode(strategy: ReplicaSchedulingStrategy | None) -> Mode:
    """:func:`mode` of a placement whose replicaScheduling is ``strategy``."""
    if strategy is None or strategy.replica_scheduling_type == "Duplicated":
        return Mode.DUPLICATED
    if strategy.replica_division_preference == "Aggregated":
        return Mode.AGGREGATED
    weights = strategy.weight_preference
    return Mode.DYNAMIC if weights is not None and weights.dynamic_weight else Mode.STATIC


def affinity_terms(placement: Placement) -> list[tuple[str | None, ClusterAffinity | None]]:
    """The affinity terms to try in order: clusterAffinities, else the single clusterAffinity."""
    if placement.cluster_affinities:
        return [(term.affinity_name, term) for term in placement.cluster_affinities]
    return [(None, placement.cluster_affinity)]


# -- cross-field rules -------------------------------------------------------------------


def problems(policy: Policy) -> list[Problem]:
    """Every rule violation that pydantic's per-field checks cannot see."""
    found: list[Problem] = []
    if policy.kind == "ClusterPropagationPolicy" and policy.metadata.namespace:
        found.append(("metadata.namespace", "a ClusterPropagationPolicy is cluster-scoped"))
    spec = policy.spec
    if not spec.resource_selectors:
        found.append(("spec.resourceSelectors", "at least one resource selector is required"))
    for i, selector in enumerate(spec.resource_selectors):
        if policy.namespaced and selector.namespace and selector.namespace != policy.namespace:
            found.append((f"spec.resourceSelectors[{i}].namespace",
                          "must be the policy's own namespace (a PropagationPolicy selects "
                          "only there), as Karmada's webhook requires"))
        if selector.label_selector is not None:
            path = f"spec.resourceSelectors[{i}].labelSelector"
            found += _label_selector_problems(path, selector.label_selector)
    found += _placement_problems("spec.placement", spec.placement)
    if spec.failover is not None:
        found += _failover_problems("spec.failover", spec.failover)
    found += _behaviour_problems(spec)
    found += _apply_strategy_problems(spec)
    return found


RESERVED_LABEL_DOMAIN = "federation.io"
"""Our own labels' domain (``hub.manifests.DOMAIN``): a preserved-state label may not
be one, or a policy could rewrite the ownership marks of a copy."""


def _failover_problems(path: str, failover: FailoverBehavior) -> list[Problem]:
    """Karmada's webhook (ValidateFailover), word for word where it has a rule."""
    found: list[Problem] = []
    application = failover.application
    if application is not None:
        where = f"{path}.application"
        if application.decision_conditions.toleration_seconds < 0:
            found.append((f"{where}.decisionConditions.tolerationSeconds",
                          "must be greater than or equal to 0"))
        grace = application.grace_period_seconds
        if application.purge_mode != "Gracefully" and grace is not None:
            found.append((f"{where}.gracePeriodSeconds",
                          "only takes effect when purgeMode is gracefully"))
        if grace is not None and grace <= 0:
            found.append((f"{where}.gracePeriodSeconds", "must be greater than 0"))
        found += _preservation_problems(f"{where}.statePreservation",
                                        application.state_preservation)
    if failover.cluster is not None:
        found += _preservation_problems(f"{path}.cluster.statePreservation",
                                        failover.cluster.state_preservation)
    return found


def _preservation_problems(path: str, preservation: StatePreservation | None
                           ) -> list[Problem]:
    found: list[Problem] = []
    for i, rule in enumerate(preservation.rules if preservation is not None else ()):
        where = f"{path}.rules[{i}]"
        problems_of_key = _label_key_problems(f"{where}.aliasLabelName", rule.alias_label_name)
        found += problems_of_key
        prefix, slash, _ = rule.alias_label_name.partition("/")
        prefix = prefix.casefold()
        if not problems_of_key and slash and (
                prefix == RESERVED_LABEL_DOMAIN or prefix.endswith("." + RESERVED_LABEL_DOMAIN)):
            found.append((f"{where}.aliasLabelName",
                          f"labels of {RESERVED_LABEL_DOMAIN} are the control plane's own"))
        if jsonpath.problem(rule.json_path) is not None:
            found.append((f"{where}.jsonPath", str(jsonpath.problem(rule.json_path))))
    return found


def _apply_strategy_problems(spec: PropagationSpec) -> list[Problem]:
    strategy = spec.apply_strategy
    if strategy is None:
        return []
    found: list[Problem] = []
    if spec.conflict_resolution == "Overwrite" and strategy.when_to_take_over in (
            "IfNoDiff", "Never"):
        found.append(("spec.applyStrategy.whenToTakeOver",
                      f"{strategy.when_to_take_over} contradicts conflictResolution: Overwrite"))
    for i, pointer in enumerate(strategy.ignored_fields):
        if not pointer.startswith("/") or "//" in pointer or pointer.endswith("/") \
                or len(pointer) > 256:
            found.append((f"spec.applyStrategy.ignoredFields[{i}]",
                          "must be a JSON pointer such as /spec/replicas (* for any one "
                          "list index or key)"))
        elif pointer.split("/")[1] in ("apiVersion", "kind", "metadata"):
            found.append((f"spec.applyStrategy.ignoredFields[{i}]",
                          "the object's identity and metadata are always compared"))
    return found


def _behaviour_problems(spec: PropagationSpec) -> list[Problem]:
    """Karmada's webhook rules for the behaviour fields, and the one we refuse."""
    found: list[Problem] = []
    suspension = spec.suspension
    if suspension is not None and suspension.dispatching and \
            suspension.dispatching_on_clusters is not None and \
            suspension.dispatching_on_clusters.cluster_names:
        found.append(("spec.suspension", "dispatching cannot be set together with "
                      "dispatchingOnClusters.clusterNames"))
    if spec.preemption == "Always":
        for i, selector in enumerate(spec.resource_selectors):
            if not selector.name:
                found.append((f"spec.resourceSelectors[{i}].name",
                              "required when preemption is Always (an empty name could "
                              "preempt unexpected resources)"))
    for i, name in enumerate(spec.dependent_overrides):
        if not name:
            found.append((f"spec.dependentOverrides[{i}]", "must name an OverridePolicy"))
    if spec.association:
        found.append(("spec.association", "deprecated in Karmada in favour of propagateDeps "
                      "and without effect there; set propagateDeps: true instead"))
    return found


def _placement_problems(path: str, placement: Placement) -> list[Problem]:
    found: list[Problem] = []
    if placement.cluster_affinity is not None and placement.cluster_affinities:
        found.append((f"{path}.clusterAffinities", "cannot be set together with clusterAffinity"))
    if placement.cluster_affinity is not None:
        found += _affinity_problems(f"{path}.clusterAffinity", placement.cluster_affinity)
    names: set[str] = set()
    for i, term in enumerate(placement.cluster_affinities):
        term_path = f"{path}.clusterAffinities[{i}]"
        if term.affinity_name in names:
            found.append((f"{term_path}.affinityName", f"duplicate name {term.affinity_name!r}"))
        names.add(term.affinity_name)
        found += _label_key_problems(f"{term_path}.affinityName", term.affinity_name)
        found += _affinity_problems(term_path, term)
        found += _overflow_problems(term_path, term, placement)
    for i, toleration in enumerate(placement.cluster_tolerations):
        found += _toleration_problems(f"{path}.clusterTolerations[{i}]", toleration)
    if placement.workload_affinity is not None:
        found += _workload_affinity_problems(f"{path}.workloadAffinity",
                                             placement.workload_affinity)
    found += _spread_problems(f"{path}.spreadConstraints", placement.spread_constraints)
    if placement.replica_scheduling is not None:
        found += _strategy_problems(f"{path}.replicaScheduling", placement.replica_scheduling)
    return found


def _label_selector_problems(path: str, selector: LabelSelector) -> list[Problem]:
    found: list[Problem] = []
    for i, req in enumerate(selector.match_expressions):
        needs_values = req.operator in ("In", "NotIn")
        if needs_values and not req.values:
            found.append((f"{path}.matchExpressions[{i}].values", f"required for {req.operator}"))
        if not needs_values and req.values:
            found.append(
                (f"{path}.matchExpressions[{i}].values", f"must be empty for {req.operator}")
            )
    return found


def _affinity_problems(path: str, affinity: ClusterAffinity) -> list[Problem]:
    found: list[Problem] = []
    if affinity.label_selector is not None:
        found += _label_selector_problems(f"{path}.labelSelector", affinity.label_selector)
    if affinity.field_selector is not None:
        for i, req in enumerate(affinity.field_selector.match_expressions):
            if not req.values:
                where = f"{path}.fieldSelector.matchExpressions[{i}].values"
                found.append((where, f"required for {req.operator}"))
    return found


def _toleration_problems(path: str, toleration: Toleration) -> list[Problem]:
    """Karmada's rule, no more: Lt and Gt are refused (they compare numbers on nodes, which
    has no meaning for a cluster). An effect-only toleration (``{effect: NoSchedule}``)
    is valid and, as in Kubernetes, tolerates that effect's taints with an empty value."""
    if toleration.operator in ("Lt", "Gt"):
        return [(f"{path}.operator", f"{toleration.operator} is not supported for cluster "
                                     "tolerations; use Equal, Exists or leave it empty")]
    return []


_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        rf"{_NAME}$")


def _label_key_problems(path: str, key: str) -> list[Problem]:
    """Karmada checks affinity names and groupByLabelKey as Kubernetes label keys."""
    prefix, _, _ = key.rpartition("/")
    if not _LABEL_KEY.match(key) or len(prefix) > 253:
        return [(path, f"{key!r} is not a valid label key (an optional DNS prefix and '/', "
                       "then at most 63 alphanumerics, '-', '_' or '.')")]
    return []


def overflow_allowed(strategy: ReplicaSchedulingStrategy | None) -> bool:
    """Karmada: overflow needs Divided with Aggregated, or Weighted with a dynamic weight.
    The mode is the effective one: Divided without a preference is Weighted (Karmada's
    defaulting), so a dynamic weight alone allows overflow too."""
    return strategy_mode(strategy) in (Mode.AGGREGATED, Mode.DYNAMIC)


def _overflow_problems(path: str, term: ClusterAffinityTerm,
                       placement: Placement) -> list[Problem]:
    if term.overflow_affinities is None:
        return []
    where = f"{path}.overflowAffinities"
    found: list[Problem] = []
    if not overflow_allowed(placement.replica_scheduling):
        found.append((where, "can only be used with Divided replicas and Aggregated or a "
                             "dynamic weight (the next tier takes what the previous cannot "
                             "hold, which needs room estimates)"))
    if not (term.cluster_names or term.exclude or term.label_selector or term.field_selector):
        found.append((where, "needs the term's own cluster affinity to be set (it is the "
                             "first tier)"))
    names = {term.affinity_name}
    for i, overflow in enumerate(term.overflow_affinities):
        item = f"{where}[{i}]"
        found += _label_key_problems(f"{item}.affinityName", overflow.affinity_name)
        if overflow.affinity_name in names:
            found.append((f"{item}.affinityName", f"duplicate name {overflow.affinity_name!r} "
                                                  "(the term's and every overflow's must differ)"))
        names.add(overflow.affinity_name)
        found += _affinity_problems(item, overflow)
    return found


def _workload_affinity_problems(path: str, affinity: WorkloadAffinity) -> list[Problem]:
    found: list[Problem] = []
    for name, term in (("affinity", affinity.affinity), ("antiAffinity", affinity.anti_affinity)):
        if term is not None:
            found += _label_key_problems(f"{path}.{name}.groupByLabelKey", term.group_by_label_key)
    keys = {t.group_by_label_key for t in (affinity.affinity, affinity.anti_affinity) if t}
    if affinity.affinity is not None and affinity.anti_affinity is not None and len(keys) == 1:
        found.append((path, "affinity and antiAffinity must not use the same groupByLabelKey"))
    return found


def _spread_problems(path: str, constraints: list[SpreadConstraint]) -> list[Problem]:
    found: list[Problem] = []
    seen: set[str] = set()
    for i, constraint in enumerate(constraints):
        item = f"{path}[{i}]"
        if constraint.spread_by_field and constraint.spread_by_label:
            found.append((f"{item}.spreadByLabel", "cannot be set together with spreadByField"))
        if constraint.max_groups and constraint.max_groups < constraint.min_groups:
            found.append((f"{item}.maxGroups", "must not be lower than minGroups"))
        if constraint.key in seen:
            found.append((item, f"a second constraint spreading by {constraint.key}"))
        seen.add(constraint.key)
    return found


def _strategy_problems(path: str, strategy: ReplicaSchedulingStrategy) -> list[Problem]:
    found: list[Problem] = []
    for i, bound in enumerate(strategy.replica_bounds):
        too_low = bound.max_replicas is not None and bound.max_replicas < bound.min_replicas
        if too_low:
            found.append(
                (f"{path}.replicaBounds[{i}].maxReplicas", "must not be lower than minReplicas")
            )
        found += _affinity_problems(
            f"{path}.replicaBounds[{i}].targetCluster", bound.target_cluster
        )
    if strategy.weight_preference is not None:
        for i, rule in enumerate(strategy.weight_preference.static_weight_list):
            where = f"{path}.weightPreference.staticWeightList[{i}].targetCluster"
            found += _affinity_problems(where, rule.target_cluster)
    return found
