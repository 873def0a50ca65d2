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
  more) and ``applicationRevisionLimit`` (revisions kept, default 10).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from federation.apps import render, scope
from federation.apps.model import AppError, AppSpec, Component, PolicySpec, RenderBudget, Trait
from federation.apps.scope import PROTECTED_NAMESPACES
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


def gc_of(policies: Sequence[PolicySpec]) -> GarbageCollect:
    for policy in policies:
        if policy.type == "garbage-collect":
            where = f"policy {policy.name} properties"
            props = policy.properties
            _check(props, {"keepLegacyResource", "applicationRevisionLimit"}, where)
            keep = props.get("keepLegacyResource", False)
            limit = props.get("applicationRevisionLimit", 10)
            if not isinstance(keep, bool):
                raise AppError(f"{where}.keepLegacyResource: true or false")
            if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 100:
                raise AppError(f"{where}.applicationRevisionLimit: an integer from 1 to 100")
            return GarbageCollect(keep, limit)
    return GarbageCollect()


# -- override (KubeVela's component patches) -------------------------------------------------


def merge(base: Any, patch: Any) -> Any:
    """Maps merged key by key (recursively); anything else replaced by the patch."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = merge(base.get(key), value) if key in base else copy.deepcopy(value)
        return out
    return copy.deepcopy(patch)


def override_components(components: Sequence[Component], policy: PolicySpec
                        ) -> list[Component]:
    props = policy.properties
    where = f"policy {policy.name} properties"
    _check(props, {"components", "selector", "overrideRules"}, where)
    selector = props.get("selector")
    if selector is not None and (not isinstance(selector, list) or
                                 not all(isinstance(s, str) for s in selector)):
        raise AppError(f"{where}.selector: a list of component names")
    result = [c for c in components if selector is None or c.name in selector]
    for index, patch in enumerate(props.get("components") or []):
        here = f"{where}.components[{index}]"
        if not isinstance(patch, dict):
            raise AppError(f"{here}: must be a map")
        _check(patch, {"name", "type", "properties", "traits"}, here)
        result = [_patch_component(c, patch, here) if _matches(c, patch) else c
                  for c in result]
    return result


def _matches(component: Component, patch: Mapping[str, Any]) -> bool:
    name, kind = patch.get("name"), patch.get("type")
    return (name in (None, "", "*") or name == component.name) and \
        (kind in (None, "") or kind == component.type)


def _patch_component(component: Component, patch: Mapping[str, Any], where: str) -> Component:
    properties = merge(component.properties, patch.get("properties") or {})
    traits = list(component.traits)
    for index, raw in enumerate(patch.get("traits") or []):
        here = f"{where}.traits[{index}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
            raise AppError(f"{here}.type: required")
        _check(raw, {"type", "properties", "disable"}, here)
        position = next((i for i, t in enumerate(traits) if t.type == raw["type"]), None)
        if raw.get("disable"):
            if position is not None:
                traits.pop(position)
            continue
        if position is None:
            traits.append(Trait(type=raw["type"], properties=raw.get("properties") or {}))
        else:
            old = traits[position]
            traits[position] = Trait(type=old.type,
                                     properties=merge(old.properties, raw.get("properties")
                                                      or {}))
    return Component(name=component.name, type=component.type, properties=properties,
                     traits=tuple(traits))


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


def topology_of(policy: PolicySpec, local_cluster: str | None) -> Topology:
    props = policy.properties
    where = f"policy {policy.name} properties"
    _check(props, {"clusters", "clusterLabelSelector", "clusterSelector", "namespace",
                   "allowEmpty", "placement"}, where)
    placement = copy.deepcopy(props.get("placement") or {})
    if not isinstance(placement, dict):
        raise AppError(f"{where}.placement: a placement block (PropagationPolicy schema)")
    affinity: JSON = {}
    if "clusters" in props:
        names = props["clusters"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise AppError(f"{where}.clusters: a list of cluster names")
        resolved = []
        for name in names:
            if name == LOCAL:
                if local_cluster is None:
                    raise AppError(f"{where}.clusters: 'local' (KubeVela's control-plane "
                                   "cluster) names no member here; start fedctl run with "
                                   "--app-local-cluster NAME")
                name = local_cluster
            resolved.append(name)
        affinity["clusterNames"] = resolved
    selector = props.get("clusterLabelSelector", props.get("clusterSelector"))
    if selector is not None:
        if not isinstance(selector, dict):
            raise AppError(f"{where}.clusterLabelSelector: a map of labels")
        affinity["labelSelector"] = {"matchLabels": dict(selector)}
    if affinity:
        if "clusterAffinity" in placement or "clusterAffinities" in placement:
            raise AppError(f"{where}.placement.clusterAffinity: give the clusters either "
                           "here or in clusters/clusterLabelSelector, not both")
        placement["clusterAffinity"] = affinity
    placement.setdefault("replicaScheduling", {"replicaSchedulingType": "Duplicated"})
    namespace = props.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise AppError(f"{where}.namespace: a namespace name")
    allow_empty = props.get("allowEmpty", False)
    if not isinstance(allow_empty, bool):
        raise AppError(f"{where}.allowEmpty: true or false")
    return Topology(policy.name, namespace, placement, allow_empty, "clusters" in props)


@dataclasses.dataclass(frozen=True)
class Target:
    """A deploy step's outcome for one revision: per cluster, the manifests to hold."""

    clusters: Mapping[str, tuple[JSON, ...]]
    explanation: tuple[str, ...] = ()
    empty: tuple[str, ...] = ()
    """Topologies with ``allowEmpty`` whose selection matched no member (nothing placed)."""


