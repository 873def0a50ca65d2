"""The port of Go's sort.Sort: Go's own output on recorded inputs, and a correct sort."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from federation.placement import gosort

VECTORS = Path(__file__).parent / "data" / "go_sort_vectors.txt"
GO_1_19_SHIFTS = (13, 17, 5)


def descending(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[1] > b[1]


def test_equal_keys_come_out_in_gos_order() -> None:
    """300 inputs of 13 to 150 keys, many equal, sorted by Go 1.19: same permutation."""
    cases = [line for line in VECTORS.read_text().splitlines() if not line.startswith("#")]
    assert len(cases) == 300
    for line in cases:
        keys, expected = line.split("|")
        items = list(enumerate(int(k) for k in keys.split()))
        gosort.sort(items, descending, shifts=GO_1_19_SHIFTS)
        assert [index for index, _ in items] == [int(i) for i in expected.split()], keys


@given(st.lists(st.integers(0, 6), max_size=300))
def test_it_sorts(keys: list[int]) -> None:
    items = list(enumerate(keys))
    gosort.sort(items, descending)
    assert [k for _, k in items] == sorted(keys, reverse=True)
    assert sorted(i for i, _ in items) == list(range(len(keys)))


@given(st.lists(st.integers(0, 3), max_size=gosort.MAX_INSERTION))
def test_up_to_twelve_it_is_stable(keys: list[int]) -> None:
    """Go's insertion sort path: equal elements keep their order (Karmada relies on it)."""
    items = list(enumerate(keys))
    gosort.sort(items, descending)
    assert items == sorted(enumerate(keys), key=lambda item: -item[1])


def test_heap_sort_sorts() -> None:
    """The fallback after too many bad pivots (rare: exercised directly)."""
    items = list(enumerate([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4]))
    data = gosort._Data(items, descending, gosort.GO_SHIFTS)
    gosort._heap_sort(data, 0, len(items))
    assert [k for _, k in items] == sorted((k for _, k in items), reverse=True)


@given(st.lists(st.integers(0, 4), max_size=300))
def test_input_already_in_order_is_left_as_it_is(keys: list[int]) -> None:
    """Equal elements included: what lets the engine skip Go's sort for a first Aggregated
    placement, whose input Karmada has already sorted by room and name."""
    items = list(enumerate(sorted(keys, reverse=True)))
    expected = list(items)
    gosort.sort(items, descending)
    assert items == expected
