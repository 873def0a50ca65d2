"""A restart writes nothing: a settled Application, reconciled by a freshly started
reconciler (a cold restart of ``fedctl run``) a minute later, gets no status patch, no
other write, no Event and no notification.

The status goes through the in-memory hub as through the API server: sent as JSON (a
tuple comes back a list) in a merge patch (a null field is deleted, at any depth), so
what the next reconcile reads is what the hub would give it. The shapes are those a
restart meets (the write budget's e2e cold restart has them on a real fleet)."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from federation.controllers import applications
from federation.controllers.applications import status as status_
from tests.unit.applications.test_controller import (
    MC,
    REQUEST,
    Clock,
    app,
    must,
    ready_everywhere,
    set_app,
)
from tests.unit.applications.test_notifications import notifying_app
from tests.unit.controllers import fakes
from tests.unit.controllers.applications import fakes as app_fakes

JSON = dict[str, Any]
Shape = Callable[[MC, Clock], Awaitable[None]]


def started(mc: MC, clock: Clock
            ) -> tuple[applications.Reconciler, app_fakes.Recorder, app_fakes.Outbox]:
    """A reconciler as a process start makes it: nothing remembered."""
    recorder, outbox = app_fakes.Recorder(), app_fakes.Outbox()
    return app_fakes.reconciler(mc, recorder, clock=clock, outbox=outbox), recorder, outbox


def unready_everywhere(mc: MC) -> None:
    """The simulator's part for a broken image: no replica of any Deployment ready."""
    for key, obj in mc.objects.items():
        if key[1] == "deployments":
            obj["status"] = {"observedGeneration": 0, "readyReplicas": 0,
                             "updatedReplicas": 0}


async def settle(mc: MC, clock: Clock, ready: bool = True, times: int = 6) -> None:
    reconciler = started(mc, clock)[0]
    for _ in range(times):
        (ready_everywhere if ready else unready_everywhere)(mc)
        await reconciler.reconcile(REQUEST)
        clock.now += 10


def steps(*found: JSON) -> JSON:
    body = app()
    body["spec"]["workflow"]["steps"] = list(found)
    return body


DEPLOY_ALL: JSON = {"name": "everywhere", "type": "deploy",
                    "properties": {"policies": ["canary", "rest"]}}


async def succeeded_in_three_clusters(mc: MC, clock: Clock) -> None:
    set_app(mc, steps(DEPLOY_ALL))
    await settle(mc, clock)


async def suspended_at_an_approve_step(mc: MC, clock: Clock) -> None:
    set_app(mc, app())
    await settle(mc, clock)


async def suspended_for_a_duration(mc: MC, clock: Clock) -> None:
    """A suspend step with a duration: its message said how many seconds were left."""
    set_app(mc, steps(DEPLOY_ALL, {"name": "soak", "type": "suspend",
                                   "properties": {"duration": "1h"}}))
    await settle(mc, clock)


async def failed_at_a_timeout(mc: MC, clock: Clock) -> None:
    set_app(mc, steps({**DEPLOY_ALL, "timeout": "30s"}))
    await settle(mc, clock, ready=False)


async def rolled_back(mc: MC, clock: Clock) -> None:
    """Revision 1 succeeded; revision 2 failed its deploy and went back to revision 1."""
    set_app(mc, steps(DEPLOY_ALL))
    await settle(mc, clock)
    broken = steps({**DEPLOY_ALL, "timeout": "30s",
                    "properties": {**DEPLOY_ALL["properties"], "rollbackOnFailure": True}})
    broken["spec"]["components"][0]["properties"]["image"] = "web:2"
    set_app(mc, broken)
    await settle(mc, clock, ready=False)
    await settle(mc, clock)


async def notified(mc: MC, clock: Clock) -> None:
    set_app(mc, notifying_app("http://hook.example/"))
    await settle(mc, clock)


async def refused(mc: MC, clock: Clock) -> None:
    body = app()
    body["spec"]["components"][0]["type"] = "no-such-type"
    set_app(mc, body)
    await settle(mc, clock)


SHAPES: dict[str, tuple[Shape, str]] = {
    "succeeded in three clusters": (succeeded_in_three_clusters, "running"),
    "suspended at an approve step": (suspended_at_an_approve_step, "workflowSuspending"),
    "suspended for a duration": (suspended_for_a_duration, "workflowSuspending"),
    "failed": (failed_at_a_timeout, "workflowFailed"),
    "rolled back": (rolled_back, "rolledBack"),
    "with a notification": (notified, "running"),
    "refused": (refused, "renderFailed"),
}


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_restart_writes_nothing_for_a_settled_application(shape: str) -> None:
    make, phase = SHAPES[shape]
    mc, clock = MC(fakes.cluster_set(*fakes.MEMBERS)), Clock()
    await make(mc, clock)
    before = must(mc, "hub", "Application", "shop")
    assert before["status"]["status"] == phase
    writes = list(mc.writes)
    clock.now += 60  # the process is back a minute later
    reconciler, recorder, outbox = started(mc, clock)
    await reconciler.reconcile(REQUEST)
    assert mc.writes == writes, f"written after a restart: {mc.writes[len(writes):]}"
    assert recorder.events == [] and outbox.messages == []
    assert must(mc, "hub", "Application", "shop") == before


def test_the_same_status_patches_nothing() -> None:
    """What the hub keeps of a status (JSON, no null field) against the status computed
    again: no patch, however the computed one spells it (tuples, nulls)."""
    computed = {"workflow": {"endTime": None, "steps": [
        {"name": "a", "clusters": ("m1",), "finishedTime": None}],
        "_state": {"healthy_since": (("m1", 5.0),), "end": None}}}
    stored = {"workflow": {"steps": [{"name": "a", "clusters": ["m1"]}],
                           "_state": {"healthy_since": [["m1", 5]]}}}
    assert status_.status_patch(stored, computed) is None


def test_a_patch_carries_what_changed_and_deletes_what_went_away() -> None:
    """A merge patch keeps a field it does not name: one that went away (a rollback
    ended by a restart, a workflow's end time) is sent as null, else the hub keeps it."""
    stored = {"status": "rolledBack", "rollback": {"revision": 1},
              "workflow": {"endTime": "t1", "phase": "succeeded", "steps": [{"n": 1}]}}
    new = {"status": "runningWorkflow", "workflow": {"endTime": None, "phase": "running",
                                                     "steps": [{"n": 1}]}}
    patch = status_.status_patch(stored, new)
    assert patch == {"status": "runningWorkflow", "rollback": None,
                     "workflow": {"endTime": None, "phase": "running"}}
    assert fakes.merge_patch(copy.deepcopy(stored), patch) == status_.kept(new)


async def test_fedctl_app_restart_ends_a_rollback_on_the_hub() -> None:
    """A workflow restarted on request drops the recorded rollback: the patch deletes it
    (a merge patch that only left it out kept it on the hub, and the Application stayed
    rolledBack, its rollback deployed, for ever)."""
    mc, clock = MC(fakes.cluster_set(*fakes.MEMBERS)), Clock()
    await rolled_back(mc, clock)
    assert "rollback" in must(mc, "hub", "Application", "shop")["status"]
    body = must(mc, "hub", "Application", "shop")
    body["metadata"]["annotations"] = {applications.RESTART: "n1"}
    set_app(mc, body)
    await settle(mc, clock, times=1)
    status = must(mc, "hub", "Application", "shop")["status"]
    assert "rollback" not in status and status["status"] == "runningWorkflow"
    assert status["handledRequests"] == {applications.RESTART: "n1"}
