"""Evaluate workflow: the state machine advanced, what each reached cluster holds, waits
and a failed step's rollback."""

from __future__ import annotations

from typing import Any

from federation.applications import workflow
from federation.controllers.applications import evaluation, health
from federation.controllers.applications.build import Build
from tests.unit.controllers.applications.fakes import (
    FakeView,
    app,
    build_of,
    canary_started,
    kept,
    revision_doc,
    run_through,
)

CANARY_ONLY = [{"name": "canary", "type": "deploy", "properties": {"policies": ["canary"]}}]


async def observed(view: FakeView, doc: dict[str, Any], rt: dict[str, Any] | None = None
                   ) -> Build:
    """The build up to the health observation, the revision of ``doc`` kept."""
    await kept(view, doc)
    build = build_of(doc, rt)
    await run_through(view, build, health.observe_health)
    return build


async def test_the_first_evaluation_starts_the_canary_and_says_what_it_holds() -> None:
    view, build = FakeView(), build_of(app())
    await run_through(view, build, evaluation.evaluate_workflow)
    assert build.state is not None
    assert workflow.assignments(build.state) == {"canary": ("member1",)}
    assert set(build.desired) == {("member1", "canary")}
    assert {o["kind"] for o, _ in build.desired[("member1", "canary")]} == {"Deployment"}
    assert all(number == 1 for _, number in build.desired[("member1", "canary")])
    assert build.final == set()


async def test_a_waiting_step_asks_to_be_looked_at_again() -> None:
    steps = [{"name": "pause", "type": "suspend", "properties": {"duration": "30s"}}]
    view, build = FakeView(), build_of(app(steps=steps))
    await run_through(view, build, health.observe_health)
    verdict = await evaluation.evaluate_workflow(view, build)
    assert any(isinstance(a, workflow.Wait) for a in build.actions)
    assert verdict is not None and not verdict.stop
    assert verdict.requeue_after is not None and 0 < verdict.requeue_after <= 30


async def test_a_recorded_rollback_is_not_evaluated() -> None:
    build = build_of(app())
    build.status["rollback"] = {"revision": 1}
    assert await evaluation.evaluate_workflow(FakeView(), build) is None
    assert build.actions == [] and build.desired == {}


async def test_a_failed_step_with_rollback_on_failure_records_the_last_good_revision() -> None:
    """The canary fails (its Deployment stopped progressing); the step asks to go back:
    the status records a rollback to v1, the last revision that succeeded."""
    steps = [{"name": "canary", "type": "deploy",
              "properties": {"policies": ["canary"], "rollbackOnFailure": True}}]
    view = FakeView([("hub", revision_doc(1, succeeded=True))], now=2000.0)
    build = await observed(view, app("web:2", steps=steps,
                                     status={"workflow": canary_started(2, steps=1)}))
    build.health = {("canary", "member1"): ("failed", "Deployment shop/web: broken")}
    await evaluation.evaluate_workflow(view, build)
    assert build.state is not None and build.state.phase == "failed"
    assert any(isinstance(a, workflow.Rollback) for a in build.actions)
    assert build.status["rollback"]["revision"] == 1
    assert build.status["rollback"]["from"] == 2


async def test_with_nothing_good_to_go_back_to_no_rollback_is_recorded() -> None:
    steps = [{"name": "canary", "type": "deploy",
              "properties": {"policies": ["canary"], "rollbackOnFailure": True}}]
    view = FakeView()
    build = await observed(view, app(steps=steps,
                                     status={"workflow": canary_started(1, steps=1)}))
    build.health = {("canary", "member1"): ("failed", "broken")}
    await evaluation.evaluate_workflow(view, build)
    assert "rollback" not in build.status


async def test_a_succeeded_workflow_makes_every_tracked_cluster_final() -> None:
    rt = {"metadata": {"name": "shop", "namespace": "shop", "resourceVersion": "1"},
          "spec": {"resources": [{"cluster": "member7", "apiVersion": "v1",
                                  "kind": "ConfigMap", "namespace": "shop", "name": "old",
                                  "revision": 1, "step": "gone"}]}}
    view = FakeView()
    build = await observed(view, app(steps=CANARY_ONLY,
                                     status={"workflow": canary_started(1, steps=1)}), rt)
    build.health = {("canary", "member1"): ("healthy", "")}
    await evaluation.evaluate_workflow(view, build)
    assert build.state is not None and build.state.phase == "succeeded"
    assert build.final == {"member7"}


async def test_a_failed_workflow_cleans_up_only_with_continue_on_failure() -> None:
    """garbage-collect's continueOnFailure (KubeVela runs its mark stage on a failed
    workflow too): every tracked cluster is final; without it, none is."""
    rt = {"metadata": {"name": "shop", "namespace": "shop", "resourceVersion": "1"},
          "spec": {"resources": [{"cluster": "member7", "apiVersion": "v1",
                                  "kind": "ConfigMap", "namespace": "shop", "name": "old",
                                  "revision": 1, "step": "gone"}]}}
    for go_on, final in ((False, set()), (True, {"member7"})):
        doc = app(steps=CANARY_ONLY, status={"workflow": canary_started(1, steps=1)})
        doc["spec"]["policies"].append({"name": "gc", "type": "garbage-collect",
                                        "properties": {"continueOnFailure": go_on}})
        build = await observed(FakeView(), doc, rt)
        build.health = {("canary", "member1"): ("failed", "broken")}
        await evaluation.evaluate_workflow(FakeView(), build)
        assert build.state is not None and build.state.phase == "failed"
        assert build.final == final
