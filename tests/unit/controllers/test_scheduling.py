"""The placement engine runs off the event loop, within a time budget."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from federation.controllers import propagation
from federation.controllers.propagation import scheduling
from federation.placement import engine
from tests.unit.controllers.fakes import (
    FakeMC,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)

pytestmark = pytest.mark.timeout(30)
BUDGET = 0.2
"""Short: the slow engine below waits on an event, so nothing sleeps this long for real
except the one wait a budget test must make."""


class SlowEngine:
    """A placement that blocks its thread until released (no wall-clock sleep)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.calls = 0

    def __call__(self, *args: Any) -> str:
        self.calls += 1
        self.started.set()
        self.release.wait(10)
        return "placed"


async def test_the_loop_keeps_serving_while_a_placement_computes() -> None:
    """While one placement blocks its thread, other coroutines (and another placement) run;
    the slow one's answer arrives once it returns."""
    slow = SlowEngine()
    scheduler = scheduling.Scheduler(budget=10, threads=2)
    pending = asyncio.create_task(scheduler.run(slow))
    assert await asyncio.to_thread(slow.started.wait, 5)
    ticks = 0
    for _ in range(100):
        await asyncio.sleep(0)
        ticks += 1
    assert ticks == 100 and not pending.done()
    assert await scheduler.run(lambda: "quick") == "quick"
    slow.release.set()
    assert await pending == "placed"
    assert scheduler.running == 0


async def test_past_the_budget_the_caller_gets_an_answer_and_the_inputs_are_remembered() -> None:
    """BudgetExceeded at the budget; the key is remembered; the thread's slot is given back
    only when it returns."""
    slow = SlowEngine()
    scheduler = scheduling.Scheduler(budget=BUDGET, threads=1)
    with pytest.raises(scheduling.BudgetExceeded, match=r"budget of 0\.2s"):
        await scheduler.run(slow, key="t1")
    assert scheduler.timed_out("t1") is not None and scheduler.timed_out("t2") is None
    assert scheduler.running == 1
    with pytest.raises(scheduling.SchedulerBusy):  # the one thread is still computing
        await scheduler.run(lambda: "other")
    slow.release.set()  # the slot comes back as the thread returns: well within a budget
    assert await scheduler.run(lambda: "other") == "other"
    assert scheduler.running == 0


async def test_an_engine_error_reaches_the_caller() -> None:
    """An exception in the thread is raised in the coroutine that asked."""
    scheduler = scheduling.Scheduler(budget=10, threads=1)

    def broken() -> None:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        await scheduler.run(broken)
    assert scheduler.running == 0


async def test_a_template_whose_placement_runs_out_is_scheduled_false_and_not_rerun(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The propagation controller's schedule step: Scheduled=False, ScheduleTimeout, and the
    next reconcile of the same inputs answers at once without running the engine again."""
    slow = SlowEngine()
    monkeypatch.setattr(engine, "place", slow)
    mc = FakeMC(cluster_set("member1"))
    mc.put("hub", duplicated_policy("huge", ["member1"]))
    template = mc.put("hub", config_map("huge"))
    r = reconciler(mc, propagation.PropagationSettings(schedule_budget=BUDGET))
    try:
        assert await r.reconcile(request_for(template)) is None  # not retried by itself
        assert slow.calls == 1
        binding = mc.find("hub", "ResourceBinding", "huge-configmap", "shop")
        assert binding is not None
        scheduled = {c["type"]: c for c in binding["status"]["conditions"]}["Scheduled"]
        assert (scheduled["status"], scheduled["reason"]) == ("False", "ScheduleTimeout")
        assert "budget of 0.2s" in scheduled["message"]
        assert await r.reconcile(request_for(template)) is None
        assert slow.calls == 1
    finally:
        slow.release.set()
    assert mc.find("member1", "ConfigMap", "huge", "shop") is None


def test_the_settings_refuse_a_budget_of_nothing() -> None:
    """A zero budget or no thread is a configuration error, said at once."""
    with pytest.raises(ValueError, match="positive budget"):
        scheduling.Scheduler(budget=0, threads=1)


async def test_threads_are_reused_and_a_stuck_one_does_not_hold_up_the_others() -> None:
    """Placements one after another share one thread; with one thread stuck past its
    budget, the next placement gets a thread of its own."""
    scheduler = scheduling.Scheduler(budget=BUDGET, threads=2)
    for n in range(20):
        assert await scheduler.run(lambda n=n: n) == n
    assert scheduler._threads == 1
    slow = SlowEngine()
    with pytest.raises(scheduling.BudgetExceeded):
        await scheduler.run(slow)
    try:
        assert await scheduler.run(lambda: "beside") == "beside"
        assert scheduler._threads == 2
    finally:
        slow.release.set()
