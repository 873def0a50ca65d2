"""Policies and the deploy step's target: what goes to which cluster, a pure function.

- ``topology``: KubeVela's ``clusters``, ``clusterLabelSelector`` (``clusterSelector``,
  its old name), ``namespace`` and ``allowEmpty`` (a topology whose selection matches no
  member places nothing instead of failing; a cluster that matches but cannot take the
  component is still an error, and so is a name in ``clusters`` that is no member, which
  would otherwise hide a typo), plus ours: ``placement``, a block in the
  PropagationPolicy schema (docs/placement.md). The topology becomes a PropagationPolicy
  for the component's workload and goes through :func:`federation.placement.engine.place`,
  so weights, replica division, spread and min/max are the placement engine's. Without a
  ``placement`` block every chosen cluster gets the whole component (Duplicated), as in
  KubeVela. KubeVela's ``local`` (the control plane's own cluster) names the cluster
  given as ``local_cluster`` (the hub runs no workloads here).
- ``override``: KubeVela's ``components[]`` (``name``, ``type``, ``properties``,
  ``traits[]`` with ``disable``) merged into the components, and ``selector`` (only these
  components), plus ours: ``overrideRules``, per-cluster patches in the OverridePolicy
  schema applied by :mod:`federation.hub.overrides` (same validation and
  protected fields as propagation).
- ``health``: ``probeInterval`` (seconds between health checks while a step waits) and
  ``window`` (seconds a cluster must stay healthy before a deploy step counts it).
- ``garbage-collect``: ``keepLegacyResource`` (keep resources no revision renders any
  more), ``applicationRevisionLimit`` (revisions kept, default 10) and
  ``continueOnFailure`` (clean up after a failed workflow too), ``rules`` (a strategy per
  object by component, kind or name: :mod:`federation.applications.resource_policies`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from federation.applications import (
    custom_status,
    patches,
    render,
    replication,
    resource_policies,
    scope,
    terraform,
)
from federation.applications.model import AppError, AppSpec, PolicySpec, RenderBudget
from federation.applications.scope import PROTECTED_NAMESPACES
from federation.hub import overrides
from federation.placement import clusters as clusters_
from federation.placement import engine, loader, selection
from federation.placement import policy as policy_
from federation.placement import resources as resources_

JSON = dict[str, Any]
LOCAL = "local"


@dataclasses.dataclass(frozen=True)
class Health:
    probe_interval: float = 5.0
    """Seconds between health checks while a deploy step waits: members report a new
    workload ready within a few seconds; a shorter period only adds reconciles."""
    window: float = 0.0
    """Seconds a cluster must stay healthy before a deploy step counts it: 0 trusts the
    first healthy report, as KubeVela does."""


@dataclasses.dataclass(frozen=True)
class GarbageCollect:
    keep_legacy: bool = False
    """KubeVela's default: resources no revision renders any more are deleted."""
    revision_limit: int = 10
    """KubeVela's default ``applicationRevisionLimit``: enough to roll back a few releases
    without growing the hub's store per deploy."""
    continue_on_failure: bool = False
    """KubeVela's ``continueOnFailure``: a failed workflow cleans what the release no
    longer renders too (by default only a workflow that succeeded does)."""
    rules: tuple[resource_policies.GcRule, ...] = ()
    """KubeVela's ``rules``: which objects are kept longer than ``onAppUpdate``."""

    def strategy(self, manifest: JSON) -> tuple[str, str]:
        """The (strategy, propagation) the tracker records with ``manifest``."""
        return resource_policies.gc_strategy(self.rules, manifest)


