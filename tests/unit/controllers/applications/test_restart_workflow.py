"""KubeVela's restart-workflow step: the workflow runs again at ``at``, ``after`` the step
ran, or ``every`` so long after each run ended, once it has ended (a time not after its
end never restarts it, as in KubeVela); the schedule is in the status and asks for a
look at that time. On virtual time."""

from __future__ import annotations

from typing import Any

import pytest

from federation.applications import compile as compile_
from federation.applications import model, workflow
from federation.controllers.applications.settings import stamp
from tests.unit.controllers.applications.fakes import World, app, status_after

JSON = dict[str, Any]


def restart_app(**props: str) -> JSON:
    return app(steps=[{"name": "again", "type": "restart-workflow", "properties": props}])


async def reconciled(world: World, doc: JSON) -> tuple[JSON, Any]:
    """The status after one more reconcile, as the hub keeps it (merge patches applied)."""
    world.view.put("hub", doc)
    sent = len(world.status.written)
    result = await world.reconcile()
    return status_after(world, doc, sent), result


async def test_every_restarts_the_ended_workflow_that_long_after_each_run() -> None:
    world = World()
    doc = restart_app(every="1m")
    status, result = await reconciled(world, doc)
    assert status["status"] == "running" and status["workflow"]["phase"] == "succeeded"
    assert status["workflowRestartScheduledAt"] == stamp(1060.0)
    assert result.requeue_after == pytest.approx(60.0)
    step = status["workflow"]["steps"][0]
    assert (step["phase"], step["reason"]) == ("succeeded", "Scheduled")
    world.view.clock = 1030.0
    status, _ = await reconciled(world, doc)
    assert status["workflow"]["startTime"] == stamp(1000.0)  # not yet
    world.view.clock = 1061.0
    status, _ = await reconciled(world, doc)
    assert status["workflow"]["startTime"] == stamp(1061.0)  # ran again
    assert status["workflowRestartScheduledAt"] == stamp(1121.0)


async def test_after_counts_from_when_the_step_ran_and_at_once() -> None:
    world = World()
    doc = restart_app(after="30s")
    status, _ = await reconciled(world, doc)
    assert status["workflowRestartScheduledAt"] == stamp(1030.0)
    world.view.clock = 1031.0
    status, _ = await reconciled(world, doc)
    assert status["workflow"]["startTime"] == stamp(1031.0)


async def test_a_time_before_the_run_ended_never_restarts_it() -> None:
    """KubeVela's own example (at: 2025-01-20T15:00:00Z) on a later clock: no restart."""
    world = World()
    doc = restart_app(at="1970-01-01T00:10:00Z")
    status, _ = await reconciled(world, doc)
    assert "workflowRestartScheduledAt" not in status
    world.view.clock = 5000.0
    status, _ = await reconciled(world, doc)
    assert status["workflow"]["startTime"] == stamp(1000.0)
    doc = restart_app(at="1970-01-01T00:20:00Z")  # 1200 s: after the run ended
    world = World()
    status, _ = await reconciled(world, doc)
    assert status["workflowRestartScheduledAt"] == stamp(1200.0)


@pytest.mark.parametrize(("props", "message"), [
    ({}, "exactly one of 'at', 'after', or 'every' must be specified (found 0)"),
    ({"at": "2025-01-20T15:00:00Z", "every": "1h"}, "(found 2)"),
    ({"at": "tomorrow"}, "properties.at: 'tomorrow' is not an RFC 3339 time"),
    ({"at": "2025-01-20T15:00:00"}, "properties.at: '2025-01-20T15:00:00' has no time zone"),
    ({"every": "often"}, "properties.every: 'often' is not a duration"),
    ({"after": 5}, "properties.after: must be a string"),
    ({"every": "1h", "cron": "x"}, "properties.cron: not supported for a restart-workflow"),
    # attack: KubeVela's step takes 0s, which restarts the ended workflow at once, for ever
    ({"every": "0s"}, "properties.every: at least 1s"),
])
def test_a_bad_schedule_is_refused_by_name(props: JSON, message: str) -> None:
    spec = restart_app()["spec"]
    spec["workflow"]["steps"][0]["properties"] = props
    with pytest.raises(model.AppError, match=None) as caught:
        compile_.compile_app(spec, "shop", "shop", {}, [], None)
    assert message in str(caught.value)
    assert str(caught.value).startswith("spec.workflow.steps[0]")


def test_the_schedule_survives_the_status_and_a_restart_clears_it() -> None:
    specs = (workflow.StepSpec("again", "restart-workflow", restart=(None, 60.0)),)
    state, actions = workflow.evaluate(workflow.initial(1, specs, 0.0), specs,
                                       workflow.Observations(), 5.0)
    assert actions == [] and state.restart_due() == 65.0
    back = workflow.from_status(workflow.to_status(state, str))
    assert back is not None and back.restart_due() == 65.0
    assert workflow.initial(1, specs, 70.0).restart_due() is None
