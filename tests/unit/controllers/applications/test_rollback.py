"""Rollback: a recorded rollback deploys its revision everywhere it targets, every
cluster final; a revision no longer kept is a Problem."""

from __future__ import annotations

import pytest

from federation.controllers.applications import rollback
from federation.controllers.kit.chain import Problem
from tests.unit.controllers.applications.fakes import (
    FakeView,
    app,
    build_of,
    revision_doc,
    run_through,
    running,
)


def tracked(cluster: str) -> dict[str, object]:
    return {"cluster": cluster, "apiVersion": "apps/v1", "kind": "Deployment",
            "namespace": "shop", "name": "old", "revision": 1, "step": "canary"}


async def test_without_a_rollback_nothing_is_decided_here() -> None:
    view, build = FakeView(), build_of(app())
    await run_through(view, build, rollback.roll_back)
    assert build.desired == {} and build.targets == {} and build.final == set()


async def test_a_rollback_deploys_its_revision_to_every_cluster_it_targets() -> None:
    """v1 (image web:1) everywhere it placed, at once: no staging, and every cluster
    (those tracked too) final, so nothing of v2 stays."""
    view = FakeView([("hub", revision_doc(1, succeeded=True))])
    rt = {"metadata": {"name": "shop", "namespace": "shop", "resourceVersion": "9"},
          "spec": {"resources": [tracked("member9")]}}
    build = build_of(app("web:2", status={"rollback": {"revision": 1, "from": 2, "time": "t"},
                                          "workflow": running(2)}), rt)
    await run_through(view, build, rollback.roll_back)
    assert set(build.desired) == {("member1", "canary"), ("member2", "rollout"),
                                  ("member3", "rollout")}
    images = {o["spec"]["template"]["spec"]["containers"][0]["image"]
              for objects in build.desired.values() for o, number in objects if number == 1
              and o["kind"] == "Deployment"}
    assert images == {"web:1"}
    assert build.final == {"member1", "member2", "member3", "member9"}
    assert set(build.targets) == {("canary", "member1"), ("rollout", "member2"),
                                  ("rollout", "member3")}


async def test_a_revision_no_longer_kept_is_refused() -> None:
    view = FakeView()
    build = build_of(app(status={"rollback": {"revision": 7, "from": 1, "time": "t"},
                                 "workflow": running(1)}))
    with pytest.raises(Problem, match="rollback: revision 7 is not kept any more"):
        await run_through(view, build, rollback.roll_back)


async def test_a_revision_that_no_longer_compiles_is_refused_by_field() -> None:
    broken = app()["spec"]
    broken["components"][0]["type"] = "nonsense"
    view = FakeView([("hub", revision_doc(1, succeeded=True, spec=broken))])
    build = build_of(app("web:2", status={"rollback": {"revision": 1, "from": 2, "time": "t"},
                                          "workflow": running(2)}))
    with pytest.raises(Problem, match=r"spec\.components\[0\]"):
        await run_through(view, build, rollback.roll_back)


IO_SPEC = {
    "components": [{"name": "a", "type": "config", "properties": {"data": {"k": "v"}}},
                   {"name": "b", "type": "config", "properties": {"data": {"k": "v"}}}],
    "workflow": {"steps": [
        {"name": "make", "type": "apply-component",
         "properties": {"component": "a", "cluster": "member1"},
         "outputs": [{"name": "o", "valueFrom": '"from-a"'}]},
        {"name": "take", "type": "apply-component",
         "properties": {"component": "b", "cluster": "member1"},
         "inputs": [{"from": "o", "parameterKey": "properties.data.k"}]}]}}


async def test_a_rollback_renders_steps_with_inputs_from_the_revisions_outputs() -> None:
    """The revision records the outputs its workflow produced when it ended; the
    rollback renders the step taking them as that revision ran it."""
    old = revision_doc(1, succeeded=True, spec=IO_SPEC)
    old["status"]["outputValues"] = [["o", '"from-a"']]
    view = FakeView([("hub", old)])
    build = build_of(app("web:2", status={"rollback": {"revision": 1, "from": 2, "time": "t"},
                                          "workflow": running(2)}))
    await run_through(view, build, rollback.roll_back)
    (config_map, _), = build.desired[("member1", "take")]
    assert config_map["data"] == {"k": "from-a"}


async def test_a_rollback_to_a_revision_without_its_outputs_is_refused() -> None:
    """Rendering the step without its inputs would drop its objects everywhere (every
    cluster is final in a rollback): refused, naming the step."""
    view = FakeView([("hub", revision_doc(1, succeeded=False, spec=IO_SPEC))])
    build = build_of(app("web:2", status={"rollback": {"revision": 1, "from": 2, "time": "t"},
                                          "workflow": running(2)}))
    with pytest.raises(Problem, match="rollback: step take of revision 1 takes inputs"):
        await run_through(view, build, rollback.roll_back)