def _check(props: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in props:
        if key not in allowed:
            raise AppError(f"{where}.{key}: not supported ({', '.join(sorted(allowed))})")


def health_of(policies: Sequence[PolicySpec]) -> Health:
    for policy in policies:
        if policy.type == "health":
            where = f"policy {policy.name} properties"
            props = policy.properties
            _check(props, {"probeInterval", "window"}, where)
            values = {}
            for key in ("probeInterval", "window"):
                if key in props:
                    value = props[key]
                    if not isinstance(value, int | float) or isinstance(value, bool) \
                            or value < 0 or value > 3600:
                        raise AppError(f"{where}.{key}: seconds from 0 to 3600")
                    values[key] = float(value)
            return Health(max(values.get("probeInterval", 5.0), 1.0), values.get("window", 0.0))
    return Health()


def gc_of(policies: Sequence[PolicySpec],
          made_by: resource_policies.Provenance | None = None) -> GarbageCollect:
    for policy in policies:
        if policy.type == "garbage-collect":
            where = f"policy {policy.name} properties"
            props = policy.properties
            _check(props, {"keepLegacyResource", "applicationRevisionLimit",
                           "continueOnFailure", "rules"}, where)
            keep = props.get("keepLegacyResource", False)
            limit = props.get("applicationRevisionLimit", 10)
            go_on = props.get("continueOnFailure", False)
            if not isinstance(keep, bool) or not isinstance(go_on, bool):
                key = "keepLegacyResource" if not isinstance(keep, bool) else \
                    "continueOnFailure"
                raise AppError(f"{where}.{key}: true or false")
            if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 100:
                raise AppError(f"{where}.applicationRevisionLimit: an integer from 1 to 100")
            return GarbageCollect(keep, limit, go_on,
                                  resource_policies.gc_rules_of(policy, where, made_by))
    return GarbageCollect()


# -- override (KubeVela's component patches) -------------------------------------------------


def cluster_rules(policy: PolicySpec, namespace: str) -> overrides.OverridePolicy | None:
    """Our ``overrideRules`` as an OverridePolicy, validated like any (refusals included)."""
    rules = policy.properties.get("overrideRules")
    if rules is None:
        return None
    document = {"apiVersion": "policy.federation.io/v1alpha1", "kind": "OverridePolicy",
                "metadata": {"name": policy.name, "namespace": namespace},
                "spec": {"resourceSelectors": [], "overrideRules": rules}}
    try:
        return overrides.validate(document)
    except overrides.OverrideError as exc:
        raise AppError(f"policy {policy.name} properties.{exc}") from None


# -- topology --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Topology:
    name: str
    namespace: str | None
    placement: JSON
    allow_empty: bool = False
    """KubeVela's ``allowEmpty``: a selection matching no member places nothing."""
    names_from_clusters: bool = False
    """The cluster names came from KubeVela's ``clusters`` (for the path in a refusal)."""
    uses_local: bool = False
    """It places on KubeVela's ``local`` (named or by default)."""


def topology_of(policy: PolicySpec, local_cluster: str | None) -> Topology:
    """A topology policy as a placement. Neither ``clusters``, ``clusterLabelSelector`` nor
    ``placement``: KubeVela's local cluster (``local_cluster``), as in KubeVela."""
    props = policy.properties
    where = f"policy {policy.name} properties"
    _check(props, {"clusters", "clusterLabelSelector", "clusterSelector", "namespace",
                   "allowEmpty", "placement"}, where)
    placement = copy.deepcopy(props.get("placement") or {})
    if not isinstance(placement, dict):
        raise AppError(f"{where}.placement: a placement block (PropagationPolicy schema)")
    affinity, uses_local = _affinity(props, local_cluster, where)
    if affinity:
        if "clusterAffinity" in placement or "clusterAffinities" in placement:
            raise AppError(f"{where}.placement.clusterAffinity: give the clusters either "
                           "here or in clusters/clusterLabelSelector, not both")
        placement["clusterAffinity"] = affinity
    if placement.get("replicaScheduling") is None:  # absent or null: KubeVela's copies
        placement["replicaScheduling"] = {"replicaSchedulingType": "Duplicated"}
    namespace = props.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise AppError(f"{where}.namespace: a namespace name")
    allow_empty = props.get("allowEmpty", False)
    if not isinstance(allow_empty, bool):
        raise AppError(f"{where}.allowEmpty: true or false")
    return Topology(policy.name, namespace, placement, allow_empty, "clusters" in props,
                    uses_local)


def _affinity(props: Mapping[str, Any], local_cluster: str | None, where: str
              ) -> tuple[JSON, bool]:
    """KubeVela's cluster choice as a cluster affinity, and whether it names ``local``."""
    affinity: JSON = {}
    names = props.get("clusters")
    if names is None and props.get("clusterLabelSelector", props.get("clusterSelector")) \
            is None and not props.get("placement"):
        names = [LOCAL]
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise AppError(f"{where}.clusters: a list of cluster names")
        if LOCAL in names and local_cluster is None:
            raise AppError(f"{where}.clusters: KubeVela's local cluster (named 'local', or "
                           "the default of a topology without clusters) names no member "
                           "here; give --local-cluster NAME (fedctl run "
                           "--app-local-cluster NAME)")
        affinity["clusterNames"] = [local_cluster if n == LOCAL else n for n in names]
    selector = props.get("clusterLabelSelector", props.get("clusterSelector"))
    if selector is not None:
        if not isinstance(selector, dict):
            raise AppError(f"{where}.clusterLabelSelector: a map of labels")
        affinity["labelSelector"] = {"matchLabels": dict(selector)}
    return affinity, names is not None and LOCAL in names


@dataclasses.dataclass(frozen=True)
class Target:
    """A deploy step's outcome for one revision: per cluster, the manifests to hold."""

    clusters: Mapping[str, tuple[JSON, ...]]
    explanation: tuple[str, ...] = ()
    empty: tuple[str, ...] = ()
    """Topologies with ``allowEmpty`` whose selection matched no member (nothing placed)."""
    checks: tuple[custom_status.Checks, ...] = ()
    """The components whose definitions judge their health or say their message
    (``spec.status``), each against its workload's identity."""
    replicas: tuple[str, ...] = ()
    """A line per replication policy of the step: the components it copies, by which keys."""
    made_by: Mapping[resource_policies.ObjectKey, resource_policies.MadeBy] = \
        dataclasses.field(default_factory=dict)
    """What rendered each object (component type, workload or trait, trait type), for the
    resource policies' type selectors."""


def _policy_document(topology: Topology, resource: resources_.Resource) -> JSON:
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": topology.name, "namespace": resource.namespace or "default"},
            "spec": {"resourceSelectors": [{"apiVersion": resource.api_version,
                                            "kind": resource.kind}],
                     "placement": topology.placement}}


