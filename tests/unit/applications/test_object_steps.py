"""vela-core's apply-object and apply-deployment steps as deploy steps of one object to one
cluster (workflowstep/apply-object.cue, apply-deployment.cue)."""

from __future__ import annotations

from typing import Any

import pytest

from federation.applications import compile as compile_
from federation.applications import model
from federation.placement import clusters as clusters_

FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2")]


def compiled(*steps: dict[str, Any]) -> compile_.Compiled:
    spec = {"components": [{"name": "web", "type": "webservice",
                            "properties": {"image": "nginx"}}],
            "workflow": {"steps": list(steps)}}
    return compile_.compile_app(spec, "app", "ns", {}, FLEET, local_cluster="member1")


def test_apply_object_places_its_one_object_in_its_cluster() -> None:
    result = compiled({"name": "conf", "type": "apply-object", "properties": {
        "cluster": "member2",
        "value": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}}}})
    [step] = result.steps
    assert (step.type, step.targets) == ("apply-object", ("member2",))
    assert result.targets["conf"].clusters == {"member2": ({
        "apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"},
        "metadata": {"name": "conf", "namespace": "ns", "labels": {
            "app.oam.dev/name": "app", "app.oam.dev/component": "conf"}}},)}


def test_apply_deployment_renders_its_definitions_deployment_in_the_local_cluster() -> None:
    """apply-deployment.cue: named after the step, selected by workflow.oam.dev/step-name
    <app>-<step>, one container of the step's name, replicas 1 by default."""
    result = compiled({"name": "web2", "type": "apply-deployment",
                       "properties": {"image": "nginx:2", "cmd": ["run"]}})
    [deployment] = result.targets["web2"].clusters["member1"]
    labels = {"workflow.oam.dev/step-name": "app-web2"}
    assert deployment["spec"] == {
        "selector": {"matchLabels": labels}, "replicas": 1,
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [
            {"name": "web2", "image": "nginx:2", "command": ["run"]}]}}}
    assert deployment["metadata"]["name"] == "web2"


@pytest.mark.parametrize(("step", "words"), [
    ({"name": "s", "type": "apply-object", "properties": {}}, r"properties\.value: required"),
    ({"name": "s", "type": "apply-object", "properties": {"value": {"apiVersion": "v1",
                                                                      "kind": "Namespace"}}},
     r"Namespace s is cluster-scoped"),
    ({"name": "s", "type": "apply-object", "properties": {"value": {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "bank"}}}},
     r"namespace 'bank' is not this Application's namespace"),
    ({"name": "s", "type": "apply-object", "properties": {"value": {}, "cluster": 3}},
     r"properties\.cluster: must be a string"),
    ({"name": "s", "type": "apply-deployment", "properties": {"image": "x", "replicas": -1}},
     r"properties\.replicas: must be an integer from 0"),
    ({"name": "s", "type": "apply-deployment", "properties": {"image": "x", "cluster": "mars"}},
     r"no member cluster 'mars'"),
    ({"name": "Big_Step", "type": "apply-deployment", "properties": {"image": "x"}},
     r"\.name: 'Big_Step' must be a DNS label"),
    ({"name": "s", "type": "apply-deployment", "properties": {"image": "x", "env": []}},
     r"properties\.env: not supported for a apply-deployment step"),
])
def test_refusals(step: dict[str, Any], words: str) -> None:
    """Among them the attack: an object into another team's namespace or a cluster-scoped
    kind through a step instead of a component, refused as a component's would be."""
    with pytest.raises(model.AppError, match=words):
        compiled(step)


def compiled_with(steps: list[dict[str, Any]], policies: list[dict[str, Any]] | None = None
                  ) -> compile_.Compiled:
    spec = {"components": [{"name": n, "type": "webservice", "properties": {"image": "nginx"}}
                           for n in ("web", "api", "db")],
            "policies": policies or [], "workflow": {"steps": steps}}
    return compile_.compile_app(spec, "app", "ns", {}, FLEET, local_cluster="member1")


def names(result: compile_.Compiled, step: str, cluster: str) -> list[str]:
    return [o["metadata"]["name"] for o in result.targets[step].clusters[cluster]
            if o["kind"] == "Deployment"]


def test_deprecated_deploy_steps() -> None:
    """deprecated/apply-application.cue (the default deploy), apply-remaining.cue (all but
    the exceptions) and deploy2runtime.cue (each of its clusters, default every member)."""
    topology = [{"name": "t", "type": "topology", "properties": {"clusters": ["member2"]}}]
    result = compiled_with([{"name": "all", "type": "apply-application"}], topology)
    assert names(result, "all", "member2") == ["web", "api", "db"]
    result = compiled_with([{"name": "rest", "type": "apply-remaining",
                             "properties": {"exceptions": ["api"]}}])
    assert list(result.targets["rest"].clusters) == ["member1"]
    assert names(result, "rest", "member1") == ["web", "db"]
    result = compiled_with([{"name": "out", "type": "deploy2runtime"}], topology)
    assert set(result.targets["out"].clusters) == {"member1", "member2"}
    result = compiled_with([{"name": "out", "type": "deploy2runtime",
                             "properties": {"clusters": ["member2"]}}])
    assert list(result.targets["out"].clusters) == ["member2"]
    with pytest.raises(model.AppError, match=r"exceptions\[0\]: names no component"):
        compiled_with([{"name": "rest", "type": "apply-remaining",
                        "properties": {"exceptions": ["cache"]}}])
    with pytest.raises(model.AppError, match=r"properties\.policies: not supported for a "
                                             "apply-application step"):
        compiled_with([{"name": "all", "type": "apply-application",
                        "properties": {"policies": []}}])
