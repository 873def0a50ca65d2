"""The copy vertices: create when missing, update when ours and changed, nothing when up
to date, never a foreign object unless told to take it over; a release drops our marks."""

from __future__ import annotations

from typing import Any

from federation.controllers.kit import plan
from federation.controllers.kit.copies import copy_vertex, release_vertex
from federation.hub import manifests

JSON = dict[str, Any]


def desired(data: str = "v") -> JSON:
    template = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "shop"}, "data": {"k": data}}
    return manifests.mark(manifests.render(template, None, False), "uid-1")


def live(obj: JSON) -> JSON:
    """``obj`` as a server returns it."""
    return {**obj, "metadata": {**obj["metadata"], "uid": "m-1", "resourceVersion": "7"}}


IDENTITY = plan.Identity("", "ConfigMap", "shop", "a")


def test_a_missing_copy_is_created_with_the_expected_identity() -> None:
    vertex = copy_vertex("member1", desired(), None, overwrite=False, expect=IDENTITY)
    assert vertex is not None
    assert (vertex.action, vertex.reason, vertex.expect) == (plan.Action.CREATE, "missing",
                                                             IDENTITY)


def test_our_copy_is_left_alone_when_up_to_date_and_updated_when_changed() -> None:
    same = copy_vertex("member1", desired(), live(desired()), overwrite=False)
    assert same is not None and same.action is plan.Action.NOOP
    changed = copy_vertex("member1", desired("new"), live(desired()), overwrite=False,
                          expect=IDENTITY)
    assert changed is not None and changed.action is plan.Action.UPDATE
    assert changed.obj["metadata"]["resourceVersion"] == "7"  # a concurrent change fails
    assert changed.expect == IDENTITY


def test_a_foreign_object_is_not_touched_unless_taken_over() -> None:
    foreign = live({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "a", "namespace": "shop"}, "data": {"k": "theirs"}})
    assert copy_vertex("member1", desired(), foreign, overwrite=False) is None
    taken = copy_vertex("member1", desired(), foreign, overwrite=True)
    assert taken is not None
    assert (taken.action, taken.reason) == (plan.Action.UPDATE, "taking over")


def test_a_release_keeps_the_object_without_our_marks() -> None:
    ours = live(desired())
    vertex = release_vertex("member1", ours, what="dependency ConfigMap/a")
    assert vertex.action is plan.Action.UPDATE
    assert not manifests.is_propagated(vertex.obj)
    assert vertex.obj["metadata"]["resourceVersion"] == "7"
    assert vertex.expect == IDENTITY and "dependency ConfigMap/a" in vertex.reason
    assert manifests.is_propagated(ours)  # the read object is not changed
