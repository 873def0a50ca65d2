"""Go's ``sort.Sort``, so that clusters Karmada sorts as equal come out in Karmada's order.

Karmada orders the Aggregated candidates with ``sort.Sort`` on room alone. That sort is
not stable: for more than 12 elements Go runs pattern-defeating quicksort (pdqsort), whose
order among equal elements is a deterministic function of the input and the comparisons
it makes. Aggregated takes the first clusters of that order until their room suffices, so
when the cut falls among clusters of equal room, which of them are taken depends on that
order. This module reproduces it: a port of ``pdqsort`` and its helpers from Go's
``sort/zsortinterface.go`` and ``sort/sort.go`` (BSD licence; written here from reading
them), same steps, same comparisons, same swaps. Up to 12 elements it is Go's insertion
sort, which is stable.

:func:`sort` works in place on a list with a ``less(a, b)`` function, as Go's
``sort.Interface`` does with ``Less(i, j)`` and ``Swap(i, j)``. ``shifts`` are the
xorshift constants of ``breakPatterns``; Go changed them once (13, 17, 5 in Go 1.19,
13, 7, 17 since), and Karmada builds with a current Go.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

_MASK64 = 2**64 - 1
MAX_INSERTION = 12
#: Go's breakPatterns xorshift constants since Go 1.20 (Karmada builds with Go 1.26).
GO_SHIFTS = (13, 7, 17)
_UNKNOWN, _INCREASING, _DECREASING = 0, 1, 2


class _Data(Generic[T]):
    """Go's sort.Interface over a Python list."""

    def __init__(self, items: list[T], less: Callable[[T, T], bool], shifts: tuple[int, ...]):
        self.items = items
        self.less_items = less
        self.shifts = shifts

    def less(self, i: int, j: int) -> bool:
        return self.less_items(self.items[i], self.items[j])

    def swap(self, i: int, j: int) -> None:
        items = self.items
        items[i], items[j] = items[j], items[i]


def sort(items: list[T], less: Callable[[T, T], bool], shifts: tuple[int, ...] = GO_SHIFTS) -> None:
    """Sort ``items`` in place exactly as Go's ``sort.Sort`` would."""
    n = len(items)
    if n <= 1:
        return
    _pdqsort(_Data(items, less, shifts), 0, n, n.bit_length())


def _insertion_sort(data: _Data[T], a: int, b: int) -> None:
    for i in range(a + 1, b):
        j = i
        while j > a and data.less(j, j - 1):
            data.swap(j, j - 1)
            j -= 1


def _sift_down(data: _Data[T], lo: int, hi: int, first: int) -> None:
    root = lo
    while True:
        child = 2 * root + 1
        if child >= hi:
            return
        if child + 1 < hi and data.less(first + child, first + child + 1):
            child += 1
        if not data.less(first + root, first + child):
            return
        data.swap(first + root, first + child)
        root = child


