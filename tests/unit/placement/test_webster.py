"""The Webster primitive: examples, ties, bounds, exactness, and its properties."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.placement import division
from federation.placement.division import Party, webster


def reference(total: int, parties: list[Party]) -> dict[str, int]:
    """Seat-by-seat Webster with exact fractions and the documented tie rule, no shortcuts."""
    return reference_with_ties(total, parties)[0]


def reference_with_ties(
    total: int, parties: list[Party]
) -> tuple[dict[str, int], list[division.Tie]]:
    """:func:`reference`, also listing every tie: seat, winner, runner-up (next in order), rule."""
    seats = {p.name: p.floor for p in parties}
    ties = []
    for seat in range(sum(seats.values()) + 1, total + 1):
        ranked = sorted(
            (-Fraction(p.weight, 2 * seats[p.name] + 1), seats[p.name], p.name)
            for p in parties
            if p.cap is None or seats[p.name] < p.cap
        )
        (priority, held, name), rest = ranked[0], ranked[1:]
        if rest and rest[0][0] == priority:
            rule = "fewer replicas" if rest[0][1] != held else "name"
            ties.append(division.Tie(seat, name, rest[0][2], rule))
        seats[name] += 1
    return seats, ties


def weights(*values: int) -> list[Party]:
    return [Party(f"c{i}", w) for i, w in enumerate(values)]


def test_issue_example_3_2_1() -> None:
    """14 seats at weights 3:2:1 give 7:5:2."""
    assert webster(14, weights(3, 2, 1)).seats == {"c0": 7, "c1": 5, "c2": 2}


def test_issue_example_170_110_60() -> None:
    """5 seats at weights 170:110:60 give 2:2:1 (not Karmada's old 3:2:0)."""
    assert webster(5, weights(170, 110, 60)).seats == {"c0": 2, "c1": 2, "c2": 1}


def test_sainte_lague_textbook_example() -> None:
    """The Wikipedia example: 8 seats for 100k/80k/30k/20k votes gives 3:3:1:1."""
    result = webster(8, weights(100_000, 80_000, 30_000, 20_000)).seats
    assert list(result.values()) == [3, 3, 1, 1]


def test_tie_goes_to_fewer_replicas() -> None:
    """At equal priority the party holding fewer seats wins (3/3 vs 1/1)."""
    parties = [Party("a", 3, floor=1), Party("b", 1)]
    result = webster(2, parties)
    assert result.seats == {"a": 1, "b": 1}
    assert result.ties[0].winner == "b"
    assert result.ties[0].rule == "fewer replicas"


def test_tie_goes_to_name_that_sorts_first() -> None:
    """At equal priority and seats the name that sorts first wins."""
    result = webster(1, [Party("b", 1), Party("a", 1)])
    assert result.seats == {"a": 1, "b": 0}
    assert (result.ties[0].winner, result.ties[0].runner_up, result.ties[0].rule) == (
        "a",
        "b",
        "name",
    )


def test_ties_are_counted_beyond_those_listed() -> None:
    """Many ties are counted; only the first few are listed."""
    result = webster(20, [Party(f"c{i:02}", 1) for i in range(40)])
    assert result.tie_count == 20
    assert len(result.ties) == division.TIES_SHOWN
    assert division.ties_text(result)[-1] == f"... and {20 - division.TIES_SHOWN} more ties"


def test_floors_are_given_first() -> None:
    """A floor is honoured even for a party of weight 0."""
    result = webster(4, [Party("a", 10), Party("b", 0, floor=2)])
    assert result.seats == {"a": 2, "b": 2}


def test_caps_are_never_exceeded() -> None:
    """A capped party stops at its cap and the rest goes elsewhere."""
    assert webster(10, [Party("a", 100, cap=3), Party("b", 1)]).seats == {"a": 3, "b": 7}


@pytest.mark.parametrize(
    ("total", "parties", "message"),
    [
        (3, [Party("a", 1, floor=2), Party("b", 1, floor=2)], "floors add up to 4"),
        (5, [Party("a", 1, cap=2), Party("b", 1, cap=2)], "caps add up to 4"),
        (5, [Party("a", 1, floor=3, cap=2)], "floor is above its cap"),
    ],
)
def test_infeasible_bounds_are_refused(total: int, parties: list[Party], message: str) -> None:
    """Floors above the total, caps below it, or a floor above its cap raise Infeasible."""
    with pytest.raises(division.Infeasible, match=message):
        webster(total, parties)


def test_huge_weights_use_exact_fractions() -> None:
    """Weights beyond float exactness are still compared exactly (Fraction path)."""
    big = 2**60
    parties = [Party("a", 3 * big), Party("b", 3 * big + 1), Party("c", big)]
    assert webster(7, parties).seats == reference(7, parties)


def test_jump_start_matches_seat_by_seat() -> None:
    """Many seats over few parties (jump start) give the seat-by-seat result."""
    parties = [Party("a", 7, floor=3), Party("b", 13, cap=900), Party("c", 29), Party("d", 1)]
    assert webster(5000, parties).seats == reference(5000, parties)


def test_zero_seats() -> None:
    """Zero seats leave every party at its floor."""
    assert webster(0, weights(1, 2)).seats == {"c0": 0, "c1": 0}


def test_total_cap_is_none_when_any_cap_is_unlimited() -> None:
    """One unlimited cap makes the sum unlimited."""
    assert division.total_cap([1, None, 2]) is None
    assert division.total_cap([1, 2]) == 3


# -- properties ------------------------------------------------------------------------------

parties_strategy = st.lists(
    st.tuples(st.integers(0, 50), st.integers(0, 3), st.none() | st.integers(0, 12)),
    min_size=1,
    max_size=6,
).map(
    lambda specs: [
        Party(f"c{i}", w, floor, None if cap is None else max(cap, floor))
        for i, (w, floor, cap) in enumerate(specs)
    ]
)


def feasible_total(parties: list[Party], data: st.DataObject) -> int:
    low = sum(p.floor for p in parties)
    high = division.total_cap(p.cap for p in parties)
    return data.draw(st.integers(low, low + 40 if high is None else high))


@settings(max_examples=150, deadline=None)
@given(parties=parties_strategy, data=st.data())
def test_seats_are_conserved_and_bounds_honoured(parties: list[Party], data: st.DataObject) -> None:
    """Any feasible total is handed out exactly, every floor and cap holding."""
    total = feasible_total(parties, data)
    seats = webster(total, parties).seats
    assert sum(seats.values()) == total
    for p in parties:
        assert seats[p.name] >= p.floor
        assert p.cap is None or seats[p.name] <= p.cap


@settings(max_examples=150, deadline=None)
@given(parties=parties_strategy, data=st.data())
def test_matches_the_reference_method(parties: list[Party], data: st.DataObject) -> None:
    """The fast implementation equals plain seat-by-seat Webster with exact fractions."""
    total = feasible_total(parties, data)
    assert webster(total, parties).seats == reference(total, parties)


@settings(max_examples=150, deadline=None)
@given(parties=parties_strategy, data=st.data())
def test_house_monotone(parties: list[Party], data: st.DataObject) -> None:
    """One more seat never lowers any party (Alabama paradox impossible)."""
    total = feasible_total(parties, data)
    if division.total_cap(p.cap for p in parties) == total:
        total -= 1
    if total < sum(p.floor for p in parties):
        return
    before, after = webster(total, parties).seats, webster(total + 1, parties).seats
    assert all(after[name] >= before[name] for name in before)
    assert sum(after.values()) == sum(before.values()) + 1


@settings(max_examples=100, deadline=None)
@given(parties=parties_strategy, data=st.data())
def test_deterministic_whatever_the_input_order(parties: list[Party], data: st.DataObject) -> None:
    """The result depends on the parties, not on the order they are listed in."""
    total = feasible_total(parties, data)
    shuffled = data.draw(st.permutations(parties))
    assert webster(total, parties).seats == webster(total, shuffled).seats


@settings(max_examples=40, deadline=None)
@given(
    weights_=st.lists(st.integers(1, 1000), min_size=1, max_size=5),
    total=st.integers(0, 3000),
)
def test_jump_start_is_exact_for_large_totals(weights_: list[int], total: int) -> None:
    """Large totals (where the jump start kicks in) equal the reference."""
    parties = [Party(f"c{i}", w) for i, w in enumerate(weights_)]
    assert webster(total, parties).seats == reference(total, parties)


# -- large totals: exact, and in time polynomial in the number of parties ---------------------

bounded_parties = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 20), st.none() | st.integers(0, 300)),
    min_size=1,
    max_size=5,
).map(
    lambda specs: [
        Party(f"c{i}", w, floor, None if cap is None else floor + cap)
        for i, (w, floor, cap) in enumerate(specs)
    ]
)