def _policy_document(topology: Topology, resource: resources_.Resource) -> JSON:
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": topology.name, "namespace": resource.namespace or "default"},
            "spec": {"resourceSelectors": [{"apiVersion": resource.api_version,
                                            "kind": resource.kind}],
                     "placement": topology.placement}}


def deploy_target(spec: AppSpec, app: str, namespace: str, step_policies: Sequence[str],
                  policies: Mapping[str, PolicySpec], fleet: Sequence[clusters_.Cluster],
                  local_cluster: str | None = None, where: str = "deploy",
                  grant: scope.Grant | None = None, budget: RenderBudget | None = None
                  ) -> Target:
    """Render the components for one deploy step (its topology and override policies, in
    the step's order; none named: the Application's own) and place them. Every object
    must land in a namespace ``grant`` allows (default: ``namespace`` only); each render
    is spent from ``budget`` (the compile's, over every deploy step) before it is placed."""
    grant = grant or scope.Grant(namespace)
    budget = budget or RenderBudget()
    chosen: list[PolicySpec] = []
    for name in step_policies:
        if name not in policies:
            raise AppError(f"{where}.properties.policies: no policy {name!r} in the "
                           "Application or as a Policy in its namespace")
        chosen.append(policies[name])
    if not step_policies:
        chosen = [p for p in policies.values() if p.type in ("topology", "override")]
    topologies = [topology_of(p, local_cluster) for p in chosen if p.type == "topology"]
    components = list(spec.components)
    rules: list[overrides.OverridePolicy] = []
    for policy in chosen:
        if policy.type == "override":
            components = override_components(components, policy)
            rule = cluster_rules(policy, namespace)
            if rule is not None:
                rules.append(rule)
    if not topologies:
        if local_cluster is None:
            raise AppError(f"{where}: no topology policy, and no local cluster to deploy to")
        topologies = [Topology("local", None, {
            "clusterAffinity": {"clusterNames": [local_cluster]},
            "replicaScheduling": {"replicaSchedulingType": "Duplicated"}})]
    per_cluster: dict[str, list[JSON]] = {}
    notes: list[str] = []
    for topology in topologies:
        target_ns = topology.namespace or namespace
        for index, component in enumerate(spec.components):
            patched = next((c for c in components if c.name == component.name), None)
            if patched is None:
                continue
            objects = render.render_component(patched, app, target_ns,
                                              f"spec.components[{index}]")
            budget.spend(len(objects), where)
            _check_scope(objects, f"spec.components[{index}]")
            scope.check_objects(objects, grant, f"spec.components[{index}]")
            placed = _place(objects, topology, target_ns, fleet, notes)
            for cluster, manifests in placed.items():
                per_cluster.setdefault(cluster, []).extend(manifests)
    if rules:
        per_cluster = _apply_rules(per_cluster, rules, fleet)
    empty = tuple(sorted({t.name for t in topologies
                          if f"{t.name}: {EMPTY_NOTE}" in notes}))
    return Target({c: tuple(m) for c, m in sorted(per_cluster.items())}, tuple(notes), empty)




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
    policy = loader.parse_policy(_policy_document(topology, resource),
                                 f"policy {topology.name}", "placement")
    decision = engine.place(resource, policy, fleet)
    _check_names(topology, policy, fleet)
    if topology.allow_empty and not decision.ok and _selects_nothing(policy, fleet):
        notes.append(f"{topology.name}: {EMPTY_NOTE}")
        return {}
    if not decision.ok:
        raise AppError(f"policy {topology.name}: cannot place {resource.ref}: "
                       f"{decision.error}")
    notes.extend(f"{topology.name}: {line}" for line in decision.explanation)
    divided = topology.placement.get("replicaScheduling", {}).get(
        "replicaSchedulingType") == "Divided"
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
