"""Replica division: Webster seats with bounds, and the four scheduling modes.

Everything divided goes through one primitive, :func:`webster`: the
Webster/Sainte-Laguë divisor method, seat by seat. Each party (cluster) starts
at its floor (``minReplicas``, 0 by default); the next seat goes to the party
with the highest ``weight / (2 * seats + 1)`` among those below their cap; ties
go to the party with fewer seats, then to the name that sorts first, or last
when the object's UID hashes odd (:func:`names_descending`). Because
seats are handed out one at a time in order of decreasing priority, the result
for ``n + 1`` seats is the result for ``n`` plus one seat (house monotone), the
sum is exactly ``n``, and floors and caps hold whenever ``sum(floors) <= n <=
sum(caps)``; otherwise :func:`webster` refuses with :class:`Infeasible`.

Priorities are compared exactly. When ``max weight * (2n + 1) < 2**52`` two
different fractions always round to different floats, so floats are used;
beyond that, :class:`fractions.Fraction`.

Time depends on the number of parties, never on the numbers. When more than
two seats per party remain after the floors, a jump start hands out at once
every seat whose priority is above a threshold; those are the first seats the
seat-by-seat process would hand out, so the result is identical. The
threshold is exact arithmetic, not a search: a party's count of seats above
priority ``1 / (2x)`` is ``weight * x`` within half a seat (clamped to its
floor and cap), so solving that piecewise-linear sum for the remaining seats
minus half a seat per party (one sweep over the points where a party starts
or stops growing) leaves between 0 and one seat per party for the heap.
Weightless parties are served after every weighted one, level by level. This
is what lets a fleet state ``availableReplicas: 333333333`` next to unlimited
clusters, or a caller divide 2**63 replicas, without the controller's event
loop spinning. The ties an explanation lists are those of the seats handed out
one at a time: all of them when the jump start is not needed, else those of
the last seats, which include the tie (if any) that decided the last replica.

The modes are Karmada's (pkg/scheduler/core: assignment.go and
division_algorithm.go), replica for replica when no bound is set; bounds are
ours. tests/unit/placement/test_karmada_division.py checks them against a port
of that Go code.

- :func:`duplicate`: every cluster gets the total, clamped to its bounds.
- :func:`divide_static`: weights from the policy, recomputed from scratch.
- :func:`divide_dynamic`: weights = available replicas (``total`` for a
  cluster without an estimate, as Karmada's calAvailableReplicas); sticky.
  With ``aggregated`` it uses the fewest clusters that can hold the replicas
  in Karmada's order (:func:`_holders_first`).

A :class:`Slot` is a candidate cluster as the divider sees it: current
replicas (``held``), room for more (``room``; None is no estimate), bounds and
static weight. Its ``cap`` is ``min(maxReplicas, held + room)``.

Sticky division (dynamic and Aggregated; Karmada's Steady assignment).
``kept`` is each cluster's current replicas trimmed to its maxReplicas. If
``sum(kept) < total`` and the minReplicas deficits fit in the difference, only
the difference is divided (weights: room; floors: the deficits; caps: ``cap -
kept``) and added to
``kept``. If ``sum(kept) == total`` and every minReplicas holds, ``kept`` is the
answer. Otherwise (scale down, or bounds that force replicas to move) the
total is divided with ``kept`` as weights, floors at minReplicas and caps at
``max(kept, minReplicas)``: no cluster grows beyond what it held except to
reach its minimum.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

from federation.placement import decision as decision_
from federation.placement import gosort

_EXACT_FLOAT_LIMIT = 2**52
#: Threshold raises tried by the jump start before it leaves all seats to the heap.
_JUMP_ATTEMPTS = 40
#: Ties listed in an explanation; the rest are counted.
TIES_SHOWN = 5


class Infeasible(ValueError):
    """The floors, caps and total of an apportionment cannot all hold."""


class Party(NamedTuple):
    """A participant in :func:`webster` (a named tuple: thousands are made per second)."""

    name: str
    weight: int
    floor: int = 0
    cap: int | None = None


@dataclass(frozen=True, slots=True)
class Tie:
    """Seat ``seat`` had equal priority for ``winner`` and ``runner_up``."""

    seat: int
    winner: str
    runner_up: str
    rule: str


@dataclass(frozen=True)
class Apportionment:
    seats: dict[str, int]
    ties: tuple[Tie, ...] = ()
    tie_count: int = 0


def total_cap(caps: Iterable[int | None]) -> int | None:
    """Sum of caps; None (unlimited) if any cap is None."""
    total = 0
    for cap in caps:
        if cap is None:
            return None
        total += cap
    return total


def webster(total: int, parties: Sequence[Party], descending: bool = False) -> Apportionment:
    """Give ``total`` seats to ``parties`` by Webster's method within floors and caps.

    A tie goes to the party with fewer seats, then to the name that sorts first, or
    last with ``descending`` (see :func:`names_descending`).
    """
    _check_feasible(total, parties)
    seats = {p.name: p.floor for p in parties}
    remaining = total - sum(seats.values())
    if remaining > 2 * len(parties):
        remaining -= _jump_start(seats, parties, remaining)
    return _seat_by_seat(seats, parties, remaining, total, descending)


def fnv32a(data: bytes) -> int:
    """The 32-bit FNV-1a hash (Go's ``hash/fnv.New32a``)."""
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def names_descending(uid: str) -> bool:
    """Whether Webster ties between equal seats go to the name that sorts last.

    Karmada's ``tieBreakerByUID``: odd FNV-32a hash of the object's UID means
    descending; an empty UID means ascending. Hashing the UID spreads the
    advantage over objects instead of always favouring the first name.
    """
    return bool(uid) and fnv32a(uid.encode()) & 1 == 1


def _check_feasible(total: int, parties: Sequence[Party]) -> None:
    floors = sum(p.floor for p in parties)
    caps = total_cap(p.cap for p in parties)
    if any(p.cap is not None and p.floor > p.cap for p in parties):
        raise Infeasible("a floor is above its cap")
    if floors > total:
        raise Infeasible(f"floors add up to {floors}, more than {total}")
    if caps is not None and caps < total:
        raise Infeasible(f"caps add up to {caps}, less than {total}")


def _priority_key(total: int, parties: Sequence[Party]) -> Callable[[int, int], float | Fraction]:
    heaviest = max((p.weight for p in parties), default=0)
    if heaviest * (2 * total + 1) < _EXACT_FLOAT_LIMIT:
        return lambda weight, seats: -weight / (2 * seats + 1)
    return lambda weight, seats: -Fraction(weight, 2 * seats + 1)


def _seat_by_seat(
    seats: dict[str, int],
    parties: Sequence[Party],
    remaining: int,
    total: int,
    descending: bool = False,
) -> Apportionment:
    key = _priority_key(total, parties)
    ordered: Callable[[str], str | _Reversed] = _Reversed if descending else str
    heap = [
        (key(p.weight, seats[p.name]), seats[p.name], ordered(p.name), p.name, p.weight, p.cap)
        for p in parties
        if p.cap is None or seats[p.name] < p.cap
    ]
    heapq.heapify(heap)
    ties: list[Tie] = []
    tie_count = 0
    name_rule = "name, last first by UID" if descending else "name"
    for seat in range(total - remaining + 1, total + 1):
        priority, held, rank, name, weight, cap = heapq.heappop(heap)
        if heap and heap[0][0] == priority:
            tie_count += 1
            if len(ties) < TIES_SHOWN:
                rule = "fewer replicas" if heap[0][1] != held else name_rule
                ties.append(Tie(seat, name, heap[0][3], rule))
        seats[name] = held + 1
        if cap is None or held + 1 < cap:
            heapq.heappush(heap, (key(weight, held + 1), held + 1, rank, name, weight, cap))
    return Apportionment(seats, tuple(ties), tie_count)


class _Reversed:
    """A name that sorts in reverse (ties to the last name): compared only on full ties."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __lt__(self, other: _Reversed) -> bool:
        return self.name > other.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and self.name == other.name

    __hash__ = None  # type: ignore[assignment]


def _jump_start(seats: dict[str, int], parties: Sequence[Party], remaining: int) -> int:
    """Hand out at once seats the seat-by-seat process would hand out first; returns how many.

    Parties with a weight are served, by priority, before any weightless one. If
    they can take fewer than ``remaining`` seats they all fill up and the rest is
    levelled over the weightless parties (:func:`_level_up`). Otherwise every seat
    whose priority lies above a threshold is handed out: the threshold comes from
    solving the continuous version of the count exactly (:func:`_solve`), which
    is within half a seat per party of the real count, aimed so that between 0
    and ``len(parties)`` seats are left for the heap. Arithmetic on the number
    of parties only: the replicas and capacities may be any size. Negative
    weights (which no mode makes) would break the premise that a party's
    priorities decrease, so they are refused here.
    """
    if any(p.weight < 0 for p in parties):
        raise ValueError(f"a weight is negative: {[p.weight for p in parties]}")
    weighted = [p for p in parties if p.weight > 0]
    room = total_cap(None if p.cap is None else p.cap - seats[p.name] for p in weighted)
    if room is not None and room <= remaining:
        seats.update({p.name: p.cap for p in weighted if p.cap is not None})  # all have one
        weightless = [p for p in parties if p.weight == 0]
        return room + _level_up(seats, weightless, remaining - room)
    target = remaining - (len(weighted) + 1) // 2
    x = _solve(weighted, seats, target)
    top, bottom = x.denominator, 2 * x.numerator  # priority threshold 1 / (2x)
    grown = {p.name: _seats_above(p, seats[p.name], top, bottom) for p in weighted}
    given = sum(grown.values()) - sum(seats[name] for name in grown)
    seats.update(grown)
    return given


def _solve(weighted: Sequence[Party], seats: Mapping[str, int], target: int) -> Fraction:
    """The x > 0 at which ``sum(clamp(weight * x - floor, 0, cap - floor))`` reaches ``target``.

    A party's real seat count above priority ``1 / (2x)`` is within half a seat of
    its term. The sum is piecewise linear: a party's slope starts at
    ``floor / weight`` and stops at ``cap / weight``; one sweep over those points
    finds the segment where it crosses ``target`` (it does: the caller checked
    that the parties can take more than ``target`` seats).
    """
    changes: list[tuple[Fraction, int]] = []
    for p in weighted:
        changes.append((Fraction(seats[p.name], p.weight), p.weight))
        if p.cap is not None:
            changes.append((Fraction(p.cap, p.weight), -p.weight))
    changes.sort(key=lambda change: change[0])
    x, value, slope = Fraction(0), Fraction(0), 0
    for at, change in changes:
        reached = value + slope * (at - x)
        if slope and reached >= target:
            break
        x, value, slope = at, reached, slope + change
    return x + (target - value) / slope


def _level_up(seats: dict[str, int], weightless: Sequence[Party], extra: int) -> int:
    """Raise weightless parties to a common level; returns the seats handed out.

    Among weightless parties the seat-by-seat process serves the fewest seats
    first, so every seat below a level ``L`` comes before any seat at ``L``.
    The seats below level ``L`` are ``sum(clamp(L - floor, 0, cap - floor))``:
    :func:`_solve` with unit weights, aimed at ``extra - 1`` and rounded down,
    gives a level that leaves between 1 and one-per-party seats for the heap
    (so the heap hands out the last seat and reports its tie).
    """
    if not extra or not weightless:
        return 0
    x = _solve([p._replace(weight=1) for p in weightless], seats, extra - 1)
    level = x.numerator // x.denominator
    given = 0
    for p in weightless:
        raised = max(seats[p.name], level if p.cap is None else min(level, p.cap))
        given += raised - seats[p.name]
        seats[p.name] = raised
    return given


def _seats_above(party: Party, held: int, top: int, bottom: int) -> int:
    """Seats of ``party`` whose priority is strictly above ``top / bottom``, within bounds."""
    odd_max = (party.weight * bottom - 1) // top  # largest m with m * top < weight * bottom
    count = (odd_max + 1) // 2 if odd_max >= 1 else 0
    if party.cap is not None:
        count = min(count, party.cap)
    return max(held, count)


def ties_text(apportionment: Apportionment) -> list[str]:
    """Explanation lines for the ties an apportionment broke."""
    lines = [
        f"tie for replica {t.seat}: {t.winner} over {t.runner_up} ({t.rule})"
        for t in apportionment.ties
    ]
    if apportionment.tie_count > len(apportionment.ties):
        lines.append(f"... and {apportionment.tie_count - len(apportionment.ties)} more ties")
    return lines


# -- the modes ----------------------------------------------------------------------------


class Slot(NamedTuple):
    """A candidate cluster as the divider sees it."""

    name: str
    held: int = 0
    room: int | None = None
    low: int = 0
    high: int | None = None
    weight: int = 1

    @property
    def cap(self) -> int | None:
        """Most replicas this cluster may hold: min(maxReplicas, held + room)."""
        capacity = None if self.room is None else self.held + self.room
        return least(capacity, self.high)


class DivisionError(Exception):
    """Nothing may be applied; ``unschedulable`` is the shortfall when room ran out."""

    def __init__(self, message: str, unschedulable: int = 0) -> None:
        super().__init__(message)
        self.unschedulable = unschedulable


@dataclass
class Division:
    replicas: dict[str, int]
    pending: int = 0
    notes: list[str] = field(default_factory=list)


def least(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


def check_bounds(total: int, slots: Sequence[Slot], room: bool = True) -> None:
    """Raise :class:`DivisionError` when the minReplicas bounds cannot hold.

    ``room=False`` for the modes that do not consider availableReplicas.
    """
    lows = {}
    for s in slots:
        if not s.low:
            continue
        if s.high is not None and s.low > s.high:
            raise DivisionError(
                f"bounds: {s.name} has minReplicas {s.low} above maxReplicas {s.high}"
            )
        if room and s.cap is not None and s.low > s.cap:
            raise DivisionError(
                f"bounds: {s.name} needs minReplicas {s.low} but has room for {s.cap}"
            )
        lows[s.name] = s.low
    if sum(lows.values()) > total:
        raise DivisionError(
            f"bounds: minReplicas add up to {sum(lows.values())} "
            f"({decision_.counts_text(lows)}) but there are only {total} replicas"
        )


def _fit(
    wanted: int, capacity: int | None, partial: bool, what: str, limit: str
) -> tuple[int, int]:
    """(replicas to place, pending) for ``wanted`` replicas against ``capacity``."""
    if capacity is None or wanted <= capacity:
        return wanted, 0
    shortfall = wanted - capacity
    if not partial:
        raise DivisionError(
            f"unschedulable: {wanted} {what} to place but the candidate clusters can take "
            f"{capacity} ({limit}); shortfall {shortfall}",
            unschedulable=shortfall,
        )
    return capacity, shortfall


def duplicate(total: int, slots: Sequence[Slot]) -> Division:
    """Every cluster gets ``total``, clamped to its bounds (room is not considered)."""
    result = Division(replicas={})
    for s in slots:
        wanted = max(s.low, total if s.high is None else min(total, s.high))
        if wanted != total:
            result.notes.append(f"bounds: {s.name} gets {wanted} instead of {total}")
        result.replicas[s.name] = wanted
    return result


def divide_static(
    total: int, slots: Sequence[Slot], partial: bool, descending: bool = False
) -> Division:
    """Static weights, Webster, from scratch, within bounds (room is not considered)."""
    check_bounds(total, slots, room=False)
    highs = total_cap(s.high for s in slots)
    placing, pending = _fit(total, highs, partial, "replicas", "maxReplicas bounds")
    share = webster(placing, [Party(s.name, s.weight, s.low, s.high) for s in slots], descending)
    seats = _nonzero(share.seats)
    notes = [f"divided {placing} replicas by Webster: {decision_.counts_text(seats)}"]
    if pending:
        notes.append(f"partial: {pending} replicas wait for room")
    return Division(seats, pending, notes + ties_text(share))


def divide_dynamic(
    total: int, slots: Sequence[Slot], partial: bool, aggregated: bool, descending: bool = False
) -> Division:
    """Dynamic weights (available replicas) or Aggregated; sticky against ``held``."""
    check_bounds(total, slots)
    kept = {s.name: s.held if s.high is None else min(s.held, s.high) for s in slots if s.held}
    notes = [
        f"bounds: {s.name} trimmed from {s.held} to maxReplicas {s.high}"
        for s in slots
        if s.held and s.high is not None and s.held > s.high
    ]
    assigned = sum(kept.values())
    deficit = sum(s.low - kept.get(s.name, 0) for s in slots if s.low > kept.get(s.name, 0))
    if assigned < total and deficit <= total - assigned:
        return _scale_up(total, slots, kept, partial, aggregated, descending, notes)
    if assigned == total and deficit == 0:
        notes.append(f"kept the current placement ({assigned} replicas; nothing to change)")
        return Division(_nonzero(kept), notes=notes)
    return _shrink(total, slots, kept, aggregated, descending, notes)


def divide_fresh(
    total: int, slots: Sequence[Slot], partial: bool, aggregated: bool, descending: bool = False
) -> Division:
    """Karmada's Fresh assignment (``dynamicFreshScale``): the previous division is set
    aside and ``total`` is divided as a first placement, each cluster's room being what it
    could take now plus what it holds (``total`` plus held without an estimate). Asked for
    by a WorkloadRebalancer; the sticky rules of :func:`divide_dynamic` do not apply."""
    check_bounds(total, slots)
    held = {s.name: s.held for s in slots if s.held}
    notes = [f"fresh division: the previous placement ({sum(held.values())} replicas) is "
             "not kept; room counts what each cluster holds"]
    parties = [_fresh_party(s, total) for s in slots]
    caps = total_cap(p.cap for p in parties)
    placing, pending = _fit(total, caps, partial, "replicas", "availableReplicas and bounds")
    if aggregated:
        # Karmada's candidates come holders first (ClusterLocality), then by room and
        # name; dynamicFreshScale sorts them by room alone, a stable sort up to 12.
        keys = [(-p.weight, 0, 0 if p.name in held else 1, p.name) for p in parties]
        go_order = (lambda: _go_order_fresh(parties, held)) if held else None
        parties = _fewest(parties, placing, keys, go_order)
        notes.append(f"aggregated onto {decision_.names_text([p.name for p in parties])}")
    notes += _capacity_notes([p.name for p in parties if p.cap == 0], {})
    weights = decision_.pairs_text([(p.name, p.weight) for p in parties])
    notes.append(f"weights = available replicas plus replicas held: {weights}")
    return _add({}, webster(placing, parties, descending), pending, notes)


def _fresh_party(s: Slot, total: int) -> Party:
    """Room plus held as weight and cap (Karmada's AllocatableReplicas + assigned)."""
    room = (total if s.room is None else s.room) + s.held
    cap = least(room, s.high)
    return Party(s.name, room, s.low, cap)


def _go_order_fresh(parties: list[Party], held: Mapping[str, int]) -> list[Party]:
    """Karmada's Aggregated order in a fresh division, equal rooms in Go's sort order: the
    candidates by score (holders first), room and name, then sort.Sort by room."""
    order = sorted(parties, key=lambda p: (p.name not in held, -p.weight, p.name))
    gosort.sort(order, lambda a, b: a.weight > b.weight)
    return order


def _scale_up(
    total: int,
    slots: Sequence[Slot],
    kept: dict[str, int],
    partial: bool,
    aggregated: bool,
    descending: bool,
    notes: list[str],
) -> Division:
    assigned = sum(kept.values())
    delta = total - assigned
    if assigned:
        notes.append(f"scaling up: {assigned} replicas stay where they are, {delta} to add")
    parties = _growth_parties(slots, kept, total)
    what = "more replicas" if assigned else "replicas"
    caps = total_cap(p.cap for p in parties)
    placing, pending = _fit(delta, caps, partial, what, "availableReplicas and bounds")
    if aggregated:
        keys = [_holders_first(p, kept) for p in parties]
        # Without holders Karmada's input to Go's sort is already in order (room, then
        # name), which Go's sort leaves as it is: the keys alone are Karmada's order.
        go_order = (lambda: _go_order_growing(parties, kept)) if kept else None
        parties = _fewest(parties, placing, keys, go_order)
        notes.append(f"aggregated onto {decision_.names_text([p.name for p in parties])}")
    notes += _capacity_notes([p.name for p in parties if p.cap == 0], kept)
    weights = decision_.pairs_text([(p.name, p.weight) for p in parties])
    unsized = " (no estimate counts as spec.replicas)" if any(s.room is None for s in slots) else ""
    notes.append(f"weights = available replicas{unsized}: {weights}")
    return _add(kept, webster(placing, parties, descending), pending, notes)


def _growth_parties(slots: Sequence[Slot], kept: dict[str, int], total: int) -> list[Party]:
    """Parties for the replicas to add: room as weight, bounds shifted.

    A cluster without an estimate weighs ``total`` (spec.replicas), Karmada's rule
    (calAvailableReplicas turns an unanswered MaxInt32 into spec.replicas). It stays
    uncapped: Webster never gives a party more seats than its weight while the
    weights add up to at least the seats, so the cap would change nothing.
    """
    return [
        Party(s.name, total if s.room is None else s.room, 0, s.room)
        if not s.low and s.high is None
        else _growth(s, kept.get(s.name, 0), total)
        for s in slots
    ]


def _add(kept: dict[str, int], share: Apportionment, pending: int, notes: list[str]) -> Division:
    """``kept`` plus the newly divided replicas."""
    added = _nonzero(share.seats)
    placed = sum(added.values())
    notes.append(f"divided {placed} replicas by Webster: {decision_.counts_text(added)}")
    merged = dict(kept)
    for name, n in added.items():
        merged[name] = merged.get(name, 0) + n
    if pending:
        notes.append(f"partial: {pending} replicas wait for room")
    return Division(_nonzero(merged), pending, notes + ties_text(share))


def _capacity_notes(full: list[str], kept: dict[str, int]) -> list[str]:
    """Explain clusters that can take no more replicas (availableReplicas or maxReplicas)."""
    empty = [name for name in full if name not in kept]
    busy = [name for name in full if name in kept]
    notes = []
    if empty:
        notes.append(f"filtered (capacity: no room for replicas): {decision_.names_text(empty)}")
    if busy:
        names = decision_.names_text(busy)
        notes.append(f"no room for more replicas (capacity), current ones stay: {names}")
    return notes


def _growth(s: Slot, kept: int, total: int) -> Party:
    """The party for a bounded cluster's share of new replicas: room as weight, bounds shifted."""
    cap = s.cap
    weight = total if s.room is None else s.room
    return Party(s.name, weight, max(0, s.low - kept), None if cap is None else max(0, cap - kept))


def _holders_first(p: Party, kept: dict[str, int]) -> tuple[int, int, int, str]:
    """Aggregated order, Karmada's: holders first, then most room, most held, name.

    ``p.weight`` is the room (spec.replicas without an estimate). Karmada sorts the
    candidates by score (holders 100), then room plus held, then name; sorts that by
    room (a stable insertion sort up to 12 clusters); then moves holders to the front.
    """
    return (0 if p.name in kept else 1, -p.weight, -kept.get(p.name, 0), p.name)


def _shrink(
    total: int,
    slots: Sequence[Slot],
    kept: dict[str, int],
    aggregated: bool,
    descending: bool,
    notes: list[str],
) -> Division:
    notes.append(f"scaling from {sum(kept.values())} to {total}: current replicas are the weights")
    parties = [
        Party(s.name, kept.get(s.name, 0), s.low, max(kept.get(s.name, 0), s.low))
        for s in slots
        if s.name in kept or s.low
    ]
    if aggregated:
        keys = [(-p.weight, 0, 0, p.name) for p in parties]
        parties = _fewest(parties, total, keys, lambda: _go_order_shrinking(parties))
        notes.append(f"aggregated onto {decision_.names_text([p.name for p in parties])}")
    share = webster(total, parties, descending)
    seats = _nonzero(share.seats)
    notes.append(f"divided {total} replicas by Webster: {decision_.counts_text(seats)}")
    return Division(seats, notes=notes + ties_text(share))


def _fewest(
    parties: list[Party],
    need: int,
    keys: list[tuple[int, int, int, str]],
    go_order: Callable[[], list[Party]] | None,
) -> list[Party]:
    """Parties with a floor, then the first by ``keys`` until their caps hold ``need``.

    ``keys[i]`` orders ``parties[i]``; a heap yields them lazily since only the
    first few are usually needed out of possibly thousands. ``key[:2]`` is what
    Karmada sorts by; the rest is the order a stable sort keeps among equals,
    which Go's sort is for up to 12 clusters. Beyond that, when the cut falls
    among parties equal in ``key[:2]``, the choice is redone in Go's order
    (``go_order``, which runs Go's sort; None when the keys are known to give
    Go's order already).
    """
    floored = [p for p in parties if p.floor > 0]
    queue = [(key, i) for i, (key, p) in enumerate(zip(keys, parties, strict=True)) if not p.floor]
    heapq.heapify(queue)
    chosen, room = list(floored), total_cap(c.cap for c in floored)
    last: tuple[int, int, int, str] | None = None
    while queue and room is not None and room < need:
        last, index = heapq.heappop(queue)
        chosen.append(parties[index])
        cap = parties[index].cap
        room = None if cap is None else room + cap
    tied = last is not None and any(key[:2] == last[:2] for key, _ in queue)
    if tied and go_order is not None and len(parties) > gosort.MAX_INSERTION:
        chosen = _first_holding(floored, [p for p in go_order() if not p.floor], need)
    return sorted(chosen, key=lambda p: p.name)


def _first_holding(chosen: list[Party], ordered: list[Party], need: int) -> list[Party]:
    """``chosen`` plus the first of ``ordered`` until their caps hold ``need``."""
    chosen, room = list(chosen), total_cap(c.cap for c in chosen)
    for party in ordered:
        if room is None or room >= need:
            break
        chosen.append(party)
        room = None if party.cap is None else room + party.cap
    return chosen


def _go_order_growing(parties: list[Party], kept: Mapping[str, int]) -> list[Party]:
    """Karmada's Aggregated order when adding replicas, equal rooms in Go's sort order.

    Karmada's candidates come sorted by score (ClusterLocality: 100 for clusters in
    the previous result), room plus replicas held, then name; dynamicScaleUp sorts
    them by room with sort.Sort; resortAvailableClusters moves holders to the front.
    """
    order = sorted(
        parties, key=lambda p: (p.name not in kept, -(p.weight + kept.get(p.name, 0)), p.name)
    )
    gosort.sort(order, lambda a, b: a.weight > b.weight)
    return [p for p in order if p.name in kept] + [p for p in order if p.name not in kept]


def _go_order_shrinking(parties: list[Party]) -> list[Party]:
    """Karmada's Aggregated order when scaling down: the previous result (in name order,
    as Karmada writes a Webster result) sorted by replicas held with sort.Sort."""
    order = sorted(parties, key=lambda p: p.name)
    gosort.sort(order, lambda a, b: a.weight > b.weight)
    return order


def _nonzero(seats: dict[str, int]) -> dict[str, int]:
    """The clusters with replicas, in name order."""
    return dict(sorted((name, n) for name, n in seats.items() if n))