@settings(max_examples=200, deadline=None)
@given(parties=bounded_parties, data=st.data())
def test_jump_start_with_caps_and_weightless_parties(
    parties: list[Party], data: st.DataObject
) -> None:
    """Totals far above two seats per party, binding caps, zero weights: the reference result.

    The ties listed are ties the seat-by-seat process breaks at those seats; when it
    breaks one for the last seat, that one is listed (it decided who got a replica).
    """
    low = sum(p.floor for p in parties)
    high = division.total_cap(p.cap for p in parties)
    total = data.draw(st.integers(low, low + 1500 if high is None else high))
    result = webster(total, parties)
    seats, ties = reference_with_ties(total, parties)
    assert result.seats == seats
    assert set(result.ties) <= set(ties)
    assert result.tie_count <= len(ties)
    if ties and ties[-1].seat == total and result.tie_count <= division.TIES_SHOWN:
        assert ties[-1] in result.ties
    if total - low <= 2 * len(parties):  # no jump start: every tie, as before
        assert list(result.ties) == ties[: division.TIES_SHOWN]
        assert result.tie_count == len(ties)


def optimal(total: int, parties: list[Party], seats: dict[str, int]) -> bool:
    """Webster's divisor condition: no seat could move to a party with a higher priority.

    Every seat above a floor has a priority at least that of every next seat a party
    below its cap would get; that, with the sum and the bounds, characterises the
    result without handing seats out one at a time.
    """
    given = [Fraction(p.weight, 2 * seats[p.name] - 1) for p in parties if seats[p.name] > p.floor]
    wanted = [
        Fraction(p.weight, 2 * seats[p.name] + 1)
        for p in parties
        if p.cap is None or seats[p.name] < p.cap
    ]
    in_bounds = all(
        p.floor <= seats[p.name] and (p.cap is None or seats[p.name] <= p.cap) for p in parties
    )
    fair = not given or not wanted or min(given) >= max(wanted)
    return sum(seats.values()) == total and in_bounds and fair


