"""Plan deploy: namespaces first, then create / update / nothing for each object the
reached clusters must hold, after the new revision; someone else's object never."""

from __future__ import annotations

from typing import Any

from federation.controllers.applications import deploy
from federation.controllers.applications.build import Build
from federation.controllers.kit import plan
from tests.unit.controllers.applications.fakes import (
    NAMESPACE,
    FakeView,
    app,
    build_of,
    kept,
    live_copy,
    run_through,
)


async def planned(view: FakeView, doc: dict[str, Any] | None = None) -> Build:
    build = build_of(doc or app())
    await run_through(view, build, deploy.plan_deploy)
    return build


def by_kind(build: Build) -> dict[str, plan.Vertex]:
    return {f"{v.obj['kind']}/{v.cluster}": v for v in build.plan}


async def test_a_first_deploy_creates_the_namespace_then_the_object_after_the_revision(
        ) -> None:
    build = await planned(FakeView())
    vertices = by_kind(build)
    assert set(vertices) == {"ApplicationRevision/hub", "Namespace/member1",
                             "Deployment/member1"}
    web = vertices["Deployment/member1"]
    assert web.action is plan.Action.CREATE
    assert web.depends_on == {vertices["Namespace/member1"].key,
                              vertices["ApplicationRevision/hub"].key}
    assert vertices["Namespace/member1"].depends_on == {vertices["ApplicationRevision/hub"].key}
    assert web.expect == plan.Identity("apps", "Deployment", "shop", "web")
    annotations = web.obj["metadata"]["annotations"]
    assert annotations["federation.io/application"] == "shop/shop"
    assert web.obj["metadata"]["labels"]["federation.io/managed-by"] == "federation"
    assert build.by_vertex[web.key].cluster == "member1"
    assert build.problems == []


async def test_what_is_there_already_is_nothing_to_write() -> None:
    view = FakeView([("member1", NAMESPACE)])
    first = await planned(view)
    await kept(view, app())
    view.put("member1", live_copy(by_kind(first)["Deployment/member1"].obj))
    again = await planned(view)
    assert [(v.obj["kind"], v.action) for v in again.plan] == [("Deployment", plan.Action.NOOP)]


async def test_someone_elses_object_is_a_problem_naming_who_placed_it() -> None:
    """The attack: another team's Deployment of the same identity in member1. It is not
    planned (no update, not even a no-op); the problem says whose it is."""
    foreign = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "shop",
                            "annotations": {"federation.io/application": "shop/other"},
                            "labels": {"federation.io/managed-by": "federation"}},
               "spec": {"replicas": 9}}
    build = await planned(FakeView([("member1", NAMESPACE), ("member1", foreign)]))
    assert [v.obj["kind"] for v in build.plan] == ["ApplicationRevision"]
    assert build.problems == ["Deployment shop/web in member1: exists and was placed by "
                              "Application shop/other"]


async def test_a_member_that_cannot_be_read_is_a_problem_and_nothing_is_planned() -> None:
    view = FakeView()
    view.down.add("member1")
    build = await planned(view)
    assert [v.obj["kind"] for v in build.plan] == ["ApplicationRevision"]
    assert len(build.problems) == 1
    assert build.problems[0].startswith("Deployment shop/web in member1: member1")
