"""Load revision: the content hash, the revisions kept, and the create of a new one."""

from __future__ import annotations

from federation.applications import revision
from federation.controllers.applications import revisions
from federation.controllers.kit import plan
from tests.unit.controllers.applications.fakes import FakeView, app, build_of, revision_doc


async def test_a_first_revision_is_planned_as_a_hub_create() -> None:
    """No revision yet: v1 is a create on the hub, in the build's list, nothing written."""
    view, build = FakeView(), build_of(app())
    assert await revisions.load_revision(view, build) is None
    vertex = build.revision_vertex
    assert vertex is not None and vertex.cluster == "hub"
    assert vertex.action is plan.Action.CREATE
    assert vertex.obj["metadata"]["name"] == "shop-v1"
    assert vertex.obj["metadata"]["labels"] == {"app.oam.dev/name": "shop"}
    assert vertex.obj["spec"]["revision"] == 1 == build.number
    assert vertex.obj["spec"]["revisionHash"] == build.digest
    assert build.revisions == [vertex.obj]
    assert list(build.plan) == [vertex]


async def test_the_same_content_makes_no_revision() -> None:
    view, build = FakeView(), build_of(app())
    await revisions.load_revision(view, build)
    kept = revision_doc(1)
    kept["spec"]["revisionHash"] = build.digest
    view.put("hub", kept)
    again = build_of(app())
    await revisions.load_revision(view, again)
    assert again.revision_vertex is None and len(again.plan) == 0
    assert again.number == 1 and [r["metadata"]["name"] for r in again.revisions] == ["shop-v1"]


async def test_new_content_is_the_next_number_and_other_apps_revisions_do_not_count() -> None:
    view = FakeView([("hub", revision_doc(1)), ("hub", revision_doc(2)),
                     ("hub", revision_doc(7, app_name="other"))])
    build = build_of(app("web:2"))
    await revisions.load_revision(view, build)
    assert build.number == 3
    assert build.revision_vertex is not None
    assert build.revision_vertex.obj["metadata"]["name"] == "shop-v3"
    assert [r["spec"]["revision"] for r in build.revisions] == [1, 2, 3]


async def test_external_policies_named_by_a_step_are_part_of_the_content() -> None:
    """A Policy of the namespace a deploy step names (not inline) is read and hashed; one
    in another namespace, or not named, is not."""
    steps = [{"name": "all", "type": "deploy", "properties": {"policies": ["canary", "ext"]}}]
    policy = {"apiVersion": "core.oam.dev/v1alpha1", "kind": "Policy", "type": "topology",
              "metadata": {"name": "ext", "namespace": "shop", "uid": "p"},
              "properties": {"clusters": ["member2"]}}
    elsewhere = {**policy, "metadata": {"name": "ext", "namespace": "other"}}
    view = FakeView([("hub", policy), ("hub", elsewhere)])
    build = build_of(app(steps=steps))
    await revisions.load_revision(view, build)
    assert build.external == {"ext": {"apiVersion": "core.oam.dev/v1alpha1", "kind": "Policy",
                                      "type": "topology",
                                      "properties": {"clusters": ["member2"]},
                                      "metadata": {"name": "ext", "namespace": "shop"}}}
    without = build_of(app(steps=steps))
    await revisions.load_revision(FakeView(), without)
    assert without.digest != build.digest
    assert build.digest == revision.content_hash(revision.content(app(steps=steps)["spec"],
                                                                  build.external))


async def test_the_planned_revision_is_the_callers_own_copy() -> None:
    """The snapshot in the planned body is a copy: the cached spec is never shared."""
    view, build = FakeView(), build_of(app())
    await revisions.load_revision(view, build)
    assert build.revision_vertex is not None
    body = build.revision_vertex.obj
    body["spec"]["application"]["spec"]["components"].append({"name": "x"})
    assert len(build.spec["components"]) == 1
