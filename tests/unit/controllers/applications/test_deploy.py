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


def with_policy(properties: dict[str, Any]) -> dict[str, Any]:
    doc = app()
    doc["spec"]["policies"].append({"name": "once", "type": "apply-once",
                                    "properties": properties})
    return doc


async def drifted(doc: dict[str, Any], tracked: bool = True, image: str = "web:1",
                  replicas: int = 5, present: bool = True) -> Build:
    """``doc`` planned against member1 holding our Deployment (of ``image``) scaled to
    ``replicas`` by someone in the member; tracked at this revision or not."""
    view = FakeView([("member1", NAMESPACE)])
    first = await planned(view, doc)
    written = first.by_vertex[by_kind(first)["Deployment/member1"].key]
    live = live_copy(by_kind(await planned(FakeView(), app(image)))["Deployment/member1"].obj)
    live["spec"]["replicas"] = replicas
    if present:
        view.put("member1", live)
    await kept(view, doc)
    rt = {"spec": {"resources": [written.as_json()]}} if tracked else None
    build = build_of(doc, rt)
    await run_through(view, build, deploy.plan_deploy)
    return build


async def test_drift_is_undone_without_apply_once() -> None:
    vertex = by_kind(await drifted(app()))["Deployment/member1"]
    assert vertex.action is plan.Action.UPDATE and vertex.reason == "drift at /spec/replicas"


async def test_apply_once_leaves_drift_of_a_written_revision_alone() -> None:
    """apply-once enabled without rules: KubeVela skips its state-keep."""
    vertex = by_kind(await drifted(with_policy({"enable": True})))["Deployment/member1"]
    assert vertex.action is plan.Action.NOOP
    assert vertex.reason == "left as it is (apply-once)"
    disabled = by_kind(await drifted(with_policy({"enable": False})))["Deployment/member1"]
    assert disabled.action is plan.Action.UPDATE


async def test_apply_once_does_not_bring_back_an_object_deleted_in_the_member() -> None:
    build = await drifted(with_policy({"enable": True}), present=False)
    assert "Deployment/member1" not in by_kind(build)
    untracked = await drifted(with_policy({"enable": True}), present=False, tracked=False)
    assert by_kind(untracked)["Deployment/member1"].action is plan.Action.CREATE


async def test_a_new_revision_is_written_but_keeps_the_live_paths_a_rule_names() -> None:
    """apply-once's rule (KubeVela's example with an HPA): a new image is rolled out, the
    replicas the member's autoscaler set are kept."""
    doc = with_policy({"enable": True, "rules": [{
        "selector": {"resourceTypes": ["Deployment"]},
        "strategy": {"path": ["spec.replicas"], "affect": "onUpdate"}}]})
    doc["spec"]["components"][0]["properties"]["image"] = "web:2"
    vertex = by_kind(await drifted(doc, tracked=False))["Deployment/member1"]
    assert vertex.action is plan.Action.UPDATE and vertex.reason == "content changed"
    assert vertex.obj["spec"]["replicas"] == 5
    assert vertex.obj["spec"]["template"]["spec"]["containers"][0]["image"] == "web:2"


def read_only(doc: dict[str, Any]) -> dict[str, Any]:
    doc["spec"]["policies"].append({"name": "ro", "type": "read-only", "properties": {
        "rules": [{"selector": {"resourceTypes": ["Deployment"]}}]}})
    return doc


async def test_a_read_only_object_is_never_written_even_someone_elses() -> None:
    """read-only: another team's Deployment of that identity is read, not overwritten and
    not a problem; nothing is planned for it (so it is never tracked, never deleted)."""
    foreign = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "shop",
                            "annotations": {"federation.io/application": "shop/other"}},
               "spec": {"replicas": 9}}
    build = await planned(FakeView([("member1", NAMESPACE), ("member1", foreign)]),
                          read_only(app()))
    assert [v.obj["kind"] for v in build.plan] == ["ApplicationRevision"]
    assert build.problems == []


async def test_a_read_only_object_that_is_not_there_is_a_problem() -> None:
    build = await planned(FakeView([("member1", NAMESPACE)]), read_only(app()))
    assert [v.obj["kind"] for v in build.plan] == ["ApplicationRevision"]
    assert build.problems == ["Deployment shop/web in member1: is marked as read-only but "
                              "does not exist"]


async def test_read_only_by_component_type_reaches_the_controllers_plan() -> None:
    """A rule by ``componentTypes`` (what rendered the object, recorded by the compile)
    holds in the controller as one by kind does; a type that made nothing holds nothing."""
    foreign = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "shop",
                            "annotations": {"federation.io/application": "shop/other"}},
               "spec": {"replicas": 9}}
    for types, kinds in ((["webservice"], ["ApplicationRevision"]),
                         (["worker"], ["ApplicationRevision"])):
        doc = app()
        doc["spec"]["policies"].append({"name": "ro", "type": "read-only", "properties": {
            "rules": [{"selector": {"componentTypes": types}}]}})
        build = await planned(FakeView([("member1", NAMESPACE), ("member1", foreign)]), doc)
        assert [v.obj["kind"] for v in build.plan] == kinds
        if types == ["webservice"]:
            assert build.problems == []
        else:  # not read-only: someone else's Deployment is a problem, never overwritten
            assert build.problems == ["Deployment shop/web in member1: exists and is not "
                                      "managed by federation"]  # no hint: shop/other's mark