@settings(max_examples=30, deadline=None)
@given(
    size=st.integers(1, 1000),
    seed=st.randoms(use_true_random=False),
)
def test_int32_replicas_over_up_to_1000_parties(size: int, seed: Any) -> None:
    """2147483647 seats over 1-1000 parties of any weight, floor and cap (None: unlimited)."""
    parties = [
        Party(
            f"c{i:04}",
            seed.choice([0, 1, seed.randint(1, 1000), seed.randint(1, 2**31 - 1)]),
            seed.choice([0, 0, seed.randint(0, 10**6)]),
            seed.choice([None, None, 0, seed.randint(0, 2**31 - 1)]),
        )
        for i in range(size)
    ]
    parties = [p._replace(cap=None if p.cap is None else max(p.cap, p.floor)) for p in parties]
    if division.total_cap(p.cap for p in parties) is not None:
        parties.append(Party("zz", 1))
    total = 2**31 - 1 + sum(p.floor for p in parties)
    result = webster(total, parties)
    assert optimal(total, parties, result.seats)


@pytest.mark.parametrize("total", [10**8, 5 * 10**8, 10**9, 2**31 - 1, 2**63, 2**200])
@pytest.mark.parametrize(
    "caps", [[333333333, None, None], [None, None], [1, 2, None], [2**62, 2**62, 2**62, None]]
)
def test_huge_totals_divide_at_once(total: int, caps: list[int | None]) -> None:
    """The dynamic-weight case that spun forever, and 2**63 or more seats: exact at once."""
    parties = [Party(f"c{i}", total if c is None else c, 0, c) for i, c in enumerate(caps)]
    result = webster(total, parties)
    assert optimal(total, parties, result.seats)


def test_the_case_that_spun_forever() -> None:
    """10**9 replicas, room 333333333 / unlimited / unlimited (weights: room, unlimited = total)."""
    total = 10**9
    parties = [Party("a", 333333333, 0, 333333333), Party("b", total), Party("c", total)]
    assert webster(total, parties).seats == {"a": 142857143, "b": 428571429, "c": 428571428}


def test_weightless_parties_share_what_the_others_cannot_take() -> None:
    """Once weighted parties are full, weightless ones fill level by level, ties by name."""
    parties = [Party("a", 5, 0, 10), Party("b", 0, 3), Party("c", 0), Party("d", 0, 0, 4)]
    assert webster(10**6, parties).seats == reference_big_weightless(10**6, parties)


def reference_big_weightless(total: int, parties: list[Party]) -> dict[str, int]:
    """Weighted parties at their caps, then levels: b and c share the rest evenly, d stops at 4."""
    rest = total - 10 - 4
    return {"a": 10, "b": (rest + 1) // 2, "c": rest // 2, "d": 4}


def test_negative_weights_are_refused() -> None:
    """The divisor method is undefined for them; the engine never makes one."""
    with pytest.raises(ValueError, match="negative"):
        webster(100, [Party("a", -1), Party("b", 1)])  # more than 2 seats per party: jump
