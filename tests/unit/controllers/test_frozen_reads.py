"""The fakes' reads are frozen, so a change to a cached object fails the test that makes
it; they still compare, serialise and deep-copy like plain JSON."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

import pytest

from federation.contexts import client as kube
from federation.hub import manifests
from tests.unit.controllers.fakes import FakeContext, config_map
from tests.unit.controllers.frozen import freeze


def test_a_change_to_a_frozen_read_is_refused_anywhere_in_it() -> None:
    read = freeze({"metadata": {"labels": {"a": "1"}}, "items": [{"b": 2}]})
    changes: tuple[Callable[[], object], ...] = (
        lambda: read.__setitem__("x", 1), lambda: read.setdefault("x", {}),
        lambda: read["metadata"]["labels"].pop("a"),
        lambda: read["items"].append(3), lambda: read["items"][0].update(b=3))
    for change in changes:
        with pytest.raises(TypeError, match="was changed: copy what you change"):
            change()
    assert read == {"metadata": {"labels": {"a": "1"}}, "items": [{"b": 2}]}


def test_a_frozen_read_behaves_as_json_and_copies_into_plain_json() -> None:
    read = freeze(config_map("a", data="x"))
    assert json.loads(json.dumps(read)) == config_map("a", data="x")
    mine = copy.deepcopy(read)
    mine["metadata"]["labels"] = {"mine": "yes"}
    assert type(mine) is dict and "labels" not in read["metadata"]


async def test_rendering_a_cached_template_leaves_it_unchanged() -> None:
    """What propagation does with a template read from the cache: render a copy."""
    ctx = FakeContext(lists={"ConfigMap": [config_map("a")]})
    template = await ctx.get(kube.CONFIGMAPS, "a", "shop", "hub")
    assert template is not None
    rendered = manifests.mark(manifests.render(template, None, False), "u1")
    assert rendered["metadata"]["annotations"][manifests.TEMPLATE_UID_ANNOTATION] == "u1"
    assert "annotations" not in template["metadata"]

