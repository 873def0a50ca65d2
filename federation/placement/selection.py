"""Which clusters a placement may use: readiness, affinity, taints, then spread.

Screening is a pure per-cluster verdict and is memoised on the fleet per
(affinity term, tolerations): a cluster is *rejected* (not ready, affinity
mismatch, untolerated NoExecute taint), *passed*, or *held back* by an
untolerated NoSchedule taint. Held-back clusters are usable only by a workload
that already has replicas there: like Kubernetes (and Karmada's taint filter),
NoSchedule stops new placements but evicts nothing, while NoExecute evicts.
PreferNoSchedule never filters.

Spread constraints then choose groups of the screened candidates. Groups are
formed by the constraint's key (cluster name, region, zone, provider or a label
value); clusters without that key are rejected. Group constraints (anything but
``cluster``) are applied first, in the order written, and a ``cluster``
constraint last. Each keeps the best-ranked ``maxGroups`` groups (all when
maxGroups is 0) and fails when fewer than ``minGroups`` exist. Ranking prefers,
in order: groups holding more of the workload's current replicas (so that a
re-plan moves nothing it need not), more room for replicas (unlimited first),
more clusters, then the name. When a cluster constraint follows group
constraints, clusters are taken round-robin across the groups chosen last, so
that ``region: minGroups 2`` plus ``cluster: maxGroups 2`` yields one cluster
in each of two regions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from federation.placement import clusters as clusters_
from federation.placement import policy as policy_

NOT_READY = "not ready"
AFFINITY = "affinity"
TAINT = "taint"
SPREAD = "spread"


def labels_match(selector: policy_.LabelSelector, labels: Mapping[str, str]) -> bool:
    """Kubernetes label selector semantics: matchLabels AND every expression."""
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    return all(_requirement_holds(req, labels) for req in selector.match_expressions)


def _requirement_holds(req: policy_.LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    present = req.key in labels
    if req.operator == "In":
        return present and labels[req.key] in req.values
    if req.operator == "NotIn":
        return not present or labels[req.key] not in req.values
    return present if req.operator == "Exists" else not present


def affinity_mismatch(cluster: clusters_.Cluster, affinity: policy_.ClusterAffinity) -> str | None:
    """Why ``cluster`` does not match ``affinity`` (the first failing part), or None."""
    if affinity.cluster_names and cluster.name not in affinity.cluster_names:
        return "not in clusterNames"
    if cluster.name in affinity.exclude:
        return "in exclude"
    if affinity.label_selector is not None and not labels_match(
        affinity.label_selector, cluster.labels
    ):
        return "labelSelector"
    if affinity.field_selector is not None:
        for req in affinity.field_selector.match_expressions:
            if not _field_holds(req, cluster.field(req.key)):
                return f"fieldSelector {req.key} {req.operator} {','.join(req.values)}"
    return None


def _field_holds(req: policy_.FieldSelectorRequirement, value: str | None) -> bool:
    if req.operator == "In":
        return value is not None and value in req.values
    return value is None or value not in req.values


def tolerates(toleration: policy_.Toleration, taint: clusters_.Taint) -> bool:
    """Kubernetes toleration matching (empty effect matches all; empty key + Exists all keys)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    return toleration.operator == "Exists" or toleration.value == taint.value


def untolerated(
    cluster: clusters_.Cluster, tolerations: Sequence[policy_.Toleration], effect: str
) -> clusters_.Taint | None:
    """The first taint of ``effect`` on ``cluster`` that no toleration tolerates."""
    for taint in cluster.taints:
        if taint.effect == effect and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


@dataclass(frozen=True)
class Screening:
    """Per-cluster verdicts for one affinity term and set of tolerations."""

    passed: tuple[clusters_.Cluster, ...]
    #: (cluster, taint text): usable only where the workload already has replicas.
    held_back: tuple[tuple[clusters_.Cluster, str], ...]
    #: (cluster, reason, detail) for clusters that may not be used at all.
    rejected: tuple[tuple[clusters_.Cluster, str, str], ...]


def screen(
    fleet: Iterable[clusters_.Cluster],
    affinity: policy_.ClusterAffinity | None,
    tolerations: Sequence[policy_.Toleration],
) -> Screening:
    """Readiness, affinity and taint verdicts for every cluster of ``fleet``."""
    passed: list[clusters_.Cluster] = []
    held: list[tuple[clusters_.Cluster, str]] = []
    rejected: list[tuple[clusters_.Cluster, str, str]] = []
    for cluster in fleet:
        reason, detail = _rejection(cluster, affinity, tolerations)
        if reason:
            rejected.append((cluster, reason, detail))
        elif (taint := untolerated(cluster, tolerations, "NoSchedule")) is not None:
            held.append((cluster, str(taint)))
        else:
            passed.append(cluster)
    return Screening(tuple(passed), tuple(held), tuple(rejected))