def _heap_sort(data: _Data[T], a: int, b: int) -> None:
    first, hi = a, b - a
    for i in range((hi - 1) // 2, -1, -1):
        _sift_down(data, i, hi, first)
    for i in range(hi - 1, -1, -1):
        data.swap(first, first + i)
        _sift_down(data, 0, i, first)


def _pdqsort(data: _Data[T], a: int, b: int, limit: int) -> None:
    was_balanced = was_partitioned = True
    while True:
        length = b - a
        if length <= MAX_INSERTION:
            _insertion_sort(data, a, b)
            return
        if limit == 0:  # too many bad pivots: heapsort
            _heap_sort(data, a, b)
            return
        if not was_balanced:
            _break_patterns(data, a, b)
            limit -= 1
        pivot, hint = _choose_pivot(data, a, b)
        if hint == _DECREASING:
            _reverse_range(data, a, b)
            pivot = (b - 1) - (pivot - a)
            hint = _INCREASING
        likely_sorted = was_balanced and was_partitioned and hint == _INCREASING
        if likely_sorted and _partial_insertion_sort(data, a, b):
            return
        # The element before the range (a previous pivot) equals the pivot: many duplicates.
        if a > 0 and not data.less(a - 1, pivot):
            a = _partition_equal(data, a, b, pivot)
            continue
        mid, was_partitioned = _partition(data, a, b, pivot)
        left, right = mid - a, b - mid
        threshold = length // 8
        if left < right:
            was_balanced = left >= threshold
            _pdqsort(data, a, mid, limit)
            a = mid + 1
        else:
            was_balanced = right >= threshold
            _pdqsort(data, mid + 1, b, limit)
            b = mid


def _partition(data: _Data[T], a: int, b: int, pivot: int) -> tuple[int, bool]:
    data.swap(a, pivot)
    i, j = a + 1, b - 1
    while i <= j and data.less(i, a):
        i += 1
    while i <= j and not data.less(j, a):
        j -= 1
    if i > j:
        data.swap(j, a)
        return j, True
    data.swap(i, j)
    i, j = i + 1, j - 1
    while True:
        while i <= j and data.less(i, a):
            i += 1
        while i <= j and not data.less(j, a):
            j -= 1
        if i > j:
            break
        data.swap(i, j)
        i, j = i + 1, j - 1
    data.swap(j, a)
    return j, False


def _partition_equal(data: _Data[T], a: int, b: int, pivot: int) -> int:
    data.swap(a, pivot)
    i, j = a + 1, b - 1
    while True:
        while i <= j and not data.less(a, i):
            i += 1
        while i <= j and data.less(a, j):
            j -= 1
        if i > j:
            return i
        data.swap(i, j)
        i, j = i + 1, j - 1


def _partial_insertion_sort(data: _Data[T], a: int, b: int) -> bool:
    max_steps, shortest_shifting = 5, 50
    i = a + 1
    for _ in range(max_steps):
        while i < b and not data.less(i, i - 1):
            i += 1
        if i == b:
            return True
        if b - a < shortest_shifting:
            return False
        data.swap(i, i - 1)
        if i - a >= 2:  # shift the smaller one to the left (Go's loop runs down to index 1)
            for j in range(i - 1, 0, -1):
                if not data.less(j, j - 1):
                    break
                data.swap(j, j - 1)
        if b - i >= 2:  # shift the greater one to the right
            for j in range(i + 1, b):
                if not data.less(j, j - 1):
                    break
                data.swap(j, j - 1)
    return False


def _break_patterns(data: _Data[T], a: int, b: int) -> None:
    length = b - a
    if length < 8:
        return
    random = length
    modulus = 1 << length.bit_length()
    left, right, last = data.shifts
    start = a + (length // 4) * 2 - 1
    for idx in range(start, start + 3):
        random ^= (random << left) & _MASK64
        random ^= random >> right
        random ^= (random << last) & _MASK64
        other = random & (modulus - 1)
        if other >= length:
            other -= length
        data.swap(idx, a + other)


def _choose_pivot(data: _Data[T], a: int, b: int) -> tuple[int, int]:
    shortest_ninther, max_swaps = 50, 4 * 3
    length = b - a
    swaps = [0]
    i, j, k = a + length // 4, a + length // 4 * 2, a + length // 4 * 3
    if length >= 8:
        if length >= shortest_ninther:
            i = _median(data, i - 1, i, i + 1, swaps)
            j = _median(data, j - 1, j, j + 1, swaps)
            k = _median(data, k - 1, k, k + 1, swaps)
        j = _median(data, i, j, k, swaps)
    if swaps[0] == 0:
        return j, _INCREASING
    if swaps[0] == max_swaps:
        return j, _DECREASING
    return j, _UNKNOWN


def _order2(data: _Data[T], a: int, b: int, swaps: list[int]) -> tuple[int, int]:
    if data.less(b, a):
        swaps[0] += 1
        return b, a
    return a, b


def _median(data: _Data[T], a: int, b: int, c: int, swaps: list[int]) -> int:
    a, b = _order2(data, a, b, swaps)
    b, c = _order2(data, b, c, swaps)
    a, b = _order2(data, a, b, swaps)
    return b


def _reverse_range(data: _Data[T], a: int, b: int) -> None:
    i, j = a, b - 1
    while i < j:
        data.swap(i, j)
        i, j = i + 1, j - 1
