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
resource (empty on first placement). It matters in three ways: a cluster with
an untolerated NoSchedule taint stays a candidate where replicas already run
(the dynamic modes give it no new ones); spread prefers groups that already
hold replicas; and the dynamic and Aggregated modes are sticky (see
:mod:`division`). Duplicated and static weights recompute from scratch and, as
in Karmada, ignore availableReplicas. Replicas on a cluster that is no longer
a candidate (not ready, excluded, evicted by a NoExecute taint, or missing
from ``clusters``) are placed again.

Two things besides the placement shape a division, as in Karmada: the
resource's UID, whose FNV-32a hash orders Webster's ties, and the policy's API
group. A ``policy.karmada.io`` policy gets Karmada's behaviour where ours goes
further: static weights ignore spread constraints, and a NoSchedule-tainted
cluster that holds replicas keeps its estimate (ours gives it no new ones).

Speed: everything that depends only on the fleet and the policy (screening,
slots, static weights, bounds, the first spread grouping) is memoised on the
:class:`~federation.placement.clusters.Fleet`, so placing many resources under
few policies costs little more than the division itself.

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


def room_matters(placement: policy_.Placement) -> bool:
    """Whether the clusters' availableReplicas can change a decision under ``placement``
    beyond whether a cluster has an estimate at all (the propagation fast path digests
    room only then): the dynamic modes divide by it, spread constraints and overflow tiers
    fill by it; Duplicated and static weights do not look at it (as in Karmada)."""
    return policy_.mode(placement) not in _ROOMLESS or bool(placement.spread_constraints) \
        or any(term.overflow_affinities for term in placement.cluster_affinities)


@dataclass(frozen=True)
class Planned:
    """One resource's outcome in a batch: the policy used (if any) and its decision."""

    resource: resources_.Resource
    policy: policy_.Policy | None
    decision: decision_.Decision


@dataclass(frozen=True)
class Peers:
    """What Karmada's WorkloadAffinity and WorkloadAntiAffinity filters see: the clusters
    of the other placed workloads of this one's groups (same namespace, same group value)."""

    affinity: tuple[frozenset[str], ...] = ()
    """Each placed affinity-group peer's clusters: a new cluster must be in all of them."""
    anti: frozenset[str] = frozenset()
    """Every cluster an anti-affinity-group peer uses: a new cluster must be in none."""


def affinity_groups(policy: policy_.Policy, resource: resources_.Resource
                    ) -> tuple[str | None, str | None]:
    """(affinity group, anti-affinity group) as Karmada names them, ``key=value`` of the
    workload's ``groupByLabelKey`` label; None when the policy has no such term or the
    workload has no such label (it then belongs to no group)."""
    terms = policy.spec.placement.workload_affinity
    found: list[str | None] = []
    for term in (terms.affinity, terms.anti_affinity) if terms else (None, None):
        value = resource.labels.get(term.group_by_label_key) if term is not None else None
        found.append(f"{term.group_by_label_key}={value}" if term and value is not None
                     else None)
    return found[0], found[1]


def _peer_filter(fleet: clusters_.Fleet, used: Iterable[str], peers: Peers | None
                 ) -> tuple[clusters_.Fleet, list[str]]:
    """The fleet without the clusters the workload-affinity filters refuse. As in Karmada,
    a cluster the workload already targets (``used``, 0 replicas included) always passes."""
    used = set(used)
    if peers is None or not (peers.affinity or peers.anti):
        return fleet, []
    refused: dict[str, list[str]] = {}
    for cluster in fleet:
        if cluster.name in used:
            continue
        if any(cluster.name not in placed for placed in peers.affinity):
            refused.setdefault("not used by every placed workload of its affinity group",
                               []).append(cluster.name)
        elif cluster.name in peers.anti:
            refused.setdefault("used by a workload of its anti-affinity group",
                               []).append(cluster.name)
    if not refused:
        return fleet, []
    gone = {name for names in refused.values() for name in names}
    lines = [f"filtered (workload affinity: {why}): {decision_.names_text(names)}"
             for why, names in refused.items()]
    return clusters_.Fleet(c for c in fleet if c.name not in gone), lines


