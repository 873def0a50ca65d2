"""``compile_app`` on mutated valid Applications: it renders them or raises
:class:`model.AppError`, never any other exception (issue 23, "no traceback on any input").

The controller compiles every Application on every reconcile and maps only ``AppError`` to
``renderFailed``: any other exception would retry for ever with no reason on the
Application. Random documents rarely get past the first field, so each case here starts
from a valid Application using every built-in (:data:`VALID`) and changes one to three
places in it: a value replaced by a random one (a scalar, a list, a map of known field
names), a key deleted, or a known key added where it does not belong.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.applications import compile as compile_
from federation.applications import model, scope
from federation.placement import clusters as clusters_

FLEET = [clusters_.Cluster(name=n, labels={"region": r})
         for n, r in (("member1", "eu"), ("member2", "us"), ("member3", "eu"))]
GRANT = scope.Grant("shop", frozenset({"shop", "prod"}))

VALID: list[dict[str, Any]] = [
    {"components": [
        {"name": "web", "type": "webservice",
         "properties": {"image": "web:1", "ports": [{"port": 80, "expose": True}],
                        "env": [{"name": "A", "value": "1"}], "cpu": "100m",
                        "volumeMounts": {"configMap": [{"name": "c", "mountPath": "/c",
                                                        "cmName": "c"}]},
                        "livenessProbe": {"httpGet": {"path": "/", "port": 80}},
                        "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}]},
         "traits": [{"type": "scaler", "properties": {"replicas": 2}},
                    {"type": "labels", "properties": {"team": "a"}},
                    {"type": "expose", "properties": {"port": [8080]}},
                    {"type": "env", "properties": {"env": {"K": "V"}}},
                    {"type": "storage", "properties": {
                        "pvc": [{"name": "d", "mountPath": "/d"}],
                        "emptyDir": [{"name": "t", "mountPath": "/t"}],
                        "configMap": [{"name": "m", "mountPath": "/m", "data": {"a": "b"}}],
                        "secret": [{"name": "s", "mountPath": "/s", "mountToEnv": {
                            "envName": "S", "secretKey": "k"}}],
                        "hostPath": [{"name": "h", "path": "/h", "mountPath": "/h"}]}},
                    {"type": "init-container", "properties": {
                        "name": "i", "image": "busybox", "appMountPath": "/a",
                        "initMountPath": "/w"}},
                    {"type": "cpuscaler", "properties": {"max": 3}},
                    {"type": "command", "properties": {"addArgs": ["-v"]}},
                    {"type": "container-image", "properties": {"image": "web:3"}},
                    {"type": "json-merge-patch", "properties": {"metadata": {
                        "annotations": {"x": "y"}}}},
                    {"type": "json-patch", "properties": {"operations": [
                        {"op": "add", "path": "/spec/paused", "value": False}]}},
                    {"type": "hostalias", "properties": {"hostAliases": [
                        {"ip": "10.0.0.9", "hostnames": ["b"]}]}},
                    {"type": "sidecar", "properties": {"name": "log", "image": "busybox"}},
                    {"type": "gateway", "properties": {"domain": "a.example.com",
                                                       "http": {"/": 80}}}]},
        {"name": "conf", "type": "config", "properties": {"data": {"a": "b"}}},
        {"name": "raw", "type": "k8s-objects", "properties": {"objects": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "r"}}]}},
        {"name": "job", "type": "worker", "properties": {"image": "busybox", "cmd": ["sh"]}}],
     "policies": [
        {"name": "eu", "type": "topology", "properties": {"clusterLabelSelector":
                                                          {"region": "eu"}}},
        {"name": "us", "type": "topology", "properties": {"clusters": ["member2"],
                                                          "namespace": "prod"}},
        {"name": "ov", "type": "override", "properties": {
            "components": [{"name": "web", "properties": {"image": "web:2"},
                            "traits": [{"type": "scaler", "properties": {"replicas": 3}}]},
                           {"name": "we*", "type": "webservice"},
                           {"name": "extra", "type": "worker", "properties": {"image": "x"}}],
            "selector": ["web", "conf", "extra"]}},
        {"name": "h", "type": "health", "properties": {"probeInterval": 10}},
        {"name": "gc", "type": "garbage-collect", "properties": {"keepLegacyResource": True}}],
     "workflow": {"steps": [
        {"name": "eu", "type": "deploy", "properties": {"policies": ["eu", "ov"]}},
        {"name": "wait", "type": "suspend", "properties": {"duration": "1m"}},
        {"name": "ok", "type": "approve"},
        {"name": "tell", "type": "notification",
         "properties": {"webhook": {"url": "https://hooks.example.com/x"}, "message": "hi"}},
        {"name": "us", "type": "deploy", "properties": {"policies": ["us"],
                                                        "parallelism": 2}}]}},
    {"components": [{"name": "web", "type": "webservice", "traits": None,
                     "properties": {"image": "web:1", "port": 80}}],
     "policies": [{"name": "spread", "type": "topology", "properties": {
         "clusters": ["member1", "member2"],
         "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                             "replicaDivisionPreference": "Weighted"}}}},
                  {"type": "topology", "properties": {"clusters": ["member1"]}},
                  {"name": "rules", "type": "override", "properties": {"overrideRules": [
                      {"targetCluster": {"clusterNames": ["member1"]},
                       "overriders": {"imageOverrider": [{"component": "Tag",
                                                          "operator": "replace",
                                                          "value": "2"}]}}]}}]},
    {"components": [  # vela-core's built-ins added for its definitions table
        {"name": "agent", "type": "daemon",
         "properties": {"image": "a:1", "ports": [{"port": 80, "expose": True}],
                        "volumeMounts": {"hostPath": [{"name": "h", "mountPath": "/h",
                                                       "path": "/h", "readOnly": True}]}},
         "traits": [{"type": "affinity", "properties": {"tolerations": [{"key": "k"}],
                                                        "nodeAffinity": {"required": {
                                                            "nodeSelectorTerms": [{}]}}}},
                    {"type": "container-ports", "properties": {"ports": [
                        {"containerPort": 80, "hostPort": 80}]}},
                    {"type": "lifecycle", "properties": {"preStop": {"exec": {
                        "command": ["x"]}}}},
                    {"type": "podsecuritycontext", "properties": {"fsGroup": 1}},
                    {"type": "securitycontext", "properties": {"runAsUser": 1}},
                    {"type": "resource", "properties": {"cpu": 1, "memory": "1Gi"}},
                    {"type": "service-account", "properties": {"name": "sa", "create": True}},
                    {"type": "startup-probe", "properties": {"tcpSocket": {"port": 80}}},
                    {"type": "topologyspreadconstraints", "properties": {"constraints": [
                        {"maxSkew": 1, "topologyKey": "z", "labelSelector": {}}]}},
                    {"type": "service-binding", "properties": {"envMappings": {
                        "P": {"secret": "s"}}}},
                    {"type": "nocalhost", "properties": {"port": 80, "image": "go"}},
                    {"type": "k8s-update-strategy", "properties": {"targetKind": "DaemonSet"}},
                    {"type": "configmap", "properties": {"volumes": [
                        {"name": "c", "mountPath": "/c", "data": {"a": "b"}}]}}]},
        {"name": "once", "type": "task", "properties": {"image": "b", "count": 2}},
        {"name": "tick", "type": "cron-task", "properties": {"image": "b", "schedule": "@daily"},
         "traits": [{"type": "resource", "properties": {"requests": {"cpu": "1"}}}]},
        {"name": "plain", "type": "raw", "properties": {"apiVersion": "v1",
                                                        "kind": "ConfigMap"}},
        {"name": "web", "type": "webservice", "properties": {"image": "w",
                                                             "addRevisionLabel": True},
         "traits": [{"type": "hpa", "properties": {"max": 3}},
                    {"type": "pure-ingress", "properties": {"domain": "a", "http": {"/": 80}}},
                    {"type": "volumes", "properties": {"volumes": [{"name": "v"}]}},
                    {"type": "pvc", "properties": {
                        "claimName": "c", "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                        "volumesToMount": [{"name": "p", "mountPath": "/p"}]}}]}],
     "policies": [
        {"name": "t", "type": "topology", "properties": {"clusters": ["member1"]}},
        {"name": "once", "type": "apply-once", "properties": {"enable": True, "rules": [
            {"selector": {"resourceTypes": ["Deployment"]},
             "strategy": {"path": ["spec.replicas"]}}]}},
        {"name": "ro", "type": "read-only", "properties": {"rules": [
            {"selector": {"resourceNames": ["nothing"]}}]}},
        {"name": "update", "type": "resource-update", "properties": {"rules": [
            {"selector": {"resourceTypes": ["Deployment"]},
             "strategy": {"op": "replace", "recreateFields": ["spec.selector"]}}]}},
        {"name": "gc", "type": "garbage-collect", "properties": {"continueOnFailure": True}}],
     "workflow": {"steps": [
        {"name": "all", "type": "apply-application"},
        {"name": "rest", "type": "apply-remaining", "properties": {"exceptions": ["web"]}},
        {"name": "out", "type": "deploy2runtime", "properties": {"clusters": ["member2"]}},
        {"name": "obj", "type": "apply-object", "properties": {"value": {
            "apiVersion": "v1", "kind": "ConfigMap"}}},
        {"name": "dep", "type": "apply-deployment", "properties": {"image": "x"}},
        {"name": "say", "type": "print-message-in-status", "properties": {"message": "m"}},
        {"name": "eps", "type": "collect-service-endpoints",
         "properties": {"components": ["web"], "port": 80, "outer": True}},
        {"name": "data", "type": "export-data", "properties": {
            "topology": "t", "kind": "Secret", "data": {"k": "v"}}},
        {"name": "wait-app", "type": "depends-on-app", "properties": {"name": "other"}},
        {"name": "clean", "type": "clean-jobs", "properties": {"labelselector": {"a": "b"}}}]}},
]

FIELDS = ["name", "type", "properties", "traits", "policies", "clusters", "image", "port",
          "ports", "replicas", "objects", "steps", "components", "selector", "placement",
          "overrideRules", "namespace", "env", "data", "metadata", "url", "webhook",
          "mountPath", "disable", "expose", "http", "domain", "if", "timeout", "duration",
          "clusterLabelSelector", "allowEmpty", "volumeMounts", "livenessProbe", "containers",
          "spec", "template", "resources", "securityContext", "value", "rules", "strategy",
          "path", "envMappings", "volumesToMount", "schedule"]
scalars = (st.none() | st.booleans() | st.integers(-3, 70000) | st.floats(allow_nan=True)
           | st.text(max_size=6)
           | st.sampled_from(["web", "member1", "local", "*", "webservice", "topology",
                              "deploy", "80", "1m", "always", "Divided", "eu", "kube-system"]))
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=4), inner, max_size=3),
    max_leaves=12)


def _places(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``node`` (map keys and list indices), the root excluded."""
    found: list[tuple[Any, ...]] = []
    items = node.items() if isinstance(node, dict) else \
        enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        found.append((*path, key))
        found.extend(_places(child, (*path, key)))
    return found


