"""The reconciler: the chain, then every write through the executor, the Application's
status the one direct write, and Events only after the records they describe."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api

from federation.contexts import client as kube
from federation.controllers.applications import (
    compilation,
    deploy,
    evaluation,
    health,
    prune,
    reconciler,
    requests,
    revisions,
    rollback,
)
from federation.controllers.applications.settings import ROLLBACK
from tests.unit.controllers.applications.fakes import (
    NAMESPACE,
    Failure,
    FakeView,
    World,
    app,
    live_copy,
    revision_doc,
)


def test_the_chain_is_the_table_of_contents() -> None:
    assert reconciler.STEPS.steps == (
        revisions.load_revision, compilation.compile_app, requests.take_requests,
        rollback.roll_back, health.observe_health, evaluation.evaluate_workflow,
        deploy.plan_deploy, prune.plan_prune)


async def test_a_first_reconcile_writes_in_order_and_posts_events_last() -> None:
    """The revision, then the member Namespace and Deployment, then the tracker, then the
    Application's status; the Revision Event only after all of them."""
    world = World()
    world.view.put("hub", app())
    result = await world.reconcile()
    assert result is not None and result.requeue_after == 5.0  # the canary's probe
    assert world.journal == [
        ("create", "hub", "ApplicationRevision/shop-v1"),
        ("create", "member1", "Namespace/shop"),
        ("create", "member1", "Deployment/web"),
        ("create", "hub", "ResourceTracker/shop"),
        ("status", "hub", "Application/shop"),
        ("event", "Revision", "Application")]
    status = world.status.written[0]
    assert status["status"] == "runningWorkflow"
    assert status["latestRevision"]["name"] == "shop-v1"
    assert [e["cluster"] for e in status["appliedResources"]] == ["member1"]


async def test_an_invalid_application_records_its_status_before_the_warning() -> None:
    """Events after the record: the ``renderFailed`` status first, then the Warning; a
    status write that fails posts no Warning (it would describe a state never recorded),
    and nothing is written anywhere else."""
    body = app()
    body["spec"]["components"][0]["type"] = "nonsense"
    world = World()
    world.view.put("hub", body)
    assert await world.reconcile() is None
    assert world.journal == [("status", "hub", "Application/shop"),
                             ("event", "InvalidApplication", "Application")]
    assert world.status.written[0]["status"] == "renderFailed"
    failing = World()
    failing.view.put("hub", body)
    failing.status.fail = True
    with pytest.raises(Failure):
        await failing.reconcile()
    assert failing.journal == [] and failing.recorder.events == []


async def test_an_unchanged_refusal_writes_and_posts_nothing() -> None:
    body = app()
    body["spec"]["components"][0]["type"] = "nonsense"
    world = World()
    world.view.put("hub", body)
    await world.reconcile()
    world.view.put("hub", {**body, "status": world.status.written[0]})
    world.journal.clear()
    await world.reconcile()
    assert world.journal == []


async def test_a_revision_the_hub_refuses_stops_everything() -> None:
    """No member write without the revision on record; the reconcile fails (retried)."""
    world = World()
    world.view.put("hub", app())
    world.writer.fail[("create", "ApplicationRevision")] = 500
    with pytest.raises(kube.ApiError):
        await world.reconcile()
    assert world.journal == []


async def test_a_tracker_the_hub_refuses_fails_the_reconcile_before_the_status() -> None:
    world = World()
    world.view.put("hub", app())
    world.writer.fail[("create", "ResourceTracker")] = 500
    with pytest.raises(kube.ApiError):
        await world.reconcile()
    assert ("status", "hub", "Application/shop") not in world.journal
    assert not [j for j in world.journal if j[0] == "event"]


async def test_a_failed_rollback_request_is_warned_after_the_status() -> None:
    world = World()
    world.view.put("hub", revision_doc(1, succeeded=False))
    world.view.put("hub", app("web:2", annotations={ROLLBACK: "0@n1"}))
    await world.reconcile()
    status_at = world.journal.index(("status", "hub", "Application/shop"))
    assert world.journal.index(("event", "RollbackFailed", "Application")) > status_at
    assert world.status.written[0]["handledRequests"] == {ROLLBACK: "0@n1"}


async def test_a_failed_member_write_is_a_problem_and_a_retry() -> None:
    world = World()
    world.view.put("hub", app())
    world.writer.fail[("create", "Deployment")] = 403
    result = await world.reconcile()
    assert result is not None and result.requeue_after == 5.0
    applied = {c["type"]: c for c in world.status.written[0]["conditions"]}["Applied"]
    assert applied["status"] == "False" and "create Deployment refused" in applied["message"]
    assert world.status.written[0]["appliedResources"] == []


async def test_no_longer_rendered_objects_are_deleted_and_dropped_from_the_tracker() -> None:
    steps = [{"name": "canary", "type": "deploy", "properties": {"policies": ["canary"]}}]
    old = live_copy({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "old", "namespace": "shop"}})
    rt = {"apiVersion": "core.oam.dev/v1beta1", "kind": "ResourceTracker",
          "metadata": {"name": "shop", "namespace": "shop", "resourceVersion": "5"},
          "spec": {"resources": [{"cluster": "member1", "apiVersion": "v1",
                                  "kind": "ConfigMap", "namespace": "shop", "name": "old",
                                  "revision": 1, "step": "canary"}]}}
    world = World(FakeView([("member1", NAMESPACE), ("member1", old), ("hub", rt)]))
    world.view.put("hub", app(steps=steps))
    await world.reconcile()
    assert ("delete", "member1", "ConfigMap/old") in world.journal
    assert ("update", "hub", "ResourceTracker/shop") in world.journal
    status = world.status.written[0]
    assert [e["name"] for e in status["appliedResources"]] == ["web"]


def test_mypy_rejects_a_step_that_writes(tmp_path: Path) -> None:
    """The view has no writer: a step reaching for one does not type-check."""
    snippet = tmp_path / "bad_step.py"
    snippet.write_text(textwrap.dedent("""
        from federation.controllers.applications.build import Build
        from federation.controllers.applications.view import ApplicationView
        from federation.controllers.kit.chain import Verdict

        async def sneaky(view: ApplicationView, build: Build) -> Verdict | None:
            await view._mc.cluster("member1").create({})
            await view.writer.create("member1", {})
            return None
    """))
    out, _, status = mypy_api.run([str(snippet), "--strict", "--no-incremental",
                                   "--follow-imports=silent"])
    assert status != 0
    assert '"ApplicationView" has no attribute "_mc"' in out
    assert '"ApplicationView" has no attribute "writer"' in out