def deploy_target(spec: AppSpec, app: str, namespace: str, step_policies: Sequence[str],
                  policies: Mapping[str, PolicySpec], fleet: Sequence[clusters_.Cluster],
                  local_cluster: str | None = None, where: str = "deploy",
                  grant: scope.Grant | None = None, budget: RenderBudget | None = None,
                  user: render.UserTypes | None = None) -> Target:
    """Render the components for one deploy step (its topology and override policies, in
    the step's order; none named: the Application's own) and place them. Every object
    must land in a namespace ``grant`` allows (default: ``namespace`` only); each render
    is spent from ``budget`` (the compile's, over every deploy step) before it is placed."""
    grant = grant or scope.Grant(namespace)
    budget = budget or RenderBudget()
    chosen = _chosen(step_policies, policies, where)
    entries = patches.entries_of(spec.components)
    rules: list[overrides.OverridePolicy] = []
    for policy in chosen:
        if policy.type == "override":
            _check(policy.properties, {"components", "selector", "overrideRules"},
                   f"policy {policy.name} properties")
            entries = patches.override(entries, policy)
            rule = cluster_rules(policy, namespace)
            if rule is not None:
                rules.append(rule)
    entries, replicas = replication.replicate(
        entries, [replication.replication_of(p) for p in chosen if p.type == replication.TYPE],
        budget, where)
    topologies = _topologies(chosen, local_cluster, fleet, where)
    notes: list[str] = []
    placed = _Placed()
    made_by: dict[resource_policies.ObjectKey, resource_policies.MadeBy] = {}
    checks: list[custom_status.Checks] = []
    for topology in topologies:
        target_ns = topology.namespace or namespace
        for entry in entries:
            objects = render.render_component(entry.component, app, target_ns, entry.where,
                                              user, made_by)
            found = user.status_checks(entry.component, target_ns, objects) \
                if user is not None else None
            if found is not None and found not in checks:
                checks.append(found)
            budget.spend(len(objects), where)
            _check_scope(objects, entry.where)
            scope.check_objects(objects, grant, entry.where)
            if user is None or not user.has_component(entry.component.type):
                for obj in objects:  # a tenant's manifest (a definition's are checked there)
                    if terraform.is_configuration(obj):
                        terraform.check_manifest(obj, entry.where)
                    elif terraform.is_provider(obj):
                        terraform.check_provider_manifest(obj, entry.where)
            for cluster, manifests in _place(objects, topology, target_ns, fleet,
                                             notes).items():
                placed.add(cluster, manifests, topology.name, entry.where)
    per_cluster = placed.clusters
    if rules:
        per_cluster = _apply_rules(per_cluster, rules, fleet)
    empty = tuple(sorted({t.name for t in topologies
                          if f"{t.name}: {EMPTY_NOTE}" in notes}))
    return Target({c: tuple(m) for c, m in sorted(per_cluster.items())}, tuple(notes), empty,
                  tuple(checks), tuple(replicas), made_by)


