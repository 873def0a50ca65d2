"""vela-core's deprecated ``env-binding`` policy and ``deploy2env`` step, on KubeVela's own
example (docs/examples/envbinding/example.yaml, re-typed): each env is the Application's
components patched and selected by that env, in one cluster and namespace."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from federation.applications import compile as compile_
from federation.applications import model, scope
from federation.placement import clusters as clusters_

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name=n) for n in ("local", "cluster-worker")]
EVERYWHERE = scope.Grant("demo", frozenset({"*"}))

EXAMPLE: JSON = {
    "components": [
        {"name": "hello-world-server", "type": "webservice",
         "properties": {"image": "crccheck/hello-world", "port": 8000},
         "traits": [{"type": "scaler", "properties": {"replicas": 1}}]},
        {"name": "data-worker", "type": "worker",
         "properties": {"image": "busybox", "cmd": ["sleep", "1000000"]}}],
    "policies": [{"name": "example-multi-env-policy", "type": "env-binding", "properties": {
        "envs": [
            {"name": "test", "placement": {"namespaceSelector": {"name": "test"}},
             "selector": {"components": ["data-worker"]}},
            {"name": "staging", "placement": {"clusterSelector": {"name": "cluster-worker"}}},
            {"name": "prod",
             "patch": {"components": [{"name": "hello-world-server", "type": "webservice",
                                       "traits": [{"type": "scaler",
                                                   "properties": {"replicas": 3}}]}]},
             "placement": {"clusterSelector": {"name": "cluster-worker"},
                           "namespaceSelector": {"name": "prod"}}}]}}],
    "workflow": {"steps": [
        {"name": "deploy-test", "type": "deploy2env",
         "properties": {"policy": "example-multi-env-policy", "env": "test"}},
        {"name": "deploy-staging", "type": "deploy2env",
         "properties": {"policy": "example-multi-env-policy", "env": "staging"}},
        {"name": "manual-approval", "type": "suspend"},
        {"name": "deploy-prod", "type": "deploy2env",
         "properties": {"policy": "example-multi-env-policy", "env": "prod"}}]}}


def compiled(spec: JSON, grant: scope.Grant = EVERYWHERE) -> compile_.Compiled:
    return compile_.compile_app(spec, "example-app", "demo", {}, FLEET, "local", grant)


def placed(result: compile_.Compiled, step: str) -> dict[str, list[tuple[str, str, Any]]]:
    """cluster -> (name, namespace, replicas) of each object the step places."""
    return {cluster: sorted((o["metadata"]["name"], o["metadata"]["namespace"],
                             o["spec"].get("replicas")) for o in objects)
            for cluster, objects in result.targets[step].clusters.items()}


def test_each_env_deploys_its_components_where_it_says() -> None:
    """test: only the selected data-worker, in namespace test of the local cluster;
    staging: both, in the Application's namespace of cluster-worker; prod: both, the
    patched scaler's 3 replicas, in namespace prod."""
    result = compiled(EXAMPLE)
    assert placed(result, "deploy-test") == {"local": [("data-worker", "test", 1)]}
    assert placed(result, "deploy-staging") == {"cluster-worker": [
        ("data-worker", "demo", 1), ("hello-world-server", "demo", 1)]}
    assert placed(result, "deploy-prod") == {"cluster-worker": [
        ("data-worker", "prod", 1), ("hello-world-server", "prod", 3)]}
    assert [s.type for s in result.steps] == ["deploy2env", "deploy2env", "suspend",
                                              "deploy2env"]


def test_without_a_workflow_each_env_is_a_step() -> None:
    """vela-core's Deploy2EnvWorkflowStepGenerator: ``deploy-<policy>-<env>`` per env."""
    spec = {k: v for k, v in EXAMPLE.items() if k != "workflow"}
    result = compiled(spec)
    assert [s.name for s in result.steps] == [
        "deploy-example-multi-env-policy-test", "deploy-example-multi-env-policy-staging",
        "deploy-example-multi-env-policy-prod"]
    assert placed(result, "deploy-example-multi-env-policy-test") == {
        "local": [("data-worker", "test", 1)]}


def test_a_step_without_policy_takes_the_first_env_binding() -> None:
    spec = copy.deepcopy(EXAMPLE)
    spec["workflow"]["steps"] = [{"name": "only", "type": "deploy2env",
                                  "properties": {"env": "prod", "parallel": True}}]
    assert placed(compiled(spec), "only")["cluster-worker"][1] == \
        ("hello-world-server", "prod", 3)


def test_a_patch_without_name_matches_by_type() -> None:
    """KubeVela's envpatch-with-wild-match: an entry with only ``type`` patches every
    component of that type."""
    spec = copy.deepcopy(EXAMPLE)
    spec["policies"][0]["properties"]["envs"][1]["patch"] = {"components": [
        {"type": "webservice", "traits": [{"type": "scaler", "properties": {"replicas": 2}}]}]}
    assert placed(compiled(spec), "deploy-staging")["cluster-worker"] == [
        ("data-worker", "demo", 1), ("hello-world-server", "demo", 2)]


def test_an_env_namespace_outside_the_grant_is_refused() -> None:
    """Attack: an env's ``namespaceSelector`` naming another tenant's namespace."""
    spec = copy.deepcopy(EXAMPLE)
    spec["policies"][0]["properties"]["envs"][0]["placement"]["namespaceSelector"] = {
        "name": "bank"}
    with pytest.raises(model.AppError, match="bank"):
        compiled(spec, scope.Grant("demo"))
    spec["policies"][0]["properties"]["envs"][0]["placement"]["namespaceSelector"] = {
        "name": "kube-system"}
    with pytest.raises(model.AppError, match="kube-system"):
        compiled(spec)


@pytest.mark.parametrize(("env", "message"), [
    ({"name": "test", "placement": {"clusterSelector": {"labels": {"purpose": "test"}}}},
     r"envs\[0\].placement.clusterSelector.labels: not supported \(vela-core fails"),
    ({"name": "test", "placement": {"namespaceSelector": {"labels": {"team": "a"}}}},
     r"envs\[0\].placement.namespaceSelector.labels: not supported"),
    ({"name": "test", "placment": {}}, r"envs\[0\].placment: not supported"),
    ({"name": "test", "patch": {"components": ["web"]}},
     r"envs\[0\].patch.components\[0\]: must be a map"),
    ({"name": "test", "selector": {"components": "data-worker"}},
     r"envs\[0\].selector.components: must be a list"),
])
def test_an_env_is_honoured_or_refused_by_name(env: JSON, message: str) -> None:
    spec = copy.deepcopy(EXAMPLE)
    spec["policies"][0]["properties"]["envs"][0] = env
    with pytest.raises(model.AppError, match=message):
        compiled(spec)


@pytest.mark.parametrize(("props", "message"), [
    ({"policy": "example-multi-env-policy", "env": "nope"}, r"properties.env: 'nope' is no "
     "env of policy example-multi-env-policy"),
    ({"policy": "other", "env": "test"}, r"properties.policy: names no env-binding policy"),
    ({"env": "test", "parallel": "yes"}, r"properties.parallel: must be true or false"),
    ({"env": "test", "clusters": ["x"]}, r"properties.clusters: not supported for a "
     "deploy2env step"),
])
def test_a_bad_step_is_refused_by_name(props: JSON, message: str) -> None:
    spec = copy.deepcopy(EXAMPLE)
    spec["workflow"]["steps"] = [{"name": "only", "type": "deploy2env", "properties": props}]
    with pytest.raises(model.AppError, match=message):
        compiled(spec)
