"""The placement engine: policy + clusters + previous decision in, decision out.

:func:`place` is a pure function. For each affinity term of the policy (the
single ``clusterAffinity``, or ``clusterAffinities`` in order, the next term
tried only when the previous one cannot place the resource) it runs the same
pipeline:

1. screen the fleet: readiness, affinity, taints (see :mod:`selection`);
2. apply spread constraints to the candidates;
3. divide the replicas by the policy's mode within per-cluster bounds and
   room (see :mod:`division`);
4. assemble a :class:`~federation.placement.decision.Decision` whose
   explanation records every step.

*Previous* is the per-cluster replica count of the last decision for this
resource (empty on first placement). It matters in four ways: clusters with an
untolerated NoSchedule taint stay usable where replicas already run (but take
no new ones); spread prefers groups that already hold replicas; Duplicated and
static weights count replicas already running as usable capacity; and the
dynamic and aggregated modes are sticky (see :mod:`division`). Replicas on a
cluster that is no longer a candidate (not ready, excluded, evicted by a
NoExecute taint, or missing from ``clusters``) are placed again.

:func:`plan` adds policy matching for a batch of resources. Failover callers
pass clusters with ``ready=False`` (or leave them out) and the previous
decision: replicas on failed clusters are re-placed, the rest stay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from federation.placement import clusters as clusters_
from federation.placement import decision as decision_
from federation.placement import division, matching, selection
from federation.placement import policy as policy_
from federation.placement import resources as resources_

WEIGHT = "weight"
#: Modes that divide without looking at availableReplicas, as Karmada does.
_ROOMLESS = (policy_.Mode.DUPLICATED, policy_.Mode.STATIC)


@dataclass(frozen=True)
class Planned:
    """One resource's outcome in a batch: the policy used (if any) and its decision."""

    resource: resources_.Resource
    policy: policy_.Policy | None
    decision: decision_.Decision


def place(
    resource: resources_.Resource,
    policy: policy_.Policy,
    clusters: clusters_.Fleet | Sequence[clusters_.Cluster],
    previous: Mapping[str, int] | None = None,
) -> decision_.Decision:
    """Decide where ``resource``'s replicas go under ``policy``."""
    fleet = clusters_.as_fleet(clusters)
    held = {name: n for name, n in sorted((previous or {}).items()) if n > 0}
    placement = policy.spec.placement
    terms = policy_.affinity_terms(placement)
    tried: list[str] = []
    for index, (name, affinity) in enumerate(terms):
        outcome = _place_term(resource, placement, fleet, held, affinity)
        if name is None:
            return outcome
        label = f"affinity term {name!r} ({index + 1} of {len(terms)})"
        if outcome.ok:
            lines = (*tried, f"{label} is used", *outcome.explanation)
            return dataclasses.replace(outcome, explanation=lines)
        tried += [f"{label}: {line}" for line in outcome.explanation]
        tried.append(f"{label} cannot place the resource: {outcome.error}")
    error = f"none of the {len(terms)} affinity terms can place the resource"
    return dataclasses.replace(outcome, explanation=tuple(tried), error=error)


def plan(
    resources: Iterable[resources_.Resource],
    policies: Sequence[policy_.Policy],
    clusters: clusters_.Fleet | Sequence[clusters_.Cluster],
    previous: Mapping[resources_.ResourceKey, Mapping[str, int]] | None = None,
) -> list[Planned]:
    """Match each resource to its policy and place it."""
    fleet = clusters_.as_fleet(clusters)
    results = []
    for resource in resources:
        found = matching.candidates(resource, policies)
        if not found:
            message = "no PropagationPolicy or ClusterPropagationPolicy matches this resource"
            outcome = decision_.Decision(resource.replicas, error=message, explanation=(message,))
            results.append(Planned(resource, None, outcome))
            continue
        outcome = place(resource, found[0], fleet, (previous or {}).get(resource.key))
        line = matching.describe(found[0], found[1:])
        outcome = dataclasses.replace(outcome, explanation=(line, *outcome.explanation))
        results.append(Planned(resource, found[0], outcome))
    return results


# -- one affinity term ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Screened:
    """A memoised screening plus what explaining it needs."""

    screening: selection.Screening
    lines: tuple[str, ...]
    reasons: Mapping[str, str]


