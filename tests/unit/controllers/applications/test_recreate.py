"""Plan deploy with a resource-update policy: an update whose recreate field changed is
planned as a recreate of the exact live version judged ours; anything not ours, being
deleted, or unreadable by a rule's path is a problem and nothing is planned for it."""

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

IMAGE = "spec.template.spec.containers[0].image"


def with_rule(image: str = "web:2", fields: tuple[str, ...] = (IMAGE,),
              selector: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = app(image)
    doc["spec"]["policies"].append({"name": "update", "type": "resource-update", "properties": {
        "rules": [{"selector": selector or {"resourceTypes": ["Deployment"]},
                   "strategy": {"recreateFields": list(fields)}}]}})
    return doc


async def planned_over(doc: dict[str, Any], live: dict[str, Any]) -> Build:
    """``doc`` planned against member1 holding ``live``."""
    view = FakeView([("member1", NAMESPACE), ("member1", live)])
    await kept(view, app())
    build = build_of(doc)
    await run_through(view, build, deploy.plan_deploy)
    return build


async def ours(image: str = "web:1") -> dict[str, Any]:
    """Our Deployment of ``image`` as member1 holds it (written by the Application)."""
    build = build_of(app(image))
    await run_through(FakeView(), build, deploy.plan_deploy)
    written = next(v.obj for v in build.plan if v.obj["kind"] == "Deployment")
    live = live_copy(written)
    live["metadata"]["resourceVersion"] = "41"
    return live


def deployment(build: Build) -> plan.Vertex | None:
    return next((v for v in build.plan if v.obj["kind"] == "Deployment"), None)


async def test_a_changed_recreate_field_plans_a_recreate_of_the_version_read() -> None:
    live = await ours()
    build = await planned_over(with_rule(), live)
    vertex = deployment(build)
    assert vertex is not None and vertex.action is plan.Action.RECREATE
    assert vertex.reason == f"{IMAGE} changed (resource-update recreateFields)"
    assert vertex.gone == plan.reference(live, exact=True)
    assert vertex.gone["preconditions"] == {"uid": "uid-Deployment-web",
                                            "resourceVersion": "41"}
    assert vertex.expect == plan.Identity("apps", "Deployment", "shop", "web")
    assert "resourceVersion" not in vertex.obj["metadata"]  # a create, not a PUT
    assert vertex.obj["spec"]["template"]["spec"]["containers"][0]["image"] == "web:2"
    assert build.problems == []


async def test_an_unchanged_recreate_field_is_an_ordinary_update() -> None:
    """Another field changed (replicas): the update as without the policy."""
    doc = with_rule("web:1")
    doc["spec"]["components"][0]["properties"]["replicas"] = 3
    vertex = deployment(await planned_over(doc, await ours()))
    assert vertex is not None and vertex.action is plan.Action.UPDATE


async def test_a_rule_selecting_nothing_of_ours_recreates_nothing() -> None:
    doc = with_rule(selector={"resourceNames": ["other"]})
    vertex = deployment(await planned_over(doc, await ours()))
    assert vertex is not None and vertex.action is plan.Action.UPDATE


async def test_attack_a_rule_naming_another_applications_object_deletes_nothing() -> None:
    """Another Application's Deployment of the identity ours renders, whose image differs:
    a rule naming it by kind, name and component asks for a recreate; it is not planned
    at all (neither recreate nor update), and the problem says whose it is."""
    theirs = await ours()
    theirs["metadata"]["annotations"]["federation.io/application"] = "shop/other"
    for selector in ({"resourceNames": ["web"]}, {"resourceTypes": ["Deployment"]},
                     {"componentNames": ["web"]}):
        build = await planned_over(with_rule(selector=selector), theirs)
        assert deployment(build) is None
        assert build.problems == ["Deployment shop/web in member1: exists and was placed by "
                                  "Application shop/other"]


async def test_attack_an_unmanaged_object_of_that_name_is_never_recreated() -> None:
    foreign = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "shop", "uid": "uid-theirs"},
               "spec": {"template": {"spec": {"containers": [{"image": "theirs"}]}}}}
    build = await planned_over(with_rule(), foreign)
    assert deployment(build) is None
    assert build.problems == ["Deployment shop/web in member1: exists and is not managed by "
                              "federation" + deploy.TAKE_OVER_HINT]


async def test_an_object_being_deleted_is_waited_for_not_deleted_again() -> None:
    """KubeVela does not delete an object that has a deletionTimestamp; here the create
    waits until it is gone (a finalizer may hold it), as a problem saying so."""
    live = await ours()
    live["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z"
    build = await planned_over(with_rule(), live)
    assert deployment(build) is None
    assert build.problems == [f"Deployment shop/web in member1: being deleted; created again "
                              f"once it is gone ({IMAGE} changed (resource-update "
                              "recreateFields))"]


async def test_a_path_the_member_lacks_is_a_problem_and_nothing_is_written() -> None:
    build = await planned_over(with_rule(fields=("spec.paused",)), await ours())
    assert deployment(build) is None
    assert build.problems == ["Deployment shop/web in member1: resource-update recreateFields "
                              "'spec.paused': not in the member's object (nothing can say "
                              "whether it changed)"]


async def test_a_read_only_object_is_never_recreated() -> None:
    """read-only wins: an object both policies select is read, never written, so never
    deleted, whatever its recreate field says."""
    doc = with_rule()
    doc["spec"]["policies"].append({"name": "ro", "type": "read-only", "properties": {
        "rules": [{"selector": {"resourceTypes": ["Deployment"]}}]}})
    build = await planned_over(doc, await ours())
    assert deployment(build) is None and build.problems == []
