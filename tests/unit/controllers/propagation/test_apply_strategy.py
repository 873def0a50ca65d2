"""applyStrategy: whenToTakeOver, ReportDiff (nothing written, differences recorded),
ignoredFields (not drift) and ServerSideApply (fields other managers own are theirs)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from federation.contexts import client as kube
from federation.controllers import propagation
from federation.controllers.kit import plan
from federation.controllers.propagation.copies import plan_copies
from federation.controllers.propagation.report_only import report_only
from federation.hub import manifests
from federation.placement import decision as decision_
from federation.placement import loader
from tests.unit.controllers.fakes import (
    JSON,
    FakeContext,
    FakeMC,
    cluster_set,
    config_map,
    duplicated_policy,
)


def build(**strategy: Any) -> propagation.Build:
    template = {**config_map("a"), "metadata": {"name": "a", "namespace": "shop",
                                                "uid": "u1"}}
    found = propagation.Build(template=template, resource=kube.CONFIGMAPS, hub="hub")
    doc = duplicated_policy("a", ["member1"])
    if strategy:
        doc["spec"]["applyStrategy"] = strategy
    found.policy = loader.parse_policy(doc, "test")
    found.desired = {"member1": manifests.mark(manifests.render(config_map("a"), None, False),
                                               "u1")}
    return found


def theirs(**data: str) -> JSON:
    return config_map("a", **data)


async def test_if_no_diff_takes_over_an_equal_object() -> None:
    b = build(whenToTakeOver="IfNoDiff")
    await plan_copies(FakeContext(copies={"member1": theirs()}), b)
    [vertex] = list(b.dag)
    assert (vertex.action, vertex.reason) == (plan.Action.UPDATE, "taking over")


async def test_if_no_diff_leaves_a_different_object_and_says_where() -> None:
    b = build(whenToTakeOver="IfNoDiff")
    await plan_copies(FakeContext(copies={"member1": theirs(k="other")}), b)
    assert len(b.dag) == 0
    assert "differs at /data/k" in b.conflicts["member1"]


async def test_never_leaves_even_an_equal_object() -> None:
    b = build(whenToTakeOver="Never")
    await plan_copies(FakeContext(copies={"member1": theirs()}), b)
    assert len(b.dag) == 0 and "member1" in b.conflicts


async def test_ignored_fields_are_not_drift() -> None:
    b = build(ignoredFields=["/data/k"])
    live = {**b.desired["member1"], "data": {"k": "changed in the member"}}
    await plan_copies(FakeContext(copies={"member1": live}), b)
    [vertex] = list(b.dag)
    assert vertex.action is plan.Action.NOOP


async def test_report_only_writes_nothing_and_records_the_differences() -> None:
    b = build(type="ReportDiff")
    live = {**b.desired["member1"], "data": {"k": "changed in the member"}}
    ctx = FakeContext(copies={"member1": live})
    await plan_copies(ctx, b)
    await report_only(ctx, b)
    assert b.dag.writes() == []
    assert b.record["reportedDifferences"] == {"member1": ["/data/k"]}


async def test_report_only_reports_a_missing_and_a_foreign_object() -> None:
    b = build(type="ReportDiff")
    ctx = FakeContext(copies={})
    await plan_copies(ctx, b)
    await report_only(ctx, b)
    assert b.dag.writes() == []
    assert b.record["reportedDifferences"] == {"member1": ["missing"]}
    b = build(type="ReportDiff")
    ctx = FakeContext(copies={"member1": theirs(k="x")})
    await plan_copies(ctx, b)
    await report_only(ctx, b)
    assert b.record["reportedDifferences"]["member1"][1:] == ["/data/k"]
    assert b.conflicts == {}


@pytest.mark.parametrize(("strategy", "field"), [
    ({"whenToTakeOver": "Never"}, "spec.applyStrategy.whenToTakeOver"),
    ({"ignoredFields": ["spec/replicas"]}, "spec.applyStrategy.ignoredFields[0]"),
    ({"ignoredFields": ["/metadata/labels"]}, "spec.applyStrategy.ignoredFields[0]"),
])
def test_contradictions_and_bad_pointers_are_refused_by_name(strategy: JSON,
                                                             field: str) -> None:
    doc = duplicated_policy("a", ["member1"])
    doc["spec"]["conflictResolution"] = "Overwrite"
    doc["spec"]["applyStrategy"] = strategy
    with pytest.raises(loader.LoadError, match=re.escape(field)):
        loader.parse_policy(doc, "test")


# -- ServerSideApply --------------------------------------------------------------------------


def owned(live: JSON, *entries: tuple[str, str, JSON]) -> JSON:
    """``live`` with managedFields: (manager, operation, fieldsV1) each."""
    meta = {**live["metadata"], "resourceVersion": "41", "managedFields": [
        {"manager": manager, "operation": operation, "apiVersion": "v1",
         "fieldsType": "FieldsV1", "fieldsV1": fields} for manager, operation, fields in entries]}
    return {**live, "metadata": meta}


OUR_APPLY: tuple[str, str, JSON] = ("federation", "Apply", {"f:data": {"f:a": {}},
                                                            "f:metadata": {"f:labels": {}}})
THEIR_K: tuple[str, str, JSON] = ("member-controller", "Apply", {"f:data": {"f:k": {}}})


def ssa_build(**data: str) -> propagation.Build:
    b = build(type="ServerSideApply")
    b.desired["member1"] = manifests.mark(manifests.render(config_map("a", **data), None,
                                                           False), "u1")
    b.decision = decision_.Decision(replicas=0, clusters={"member1": 0})
    return b


async def test_ssa_leaves_a_field_another_manager_owns() -> None:
    """A member's controller owns /data/k: its value is not drift, nothing is written."""
    b = ssa_build(a="ours", k="ours")
    live = owned({**b.desired["member1"], "data": {"a": "ours", "k": "theirs"}},
                 OUR_APPLY, THEIR_K)
    ctx = FakeContext(copies={"member1": live})
    await plan_copies(ctx, b)
    [vertex] = list(b.dag)
    assert vertex.action is plan.Action.NOOP, vertex.reason
    assert vertex.reason == "differs only where other field managers own: /data/k"
    assert ctx.ownership_reads == 1