def _screened(
    fleet: clusters_.Fleet, placement: policy_.Placement, affinity: policy_.ClusterAffinity | None
) -> _Screened:
    def compute() -> _Screened:
        screening = selection.screen(fleet, affinity, placement.cluster_tolerations)
        reasons = {c.name: _reason_text(r, d) for c, r, d in screening.rejected}
        return _Screened(screening, tuple(_rejection_lines(screening.rejected)), reasons)

    return fleet.memo("screen", (placement, affinity), compute)


def _reason_text(reason: str, detail: str) -> str:
    return f"{reason}: {detail}" if detail else reason


def _rejection_lines(rejected: Iterable[tuple[clusters_.Cluster, str, str]]) -> list[str]:
    """``filtered (reason: detail): a, b`` lines, one per distinct reason and detail."""
    groups: dict[str, list[str]] = {}
    for cluster, reason, detail in rejected:
        groups.setdefault(_reason_text(reason, detail), []).append(cluster.name)
    return [f"filtered ({why}): {decision_.names_text(names)}" for why, names in groups.items()]


def _place_term(
    resource: resources_.Resource,
    placement: policy_.Placement,
    fleet: clusters_.Fleet,
    held: Mapping[str, int],
    affinity: policy_.ClusterAffinity | None,
) -> decision_.Decision:
    screened = _screened(fleet, placement, affinity)
    lines = list(screened.lines)
    candidates = list(screened.screening.passed)
    room: dict[str, int | None] = {}
    for cluster, taint in screened.screening.held_back:
        if cluster.name in held:
            candidates.append(cluster)
            room[cluster.name] = 0
            lines.append(f"{cluster.name} keeps its replicas but takes no new ones (taint {taint})")
        else:
            lines.append(f"filtered (taint: {taint}): {cluster.name}")
    candidates.sort(key=lambda c: c.name)
    for c in candidates:
        room.setdefault(c.name, c.available_replicas)
    lines += _moved_lines(held, room, screened.reasons)
    return _spread_and_divide(resource, placement, fleet, candidates, held, room, lines)


def _moved_lines(
    held: Mapping[str, int], room: Mapping[str, int | None], reasons: Mapping[str, str]
) -> list[str]:
    return [
        f"{name} held {n} replicas but is no longer a candidate "
        f"({reasons.get(name, 'unknown cluster')}); they are placed again"
        for name, n in held.items()
        if name not in room
    ]


def _spread_and_divide(
    resource: resources_.Resource,
    placement: policy_.Placement,
    fleet: clusters_.Fleet,
    candidates: list[clusters_.Cluster],
    held: Mapping[str, int],
    room: dict[str, int | None],
    lines: list[str],
) -> decision_.Decision:
    if placement.spread_constraints and candidates:
        capacity = {
            c.name: selection.infinite_room(room[c.name]) + held.get(c.name, 0) for c in candidates
        }
        chosen = selection.spread(candidates, placement.spread_constraints, held, capacity)
        lines += _rejection_lines(chosen.rejected) + chosen.notes
        if chosen.error:
            return _failed(resource, lines, chosen.error)
        candidates = chosen.kept
    if not candidates:
        return _failed(resource, lines, "no feasible cluster: every cluster was filtered out")
    lines.append(f"candidates: {decision_.names_text([c.name for c in candidates])}")
    if resource.replicas == 0:
        lines.append("no replicas to divide: every candidate gets the resource with 0 replicas")
        return decision_.Decision(0, {c.name: 0 for c in candidates}, explanation=tuple(lines))
    return _divide(resource, placement, fleet, candidates, held, room, lines)


def _failed(
    resource: resources_.Resource, lines: list[str], error: str, unschedulable: int = 0
) -> decision_.Decision:
    return decision_.Decision(
        resource.replicas, unschedulable=unschedulable, explanation=tuple(lines), error=error
    )