def _chosen(step_policies: Sequence[str], policies: Mapping[str, PolicySpec], where: str
            ) -> list[PolicySpec]:
    """The step's policies in its order; none named: every topology and override."""
    if not step_policies:
        return [p for p in policies.values() if p.type in ("topology", "override")]
    for name in step_policies:
        if name not in policies:
            raise AppError(f"{where}.properties.policies: no policy {name!r} in the "
                           "Application or as a Policy in its namespace")
    return [policies[name] for name in step_policies]


def _topologies(chosen: Sequence[PolicySpec], local_cluster: str | None,
                fleet: Sequence[clusters_.Cluster], where: str) -> list[Topology]:
    """The step's topologies; none: KubeVela's local cluster. A local cluster in use must
    be a member (else the refusal names the flag that chose it, not a policy)."""
    topologies = [topology_of(p, local_cluster) for p in chosen if p.type == "topology"]
    if not topologies:
        if local_cluster is None:
            raise AppError(f"{where}: no topology policy, and no local cluster to deploy to "
                           "(KubeVela deploys to its own cluster: name a member with "
                           "--local-cluster, or fedctl run --app-local-cluster)")
        topologies = [Topology(LOCAL, None, {
            "clusterAffinity": {"clusterNames": [local_cluster]},
            "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}, uses_local=True)]
    if local_cluster is not None and local_cluster not in {c.name for c in fleet}:
        user = next((t.name for t in topologies if t.uses_local), None)
        if user is not None:
            asked = "this deploy step has no topology" if user == LOCAL else \
                f"policy {user} deploys to KubeVela's local cluster"
            raise AppError(f"{where}: {asked}, and the local cluster {local_cluster!r} "
                           "(--local-cluster, or fedctl run --app-local-cluster) is no "
                           "member cluster")
    return topologies


class _Placed:
    """Per cluster, the objects placed so far: KubeVela places each (cluster, namespace)
    once however many of a step's topologies select it, so an object a second topology
    places again where it already is is not rendered twice; placed again differently
    (another replica count), it is refused rather than one of them silently dropped."""

    def __init__(self) -> None:
        self.clusters: dict[str, list[JSON]] = {}
        self.by: dict[tuple[str, str, str, str, str], tuple[str, str, JSON]] = {}

    def add(self, cluster: str, manifests: Sequence[JSON], topology: str,
            rendered_by: str) -> None:
        """``rendered_by`` is the component (or its replica) whose render these are: two
        renders of one object (group, kind, namespace, name) in a cluster are refused
        naming both, as one would silently overwrite the other in the member."""
        for manifest in manifests:
            meta = manifest.get("metadata") or {}
            group = str(manifest.get("apiVersion")).rpartition("/")[0]
            key = (cluster, group, str(manifest.get("kind")),
                   str(meta.get("namespace") or ""), str(meta.get("name")))
            if key in self.by:
                first, first_render, body = self.by[key]
                if first_render != rendered_by:
                    raise AppError(f"{rendered_by}: renders {key[2]} {key[3]}/{key[4]} in "
                                   f"cluster {cluster}, which {first_render} renders too; "
                                   "two renders of one object in a cluster are refused")
                if body != manifest:
                    raise AppError(f"policy {topology}: places {key[2]} {key[3]}/{key[4]} "
                                   f"in cluster {cluster}, where policy {first} places it "
                                   "differently; one deploy step renders an object once "
                                   "per cluster")
                continue
            self.by[key] = (topology, rendered_by, manifest)
            self.clusters.setdefault(cluster, []).append(manifest)


def _check_scope(objects: Sequence[JSON], where: str) -> None:
    """Refuse cluster-scoped objects (a ClusterRoleBinding, a Namespace: whoever may write
    an Application on the hub would change whole members) and system namespaces."""
    for obj in objects:
        kind = str(obj.get("kind"))
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        if kind in resources_.CLUSTER_SCOPED_KINDS:
            raise AppError(f"{where}: {kind} {obj['metadata'].get('name')} is cluster-scoped; "
                           "an Application places namespaced objects only")
        if namespace in PROTECTED_NAMESPACES:
            raise AppError(f"{where}: {kind} {obj['metadata'].get('name')}: namespace "
                           f"{namespace} is a system namespace no Application writes into")


def _place(objects: Sequence[JSON], topology: Topology, namespace: str,
           fleet: Sequence[clusters_.Cluster], notes: list[str]) -> dict[str, list[JSON]]:
    workload = next((o for o in objects if o.get("kind") in render.WORKLOAD_KINDS), None)
    primary = workload or objects[0]
    resource = resources_.from_manifest(primary)
    policy = _placement_policy(topology, resource)
    decision = engine.place(resource, policy, fleet)
    _check_names(topology, policy, fleet)
    if topology.allow_empty and not decision.ok and _selects_nothing(policy, fleet):
        notes.append(f"{topology.name}: {EMPTY_NOTE}")
        return {}
    if not decision.ok:
        raise AppError(f"policy {topology.name}: cannot place {resource.ref}: "
                       f"{decision.error}")
    notes.extend(f"{topology.name}: {line}" for line in decision.explanation)
    divided = policy.spec.placement.replica_scheduling is not None and \
        policy.spec.placement.replica_scheduling.replica_scheduling_type == "Divided" and \
        workload is not None and workload.get("kind") in render.REPLICATED_KINDS
    placed: dict[str, list[JSON]] = {}
    for cluster, replicas in decision.clusters.items():
        if workload is not None and divided and replicas == 0:
            continue
        manifests = []
        for obj in objects:
            body = copy.deepcopy(obj)
            if obj is workload and divided:
                body["spec"]["replicas"] = replicas
            manifests.append(body)
        placed[cluster] = manifests
    return placed


def _placement_policy(topology: Topology, resource: resources_.Resource) -> policy_.Policy:
    """The topology as a PropagationPolicy; a bad ``placement`` block is refused naming
    its field (``policy P properties.placement.clusterAfinity: unknown field``)."""
    try:
        return loader.parse_policy(_policy_document(topology, resource), "", "")
    except loader.LoadError as exc:
        field = exc.path.removeprefix("spec.")
        raise AppError(f"policy {topology.name} properties.{field}: {exc.message}") from None


EMPTY_NOTE = "allowEmpty: the selection matches no member cluster; nothing placed"


def _check_names(topology: Topology, policy: policy_.Policy,
                 fleet: Sequence[clusters_.Cluster]) -> None:
    """Every cluster name (``clusters``, or the ``placement`` block's affinities) must be a
    member, ready or not (as KubeVela's cluster-not-found): a misspelt one would place
    nothing there, silently (with ``allowEmpty``, maybe nothing at all)."""
    members = {c.name for c in fleet}
    placement = policy.spec.placement
    terms = [("placement.clusterAffinities[{i}].clusterNames", t.cluster_names)
             for t in placement.cluster_affinities or ()]
    if not terms and placement.cluster_affinity is not None:
        field = "clusters" if topology.names_from_clusters else \
            "placement.clusterAffinity.clusterNames"
        terms = [(field, placement.cluster_affinity.cluster_names)]
    for index, (field, names) in enumerate(terms):
        for name in names or ():
            if name not in members:
                why = " (allowEmpty excuses a selection that matches no member, not a " \
                    "name that is none)" if topology.allow_empty else ""
                raise AppError(f"policy {topology.name} properties."
                               f"{field.format(i=index)}: no member cluster {name!r}{why}")


def _selects_nothing(policy: policy_.Policy, fleet: Sequence[clusters_.Cluster]) -> bool:
    """No member matches any of the policy's affinity terms (names, labels, fields):
    readiness, taints and room are not selection, so a cluster failing those is still an
    error, not an empty topology."""
    return not any(affinity is None or selection.affinity_mismatch(cluster, affinity) is None
                   for _, affinity in policy_.affinity_terms(policy.spec.placement)
                   for cluster in fleet)


def _apply_rules(per_cluster: Mapping[str, list[JSON]],
                 rules: Sequence[overrides.OverridePolicy],
                 fleet: Sequence[clusters_.Cluster]) -> dict[str, list[JSON]]:
    by_name = {c.name: c for c in fleet}
    out: dict[str, list[JSON]] = {}
    for cluster, manifests in per_cluster.items():
        member = by_name.get(cluster) or clusters_.Cluster(name=cluster)
        changed = []
        for manifest in manifests:
            if overrides.pod_spec(manifest) is None:
                changed.append(manifest)  # rules patch workloads: nothing to override here
                continue
            try:
                changed.append(overrides.apply_all(manifest, member, rules).manifest)
            except overrides.OverrideError as exc:
                raise AppError(f"override {exc}") from None
        out[cluster] = changed
    return out


def resolve_policies(spec: AppSpec, external: Mapping[str, PolicySpec]) -> dict[str, PolicySpec]:
    """The Application's own policies, then external Policies of its namespace (an inline
    policy wins a name clash, as in KubeVela)."""
    found = dict(external)
    found.update({p.name: p for p in spec.policies})
    return found