def place(
    resource: resources_.Resource,
    policy: policy_.Policy,
    clusters: clusters_.Fleet | Sequence[clusters_.Cluster],
    previous: Mapping[str, int] | None = None,
    peers: Peers | None = None,
    fresh: bool = False,
) -> decision_.Decision:
    """Decide where ``resource``'s replicas go under ``policy`` (``peers``: what its
    workload-affinity groups' other members hold, see :class:`Peers`). ``fresh``: Karmada's
    Fresh assignment (a WorkloadRebalancer asked): the dynamic modes divide anew instead of
    keeping ``previous`` (:func:`~federation.placement.division.divide_fresh`)."""
    fleet = clusters_.as_fleet(clusters)
    held = {name: n for name, n in sorted((previous or {}).items()) if n > 0}
    fleet, peer_lines = _peer_filter(fleet, previous or {}, peers)
    outcome = _place_terms(resource, policy, fleet, held, fresh)
    if peer_lines:
        outcome = dataclasses.replace(outcome, explanation=(*peer_lines, *outcome.explanation))
    return outcome


def _place_terms(
    resource: resources_.Resource,
    policy: policy_.Policy,
    fleet: clusters_.Fleet,
    held: Mapping[str, int],
    fresh: bool = False,
) -> decision_.Decision:
    placement = policy.spec.placement
    terms = policy_.affinity_terms(placement)
    rules = _Rules(policy.api_version == policy_.KARMADA_GROUP_VERSION, resource.uid, fresh)
    tried: list[str] = []
    for index, (name, affinity) in enumerate(terms):
        term = placement.cluster_affinities[index] if name is not None else None
        if term is not None and term.overflow_affinities and resource.replicas > 0 and \
                policy_.overflow_allowed(placement.replica_scheduling):
            outcome = _place_overflow(resource, placement, fleet, held, term, rules)
        else:
            outcome = _place_term(resource, placement, fleet, held, affinity, rules)
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
    results: list[Planned] = []
    for resource in resources:
        found = matching.candidates(resource, policies)
        if not found:
            message = "no PropagationPolicy or ClusterPropagationPolicy matches this resource"
            outcome = decision_.Decision(resource.replicas, error=message, explanation=(message,))
            results.append(Planned(resource, None, outcome))
            continue
        peers = batch_peers(resource, found[0], results)
        outcome = place(resource, found[0], fleet, (previous or {}).get(resource.key), peers)
        line = matching.describe(found[0], found[1:])
        outcome = dataclasses.replace(outcome, explanation=(line, *outcome.explanation))
        results.append(Planned(resource, found[0], outcome))
    return results


def batch_peers(resource: resources_.Resource, policy: policy_.Policy,
                placed: Sequence[Planned]) -> Peers | None:
    """:class:`Peers` from the resources of a batch placed before this one (``fedctl plan``
    places its inputs in order, as Karmada's scheduler takes bindings one by one)."""
    group, anti = affinity_groups(policy, resource)
    if group is None and anti is None:
        return None
    affinity: list[frozenset[str]] = []
    used: set[str] = set()
    for other in placed:
        if other.policy is None or other.resource.namespace != resource.namespace or \
                other.resource.key == resource.key or not other.decision.ok:
            continue
        their_group, their_anti = affinity_groups(other.policy, other.resource)
        targets = frozenset(other.decision.clusters)
        if group is not None and their_group == group and targets:
            affinity.append(targets)
        if anti is not None and their_anti == anti:
            used |= targets
    return Peers(tuple(affinity), frozenset(used))


# -- overflow tiers (clusterAffinities[].overflowAffinities) ---------------------------------


