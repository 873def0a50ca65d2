"""Record: the executor's report read into tracker entries and problems; the tracker, the
revision's outcome and garbage collection planned from it; the Application's status."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from federation.applications import tracker, workflow
from federation.contexts import client as kube
from federation.controllers.applications import compilation, record, status
from federation.controllers.applications.build import Build
from federation.controllers.kit import plan
from tests.unit.controllers.applications.fakes import (
    FakeView,
    app,
    build_of,
    kept,
    revision_doc,
    run_through,
)


def entry(name: str, revision: int = 1) -> tracker.Entry:
    return tracker.Entry("member1", "v1", "ConfigMap", "shop", name, revision, "canary")


def vertex(action: plan.Action, name: str, cluster: str = "member1") -> plan.Vertex:
    return plan.Vertex(cluster, action, {"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"name": name, "namespace": "shop"}})


async def compiled(view: FakeView | None = None, **kw: Any) -> Build:
    build = build_of(app(**kw))
    await run_through(view or FakeView(), build, compilation.compile_app)
    return build


def ended(build: Build, phase: workflow.Phase = "succeeded") -> None:
    build.state = workflow.State(build.number, (), "succeeded" if phase == "succeeded"
                                 else "failed", 0.0, end=10.0)


def report(*outcomes: plan.Outcome) -> plan.Report:
    return plan.Report({o.vertex.key: o for o in outcomes})


def test_the_tracker_is_written_only_when_it_changes() -> None:
    spec = record.tracker_spec("shop", "uid", [entry("a")], [])
    assert record.tracker_vertex("hub", None, "shop", "shop",
                                 record.tracker_spec("shop", "uid", [], [])) is None
    created = record.tracker_vertex("hub", None, "shop", "shop", spec)
    assert created is not None and created.action is plan.Action.CREATE
    rt = {"metadata": {"resourceVersion": "3"}, "spec": spec}
    assert record.tracker_vertex("hub", rt, "shop", "shop", spec) is None
    changed = record.tracker_vertex("hub", rt, "shop", "shop",
                                    record.tracker_spec("shop", "uid", [], []))
    assert changed is not None and changed.action is plan.Action.UPDATE
    assert changed.obj["metadata"]["resourceVersion"] == "3"


async def test_the_report_says_what_is_placed_and_what_is_pending() -> None:
    """A write done is tracked; one failed is a problem (and not tracked); a delete done,
    or that found nothing, drops the entry; one failed otherwise keeps it pending."""
    rt = {"metadata": {"resourceVersion": "1"},
          "spec": {"resources": [e.as_json() for e in
                                 (entry("gone"), entry("missing"), entry("stuck"))]}}
    build = build_of(app(), rt)
    build.diff = tracker.Diff((), (entry("gone"), entry("missing"), entry("stuck")), ())
    written, failed = vertex(plan.Action.CREATE, "new"), vertex(plan.Action.CREATE, "bad")
    deleted, missing, stuck = (vertex(plan.Action.DELETE, n) for n in
                               ("gone", "missing", "stuck"))
    for v, e in ((written, entry("new")), (failed, entry("bad")), (deleted, entry("gone")),
                 (missing, entry("missing")), (stuck, entry("stuck"))):
        build.by_vertex[v.key] = e
    done = record.outcome(build, report(
        plan.Outcome(written, True), plan.Outcome(failed, False, error="denied"),
        plan.Outcome(deleted, True),
        plan.Outcome(missing, False, exception=kube.ApiError("m", 404, "NotFound", "x")),
        plan.Outcome(stuck, False, exception=kube.ApiError("m", 500, "Internal", "x"))))
    assert done.entries == [entry("new"), entry("stuck")]
    assert done.pending == [entry("stuck")]
    assert build.problems == ["ConfigMap shop/bad in member1: denied"]


async def test_an_ended_workflow_marks_its_revision_once_after_the_tracker() -> None:
    view = FakeView()
    await kept(view, app())
    build = await compiled(view)
    ended(build)
    dag = record.plan_record("hub", build, report(), record.Outcome([entry("a")], []))
    by_kind = {v.obj["kind"]: v for v in dag}
    mark = by_kind["ApplicationRevision"]
    assert mark.action is plan.Action.UPDATE
    assert mark.obj["status"] == {"succeeded": True, "workflowFinished": True}
    assert mark.depends_on == {by_kind["ResourceTracker"].key}
    build.revisions = [revision_doc(1, succeeded=True)]
    again = record.plan_record("hub", build, report(), record.Outcome([], []))
    assert [v.obj["kind"] for v in again] == []


async def test_a_revision_created_now_is_marked_as_the_server_answered() -> None:
    """The new revision's body has no resourceVersion; the create's answer has one."""
    build = await compiled()
    ended(build, "failed")
    created = build.revision_vertex
    assert created is not None
    answer = {**created.obj, "metadata": {**created.obj["metadata"], "resourceVersion": "9"}}
    dag = record.plan_record("hub", build, report(plan.Outcome(created, True, result=answer)),
                             record.Outcome([], []))
    [mark] = list(dag)
    assert mark.obj["metadata"]["resourceVersion"] == "9"
    assert mark.obj["status"]["succeeded"] is False
    unanswered = record.plan_record("hub", build, report(), record.Outcome([], []))
    assert list(unanswered) == []  # no version to update against: the next reconcile


async def test_revisions_past_the_limit_go_unless_a_cluster_still_runs_them() -> None:
    docs = [revision_doc(n) for n in range(1, 16)]
    view = FakeView([("hub", d) for d in docs])
    build = await compiled(view)
    assert build.number == 16 and build.compiled is not None
    limit = build.compiled.gc.revision_limit
    dag = record.plan_record("hub", build, report(), record.Outcome([entry("a", 2)], []))
    gone = [v for v in dag if v.obj["kind"] == "ApplicationRevision"]
    pruned = sorted(int(v.obj["metadata"]["name"].rpartition("v")[2]) for v in gone)
    assert pruned == [n for n in range(1, 17 - limit) if n != 2]
    assert all(v.action is plan.Action.DELETE and v.obj["metadata"]["uid"] for v in gone)


def test_a_refused_tracker_fails_the_reconcile_a_refused_mark_does_not() -> None:
    tracker_vertex = plan.Vertex("hub", plan.Action.UPDATE, {
        "kind": "ResourceTracker", "metadata": {"name": "shop"}})
    mark = plan.Vertex("hub", plan.Action.UPDATE, {
        "kind": "ApplicationRevision", "metadata": {"name": "shop-v1"}})
    refused = kube.ApiError("hub", 409, "Conflict", "modified")
    record.raise_for_tracker(report(plan.Outcome(mark, False, exception=refused)))
    with pytest.raises(kube.ApiError):
        record.raise_for_tracker(report(plan.Outcome(tracker_vertex, False,
                                                     exception=refused)))
    with pytest.raises(RuntimeError, match="boom"):
        record.raise_for_tracker(report(plan.Outcome(mark, False, error="boom")))


async def test_the_status_says_rolled_back_failed_steps_and_unknown_clusters() -> None:
    build = await compiled()
    step = workflow.StepState("canary", "deploy", "failed", reason="Unhealthy",
                              message="member1: broken")
    build.state = workflow.State(1, (step,), "failed", 0.0, end=5.0)
    build.status["rollback"] = {"revision": 1}
    found = status.status_of(build, [], [tracker.Entry("nowhere", "v1", "ConfigMap", "shop",
                                                       "x")])
    assert found["status"] == "rolledBack" and found["healthy"] is False
    conditions = {c["type"]: c for c in found["conditions"]}
    assert conditions["WorkflowFailed"]["message"] == "step canary: member1: broken"
    assert conditions["UnknownClusters"]["message"].startswith(
        "1 tracked object(s) in 1 cluster(s) that are not members ('nowhere')")
    many = [tracker.Entry(f"c{n}", "v1", "ConfigMap", "shop", "x") for n in range(7)]
    assert status.unknown_message(many).endswith(
        "('c0', 'c1', 'c2', 'c3', 'c4', ...): kept, and deleted if a member of that name joins")


async def test_an_ended_workflow_records_its_outputs_on_its_revision() -> None:
    """What a rollback to the revision renders its input-taking steps with."""
    view = FakeView()
    await kept(view, app())
    build = await compiled(view)
    ended(build)
    assert build.state is not None
    build.state = dataclasses.replace(build.state, values={"o": None, "p": {"a": 1}})
    dag = record.plan_record("hub", build, report(), record.Outcome([entry("a")], []))
    mark = next(v for v in dag if v.obj["kind"] == "ApplicationRevision")
    assert mark.obj["status"]["outputValues"] == [["o", "null"], ["p", '{"a": 1}']]
