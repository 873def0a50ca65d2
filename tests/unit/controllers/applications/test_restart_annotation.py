"""KubeVela's ``app.oam.dev/restart-workflow`` annotation, honoured: ``true`` restarts the
workflow once it has ended, a time once at that time (if after the run's end), a duration
that long after each run; each value acts once (recorded in handledRequests, as the
annotation is not deleted here); a value KubeVela does not take is refused by name. On
virtual time: each test would fail with the annotation ignored."""

from __future__ import annotations

from typing import Any

import pytest

from federation.applications import model, restarts
from federation.controllers.applications.settings import stamp
from tests.unit.controllers.applications.fakes import World, app, kept
from tests.unit.controllers.fakes import merge_patch

JSON = dict[str, Any]
KEY = restarts.ANNOTATION


def waiting_app(value: str | None, duration: str = "0s", **extra: JSON) -> JSON:
    """A workflow of one suspend step of ``duration`` (0s: it ends at once)."""
    steps: list[JSON] = [{"name": "wait", "type": "suspend",
                          "properties": {"duration": duration}}]
    steps += list(extra.values())
    return app(steps=steps, annotations={KEY: value} if value is not None else {})


async def reconciled(world: World, doc: JSON, clock: float | None = None) -> tuple[JSON, Any]:
    """The status after one more reconcile at ``clock``, as the hub keeps it."""
    if clock is not None:
        world.view.clock = clock
    world.view.put("hub", doc)
    sent = len(world.status.written)
    result = await world.reconcile()
    status: JSON = doc.get("status") or {}
    for patch in world.status.written[sent:]:
        status = merge_patch(status, patch)
    doc["status"] = status
    return status, result


def started(status: JSON) -> str:
    return str(status["workflow"]["startTime"])


async def test_true_restarts_an_ended_workflow_once() -> None:
    world = World()
    doc = waiting_app(None)
    status, _ = await reconciled(world, doc)
    assert status["workflow"]["phase"] == "succeeded" and started(status) == stamp(1000.0)
    doc["metadata"]["annotations"] = {KEY: "true"}
    status, _ = await reconciled(world, doc, 1100.0)
    assert started(status) == stamp(1100.0)  # ran again
    assert status["handledRequests"][KEY] == "true"
    status, _ = await reconciled(world, doc, 1200.0)
    assert started(status) == stamp(1100.0)  # once: the value acted already


async def test_true_on_a_running_workflow_restarts_it_when_it_ends() -> None:
    """KubeVela loses this request (its "now" is before the run's end); here it waits."""
    world = World()
    doc = waiting_app(None, duration="30s")
    status, _ = await reconciled(world, doc)
    doc["metadata"]["annotations"] = {KEY: "true"}
    status, _ = await reconciled(world, doc, 1010.0)
    assert status["workflow"]["phase"] == "suspended" and started(status) == stamp(1000.0)
    assert KEY not in status.get("handledRequests", {})
    status, result = await reconciled(world, doc, 1031.0)  # the suspend step ends
    assert status["workflow"]["phase"] == "succeeded"
    assert result.requeue_after == pytest.approx(0.5)  # looked at again at once
    status, _ = await reconciled(world, doc, 1031.5)
    assert started(status) == stamp(1031.5) and status["handledRequests"][KEY] == "true"
    status, _ = await reconciled(world, doc, 1062.0)
    status, _ = await reconciled(world, doc, 1070.0)
    assert started(status) == stamp(1031.5)  # not again


async def test_removing_true_and_setting_it_again_asks_again() -> None:
    world = World()
    doc = waiting_app("true")
    status, _ = await reconciled(world, doc)
    assert status["handledRequests"][KEY] == "true"
    doc["metadata"]["annotations"] = {}
    status, _ = await reconciled(world, doc, 1100.0)
    assert KEY not in status["handledRequests"] and started(status) == stamp(1000.0)
    doc["metadata"]["annotations"] = {KEY: "true"}
    status, _ = await reconciled(world, doc, 1200.0)
    assert started(status) == stamp(1200.0)


async def test_a_time_restarts_once_at_that_time() -> None:
    world = World()
    doc = waiting_app(None)
    await reconciled(world, doc)
    doc["metadata"]["annotations"] = {KEY: "1970-01-01T00:20:00Z"}  # 1200 s
    status, result = await reconciled(world, doc, 1100.0)
    assert status["workflowRestartScheduledAt"] == stamp(1200.0)
    assert result.requeue_after == pytest.approx(100.0)
    status, _ = await reconciled(world, doc, 1150.0)
    assert started(status) == stamp(1000.0)  # not yet
    status, _ = await reconciled(world, doc, 1200.0)
    assert started(status) == stamp(1200.0)
    assert "workflowRestartScheduledAt" not in status
    status, _ = await reconciled(world, doc, 1300.0)
    assert started(status) == stamp(1200.0)  # once