def _divide(
    resource: resources_.Resource,
    placement: policy_.Placement,
    fleet: clusters_.Fleet,
    candidates: list[clusters_.Cluster],
    held: Mapping[str, int],
    room: Mapping[str, int | None],
    lines: list[str],
) -> decision_.Decision:
    mode = policy_.mode(placement)
    strategy = placement.replica_scheduling or policy_.ReplicaSchedulingStrategy()
    lines.append(f"mode: {mode.value}")
    if mode in _ROOMLESS and any(c.available_replicas is not None for c in candidates):
        lines.append("availableReplicas is not considered in this mode (as in Karmada)")
    bounds = _bounds(fleet, strategy)
    slots = [
        division.Slot(c.name, held.get(c.name, 0), room[c.name], *bounds.get(c.name, (0, None)))
        for c in candidates
    ]
    lines += _bounds_lines(slots)
    try:
        if mode is policy_.Mode.STATIC:
            slots = _weighted(fleet, strategy, slots, lines)
        result = _run(mode, resource.replicas, slots, strategy.allow_partial)
    except division.DivisionError as error:
        return _failed(resource, lines, str(error), error.unschedulable)
    lines += result.notes
    return decision_.Decision(
        resource.replicas, result.replicas, pending=result.pending, explanation=tuple(lines)
    )


def _run(
    mode: policy_.Mode, total: int, slots: list[division.Slot], partial: bool
) -> division.Division:
    if mode is policy_.Mode.DUPLICATED:
        return division.duplicate(total, slots)
    if mode is policy_.Mode.STATIC:
        return division.divide_static(total, slots, partial)
    return division.divide_dynamic(total, slots, partial, mode is policy_.Mode.AGGREGATED)


# -- bounds and static weights ----------------------------------------------------------------


def _bounds(
    fleet: clusters_.Fleet, strategy: policy_.ReplicaSchedulingStrategy
) -> Mapping[str, tuple[int, int | None]]:
    """Cluster -> (minReplicas, maxReplicas): the intersection of every matching bound."""

    def compute() -> dict[str, tuple[int, int | None]]:
        found: dict[str, tuple[int, int | None]] = {}
        for cluster in fleet:
            for rule in strategy.replica_bounds:
                if selection.affinity_mismatch(cluster, rule.target_cluster) is None:
                    low, high = found.get(cluster.name, (0, None))
                    found[cluster.name] = (
                        max(low, rule.min_replicas),
                        division.least(high, rule.max_replicas),
                    )
        return found

    if not strategy.replica_bounds:
        return {}
    return fleet.memo("bounds", (strategy,), compute)


def _bounds_lines(slots: Sequence[division.Slot]) -> list[str]:
    bounded = [
        f"{s.name}=[{s.low}, {'-' if s.high is None else s.high}]"
        for s in slots
        if s.low or s.high is not None
    ]
    return [f"bounds [min, max]: {decision_.names_text(bounded)}"] if bounded else []


def _static_weights(
    fleet: clusters_.Fleet, strategy: policy_.ReplicaSchedulingStrategy
) -> Mapping[str, int]:
    """Cluster -> the largest weight among the staticWeightList rules matching it."""
    rules = strategy.weight_preference.static_weight_list if strategy.weight_preference else []

    def compute() -> dict[str, int]:
        weights: dict[str, int] = {}
        for cluster in fleet:
            matched = [
                r.weight
                for r in rules
                if selection.affinity_mismatch(cluster, r.target_cluster) is None
            ]
            if matched:
                weights[cluster.name] = max(matched)
        return weights

    return fleet.memo("weights", (strategy,), compute)


def _weighted(
    fleet: clusters_.Fleet,
    strategy: policy_.ReplicaSchedulingStrategy,
    slots: list[division.Slot],
    lines: list[str],
) -> list[division.Slot]:
    """Slots carrying their static weight; unmatched clusters left out (all 1 if none match)."""
    weights = _static_weights(fleet, strategy)
    matched = [s for s in slots if s.name in weights]
    if not matched:
        lines.append("weights: no candidate matches a staticWeightList rule, so all weigh 1")
        return slots
    left_out = [s.name for s in slots if s.name not in weights]
    if left_out:
        names = decision_.names_text(left_out)
        lines.append(f"filtered ({WEIGHT}: no staticWeightList rule matches): {names}")
    chosen = [
        division.Slot(s.name, s.held, s.room, s.low, s.high, weights[s.name]) for s in matched
    ]
    shown = {s.name: s.weight for s in chosen}
    lines.append(
        f"weights (largest matching staticWeightList rule): {decision_.counts_text(shown)}"
    )
    return chosen