def _place_overflow(
    resource: resources_.Resource,
    placement: policy_.Placement,
    fleet: clusters_.Fleet,
    held: Mapping[str, int],
    term: policy_.ClusterAffinityTerm,
    rules: _Rules,
) -> decision_.Decision:
    """Karmada v1.18's overflow: the term's clusters are tier 0, each overflow affinity the
    next tier (a cluster belongs to the first tier it matches). Tiers are filled in order,
    each taking what it has room for (a cluster without an estimate counts as room for all
    replicas, as in Karmada) and dividing it by the policy's mode; what is left spills into
    the next tier. Replicas left after the last tier make the placement fail."""
    tiers: list[tuple[str, policy_.ClusterAffinity]] = [(term.affinity_name, term)]
    tiers += [(o.affinity_name, o) for o in term.overflow_affinities or []]
    taken: set[str] = set()
    remaining = resource.replicas
    placed: dict[str, int] = {}
    lines: list[str] = []
    for number, (name, affinity) in enumerate(tiers):
        screened = _screened(fleet, placement, affinity)
        usable = [c for c in screened.screening.passed if c.name not in taken]
        usable += [c for c, _ in screened.screening.held_back
                   if c.name in held and c.name not in taken]
        taken |= {c.name for c in usable}
        label = f"overflow tier {number} {name!r}"
        room = sum(resource.replicas if c.available_replicas is None else c.available_replicas
                   for c in usable if c in screened.screening.passed)
        share = min(remaining, room)
        if share <= 0:
            lines.append(f"{label}: no room ({decision_.names_text([c.name for c in usable])})"
                         if usable else f"{label}: no feasible cluster")
            continue
        part = resources_.Resource(**{**resource.model_dump(), "replicas": share})
        only = policy_.ClusterAffinity(cluster_names=sorted(c.name for c in usable))
        outcome = _place_term(part, placement, fleet,
                              {n: r for n, r in held.items() if n in only.cluster_names}, only,
                              rules)
        lines += [f"{label}: {line}" for line in outcome.explanation]
        if not outcome.ok:
            return _failed(resource, lines, f"{label}: {outcome.error}")
        lines.append(f"{label} takes {share} of {remaining} replicas")
        placed.update(outcome.clusters)
        remaining -= share
        if remaining == 0:
            break
    if remaining > 0:
        return _failed(resource, lines, f"not enough room in the {len(tiers)} overflow tiers: "
                                        f"{remaining} replicas left", remaining)
    return decision_.Decision(resource.replicas, dict(sorted(placed.items())),
                              explanation=tuple(lines))


# -- one affinity term ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Rules:
    """What besides the placement shapes a division: the policy's group and the object's UID."""

    #: A ``policy.karmada.io`` policy: static weights ignore spread constraints, as in Karmada.
    karmada: bool
    #: The object's UID; its FNV-32a hash orders Webster's ties (:func:`division.names_descending`).
    uid: str
    #: Karmada's Fresh assignment: the dynamic modes set the previous division aside.
    fresh: bool = False

    @property
    def descending(self) -> bool:
        return division.names_descending(self.uid)


def spread_constraints(
    placement: policy_.Placement, karmada: bool
) -> list[policy_.SpreadConstraint]:
    """The spread constraints that apply: Karmada ignores them for static weights.

    Karmada's ``shouldIgnoreSpreadConstraint``: Divided, Weighted, and either no
    weightPreference or a staticWeightList without dynamicWeight. That is the rule
    for ``policy.karmada.io`` policies; ours apply spread in every mode (our extension,
    used only when a policy states spreadConstraints).
    """
    if not karmada or policy_.mode(placement) is not policy_.Mode.STATIC:
        return placement.spread_constraints
    strategy = placement.replica_scheduling
    weights = strategy.weight_preference if strategy else None
    if weights is None or weights.static_weight_list:
        return []
    return placement.spread_constraints


@dataclass(frozen=True)
class _Screened:
    """A memoised screening plus what explaining it needs."""

    screening: selection.Screening
    #: Filter lines when the workload holds no replicas on a held-back cluster.
    lines: tuple[str, ...]
    #: Rejected cluster -> why, for explaining moved replicas.
    reasons: Mapping[str, str]
    #: Held-back cluster -> its untolerated NoSchedule taint.
    held_back: Mapping[str, str]
    passed_names: frozenset[str]


def _screened(
    fleet: clusters_.Fleet, placement: policy_.Placement, affinity: policy_.ClusterAffinity | None
) -> _Screened:
    def compute() -> _Screened:
        screening = selection.screen(fleet, affinity, placement.cluster_tolerations)
        reasons = {c.name: _reason_text(r, d) for c, r, d in screening.rejected}
        held_back = {c.name: taint for c, taint in screening.held_back}
        rejected = [*screening.rejected, *((c, selection.TAINT, t) for c, t in screening.held_back)]
        lines = tuple(_rejection_lines(rejected))
        names = frozenset(c.name for c in screening.passed)
        return _Screened(screening, lines, reasons, held_back, names)

    return fleet.memo("screen", (placement, affinity), compute)