async def test_a_time_not_after_the_runs_end_never_restarts_it() -> None:
    """KubeVela's "prevents duplicate restarts": a time before the last end counts not."""
    world = World()
    doc = waiting_app(None)
    await reconciled(world, doc, 1000.0)
    doc["metadata"]["annotations"] = {KEY: "1970-01-01T00:15:00Z"}  # 900 s < end 1000 s
    status, _ = await reconciled(world, doc, 1100.0)
    assert "workflowRestartScheduledAt" not in status
    status, _ = await reconciled(world, doc, 2000.0)
    assert started(status) == stamp(1000.0)


async def test_a_duration_restarts_that_long_after_each_run() -> None:
    world = World()
    doc = waiting_app("1m")
    status, result = await reconciled(world, doc)
    assert status["workflowRestartScheduledAt"] == stamp(1060.0)
    assert result.requeue_after == pytest.approx(60.0)
    status, _ = await reconciled(world, doc, 1061.0)
    assert started(status) == stamp(1061.0)
    assert status["workflowRestartScheduledAt"] == stamp(1121.0)  # and again
    status, _ = await reconciled(world, doc, 1121.0)
    assert started(status) == stamp(1121.0)


async def test_a_new_revision_keeps_a_time_not_due_yet() -> None:
    """KubeVela's workflowRestartScheduledAt outlives a revision change."""
    world = World()
    doc = waiting_app("1970-01-01T00:30:00Z")  # 1800 s
    status, _ = await reconciled(world, doc)
    assert status["workflowRestartScheduledAt"] == stamp(1800.0)
    await kept(world.view, doc)  # revision 1 on record
    doc["spec"]["components"][0]["properties"]["image"] = "web:2"
    status, _ = await reconciled(world, doc, 1100.0)
    assert status["latestRevision"]["revision"] == 2 and started(status) == stamp(1100.0)
    assert status["workflowRestartScheduledAt"] == stamp(1800.0)
    status, _ = await reconciled(world, doc, 1800.0)
    assert started(status) == stamp(1800.0)


@pytest.mark.parametrize(("value", "message"), [
    ("5xyz", "'5xyz' is not 'true', an RFC 3339 time such as 2025-01-20T15:00:00Z or a "
             "duration"),
    ("2025-13-45T99:99:99Z", "'2025-13-45T99:99:99Z' is not an RFC 3339 time"),
    ("2025-01-20T15:00:00", "has no time zone"),
    ("0s", "a duration of at least 1s"),
    # attacks: KubeVela restarts the ended workflow again at once, for ever
    ("1ms", "a duration of at least 1s"),
    ("999ms", "a duration of at least 1s"),
    ("yes", "'yes' is not 'true'"),
    ("x" * 100, "the value is not 'true'"),
])
async def test_a_value_kubevela_does_not_take_is_refused_by_name(value: str, message: str
                                                                 ) -> None:
    world = World()
    status, _ = await reconciled(world, waiting_app(value))
    assert status["status"] == "renderFailed"
    reason = status["conditions"][0]["message"]
    assert reason.startswith(f"metadata.annotations.{KEY}: ") and message in reason
    assert "\n" not in reason and "x" * 65 not in reason
    assert [v[0] for v in world.journal] == ["status", "event"]  # nothing else written


def test_the_floor_itself_is_taken() -> None:
    request = restarts.request({KEY: "1s"})
    assert request is not None and request.every == 1.0


async def test_a_duration_with_a_restart_workflow_step_is_refused() -> None:
    world = World()
    doc = waiting_app("5m", again={"name": "again", "type": "restart-workflow",
                                   "properties": {"every": "1m"}})
    status, _ = await reconciled(world, doc)
    assert status["status"] == "renderFailed"
    assert "restart-workflow step schedules them too: keep one" in \
        status["conditions"][0]["message"]


@pytest.mark.parametrize(("text", "seconds"), [
    ("5m", 300.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("300ms", 0.3), ("2h45m30s", 9930.0),
    (".5s", 0.5)])
def test_go_durations(text: str, seconds: float) -> None:
    assert restarts.go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "-5m", "5 m", "m", "1d", "5m!"])
def test_not_go_durations(text: str) -> None:
    assert restarts.go_duration(text) is None


def test_the_request_read() -> None:
    assert restarts.request({}) is None
    assert restarts.request({KEY: "true"}) == restarts.Request("true")
    assert restarts.request({KEY: "2025-01-20T15:00:00Z"}) == \
        restarts.Request("2025-01-20T15:00:00Z", at=1737385200.0)
    assert restarts.request({KEY: "10m"}, ["deploy"]) == restarts.Request("10m", every=600.0)
    with pytest.raises(model.AppError):
        restarts.request({KEY: 5})
    with pytest.raises(model.AppError, match=r"metadata\.annotations: must be a map"):
        restarts.request(["not", "a", "map"])  # a malformed file given to dry-run