def _rejection(
    cluster: clusters_.Cluster,
    affinity: policy_.ClusterAffinity | None,
    tolerations: Sequence[policy_.Toleration],
) -> tuple[str, str]:
    if not cluster.ready:
        return NOT_READY, ""
    if affinity is not None and (why := affinity_mismatch(cluster, affinity)):
        return AFFINITY, why
    if (taint := untolerated(cluster, tolerations, "NoExecute")) is not None:
        return TAINT, str(taint)
    return "", ""


# -- spread constraints ------------------------------------------------------------------


@dataclass
class Spread:
    """The clusters kept by spread constraints and why the others were dropped."""

    kept: list[clusters_.Cluster]
    rejected: list[tuple[clusters_.Cluster, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None


def group_key(cluster: clusters_.Cluster, key: str) -> str | None:
    """The group ``cluster`` belongs to under a spread key (None: it has no such value)."""
    if key.startswith("label:"):
        return cluster.labels.get(key.removeprefix("label:"))
    return cluster.field(key)


def spread(
    candidates: Sequence[clusters_.Cluster],
    constraints: Sequence[policy_.SpreadConstraint],
    held: Mapping[str, int],
    room: Mapping[str, float],
) -> Spread:
    """Apply spread constraints; ``held`` = current replicas, ``room`` = capacity (inf ok)."""
    result = Spread(kept=list(candidates))
    ordered = [c for c in constraints if c.key != "cluster"]
    ordered += [c for c in constraints if c.key == "cluster"]
    last_groups: list[list[clusters_.Cluster]] = []
    for constraint in ordered:
        if constraint.key == "cluster":
            _spread_clusters(result, constraint, last_groups, held, room)
        else:
            last_groups = _spread_groups(result, constraint, held, room)
        if result.error:
            return result
    return result


def _rank(
    members: Sequence[clusters_.Cluster], held: Mapping[str, int], room: Mapping[str, float]
) -> tuple[float, float, int]:
    holding = sum(held.get(c.name, 0) for c in members)
    capacity = sum(room.get(c.name, 0.0) for c in members)
    return (-holding, -capacity, -len(members))


def _spread_groups(
    result: Spread,
    constraint: policy_.SpreadConstraint,
    held: Mapping[str, int],
    room: Mapping[str, float],
) -> list[list[clusters_.Cluster]]:
    key = constraint.key
    groups: dict[str, list[clusters_.Cluster]] = {}
    for cluster in result.kept:
        value = group_key(cluster, key)
        if value is None:
            result.rejected.append((cluster, SPREAD, f"no {key}"))
        else:
            groups.setdefault(value, []).append(cluster)
    names = sorted(groups, key=lambda g: (*_rank(groups[g], held, room), g))
    if len(names) < constraint.floor:
        result.error = _too_few(key, names, constraint.floor)
        return []
    chosen = names[: constraint.max_groups] if constraint.max_groups else names
    for name in names[len(chosen) :]:
        for cluster in groups[name]:
            result.rejected.append((cluster, SPREAD, f"{key} {name} not among the chosen groups"))
    result.kept = [c for name in chosen for c in groups[name]]
    result.notes.append(_groups_note(key, names, chosen, constraint))
    return [groups[name] for name in chosen]


def _spread_clusters(
    result: Spread,
    constraint: policy_.SpreadConstraint,
    groups: list[list[clusters_.Cluster]],
    held: Mapping[str, int],
    room: Mapping[str, float],
) -> None:
    def rank(c: clusters_.Cluster) -> tuple[float, float, int, str]:
        return (*_rank([c], held, room), c.name)

    buckets = [sorted(g, key=rank) for g in groups] or [sorted(result.kept, key=rank)]
    order = _round_robin(buckets)
    if len(order) < constraint.floor:
        result.error = _too_few("cluster", [c.name for c in order], constraint.floor)
        return
    keep = order[: constraint.max_groups] if constraint.max_groups else order
    for cluster in order[len(keep) :]:
        result.rejected.append((cluster, SPREAD, "not among the chosen clusters"))
    result.kept = sorted(keep, key=lambda c: c.name)
    names = [c.name for c in order]
    result.notes.append(_groups_note("cluster", names, [c.name for c in keep], constraint))


def _round_robin(buckets: list[list[clusters_.Cluster]]) -> list[clusters_.Cluster]:
    order: list[clusters_.Cluster] = []
    for i in range(max((len(b) for b in buckets), default=0)):
        order += [b[i] for b in buckets if i < len(b)]
    return order


def _too_few(key: str, names: Sequence[str], floor: int) -> str:
    found = ", ".join(names) if names else "none"
    return f"spread: minGroups {floor} by {key} but only {len(names)} available ({found})"


def _groups_note(
    key: str, ranked: Sequence[str], chosen: Sequence[str], constraint: policy_.SpreadConstraint
) -> str:
    limit = constraint.max_groups or "none"
    return (
        f"spread by {key}: chose {', '.join(chosen)} of {len(ranked)} "
        f"(minGroups {constraint.floor}, maxGroups {limit}; "
        "ranked by current replicas, room, size, name)"
    )


def infinite_room(room: int | None) -> float:
    """Room as a float for ranking: None (unlimited) sorts above any number."""
    return math.inf if room is None else float(room)
