"""The applications controller on the in-memory fleet with data between steps: a DAG
whose step B takes step A's output (read back from the member) and step C waits for B.
The state (outputs, waits) lives in the Application's status only: each reconcile here is
a new controller reading a status whose nulls the API server dropped."""

from __future__ import annotations

from typing import Any

from federation.commands.app import tree
from tests.unit.applications.test_controller import (
    MC,
    REQUEST,
    Clock,
    must,
    ready_everywhere,
    set_app,
)
from tests.unit.controllers import fakes
from tests.unit.controllers.applications import fakes as app_fakes


def config(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "type": "config", "properties": {"data": data}}


def apply(name: str, component: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "apply-component",
            "properties": {"component": component, "cluster": "member1"}, **extra}


APP = {
    "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
    "metadata": {"name": "shop", "namespace": "shop", "annotations": {}},
    "spec": {
        "components": [config("a", {"greeting": "hello"}), config("b", {"fixed": "1"}),
                       config("c", {"x": "y"})],
        "workflow": {"mode": {"steps": "DAG"}, "steps": [
            apply("step-a", "a", outputs=[
                {"name": "greeting", "valueFrom": 'output.data.greeting + " from " + '
                                                  'output.metadata.name'}]),
            apply("step-c", "c", dependsOn=["step-b"]),
            apply("step-b", "b", dependsOn=["step-a"],
                  inputs=[{"from": "greeting", "parameterKey": "properties.data.copied"}])]}}}


def without_nulls(value: Any) -> Any:
    """What the API server keeps of a status written with a merge patch."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


async def test_outputs_inputs_and_depends_on_across_restarts() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    clock = Clock()
    set_app(mc, APP)
    seen: list[dict[str, Any]] = []
    for _ in range(8):
        # a new controller each time: nothing kept in memory between reconciles
        reconciler = app_fakes.reconciler(mc, app_fakes.Recorder(), clock=clock)
        await reconciler.reconcile(REQUEST)
        live = mc.find("hub", "Application", "shop", "shop")
        assert live is not None
        live["status"] = without_nulls(live["status"])
        seen.append(live["status"]["workflow"])
        clock.now += 1
        if live["status"]["workflow"]["phase"] == "succeeded":
            break
    flow = seen[-1]
    assert flow["phase"] == "succeeded", flow
    first = {s["name"]: s for s in seen[0]["steps"]}
    assert first["step-b"]["phase"] == "pending"
    assert first["step-b"]["waitingFor"] == ["step step-a", "input greeting"]
    assert first["step-c"]["message"] == "Pending on DependsOn: step-b"
    steps = {s["name"]: s for s in flow["steps"]}
    assert steps["step-a"]["finishedTime"] <= steps["step-b"]["firstExecuteTime"]
    assert steps["step-b"]["finishedTime"] <= steps["step-c"]["firstExecuteTime"]
    copied = must(mc, "member1", "ConfigMap", "b")
    assert copied["data"] == {"fixed": "1", "copied": "hello from a"}
    assert must(mc, "member1", "ConfigMap", "c")["data"] == {"x": "y"}


def test_a_pending_step_says_so_in_fedctl_app_status() -> None:
    status = {"workflow": {"phase": "running", "steps": [
        {"name": "g", "type": "step-group", "phase": "running", "subStepsStatus": [
            {"name": "s", "type": "notification", "phase": "pending",
             "message": "Pending on Input: greeting"}]}]}}
    assert "Pending on Input: greeting" in tree("shop", status)


ORDERED = {
    "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
    "metadata": {"name": "shop", "namespace": "shop", "annotations": {}},
    "spec": {
        "components": [
            {"name": "web", "type": "webservice", "dependsOn": ["db"],
             "properties": {"image": "web:1"}},
            {"name": "db", "type": "config", "properties": {"data": {"a": "b"}}}],
        "policies": [{"name": "two", "type": "topology",
                      "properties": {"clusters": ["member1", "member2"]}}]}}


def workflow_status(mc: MC) -> dict[str, Any]:
    live = mc.find("hub", "Application", "shop", "shop")
    assert live is not None
    flow: dict[str, Any] = live["status"]["workflow"]
    return flow


async def test_a_deploy_step_puts_a_component_after_its_dependency_in_each_cluster() -> None:
    """KubeVela's deploy: web (dependsOn db) is written to a member only once db is
    healthy there; the step ends when both are everywhere."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    clock = Clock()
    set_app(mc, ORDERED)
    reconciler = app_fakes.reconciler(mc, app_fakes.Recorder(), clock=clock)
    await reconciler.reconcile(REQUEST)
    for member in ("member1", "member2"):
        assert mc.find(member, "ConfigMap", "db", "shop") is not None
        assert mc.find(member, "Deployment", "web", "shop") is None
    assert "web waits for db" in workflow_status(mc)["steps"][0]["message"]
    for _ in range(4):
        clock.now += 1
        ready_everywhere(mc)
        await reconciler.reconcile(REQUEST)
    for member in ("member1", "member2"):
        assert mc.find(member, "Deployment", "web", "shop") is not None
    flow = workflow_status(mc)
    assert flow["phase"] == "succeeded", flow["steps"]