def _reason_text(reason: str, detail: str) -> str:
    return f"{reason}: {detail}" if detail else reason


def _rejection_lines(rejected: Iterable[tuple[clusters_.Cluster, str, str]]) -> list[str]:
    """``filtered (reason: detail): a, b`` lines, one per distinct reason and detail."""
    groups: dict[str, list[str]] = {}
    for cluster, reason, detail in rejected:
        groups.setdefault(_reason_text(reason, detail), []).append(cluster.name)
    return [f"filtered ({why}): {decision_.names_text(names)}" for why, names in groups.items()]


def _filter_lines(screened: _Screened, held: Mapping[str, int], karmada: bool) -> list[str]:
    """Why clusters were filtered, and which held replicas must move."""
    keeping = [name for name in held if name in screened.held_back]
    if keeping:
        rejected = [*screened.screening.rejected]
        rejected += [
            (c, selection.TAINT, t) for c, t in screened.screening.held_back if c.name not in held
        ]
        lines = _rejection_lines(rejected)
        rule = "stays a candidate" if karmada else "keeps its replicas but takes no new ones"
        lines += [f"{name} {rule} (taint {screened.held_back[name]})" for name in keeping]
    else:
        lines = list(screened.lines)
    return lines + [
        f"{name} held {n} replicas but is no longer a candidate "
        f"({screened.reasons.get(name, 'unknown cluster')}); they are placed again"
        for name, n in held.items()
        if name not in screened.passed_names and name not in keeping
    ]


@dataclass(frozen=True)
class _Prepared:
    """Candidates turned into division slots, with the explanation so far."""

    targets: tuple[str, ...]
    slots: tuple[division.Slot, ...]
    lines: tuple[str, ...]
    error: str | None = None


def _place_term(
    resource: resources_.Resource,
    placement: policy_.Placement,
    fleet: clusters_.Fleet,
    held: Mapping[str, int],
    affinity: policy_.ClusterAffinity | None,
    rules: _Rules,
) -> decision_.Decision:
    screened = _screened(fleet, placement, affinity)
    spread = spread_constraints(placement, rules.karmada)
    prepared = _prepare(fleet, placement, affinity, screened, held, spread, rules.karmada)
    lines = [*_filter_lines(screened, held, rules.karmada), *prepared.lines]
    if prepared.error is not None:
        return _failed(resource, lines, prepared.error)
    if resource.replicas == 0:
        lines.append("no replicas to divide: every candidate gets the resource with 0 replicas")
        return decision_.Decision(0, dict.fromkeys(prepared.targets, 0), explanation=tuple(lines))
    if spread is not placement.spread_constraints and placement.spread_constraints:
        lines.append("spreadConstraints are not considered with static weights (as in Karmada)")
    return _divide(resource, placement, list(prepared.slots), lines, rules)


def _prepare(
    fleet: clusters_.Fleet,
    placement: policy_.Placement,
    affinity: policy_.ClusterAffinity | None,
    screened: _Screened,
    held: Mapping[str, int],
    spread: Sequence[policy_.SpreadConstraint],
    karmada: bool,
) -> _Prepared:
    """Slots for the candidates: memoised when ``held`` cannot change them, else built."""
    reusable = not spread and not any(n in screened.held_back for n in held)
    if held and not reusable:
        return _build(fleet, placement, screened, held, spread, karmada)
    base = fleet.memo(
        "prepared",
        (placement, affinity, bool(spread)),
        lambda: _build(fleet, placement, screened, {}, spread, karmada),
    )
    if not held:
        return base
    slots = tuple(s._replace(held=held[s.name]) if s.name in held else s for s in base.slots)
    return dataclasses.replace(base, slots=slots)


