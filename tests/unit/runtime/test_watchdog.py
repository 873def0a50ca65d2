"""The event-loop watchdog on virtual time: a callback that holds the loop is measured,
counted and logged once; a quiet loop is not.

A stall is simulated the way it happens: a callback runs while the loop's clock moves on
(on the virtual loop, the callback advances the clock), so the watchdog's timer fires late.
"""

from __future__ import annotations

import asyncio
import logging

import prometheus_client
import pytest

from federation.contexts import clusters
from federation.runtime import manager, metrics, watchdog
from tests.unit.runtime import virtual

pytestmark = pytest.mark.timeout(30)


def sample(registry: prometheus_client.CollectorRegistry, name: str,
           labels: dict[str, str] | None = None) -> float:
    value = registry.get_sample_value(name, labels)
    assert value is not None, f"{name} is not exported"
    return value


async def watch_while(hold: list[tuple[float, float]], until: float) -> metrics.Metrics:
    """Run a watchdog on this (virtual) loop until ``until``; each (at, seconds) of ``hold``
    is a callback at ``at`` that keeps the loop for ``seconds``."""
    loop = asyncio.get_running_loop()
    assert isinstance(loop, virtual.VirtualTimeLoop)
    found = metrics.Metrics()
    dog = watchdog.LoopWatchdog(found, clock=loop.time)

    def busy(seconds: float) -> None:
        loop.now += seconds  # the callback computed for that long: nothing else ran

    for at, seconds in hold:
        loop.call_at(at, busy, seconds)
    task = asyncio.create_task(dog.run(), name="event-loop watchdog")
    await asyncio.sleep(until)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return found


def test_a_callback_holding_the_loop_is_measured_counted_and_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    """A 3.2 s callback: one stall counted, one log line naming the lag; the quiet wakes
    around it are observed with no lag."""
    caplog.set_level(logging.WARNING, "federation.watchdog")
    found = virtual.run(watch_while([(1.1, 3.2)], until=10.0))
    registry = found.registry
    assert sample(registry, "federation_event_loop_stalls_total") == 1.0
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "event loop lagged 2.8s" in lines[0], lines
    assert sample(registry, "federation_event_loop_lag_seconds_sum") == pytest.approx(2.8)
    assert sample(registry, "federation_event_loop_lag_seconds_count") == 14  # 10 s less 2.8
    assert sample(registry, "federation_event_loop_lag_seconds_bucket", {"le": "0.001"}) == 13


def test_lag_under_the_threshold_is_observed_but_not_a_stall(
        caplog: pytest.LogCaptureFixture) -> None:
    """0.9 s late is slow, not stalled: in the histogram, not counted, not logged."""
    caplog.set_level(logging.WARNING, "federation.watchdog")
    found = virtual.run(watch_while([(1.1, 1.3)], until=5.0))
    assert sample(found.registry, "federation_event_loop_stalls_total") == 0.0
    assert sample(found.registry, "federation_event_loop_lag_seconds_sum") == \
        pytest.approx(0.9)
    assert caplog.records == []


def test_a_quiet_loop_reports_no_lag(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "federation.watchdog")
    found = virtual.run(watch_while([], until=60.2))
    assert sample(found.registry, "federation_event_loop_lag_seconds_sum") == 0.0
    assert sample(found.registry, "federation_event_loop_lag_seconds_count") == 120
    assert caplog.records == []


def test_the_metrics_are_on_the_managers_metrics_page() -> None:
    """/metrics serves the manager's registry: both series are there from the start."""
    hub = clusters.Cluster("hub", is_hub=True, is_member=False, error="no context")
    mgr = manager.Manager(clusters.ClusterSet([hub]))
    text = prometheus_client.generate_latest(mgr.metrics.registry).decode()
    assert "federation_event_loop_lag_seconds_bucket" in text
    assert "federation_event_loop_stalls_total 0.0" in text
    assert mgr.watchdog.metrics is mgr.metrics
    assert mgr.settings.watchdog.threshold == 1.0


def test_settings_refuse_a_zero_interval_or_threshold() -> None:
    with pytest.raises(ValueError, match="interval"):
        watchdog.WatchdogSettings(interval=0)
    with pytest.raises(ValueError, match="threshold"):
        watchdog.WatchdogSettings(threshold=-1)


def test_the_manager_runs_the_watchdog_from_its_start_until_it_stops() -> None:
    """Started before anything else (a stall while caches sync is seen too); cancelled
    with the rest at shutdown."""
    async def scenario() -> None:
        hub = clusters.Cluster("hub", is_hub=True, is_member=False, error="no context")
        mgr = manager.Manager(clusters.ClusterSet([hub]), manager.ManagerSettings(
            health_probe_bind_address="0", metrics_bind_address="0"))
        running = asyncio.create_task(mgr.run())
        await asyncio.sleep(2.0)
        dogs = [t for t in mgr._tasks if t.get_name() == "event-loop watchdog"]
        assert len(dogs) == 1 and not dogs[0].done()
        assert sample(mgr.metrics.registry, "federation_event_loop_lag_seconds_count") >= 3
        mgr.stop()
        await running
        assert dogs[0].cancelled()

    virtual.run(scenario())
