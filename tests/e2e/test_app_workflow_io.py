"""A KubeVela workflow with data between steps on the local fleet: step ``consume`` waits
for ``produce`` and takes its output (read back from member1's ConfigMap) into its
Deployment's env in member2; ``finish`` waits for ``consume``. The steps are listed in
the reverse order and run as a DAG, so only ``dependsOn`` and ``inputs`` order them.

`fedctl run` runs for the module with `--app-local-cluster member1`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane, app_namespace, running_plane
from tests.e2e.helpers import apply, get_or_none, wait_for


@pytest.fixture(scope="module")
def io_plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[ControlPlane]:
    yield from running_plane(fleet_session, tmp_path_factory, "--app-local-cluster", "member1")


@pytest.fixture
def ns(fleet: TestFleet, io_plane: ControlPlane) -> Iterator[str]:
    yield from app_namespace(fleet, io_plane, "io")


def application(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "io", "namespace": ns},
        "spec": {
            "components": [
                {"name": "source", "type": "config", "properties": {"data": {
                    "greeting": "hello"}}},
                {"name": "web", "type": "webservice", "properties": {
                    "image": "registry.local/web:1.0",
                    "env": [{"name": "GREETING", "value": "not yet"}]}},
                {"name": "after", "type": "config", "properties": {"data": {"done": "yes"}}}],
            "workflow": {"mode": {"steps": "DAG"}, "steps": [
                {"name": "finish", "type": "apply-component", "dependsOn": ["consume"],
                 "properties": {"component": "after", "cluster": "member3"}},
                {"name": "consume", "type": "apply-component", "dependsOn": ["produce"],
                 "inputs": [{"from": "greeting", "parameterKey": "properties.env[0].value"}],
                 "properties": {"component": "web", "cluster": "member2"}},
                {"name": "produce", "type": "apply-component",
                 "properties": {"component": "source", "cluster": "member1"},
                 "outputs": [{"name": "greeting",
                              "valueFrom": 'output.data.greeting + "-from-" + '
                                           'output.metadata.name'}]}]}}}


def workflow_of(fleet: TestFleet, ns: str) -> dict[str, Any]:
    found = get_or_none(fleet, "hub", "applications.core.oam.dev", "io", "-n", ns) or {}
    flow: dict[str, Any] = (found.get("status") or {}).get("workflow") or {}
    return flow


def test_outputs_flow_into_inputs_and_steps_run_in_dependency_order(
        fleet: TestFleet, ns: str) -> None:
    apply(fleet, "hub", application(ns))
    waits: list[list[str]] = []

    def done() -> bool:
        flow = workflow_of(fleet, ns)
        for step in flow.get("steps") or []:
            if step.get("waitingFor"):
                waits.append(step["waitingFor"])
        return flow.get("phase") == "succeeded"

    try:
        wait_for(done, timeout=120, interval=0.2, what="workflow succeeded")
    except AssertionError:
        flow = workflow_of(fleet, ns)
        flow.pop("_state", None)
        raise AssertionError(json.dumps(flow, indent=1)[:3000]) from None
    steps = {s["name"]: s for s in workflow_of(fleet, ns)["steps"]}
    assert {s["phase"] for s in steps.values()} == {"succeeded"}
    # the order, from the times each step recorded
    assert steps["produce"]["finishedTime"] <= steps["consume"]["firstExecuteTime"]
    assert steps["consume"]["finishedTime"] <= steps["finish"]["firstExecuteTime"]
    # the input's value, in the member's object
    deployment = get_or_none(fleet, "member2", "deployment", "web", "-n", ns)
    assert deployment is not None
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "GREETING", "value": "hello-from-source"} in env
    after = get_or_none(fleet, "member3", "configmap", "after", "-n", ns)
    assert after is not None and after["data"] == {"done": "yes"}
    # every wait that was shown named a step or an input of this workflow
    assert all(w.startswith(("step ", "input ")) for seen in waits for w in seen)


def recreated_app(ns: str, key: str) -> dict[str, Any]:
    """vela-core's resource-update example on an immutable ConfigMap (its data cannot be
    updated): recreated when ``data.key`` changes; deployed to the local cluster."""
    return {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "recreate", "namespace": ns},
        "spec": {
            "components": [{"name": "recreate", "type": "k8s-objects", "properties": {
                "objects": [{"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "recreate"}, "data": {"key": key},
                             "immutable": True}]}}],
            "policies": [{"name": "update", "type": "resource-update", "properties": {
                "rules": [{"selector": {"resourceTypes": ["ConfigMap"]},
                           "strategy": {"recreateFields": ["data.key"]}}]}}]}}


def test_a_changed_recreate_field_recreates_the_object(fleet: TestFleet, ns: str) -> None:
    """resource-update's recreateFields on member1: a new ``data.key`` deletes the
    immutable ConfigMap and creates it again (a new UID, the new data)."""
    apply(fleet, "hub", recreated_app(ns, "a"))

    def config_map() -> dict[str, Any]:
        return get_or_none(fleet, "member1", "configmap", "recreate", "-n", ns) or {}

    wait_for(lambda: config_map().get("data") == {"key": "a"}, timeout=30,
             what="the ConfigMap in member1")
    first = config_map()["metadata"]["uid"]
    apply(fleet, "hub", recreated_app(ns, "b"))
    wait_for(lambda: config_map().get("data") == {"key": "b"}, timeout=30,
             what="the ConfigMap recreated with the new data")
    assert config_map()["metadata"]["uid"] != first
