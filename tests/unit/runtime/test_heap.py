"""runtime/heap.py on virtual time with a fake collector: the cached fleet is listed with
the collector held, frozen once synced, and kept frozen by passes over what is new."""

from __future__ import annotations

import asyncio
import contextlib
import gc

import pytest

from federation.runtime import heap
from federation.runtime.metrics import Metrics
from tests.unit.runtime import virtual

pytestmark = pytest.mark.timeout(30)


class FakeCollector:
    """Counts what the heap asks of the collector; ``tracked`` objects, ``frozen`` apart."""

    def __init__(self) -> None:
        self.enabled = True
        self.tracked = 0
        self.frozen = 0
        self.scanned: list[int] = []
        """Objects each collect() looked at."""
        self.thresholds: tuple[int, ...] = (700, 10, 10)

    def set_threshold(self, *thresholds: int) -> None:
        self.thresholds = thresholds

    def disable(self) -> None:
        self.enabled = False

    def enable(self) -> None:
        self.enabled = True

    def collect(self) -> int:
        self.scanned.append(self.tracked)
        return 0

    def freeze(self) -> None:
        self.frozen += self.tracked
        self.tracked = 0

    def unfreeze(self) -> None:
        self.tracked += self.frozen
        self.frozen = 0

    def get_freeze_count(self) -> int:
        return self.frozen


def test_the_first_lists_run_without_collections_and_are_frozen_once_synced() -> None:
    collector = FakeCollector()
    keeper = heap.Heap(collector=collector)
    keeper.hold()
    assert not collector.enabled  # no pass over the caches while they fill
    collector.tracked = 600_000  # the caches' containers at 10,000 templates
    keeper.settle()
    assert collector.enabled and not keeper.held
    assert collector.scanned == [] and collector.frozen == 600_000  # frozen, no pass
    assert collector.tracked == 0  # later automatic passes do not see the cached fleet


def test_passes_scan_only_what_is_new_and_an_hourly_one_everything() -> None:
    async def scenario() -> None:
        collector = FakeCollector()
        keeper = heap.Heap(heap.HeapSettings(refreeze_interval=600, unfreeze_every=3),
                           collector=collector)
        keeper.hold()
        collector.tracked = 1000
        keeper.settle()  # round 1: frozen without a pass
        keeping = asyncio.create_task(keeper.keep())
        collector.tracked = 50  # the watches brought 50 new objects
        await asyncio.sleep(601)  # round 2: a pass over the new ones only
        assert collector.scanned == [50] and collector.frozen == 1050
        collector.tracked = 20
        await asyncio.sleep(600)  # round 3 (every third): the frozen ones too
        assert collector.scanned == [50, 1070] and collector.frozen == 1070
        keeping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeping

    virtual.run(scenario())


def test_settle_without_hold_leaves_the_collector_as_it_was() -> None:
    collector = FakeCollector()
    collector.enabled = False  # someone else's choice (a profiler, a test)
    heap.Heap(collector=collector).settle()
    assert not collector.enabled and collector.frozen == 0


def test_settled_collector_is_paced_by_the_settings() -> None:
    collector = FakeCollector()
    keeper = heap.Heap(heap.HeapSettings(thresholds=(5000, 7, 3)), collector=collector)
    keeper.hold()
    assert collector.thresholds == (700, 10, 10)  # untouched while the caches fill
    keeper.settle()
    assert collector.thresholds == (5000, 7, 3)
    fresh = FakeCollector()
    heap.Heap(collector=fresh).settle()
    assert fresh.thresholds == heap.HeapSettings().thresholds == (20_000, 20, 10)


def test_collection_timer_reports_each_pass_in_cpu_by_generation() -> None:
    seen: list[tuple[int, float]] = []
    now = [10.0]
    timer = heap.CollectionTimer(lambda g, s: seen.append((g, s)), clock=lambda: now[0])
    timer("start", {"generation": 0})
    now[0] += 0.25
    timer("stop", {"generation": 0, "collected": 3})
    timer("stop", {"generation": 1})  # a stop without its start is not a pass of ours
    timer("start", {"generation": 2})
    now[0] += 1.5
    timer("stop", {"generation": 2})
    assert seen == [(0, 0.25), (2, 1.5)]


def test_collection_timer_times_real_passes_while_installed() -> None:
    seen: list[tuple[int, float]] = []
    timer = heap.CollectionTimer(lambda g, s: seen.append((g, s)))
    timer.install()
    timer.install()  # once only
    try:
        gc.collect(1)
    finally:
        timer.remove()
    assert timer not in gc.callbacks
    assert [g for g, _ in seen] == [1] and seen[0][1] >= 0
    gc.collect(0)
    assert len(seen) == 1  # removed: not told any more


def test_collections_are_counted_on_the_managers_metrics() -> None:

    metrics = Metrics()
    metrics.observe_collection(0, 0.5)
    metrics.observe_collection(2, 0.25)
    metrics.observe_collection(7, 1.0)  # none such: counted with the oldest
    value = {s.labels["generation"]: s.value for m in metrics.registry.collect()
             if m.name == "federation_gc_cpu_seconds" for s in m.samples
             if s.name.endswith("_total")}
    assert value == {"0": 0.5, "1": 0.0, "2": 1.25}
