"""The topology policy's ``allowEmpty``: a selection matching no member places nothing and
the deploy step succeeds; anything else that fails to place is still an error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from federation.applications import compile as compile_
from federation.applications import model, workflow
from federation.cli import cli
from federation.placement import clusters as clusters_
from tests.unit.applications.test_controller import REQUEST, app, must, ready_everywhere, set_app
from tests.unit.applications.test_notifications import world

FLEET = [clusters_.Cluster(name=n, labels={"region": "eu"})
         for n in ("member1", "member2", "member3")]


def spec_with(props: dict[str, Any]) -> dict[str, Any]:
    return {"components": [{"name": "web", "type": "webservice", "properties": {"image": "x"}}],
            "policies": [{"name": "none", "type": "topology", "properties": props},
                         {"name": "ok", "type": "topology",
                          "properties": {"clusters": ["member1"]}}],
            "workflow": {"steps": [
                {"name": "a", "type": "deploy", "properties": {"policies": ["none"]}},
                {"name": "b", "type": "deploy", "properties": {"policies": ["ok"]}}]}}


def compiled(props: dict[str, Any], fleet: list[clusters_.Cluster] = FLEET
             ) -> compile_.Compiled:
    return compile_.compile_app(spec_with(props), "shop", "shop", {}, fleet)


def test_an_empty_selection_with_allow_empty_places_nothing() -> None:
    result = compiled({"clusterLabelSelector": {"region": "mars"}, "allowEmpty": True})
    assert result.targets["a"].clusters == {} and result.targets["a"].empty == ("none",)
    assert [(s.name, s.targets) for s in result.steps] == [("a", ()), ("b", ("member1",))]
    assert result.targets["b"].empty == ()


def test_without_allow_empty_an_empty_selection_is_refused() -> None:
    for props in ({"clusterLabelSelector": {"region": "mars"}},
                  {"clusterLabelSelector": {"region": "mars"}, "allowEmpty": False}):
        with pytest.raises(model.AppError, match="policy none: cannot place"):
            compiled(props)


def test_allow_empty_does_not_excuse_a_misspelt_cluster_name() -> None:
    with pytest.raises(model.AppError) as caught:
        compiled({"clusters": ["member1", "membr2"], "allowEmpty": True})
    assert str(caught.value).startswith("policy none properties.clusters: no member cluster "
                                        "'membr2'")


def test_without_allow_empty_a_misspelt_cluster_name_is_refused_too() -> None:
    """Not only with allowEmpty: a name that is no member would place nothing there, the
    other names going ahead as if all were well (KubeVela: cluster not found)."""
    with pytest.raises(model.AppError) as caught:
        compiled({"clusters": ["member1", "membr2"]})
    assert str(caught.value) == "policy none properties.clusters: no member cluster 'membr2'"


def test_a_misspelt_name_in_the_placement_block_is_named_by_its_path() -> None:
    with pytest.raises(model.AppError) as caught:
        compiled({"placement": {"clusterAffinity": {"clusterNames": ["ghost"]}},
                  "allowEmpty": True})
    assert str(caught.value).startswith(
        "policy none properties.placement.clusterAffinity.clusterNames: no member cluster "
        "'ghost'")
    with pytest.raises(model.AppError) as caught:
        compiled({"placement": {"clusterAffinities": [
            {"affinityName": "a", "clusterNames": ["member1"]},
            {"affinityName": "b", "clusterNames": ["ghost"]}]}, "allowEmpty": True})
    assert "properties.placement.clusterAffinities[1].clusterNames: no member" in \
        str(caught.value)


def test_allow_empty_does_not_excuse_a_selected_cluster_that_cannot_take_it() -> None:
    # member1 is selected but not ready: a real placement failure, not an empty topology
    fleet = clusters_.mark_failed(FLEET, ["member1"])
    with pytest.raises(model.AppError, match="policy none: cannot place"):
        compiled({"clusters": ["member1"], "allowEmpty": True}, fleet)


def test_allow_empty_with_a_matching_selection_places_as_usual() -> None:
    result = compiled({"clusterLabelSelector": {"region": "eu"}, "allowEmpty": True})
    assert sorted(result.targets["a"].clusters) == ["member1", "member2", "member3"]
    assert result.targets["a"].empty == ()


def test_allow_empty_must_be_a_boolean() -> None:
    with pytest.raises(model.AppError, match=r"policy none properties\.allowEmpty: true or"):
        compiled({"clusterLabelSelector": {"region": "mars"}, "allowEmpty": "yes"})


def test_a_deploy_step_with_no_target_succeeds_at_once_and_the_next_runs() -> None:
    specs = [workflow.StepSpec("a", "deploy", ()), workflow.StepSpec("b", "deploy",
                                                                      ("member1",))]
    state, actions = workflow.evaluate(workflow.initial(1, specs, 0.0), specs,
                                       workflow.Observations(), 0.0)
    first, second = state.steps
    assert (first.phase, first.reason, first.started) == ("succeeded", "NothingToDeploy", ())
    assert second.phase == "running" and workflow.Deploy("b", ("member1",)) in actions


async def test_the_controller_deploys_nothing_for_the_empty_step() -> None:
    mc, reconciler, _, _, _ = world()
    body = app()
    body["spec"]["policies"].append({"name": "mars", "type": "topology", "properties": {
        "clusterLabelSelector": {"region": "mars"}, "allowEmpty": True}})
    body["spec"]["workflow"]["steps"] = [
        {"name": "nowhere", "type": "deploy", "properties": {"policies": ["mars"]}},
        {"name": "canary", "type": "deploy", "properties": {"policies": ["canary"]}}]
    set_app(mc, body)
    for _ in range(3):
        ready_everywhere(mc)
        await reconciler.reconcile(REQUEST)
    status = must(mc, "hub", "Application", "shop")["status"]
    assert status["status"] == "running"
    steps = {s["name"]: s for s in status["workflow"]["steps"]}
    assert steps["nowhere"]["phase"] == "succeeded" and steps["nowhere"]["clusters"] == []
    assert steps["canary"]["clusters"] == ["member1"]
    assert {r["cluster"] for r in status["appliedResources"]} == {"member1"}


def test_dry_run_shows_the_empty_topology(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text("""\
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: x, namespace: team-a}
spec:
  components:
  - {name: web, type: webservice, properties: {image: nginx}}
  policies:
  - {name: none, type: topology, properties: {clusterLabelSelector: {region: mars},
                                              allowEmpty: true}}
  - {name: ok, type: topology, properties: {clusters: [member1]}}
  workflow:
    steps:
    - {name: a, type: deploy, properties: {policies: [none]}}
    - {name: b, type: deploy, properties: {policies: [ok]}}
""")
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path)])
    assert result.exit_code == 0, result.output
    assert "# step a (deploy): no cluster (parallelism 5)\n#   topology none: allowEmpty, " \
        "its selection matches no member cluster; nothing placed" in result.output
    assert "# step b (deploy): member1 (parallelism 5)" in result.output
