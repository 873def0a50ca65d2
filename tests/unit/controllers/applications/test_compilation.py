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


def with_references(*objects: dict[str, object]) -> dict[str, object]:
    body = app()
    body["spec"]["components"].append({"name": "conf", "type": "ref-objects",
                                       "properties": {"objects": list(objects)}})
    return body


def config_map(name: str, namespace: str, **labels: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "resourceVersion": "3"}, "data": {"owner": namespace}}


async def test_ref_objects_are_read_from_the_applications_namespace_on_the_hub() -> None:
    view = FakeView([("hub", config_map("conf", "shop")), ("hub", config_map("conf", "bank")),
                     ("hub", config_map("a", "shop", tier="web")),
                     ("hub", config_map("b", "bank", tier="web"))])
    build = build_of(with_references({"resource": "configmap"},
                                     {"resource": "configmap", "labelSelector": {"tier": "web"}}))
    await run_through(view, build, compilation.compile_app)
    assert build.compiled is not None
    placed = [o for o in build.compiled.targets["canary"].clusters["member1"]
              if o["kind"] == "ConfigMap"]
    assert [(o["metadata"]["name"], o["data"]["owner"]) for o in placed] == [
        ("conf", "shop"), ("a", "shop")]
    assert "resourceVersion" not in placed[0]["metadata"]


@pytest.mark.parametrize(("entry", "words"), [
    ({"resource": "configmap", "name": "conf", "namespace": "bank"},
     "objects[0].namespace: not supported (ref-objects reads the Application's own"),
    ({"resource": "configmap", "name": "missing"},
     "objects[0]: ConfigMap shop/missing not found on the hub"),
    ({"apiVersion": "v1", "kind": "Namespace", "name": "bank"},
     "objects[0]: Namespace is cluster-scoped"),
])
async def test_ref_objects_outside_the_namespace_refuse_the_application(
        entry: dict[str, object], words: str) -> None:
    """The attack: an author in ``shop`` references ``bank``'s ConfigMap (or a cluster-scoped
    object) to have the control plane copy it into members where ``shop`` can read it.
    The Application is refused (renderFailed) and nothing is compiled."""
    view = FakeView([("hub", config_map("conf", "bank"))])
    build = build_of(with_references(entry))
    await revisions.load_revision(view, build)
    with pytest.raises(Problem) as raised:
        await compilation.compile_app(view, build)
    assert words in str(raised.value)
    assert build.compiled is None


async def test_a_hub_that_cannot_be_read_is_a_refusal_naming_the_reference() -> None:
    view = FakeView()
    view.unserved.add("ConfigMap")
    build = build_of(with_references({"resource": "configmap"}))
    await revisions.load_revision(view, build)
    with pytest.raises(Problem, match=r"objects\[0\]: cannot read ConfigMap shop/conf on the "
                                      "hub"):
        await compilation.compile_app(view, build)
