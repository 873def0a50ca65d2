"""The division modes: Duplicated, static, dynamic and Aggregated, stickiness, bounds, room."""

from __future__ import annotations

import pytest

from federation.placement import division
from federation.placement.division import Slot


def rooms(**available: int | None) -> list[Slot]:
    return [Slot(name, room=room) for name, room in available.items()]


def held(spec: dict[str, tuple[int, int | None]]) -> list[Slot]:
    """Slots from name -> (current replicas, room)."""
    return [Slot(name, held=h, room=r) for name, (h, r) in spec.items()]


# -- Duplicated --------------------------------------------------------------------------------


def test_duplicated_gives_every_cluster_the_total() -> None:
    """Every slot gets all replicas, whatever its room (as in Karmada)."""
    result = division.duplicate(5, rooms(a=1, b=None))
    assert result.replicas == {"a": 5, "b": 5}


def test_duplicated_clamps_to_bounds() -> None:
    """maxReplicas lowers and minReplicas raises a cluster's copy, with a note."""
    slots = [Slot("a", high=3), Slot("b", low=7), Slot("c")]
    result = division.duplicate(5, slots)
    assert result.replicas == {"a": 3, "b": 7, "c": 5}
    assert "bounds: a gets 3 instead of 5" in result.notes


# -- static weights ----------------------------------------------------------------------------


def test_static_ignores_room() -> None:
    """Static weights divide without looking at availableReplicas (as in Karmada)."""
    slots = [Slot("a", room=1, weight=3), Slot("b", room=0, weight=2), Slot("c", weight=1)]
    assert division.divide_static(14, slots, partial=False).replicas == {"a": 7, "b": 5, "c": 2}


def test_static_honours_bounds() -> None:
    """Floors are given first and caps are never exceeded."""
    slots = [Slot("a", weight=10, high=4), Slot("b", weight=1, low=3), Slot("c", weight=1)]
    assert division.divide_static(10, slots, partial=False).replicas == {"a": 4, "b": 3, "c": 3}


def test_static_max_bounds_too_low_is_unschedulable() -> None:
    """When the maxReplicas bounds cannot hold the total, the shortfall is reported."""
    with pytest.raises(division.DivisionError, match="shortfall 4") as caught:
        division.divide_static(10, [Slot("a", high=3), Slot("b", high=3)], partial=False)
    assert caught.value.unschedulable == 4


def test_static_partial_places_what_fits() -> None:
    """In partial mode the bounds are filled and the rest is pending."""
    result = division.divide_static(10, [Slot("a", high=3), Slot("b", high=3)], partial=True)
    assert (result.replicas, result.pending) == ({"a": 3, "b": 3}, 4)


def test_min_bounds_above_total_is_an_error() -> None:
    """minReplicas adding up to more than the total is a clear error in every mode."""
    slots = [Slot("a", low=3), Slot("b", low=3)]
    with pytest.raises(division.DivisionError, match="minReplicas add up to 6"):
        division.divide_static(5, slots, partial=True)
    with pytest.raises(division.DivisionError, match="minReplicas add up to 6"):
        division.divide_dynamic(5, slots, partial=True, aggregated=False)


def test_min_above_max_is_an_error() -> None:
    """Bounds intersected to min > max are reported."""
    with pytest.raises(division.DivisionError, match="minReplicas 4 above maxReplicas 2"):
        division.divide_static(5, [Slot("a", low=4, high=2)], partial=False)


def test_min_above_room_is_an_error_in_dynamic_mode() -> None:
    """A cluster that cannot hold its minReplicas is reported (dynamic mode counts room)."""
    with pytest.raises(division.DivisionError, match="needs minReplicas 4 but has room for 2"):
        division.divide_dynamic(5, [Slot("a", room=2, low=4), Slot("b")], False, False)


# -- dynamic weights ---------------------------------------------------------------------------


def test_dynamic_first_schedule_issue_example() -> None:
    """12 replicas over available 6, 8, 10 give 3:4:5."""
    result = division.divide_dynamic(12, rooms(a=6, b=8, c=10), partial=False, aggregated=False)
    assert result.replicas == {"a": 3, "b": 4, "c": 5}


def test_dynamic_unlimited_counts_as_the_replicas_to_place() -> None:
    """An unlimited cluster weighs the number of replicas being divided (Karmada's rule)."""
    result = division.divide_dynamic(12, rooms(a=None, b=6), partial=False, aggregated=False)
    assert result.replicas == {"a": 8, "b": 4}


