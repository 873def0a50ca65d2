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
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from federation.placement import clusters as clusters_
from federation.placement import decision as decision_
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


def _key_getter(key: str) -> Callable[[clusters_.Cluster], str | None]:
    if key.startswith("label:"):
        label = key.removeprefix("label:")
        return lambda cluster: cluster.labels.get(label)
    return operator.attrgetter("name" if key == "cluster" else key)


@dataclass(frozen=True)
class Grouping:
    """Clusters grouped by a spread key, with the room of each group (unlimited: None)."""

    key: str
    groups: Mapping[str, tuple[clusters_.Cluster, ...]]
    missing: tuple[clusters_.Cluster, ...]
    group_of: Mapping[str, str]
    room: Mapping[str, int | None]


def group(
    candidates: Iterable[clusters_.Cluster], key: str, room: Mapping[str, int | None]
) -> Grouping:
    """Group ``candidates`` by ``key``; clusters without a value for it are ``missing``."""
    getter = _key_getter(key)
    groups: dict[str, list[clusters_.Cluster]] = {}
    missing = []
    for cluster in candidates:
        value = getter(cluster)
        if value is None:
            missing.append(cluster)
        else:
            groups.setdefault(value, []).append(cluster)
    group_of = {c.name: value for value, members in groups.items() for c in members}
    rooms = {value: [room[c.name] for c in members] for value, members in groups.items()}
    # Exact integers: rooms are not validated on every path and may exceed a float.
    totals = {v: None if None in r else sum(x or 0 for x in r) for v, r in rooms.items()}
    frozen = {value: tuple(members) for value, members in groups.items()}
    return Grouping(key, frozen, tuple(missing), group_of, totals)


def first_group_key(constraints: Sequence[policy_.SpreadConstraint]) -> str | None:
    """The key of the constraint applied first to all candidates (see :func:`spread`)."""
    return next((c.key for c in constraints if c.key != "cluster"), None)


def spread(
    candidates: Sequence[clusters_.Cluster],
    constraints: Sequence[policy_.SpreadConstraint],
    held: Mapping[str, int],
    room: Mapping[str, int | None],
    grouped: Grouping | None = None,
) -> Spread:
    """Apply spread constraints; ``held`` = current replicas, ``room`` = more each can take.

    ``grouped`` may carry ``group(candidates, first_group_key(constraints), room)``
    computed earlier (callers memoise it); it is recomputed otherwise.
    """
    result = Spread(kept=list(candidates))
    ordered = [c for c in constraints if c.key != "cluster"]
    ordered += [c for c in constraints if c.key == "cluster"]
    last_groups: Sequence[Sequence[clusters_.Cluster]] = []
    for index, constraint in enumerate(ordered):
        if constraint.key == "cluster":
            _spread_clusters(result, constraint, last_groups, held, room)
        else:
            reuse = index == 0 and grouped is not None and grouped.key == constraint.key
            grouping = grouped if reuse and grouped else group(result.kept, constraint.key, room)
            last_groups = _spread_groups(result, constraint, grouping, held)
        if result.error:
            return result
    return result


def _spread_groups(
    result: Spread,
    constraint: policy_.SpreadConstraint,
    grouping: Grouping,
    held: Mapping[str, int],
) -> list[tuple[clusters_.Cluster, ...]]:
    key, groups = constraint.key, grouping.groups
    result.rejected.extend((cluster, SPREAD, f"no {key}") for cluster in grouping.missing)
    holding: dict[str, int] = {}
    for name, n in held.items():
        if name in grouping.group_of:
            value = grouping.group_of[name]
            holding[value] = holding.get(value, 0) + n

    def rank(value: str) -> tuple[int, bool, int, int, str]:
        h, room = holding.get(value, 0), grouping.room[value]
        unlimited = room is None
        return (-h, not unlimited, 0 if room is None else -(room + h), -len(groups[value]), value)

    names = sorted(groups, key=rank)
    if len(names) < constraint.floor:
        result.error = _too_few(key, names, constraint.floor)
        return []
    chosen = names[: constraint.max_groups] if constraint.max_groups else names
    for name in names[len(chosen) :]:
        detail = f"{key} {name} not among the chosen groups"
        result.rejected.extend((cluster, SPREAD, detail) for cluster in groups[name])
    result.kept = [c for name in chosen for c in groups[name]]
    result.notes.append(_groups_note(key, names, chosen, constraint))
    return [groups[name] for name in chosen]


def _rank_cluster(
    cluster: clusters_.Cluster, held: Mapping[str, int], room: Mapping[str, int | None]
) -> tuple[float, float, str]:
    """Sort key of a cluster: most current replicas, most room (unlimited first), name."""
    h = held.get(cluster.name, 0)
    r = room[cluster.name]
    return (-h, -math.inf if r is None else -(r + h), cluster.name)


def _spread_clusters(
    result: Spread,
    constraint: policy_.SpreadConstraint,
    groups: Sequence[Sequence[clusters_.Cluster]],
    held: Mapping[str, int],
    room: Mapping[str, int | None],
) -> None:
    def rank(c: clusters_.Cluster) -> tuple[float, float, str]:
        return _rank_cluster(c, held, room)

    buckets = [sorted(g, key=rank) for g in groups] or [sorted(result.kept, key=rank)]
    order = _round_robin(buckets)
    if len(order) < constraint.floor:
        result.error = _too_few("cluster", [c.name for c in order], constraint.floor)
        return
    keep = order[: constraint.max_groups] if constraint.max_groups else order
    result.rejected.extend((c, SPREAD, "not among the chosen clusters") for c in order[len(keep) :])
    result.kept = sorted(keep, key=lambda c: c.name)
    names = [c.name for c in order]
    result.notes.append(_groups_note("cluster", names, [c.name for c in keep], constraint))


def _round_robin(buckets: Sequence[Sequence[clusters_.Cluster]]) -> list[clusters_.Cluster]:
    order: list[clusters_.Cluster] = []
    for i in range(max((len(b) for b in buckets), default=0)):
        order += [b[i] for b in buckets if i < len(b)]
    return order


def _too_few(key: str, names: Sequence[str], floor: int) -> str:
    found = decision_.names_text(names) if names else "none"
    return f"spread: minGroups {floor} by {key} but only {len(names)} available ({found})"


def _groups_note(
    key: str, ranked: Sequence[str], chosen: Sequence[str], constraint: policy_.SpreadConstraint
) -> str:
    limit = constraint.max_groups or "none"
    return (
        f"spread by {key}: kept {decision_.names_text(chosen)} ({len(chosen)} of {len(ranked)}; "
        f"minGroups {constraint.floor}, maxGroups {limit}; "
        "ranked by current replicas, room, size, name)"
    )