async def test_ssa_corrects_our_own_field_and_sends_only_ours() -> None:
    b = ssa_build(a="ours", k="ours")
    live = owned({**b.desired["member1"], "data": {"a": "edited", "k": "theirs"}},
                 OUR_APPLY, THEIR_K)
    await plan_copies(FakeContext(copies={"member1": live}), b)
    [vertex] = list(b.dag)
    assert (vertex.action, vertex.reason) == (plan.Action.APPLY, "drift at /data/a")
    assert vertex.obj["data"] == {"a": "ours"}
    assert vertex.obj["metadata"]["resourceVersion"] == "41"
    assert plan.ADOPT not in vertex.obj and "managedFields" not in vertex.obj["metadata"]


async def test_ssa_change_of_the_template_is_applied_without_their_fields() -> None:
    b = ssa_build(a="new", k="ours")
    old = manifests.mark(manifests.render(config_map("a", a="old", k="ours"), None, False),
                         "u1")
    live = owned({**old, "data": {"a": "old", "k": "theirs"}},
                 ("fedctl", "Update", {"f:data": {".": {}, "f:a": {}}}), THEIR_K)
    ctx = FakeContext(copies={"member1": live})
    await plan_copies(ctx, b)
    [vertex] = list(b.dag)
    assert (vertex.action, vertex.reason) == (plan.Action.APPLY, "content changed")
    assert vertex.obj["data"] == {"a": "new"}
    # Our create's fields move into our apply entry first, so apply can remove them later.
    adopt = vertex.obj[plan.ADOPT]
    assert [(e["manager"], e["operation"]) for e in adopt] == [
        ("member-controller", "Apply"), ("federation", "Apply")]


async def test_ssa_still_creates_by_post_and_falls_back_without_field_managers() -> None:
    b = ssa_build(a="x")
    await plan_copies(FakeContext(copies={}), b)
    assert [v.action for v in b.dag] == [plan.Action.CREATE]
    b = ssa_build(a="x")
    live = {**b.desired["member1"], "data": {"a": "edited"}}  # a pull member: no managers
    await plan_copies(FakeContext(copies={"member1": live}), b)
    [vertex] = list(b.dag)
    assert vertex.action is plan.Action.UPDATE
    assert b.decision is not None and any(
        "records no field managers" in line for line in b.decision.explanation)


async def test_ssa_writes_are_held_by_suspension_and_report_only_lists() -> None:
    from federation.controllers.propagation import suspension
    assert plan.Action.APPLY in suspension.HELD_BACK
    from federation.controllers.propagation import report_only as report_only_module
    assert plan.Action.APPLY in report_only_module.HELD_BACK


async def test_the_writer_adopts_our_fields_then_applies_conditionally() -> None:
    mc = FakeMC(cluster_set("member1"))
    stored = mc.put("member1", config_map("a", a="old"))
    body = {**config_map("a", a="new"), plan.ADOPT: [{"manager": "federation"}]}
    body["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
    written = await propagation.Writer(mc, "hub").apply("member1", body)
    assert [verb for verb, _, _ in mc.writes] == ["patch", "apply"]
    assert written["data"] == {"a": "new"} and plan.ADOPT not in written
    body["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]  # stale now
    with pytest.raises(kube.ApiError, match="modified"):
        await propagation.Writer(mc, "hub").apply("member1", body)


def test_server_side_apply_is_a_type_and_kubefleets_other_fields_are_refused() -> None:
    doc = duplicated_policy("a", ["member1"])
    doc["spec"]["applyStrategy"] = {"type": "ServerSideApply"}
    assert loader.parse_policy(doc, "test").spec.server_side_apply()
    for field in ("serverSideApplyConfig", "comparisonOption", "whenToApply"):
        doc["spec"]["applyStrategy"] = {"type": "ServerSideApply", field: "x"}
        with pytest.raises(loader.LoadError, match=field):
            loader.parse_policy(doc, "test")
