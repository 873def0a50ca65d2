"""Rendering of the built-in types and traits, policies and revision hashing (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from federation.applications import compile as compile_
from federation.applications import model, policies, render, revision
from federation.placement import clusters as clusters_

FLEET = [clusters_.Cluster(name=n, labels={"env": "prod" if n != "member1" else "dev"})
         for n in ("member1", "member2", "member3")]


def component(**raw: Any) -> model.Component:
    return model.Component.model_validate(raw)


def test_webservice_renders_deployment_and_exposed_service() -> None:
    objs = render.render_component(component(
        name="web", type="webservice",
        properties={"image": "nginx:1", "ports": [{"port": 80, "expose": True},
                                                  {"port": 9090}],
                    "env": [{"name": "A", "value": "1"}], "cpu": "250m"}), "app", "shop")
    deployment, service = objs
    assert deployment["kind"] == "Deployment" and service["kind"] == "Service"
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "nginx:1" and container["env"] == [{"name": "A", "value": "1"}]
    assert container["resources"]["requests"] == {"cpu": "250m"}
    assert [p["port"] for p in service["spec"]["ports"]] == [80]  # only the exposed one
    assert deployment["metadata"]["labels"] == {render.APP_LABEL: "app",
                                                render.COMPONENT_LABEL: "web"}
    assert service["metadata"]["namespace"] == "shop"


def test_traits_patch_the_workload() -> None:
    objs = render.render_component(component(
        name="w", type="worker", properties={"image": "busybox"},
        traits=[{"type": "scaler", "properties": {"replicas": 4}},
                {"type": "labels", "properties": {"team": "a"}},
                {"type": "annotations", "properties": {"note": "x"}},
                {"type": "env", "properties": {"env": {"K": "V"}}},
                {"type": "expose", "properties": {"port": [8080]}},
                {"type": "storage", "properties": {
                    "pvc": [{"name": "data", "mountPath": "/data"}],
                    "emptyDir": [{"name": "tmp", "mountPath": "/tmp"}]}}]), "app", "ns")
    kinds = [o["kind"] for o in objs]
    assert kinds == ["Deployment", "Service", "PersistentVolumeClaim"]
    deployment = objs[0]
    assert deployment["spec"]["replicas"] == 4
    assert deployment["metadata"]["labels"]["team"] == "a"
    assert deployment["spec"]["template"]["metadata"]["annotations"] == {"note": "x"}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "K", "value": "V"} in container["env"]
    assert [m["mountPath"] for m in container["volumeMounts"]] == ["/data", "/tmp"]


def test_config_and_raw_objects() -> None:
    config = render.render_component(component(
        name="cfg", type="config", properties={"data": {"a": "b"}}), "app", "ns")
    assert config[0]["kind"] == "ConfigMap" and config[0]["data"] == {"a": "b"}
    secret = render.render_component(component(
        name="s", type="config", properties={"data": {"a": "b"}, "secret": True}), "app", "ns")
    assert secret[0]["kind"] == "Secret" and secret[0]["stringData"] == {"a": "b"}
    raw = render.render_component(component(
        name="raw", type="k8s-objects", properties={"objects": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "x", "uid": "u", "resourceVersion": "1"}}]}), "app", "ns")
    assert raw[0]["metadata"]["namespace"] == "ns" and "uid" not in raw[0]["metadata"]


@pytest.mark.parametrize("raw,field", [
    ({"name": "w", "type": "webservice", "properties": {"image": "x", "replica": 2}},
     "properties.replica"),
    ({"name": "w", "type": "webservice", "properties": {}}, "properties.image"),
    ({"name": "w", "type": "config", "properties": {"data": {"a": 1}}}, "properties.data"),
    ({"name": "w", "type": "config", "properties": {},
      "traits": [{"type": "scaler", "properties": {"replicas": 2}}]}, "traits[0]"),
])
def test_bad_properties_are_refused_by_name(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(model.AppError, match=field.replace("[", r"\[").replace("]", r"\]")):
        render.render_component(component(**raw), "app", "ns", "spec.components[0]")


def test_spec_refuses_unknown_types_fields_and_conditions() -> None:
    base: dict[str, Any] = {"components": [{"name": "a", "type": "webservice"}]}
    with pytest.raises(model.AppError, match=r"components\[0\].type"):
        model.parse_spec({"components": [{"name": "a", "type": "helm"}]})
    with pytest.raises(model.AppError, match=r"components\[0\].dependsOn\[0\]: 'b' names no"):
        compile_.compile_app({"components": [{"name": "a", "type": "worker", "dependsOn": [
            "b"]}]}, "app", "ns", {}, FLEET)
    with pytest.raises(model.AppError, match=r"steps\[0\].properties.parallelism"):
        model.parse_spec({**base, "workflow": {"steps": [
            {"name": "s", "type": "deploy", "properties": {"parallelism": 0}}]}})


def app_spec(**extra: Any) -> dict[str, Any]:
    return {"components": [{"name": "web", "type": "webservice",
                            "properties": {"image": "web:1", "replicas": 6}}], **extra}


def test_topology_weights_divide_through_the_placement_engine() -> None:
    spec = app_spec(policies=[{"name": "t", "type": "topology", "properties": {
        "clusters": ["member1", "member2"],
        "placement": {"replicaScheduling": {
            "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
            "weightPreference": {"staticWeightList": [
                {"targetCluster": {"clusterNames": ["member1"]}, "weight": 2},
                {"targetCluster": {"clusterNames": ["member2"]}, "weight": 1}]}}}}}])
    compiled = compile_.compile_app(spec, "app", "ns", {}, FLEET)
    target = compiled.targets["deploy"]
    replicas = {c: m[0]["spec"]["replicas"] for c, m in target.clusters.items()}
    assert replicas == {"member1": 4, "member2": 2}


def test_label_selector_and_kubevela_override_and_cluster_rules() -> None:
    spec = app_spec(policies=[
        {"name": "prod", "type": "topology", "properties": {"clusterLabelSelector":
                                                             {"env": "prod"}}},
        {"name": "ha", "type": "override", "properties": {
            "components": [{"type": "webservice", "properties": {"image": "web:2"},
                            "traits": [{"type": "scaler", "properties": {"replicas": 3}}]}],
            "overrideRules": [{"targetCluster": {"clusterNames": ["member2"]},
                               "overriders": {"imageOverrider": [
                                   {"component": "Registry", "operator": "replace",
                                    "value": "eu.example.com"}]}}]}}])
    compiled = compile_.compile_app(spec, "app", "ns", {}, FLEET)
    target = compiled.targets["deploy"].clusters
    assert sorted(target) == ["member2", "member3"]
    image = {c: m[0]["spec"]["template"]["spec"]["containers"][0]["image"]
             for c, m in target.items()}
    assert image == {"member2": "eu.example.com/web:2", "member3": "web:2"}
    assert all(m[0]["spec"]["replicas"] == 3 for m in target.values())


def test_override_rule_touching_identity_is_refused() -> None:
    spec = app_spec(policies=[
        {"name": "t", "type": "topology", "properties": {"clusters": ["member1"]}},
        {"name": "bad", "type": "override", "properties": {"overrideRules": [
            {"overriders": {"plaintext": [{"path": "/metadata/namespace",
                                           "operator": "replace", "value": "kube-system"}]}}]}}])
    with pytest.raises(model.AppError, match="may not be overridden"):
        compile_.compile_app(spec, "app", "ns", {}, FLEET)


def test_local_needs_a_local_cluster_and_unknown_policy_is_named() -> None:
    spec = app_spec(policies=[{"name": "t", "type": "topology",
                               "properties": {"clusters": ["local"]}}])
    with pytest.raises(model.AppError, match="local"):
        compile_.compile_app(spec, "app", "ns", {}, FLEET)
    assert compile_.compile_app(spec, "app", "ns", {}, FLEET, "member3") \
        .targets["deploy"].clusters.keys() == {"member3"}
    spec["workflow"] = {"steps": [{"name": "d", "type": "deploy",
                                   "properties": {"policies": ["nope"]}}]}
    with pytest.raises(model.AppError, match="no policy 'nope'"):
        compile_.compile_app(spec, "app", "ns", {}, FLEET, "member3")


def test_external_policy_is_used_by_name() -> None:
    spec = app_spec(workflow={"steps": [{"name": "d", "type": "deploy",
                                         "properties": {"policies": ["ext"]}}]})
    external = {"ext": {"apiVersion": "core.oam.dev/v1alpha1", "kind": "Policy",
                        "metadata": {"name": "ext", "namespace": "ns"}, "type": "topology",
                        "properties": {"clusters": ["member2"]}}}
    compiled = compile_.compile_app(spec, "app", "ns", external, FLEET)
    assert list(compiled.targets["d"].clusters) == ["member2"]


def test_health_and_gc_policies() -> None:
    spec = [model.PolicySpec(name="h", type="health", properties={"probeInterval": 2,
                                                                    "window": 10}),
            model.PolicySpec(name="g", type="garbage-collect",
                             properties={"keepLegacyResource": True,
                                         "applicationRevisionLimit": 3})]
    assert policies.health_of(spec) == policies.Health(2.0, 10.0)
    assert policies.gc_of(spec) == policies.GarbageCollect(True, 3)
    with pytest.raises(model.AppError, match="applicationRevisionLimit"):
        policies.gc_of([model.PolicySpec(name="g", type="garbage-collect",
                                         properties={"applicationRevisionLimit": 0})])
    assert policies.gc_of([model.PolicySpec(name="g", type="garbage-collect", properties={
        "continueOnFailure": True})]).continue_on_failure
    for bad, words in (({"continueOnFailure": "yes"}, r"continueOnFailure: true or false"),
                       ({"rules": [{"selector": {"componentNames": ["a"]},
                                    "strategy": "sometimes"}]}, r"rules\[0\]\.strategy"),
                       ({"rules": [{"selector": {"kinds": ["a"]}}]},
                        r"rules\[0\]\.selector\.kinds"),
                       ({"rules": [{"selector": {"traitTypes": [1]}}]},
                        r"rules\[0\]\.selector\.traitTypes\[0\]: must be a string"),
                       ({"rules": [{"selector": {}, "propagation": "foreground"}]},
                        r"rules\[0\]\.propagation"),
                       ({"rules": [{"selector": {}, "when": "now"}]}, r"rules\[0\]\.when")):
        with pytest.raises(model.AppError, match=words):
            policies.gc_of([model.PolicySpec(name="g", type="garbage-collect",
                                             properties=bad)])


def test_revision_hash_changes_only_with_content() -> None:
    one = revision.content_hash(revision.content(app_spec(), {}))
    same = revision.content_hash(revision.content(app_spec(), {}))
    other = revision.content_hash(revision.content(
        app_spec(policies=[{"name": "t", "type": "topology", "properties": {}}]), {}))
    external = revision.content_hash(revision.content(app_spec(), {"p": {"type": "health"}}))
    assert one == same and len({one, other, external}) == 3
    assert revision.next_revision([], one) == (1, True)
    assert revision.next_revision([(1, one)], one) == (1, False)
    assert revision.next_revision([(1, one), (2, other)], one) == (3, True)
    assert revision.to_prune([1, 2, 3, 4, 5], 2) == [1, 2, 3]
    assert revision.to_prune([1, 2, 3, 4, 5], 2, keep=[1]) == [2, 3]
