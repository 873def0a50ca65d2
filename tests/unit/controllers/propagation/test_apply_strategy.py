"""applyStrategy: whenToTakeOver, ReportDiff (nothing written, differences recorded) and
ignoredFields (not drift)."""

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
from federation.placement import loader
from tests.unit.controllers.fakes import JSON, FakeContext, config_map, duplicated_policy


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