def _build(
    fleet: clusters_.Fleet,
    placement: policy_.Placement,
    screened: _Screened,
    held: Mapping[str, int],
    spread: Sequence[policy_.SpreadConstraint],
    karmada: bool,
) -> _Prepared:
    keeping = [c for c, _ in screened.screening.held_back if c.name in held]
    candidates = sorted([*screened.screening.passed, *keeping], key=lambda c: c.name)
    room = {c.name: c.available_replicas for c in candidates}
    if not karmada:
        # Ours: a cluster kept only for its replicas takes no new ones. Karmada's
        # TaintToleration filter passes it outright, so it keeps its estimate there.
        room.update(dict.fromkeys((c.name for c in keeping), 0))
    lines: list[str] = []
    if spread and candidates:
        grouped = None if keeping else _first_grouping(fleet, placement, screened, room)
        chosen = selection.spread(candidates, list(spread), held, room, grouped)
        lines += _rejection_lines(chosen.rejected) + chosen.notes
        if chosen.error:
            return _Prepared((), (), tuple(lines), chosen.error)
        candidates = chosen.kept
    if not candidates:
        error = "no feasible cluster: every cluster was filtered out"
        return _Prepared((), (), tuple(lines), error)
    return _slots(fleet, placement, candidates, held, room, lines)


def _slots(
    fleet: clusters_.Fleet,
    placement: policy_.Placement,
    candidates: Sequence[clusters_.Cluster],
    held: Mapping[str, int],
    room: Mapping[str, int | None],
    lines: list[str],
) -> _Prepared:
    """Division slots for the final candidates: room, bounds and (static) weights."""
    names = tuple(c.name for c in candidates)
    lines.append(f"candidates: {decision_.names_text(names)}")
    mode = policy_.mode(placement)
    strategy = placement.replica_scheduling or policy_.ReplicaSchedulingStrategy()
    lines.append(f"mode: {mode.value}")
    if mode in _ROOMLESS and any(c.available_replicas is not None for c in candidates):
        lines.append("availableReplicas is not considered in this mode (as in Karmada)")
    bounds = _bounds(fleet, strategy)
    slots = [division.Slot(n, held.get(n, 0), room[n], *bounds.get(n, (0, None))) for n in names]
    lines += _bounds_lines(slots)
    if mode is policy_.Mode.STATIC:
        slots = _weighted(fleet, strategy, slots, lines)
    return _Prepared(names, tuple(slots), tuple(lines))


def _first_grouping(
    fleet: clusters_.Fleet,
    placement: policy_.Placement,
    screened: _Screened,
    room: Mapping[str, int | None],
) -> selection.Grouping | None:
    """The first spread grouping of the screened clusters, memoised (it ignores ``held``)."""
    key = selection.first_group_key(placement.spread_constraints)
    if key is None:
        return None
    passed = screened.screening.passed
    return fleet.memo("grouping", (placement, passed), lambda: selection.group(passed, key, room))


def _failed(
    resource: resources_.Resource, lines: list[str], error: str, unschedulable: int = 0
) -> decision_.Decision:
    return decision_.Decision(
        resource.replicas, unschedulable=unschedulable, explanation=tuple(lines), error=error
    )


def _divide(
    resource: resources_.Resource,
    placement: policy_.Placement,
    slots: list[division.Slot],
    lines: list[str],
    rules: _Rules,
) -> decision_.Decision:
    mode = policy_.mode(placement)
    strategy = placement.replica_scheduling or policy_.ReplicaSchedulingStrategy()
    try:
        result = _run(mode, resource.replicas, slots, strategy.allow_partial, rules)
    except division.DivisionError as error:
        return _failed(resource, lines, str(error), error.unschedulable)
    lines += result.notes
    return decision_.Decision(
        resource.replicas, result.replicas, pending=result.pending, explanation=tuple(lines)
    )


def _run(
    mode: policy_.Mode, total: int, slots: list[division.Slot], partial: bool, rules: _Rules
) -> division.Division:
    if mode is policy_.Mode.DUPLICATED:
        return division.duplicate(total, slots)
    if mode is policy_.Mode.STATIC:  # never sticky: Fresh changes nothing here (as Karmada)
        return division.divide_static(total, slots, partial, rules.descending)
    aggregated = mode is policy_.Mode.AGGREGATED
    divide = division.divide_fresh if rules.fresh else division.divide_dynamic
    return divide(total, slots, partial, aggregated, rules.descending)


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
    chosen = [s._replace(weight=weights[s.name]) for s in matched]
    shown = decision_.pairs_text([(s.name, s.weight) for s in chosen])
    lines.append(f"weights (largest matching staticWeightList rule): {shown}")
    return chosen