def _mutate(doc: Any, data: st.DataObject) -> None:
    places = _places(doc)
    if not places:  # everything deleted already: the empty spec is a case too
        return
    path = data.draw(st.sampled_from(places))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    action = data.draw(st.sampled_from(["replace", "replace", "delete", "add"]))
    if action == "replace":
        parent[last] = data.draw(values)
    elif action == "delete":
        del parent[last]
    elif isinstance(parent[last], dict):
        parent[last][data.draw(st.sampled_from(FIELDS))] = data.draw(values)
    elif isinstance(parent[last], list):
        parent[last].append(data.draw(values))


EXAMPLES = int(os.environ.get("FEDERATION_FUZZ_EXAMPLES", "150"))


def test_the_seeds_compile() -> None:
    """The starting points are valid, so the mutations start from what renders."""
    for spec in VALID:
        compile_.compile_app(spec, "shop", "shop", {}, FLEET, "member1", GRANT)


@pytest.mark.timeout(10 * EXAMPLES)
@settings(max_examples=EXAMPLES, deadline=None)
@given(seed=st.sampled_from(range(len(VALID))), count=st.integers(1, 3), data=st.data())
def test_mutated_applications_compile_or_raise_app_error(seed: int, count: int,
                                                          data: st.DataObject) -> None:
    spec = copy.deepcopy(VALID[seed])
    for _ in range(count):
        _mutate(spec, data)
    try:
        compile_.compile_app(spec, "shop", "shop", {}, FLEET,
                             data.draw(st.sampled_from([None, "member1", "nope"])), GRANT)
    except model.AppError as exc:
        assert "\n" not in str(exc)


def test_a_field_name_with_a_newline_is_refused_on_one_line() -> None:
    """Hypothesis' find: a trait whose key holds a newline; the refusal names the key
    escaped, on one line (it goes to a terminal, a log line and a status condition)."""
    spec = copy.deepcopy(VALID[0])
    spec["components"][0]["traits"] = [{"type": "scaler", "properties": {"a\nb": 1}}]
    with pytest.raises(model.AppError) as refused:
        compile_.compile_app(spec, "shop", "shop", {}, FLEET, "member1", GRANT)
    assert "\n" not in str(refused.value) and "a\\nb" in str(refused.value)
