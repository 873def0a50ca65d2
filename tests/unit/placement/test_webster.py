"""The Webster primitive: examples, ties, bounds, exactness, and its properties."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.placement import division
from federation.placement.division import Party, webster


def reference(total: int, parties: list[Party]) -> dict[str, int]:
    """Seat-by-seat Webster with exact fractions and the documented tie rule, no shortcuts."""
    seats = {p.name: p.floor for p in parties}
    for _ in range(total - sum(seats.values())):
        open_parties = [p for p in parties if p.cap is None or seats[p.name] < p.cap]
        best = min(
            open_parties,
            key=lambda p: (-Fraction(p.weight, 2 * seats[p.name] + 1), seats[p.name], p.name),
        )
        seats[best.name] += 1
    return seats


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
