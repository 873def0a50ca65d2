"""Compile: the fleet, the namespace grant, and an invalid Application as a Problem."""

from __future__ import annotations

import pytest

from federation.applications import scope
from federation.controllers.applications import compilation, revisions
from federation.controllers.kit.chain import Problem
from tests.unit.controllers.applications.fakes import FakeView, app, build_of, run_through


async def test_the_fleet_is_the_members_described_by_their_member_clusters() -> None:
    member = {"apiVersion": "cluster.federation.io/v1alpha1", "kind": "MemberCluster",
              "metadata": {"name": "member2", "labels": {"region": "eu"}}, "spec": {}}
    view, build = FakeView([("hub", member)]), build_of(app())
    await run_through(view, build, compilation.compile_app)
    assert [c.name for c in build.fleet] == ["member1", "member2", "member3"]
    assert build.fleet[1].labels.get("region") == "eu"
    assert build.compiled is not None
    assert set(build.compiled.targets) == {"canary", "rollout"}
    assert set(build.compiled.targets["rollout"].clusters) == {"member2", "member3"}


async def test_an_invalid_application_is_a_problem_naming_the_field() -> None:
    body = app()
    body["spec"]["components"][0]["type"] = "nonsense"
    view, build = FakeView(), build_of(body)
    await revisions.load_revision(view, build)
    with pytest.raises(Problem) as raised:
        await compilation.compile_app(view, build)
    assert (raised.value.condition, raised.value.reason) == ("Rendered", "InvalidApplication")
    assert str(raised.value).startswith("spec.components[0]")
    assert build.compiled is None


async def test_another_namespace_needs_the_hub_namespaces_grant() -> None:
    """A topology into ``prod``: refused until the hub Namespace lists it (read from the
    cache, cluster-scoped: nothing in ``shop`` can grant it)."""
    body = app()
    body["spec"]["policies"][0]["properties"]["namespace"] = "prod"
    view = FakeView()
    with pytest.raises(Problem, match="namespace 'prod'"):
        await run_through(view, build_of(body), compilation.compile_app)
    view.put("hub", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "shop", "annotations": {scope.TARGETS_ANNOTATION: "prod"}}})
    build = build_of(body)
    await run_through(view, build, compilation.compile_app)
    assert build.grant is not None and build.grant.allows("prod")