def test_dynamic_scale_up_divides_only_the_difference() -> None:
    """Scaling up keeps the current replicas and divides the difference by room."""
    slots = held({"a": (3, 6), "b": (4, 2), "c": (5, 0)})
    result = division.divide_dynamic(16, slots, partial=False, aggregated=False)
    assert result.replicas == {"a": 6, "b": 5, "c": 5}


def test_dynamic_scale_down_uses_current_replicas_as_weights() -> None:
    """Scaling down divides the new total with the current counts as weights, never growing."""
    slots = held({"a": (2, 100), "b": (4, 100), "c": (6, 100)})
    result = division.divide_dynamic(6, slots, partial=False, aggregated=False)
    assert result.replicas == {"a": 1, "b": 2, "c": 3}
    assert all(result.replicas[s.name] <= s.held for s in slots)


def test_dynamic_equal_total_keeps_the_current_placement() -> None:
    """Equal totals keep the current placement even if room changed."""
    slots = held({"a": (3, 0), "b": (4, 50), "c": (5, 1)})
    result = division.divide_dynamic(12, slots, partial=False, aggregated=False)
    assert result.replicas == {"a": 3, "b": 4, "c": 5}
    assert any("kept the current placement" in n for n in result.notes)


def test_dynamic_unschedulable_reports_the_shortfall() -> None:
    """Not enough room: an error with the shortfall."""
    with pytest.raises(division.DivisionError, match="shortfall 3") as caught:
        division.divide_dynamic(12, rooms(a=4, b=5), partial=False, aggregated=False)
    assert caught.value.unschedulable == 3


def test_dynamic_partial_fills_room_and_reports_pending() -> None:
    """Partial mode places what fits and counts the rest as pending."""
    result = division.divide_dynamic(12, rooms(a=4, b=5), partial=True, aggregated=False)
    assert (result.replicas, result.pending) == ({"a": 4, "b": 5}, 3)


def test_dynamic_trims_replicas_above_a_new_max_bound() -> None:
    """A cluster above its (new) maxReplicas is trimmed; the excess is placed again."""
    slots = [Slot("a", held=8, room=0, high=5), Slot("b", held=2, room=10)]
    result = division.divide_dynamic(10, slots, partial=False, aggregated=False)
    assert result.replicas == {"a": 5, "b": 5}


def test_dynamic_raises_a_cluster_to_a_new_min_bound() -> None:
    """Equal totals with a raised minReplicas move the fewest replicas to honour it."""
    slots = [Slot("a", held=6, room=0), Slot("b", held=0, room=10, low=2)]
    result = division.divide_dynamic(6, slots, partial=False, aggregated=False)
    assert result.replicas == {"a": 4, "b": 2}


# -- Aggregated --------------------------------------------------------------------------------


def test_aggregated_first_schedule_issue_example() -> None:
    """12 replicas over available 6, 8, 10 give 0:5:7."""
    result = division.divide_dynamic(12, rooms(a=6, b=8, c=10), partial=False, aggregated=True)
    assert result.replicas == {"b": 5, "c": 7}


def test_aggregated_fits_in_one_cluster_when_possible() -> None:
    """A total that fits the roomiest cluster goes there alone."""
    result = division.divide_dynamic(9, rooms(a=6, b=8, c=10), partial=False, aggregated=True)
    assert result.replicas == {"c": 9}


def test_aggregated_scale_up_prefers_clusters_holding_replicas() -> None:
    """New replicas go to clusters already holding replicas before a roomier empty one."""
    slots = held({"a": (0, 50), "b": (5, 3), "c": (7, 0)})
    result = division.divide_dynamic(15, slots, partial=False, aggregated=True)
    assert result.replicas == {"b": 8, "c": 7}


def test_aggregated_scale_down_keeps_the_fewest_clusters() -> None:
    """Scaling down keeps the clusters holding most, as few as can hold the total."""
    slots = held({"b": (5, 0), "c": (7, 0)})
    result = division.divide_dynamic(6, slots, partial=False, aggregated=True)
    assert result.replicas == {"c": 6}


def test_aggregated_includes_clusters_with_a_min_bound() -> None:
    """A cluster with minReplicas is always used, even when others could hold everything."""
    slots = [Slot("a", room=100), Slot("b", room=100, low=2)]
    result = division.divide_dynamic(10, slots, partial=False, aggregated=True)
    assert result.replicas["b"] >= 2
    assert sum(result.replicas.values()) == 10
