"""vela-core's data steps, narrowed for a tenant: ``read-object`` (an object of the
Application's own namespace, on the hub or a member it deploys to, never a Secret) into
the step's outputs; ``export2config`` and ``export2secret`` (a ConfigMap or Secret in the
Application's own namespace, written to a member as a deploy step of that one object:
tracked and cleaned like a component's). Each attack test fails on a naive step that
reads or writes where the properties say."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from federation.applications import compile as compile_
from federation.applications import model
from federation.placement import clusters as clusters_
from tests.unit.applications.test_controller import MC, REQUEST, Clock, must, set_app
from tests.unit.applications.test_controller_workflow_io import without_nulls
from tests.unit.controllers import fakes
from tests.unit.controllers.applications import fakes as app_fakes

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2", "member3")]


def spec_of(*steps: JSON) -> JSON:
    return {"components": [{"name": "web", "type": "webservice",
                            "properties": {"image": "nginx"}}],
            "workflow": {"steps": list(steps)}}


def compiled(*steps: JSON) -> compile_.Compiled:
    return compile_.compile_app(spec_of(*steps), "shop", "shop", {}, FLEET,
                                local_cluster="member1")


def deploy_web(cluster: str = "member2") -> JSON:
    return {"name": "deploy", "type": "apply-component",
            "properties": {"component": "web", "cluster": cluster}}


def read(**props: Any) -> JSON:
    return {"name": "read", "type": "read-object",
            "properties": {"apiVersion": "v1", "kind": "ConfigMap", "name": "settings",
                           **props}}


# -- what each step takes -------------------------------------------------------------------


def test_export2config_is_a_configmap_of_the_apps_namespace_in_the_local_cluster() -> None:
    result = compiled({"name": "export", "type": "export2config", "properties": {
        "configName": "my-configmap", "data": {"testkey": "testvalue\nline-2", "n": 3}}})
    [configmap] = result.targets["export"].clusters["member1"]
    assert configmap["kind"] == "ConfigMap" and configmap["metadata"]["name"] == "my-configmap"
    assert configmap["metadata"]["namespace"] == "shop"
    assert configmap["data"] == {"testkey": "testvalue\nline-2", "n": "3"}


def test_export2secret_is_a_secret_of_string_data_or_a_registry_login() -> None:
    result = compiled({"name": "export", "type": "export2secret",
                       "properties": {"secretName": "my-secret", "cluster": "member2",
                                      "data": {"k": "v"}}})
    [secret] = result.targets["export"].clusters["member2"]
    assert (secret["kind"], secret["stringData"]) == ("Secret", {"k": "v"})
    login = compiled({"name": "login", "type": "export2secret", "properties": {
        "secretName": "pull", "kind": "docker-registry",
        "dockerRegistry": {"username": "u", "password": "p"}}})
    [secret] = login.targets["login"].clusters["member1"]
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    auths = json.loads(secret["stringData"][".dockerconfigjson"])["auths"]
    assert auths == {"https://index.docker.io/v1/": {"username": "u", "password": "p",
                                                     "auth": "dTpw"}}


def test_read_object_reads_the_hub_by_default_and_a_member_it_deploys_to() -> None:
    hub = compiled(read())
    assert hub.reads["read"].cluster == "" and hub.reads["read"].name == "settings"
    member = compiled(deploy_web("member2"), read(cluster="member2", namespace="shop"))
    assert member.reads["read"].cluster == "member2"
    defaults = compiled({"name": "read", "type": "read-object", "properties": {"name": "shop"}})
    assert (defaults.reads["read"].api_version, defaults.reads["read"].kind) == \
        ("core.oam.dev/v1beta1", "Application")  # KubeVela's defaults


# -- attacks and bad input: refused by name, nothing compiled ---------------------------------


@pytest.mark.parametrize(("step", "words"), [
    # another team's namespace
    (read(namespace="bank"), "properties.namespace: not supported (the step writes or "
                             "reads the Application's own namespace only"),
    ({"name": "e", "type": "export2config", "properties": {
        "configName": "c", "namespace": "bank"}}, "properties.namespace: not supported"),
    ({"name": "e", "type": "export2secret", "properties": {
        "secretName": "s", "namespace": "kube-system"}}, "properties.namespace: not supported"),
    # a member the Application does not deploy to
    (read(cluster="member3"), "properties.cluster: 'member3' is not a cluster this "
                              "Application deploys to"),
    # a Secret, however spelled
    (read(kind="Secret"), "properties.kind: a Secret is not read"),
    (read(kind="secret"), "properties.kind: a Secret is not read"),
    # a cluster-scoped kind
    (read(kind="Namespace", name="shop"), "properties.kind: Namespace is cluster-scoped"),
    # names with path characters
    (read(name="../bank/settings"), "properties.name: not a Kubernetes object name"),
    ({"name": "e", "type": "export2config", "properties": {"configName": "a/b"}},
     "properties.configName: not a Kubernetes object name"),
    ({"name": "e", "type": "export2secret", "properties": {"secretName": "..", "data": {}}},
     "properties.secretName: not a Kubernetes object name"),
    ({"name": "e", "type": "export2config", "properties": {
        "configName": "c", "data": {"../x": "y"}}}, "properties.data: a key is not"),
    # unknown fields, by name
    (read(labelSelector={"a": "b"}), "properties.labelSelector: not supported"),
    ({"name": "e", "type": "export2config", "properties": {"configName": "c", "labels": {}}},
     "properties.labels: not supported"),
    ({"name": "e", "type": "export2secret", "properties": {
        "secretName": "s", "dockerRegistry": {"username": "u", "password": "p", "email": "x"}}},
     "properties.dockerRegistry.email: not supported"),
    # a token Secret: the deny list, as for any component's object
    ({"name": "e", "type": "export2secret", "properties": {
        "secretName": "s", "type": "kubernetes.io/service-account-token"}},
     "properties.type: a service-account-token Secret is not written"),
])
def test_refused_by_name(step: JSON, words: str) -> None:
    steps = [deploy_web(), step] if step["type"] == "read-object" else [step]
    with pytest.raises(model.AppError) as caught:
        compiled(*steps)
    assert words in str(caught.value), str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_refusal_quotes_no_secret_value() -> None:
    with pytest.raises(model.AppError) as caught:
        compiled({"name": "e", "type": "export2secret", "properties": {
            "secretName": "s", "kind": "docker-registry",
            "dockerRegistry": {"username": "u", "password": 12345}}})
    assert "12345" not in str(caught.value)


# -- on the in-memory fleet --------------------------------------------------------------------


def configmap(namespace: str, data: JSON) -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": namespace}, "data": data}


APP: JSON = {
    "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
    "metadata": {"name": "shop", "namespace": "shop", "annotations": {}},
    "spec": {
        "components": [{"name": "web", "type": "config", "properties": {"data": {"a": "b"}}}],
        "workflow": {"steps": [
            read(),
            {"name": "export", "type": "export2config", "properties": {
                "configName": "exported", "cluster": "member2"},
             "inputs": [{"from": "cpu", "parameterKey": "data.cpu"}]},
            {"name": "secret", "type": "export2secret", "properties": {
                "secretName": "exported", "cluster": "member2"},
             "inputs": [{"from": "cpu", "parameterKey": "data.cpu"}]}]}}}
APP["spec"]["workflow"]["steps"][0]["outputs"] = [
    {"name": "cpu", "valueFrom": 'output.$returns.value.data["cpu"]'}]


async def run(mc: MC, app: JSON, times: int = 8) -> JSON:
    clock = Clock()
    set_app(mc, app)
    flow: JSON = {}
    for _ in range(times):
        reconciler = app_fakes.reconciler(mc, app_fakes.Recorder(), clock=clock)
        await reconciler.reconcile(REQUEST)
        live = mc.find("hub", "Application", "shop", "shop")
        assert live is not None
        live["status"] = without_nulls(live["status"])
        mc.put("hub", live)
        flow = live["status"]
        clock.now += 1
        if flow.get("workflow", {}).get("phase") in ("succeeded", "failed"):
            break
    return flow


async def test_read_then_export_moves_a_value_between_steps() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", configmap("shop", {"cpu": "500m"}))
    status = await run(mc, APP)
    assert status["workflow"]["phase"] == "succeeded", status
    assert must(mc, "member2", "ConfigMap", "exported")["data"] == {"cpu": "500m"}
    secret = mc.find("member2", "Secret", "exported", "shop")
    assert secret is not None and secret["stringData"] == {"cpu": "500m"}
    tracked = {(r["cluster"], r["kind"], r["name"]) for r in status["appliedResources"]}
    assert {("member2", "ConfigMap", "exported"), ("member2", "Secret", "exported")} <= tracked


async def test_another_namespaces_object_of_that_name_is_not_read() -> None:
    """Only bank (and default, KubeVela's default namespace) have a ConfigMap 'settings':
    shop's read finds none, its output has no value (the step fails, reason Output) and
    neither value is anywhere in the status."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", configmap("bank", {"cpu": "bank-secret-cpu"}))
    mc.put("hub", configmap("default", {"cpu": "default-cpu"}))  # KubeVela's default
    status = await run(mc, APP)
    step = status["workflow"]["steps"][0]
    assert (step["phase"], step["reason"]) == ("failed", "Output")
    assert "bank-secret-cpu" not in json.dumps(status)
    assert "default-cpu" not in json.dumps(status)
    assert mc.find("member2", "ConfigMap", "exported", "shop") is None


async def test_a_read_in_a_member_reads_that_members_object_in_the_apps_namespace() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("member2", configmap("shop", {"cpu": "2"}))
    mc.put("member3", configmap("shop", {"cpu": "3"}))
    app = copy.deepcopy(APP)
    app["spec"]["workflow"]["steps"].insert(0, {
        "name": "deploy", "type": "apply-component",
        "properties": {"component": "web", "cluster": "member2"}})
    app["spec"]["workflow"]["steps"][1]["properties"]["cluster"] = "member2"
    status = await run(mc, app, 12)
    assert status["workflow"]["phase"] == "succeeded", status["workflow"]
    assert must(mc, "member2", "ConfigMap", "exported")["data"] == {"cpu": "2"}
