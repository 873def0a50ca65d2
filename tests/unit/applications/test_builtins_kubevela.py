"""Built-ins added for issue 23, each against what vela-core's CUE definition renders for
the same parameters (the expected objects are worked out from the definition named in each
test, vela-templates/definitions/internal/...; defaults included)."""

from __future__ import annotations

from typing import Any

import pytest

from federation.applications import model, render


def rendered(type_: str, properties: dict[str, Any], *traits: dict[str, Any]
             ) -> list[dict[str, Any]]:
    component = model.Component.model_validate(
        {"name": "web", "type": type_, "properties": properties, "traits": list(traits)})
    return render.render_component(component, "app", "ns")


def pod_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = objects[0]["spec"]["template"]["spec"]
    return spec


LABELS = {"app.oam.dev/name": "app", "app.oam.dev/component": "web"}


def test_webservice_volume_mounts_as_the_definition_renders_them() -> None:
    """component/webservice.cue: mountsArray in the order pvc, configMap, secret, emptyDir,
    hostPath; volumesList de-duplicated by name (the first wins); configMap and secret get
    defaultMode 420, items mode 511, emptyDir medium ""."""
    pod = pod_of(rendered("webservice", {"image": "nginx", "volumeMounts": {
        "hostPath": [{"name": "h", "mountPath": "/h", "path": "/var/log"}],
        "emptyDir": [{"name": "e", "mountPath": "/e"}],
        "secret": [{"name": "s", "mountPath": "/s", "secretName": "tls",
                    "items": [{"key": "k", "path": "p"}]}],
        "configMap": [{"name": "c", "mountPath": "/c", "subPath": "x", "cmName": "conf"}],
        "pvc": [{"name": "d", "mountPath": "/d", "claimName": "data"},
                {"name": "d", "mountPath": "/d2", "claimName": "other"}]}}))
    assert pod["containers"][0]["volumeMounts"] == [
        {"mountPath": "/d", "name": "d"}, {"mountPath": "/d2", "name": "d"},
        {"mountPath": "/c", "subPath": "x", "name": "c"}, {"mountPath": "/s", "name": "s"},
        {"mountPath": "/e", "name": "e"}, {"mountPath": "/h", "name": "h"}]
    assert pod["volumes"] == [
        {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "c", "configMap": {"defaultMode": 420, "name": "conf"}},
        {"name": "s", "secret": {"defaultMode": 420, "secretName": "tls",
                                 "items": [{"key": "k", "path": "p", "mode": 511}]}},
        {"name": "e", "emptyDir": {"medium": ""}},
        {"name": "h", "hostPath": {"path": "/var/log"}}]


def test_the_older_volumes_list() -> None:
    """webservice.cue's ``volumes`` (used only without volumeMounts): emptyDir by default."""
    pod = pod_of(rendered("worker", {"image": "busybox", "volumes": [
        {"name": "cache", "mountPath": "/cache"},
        {"name": "conf", "mountPath": "/etc/x", "type": "configMap", "cmName": "x"}]}))
    assert pod["containers"][0]["volumeMounts"] == [{"mountPath": "/cache", "name": "cache"},
                                                    {"mountPath": "/etc/x", "name": "conf"}]
    assert pod["volumes"] == [{"name": "cache", "emptyDir": {"medium": ""}},
                              {"name": "conf", "configMap": {"defaultMode": 420, "name": "x"}}]


def test_probes_with_the_definitions_defaults_and_host_aliases() -> None:
    """#HealthProbe of webservice.cue: timings default to 0/10/1/1/3, httpGet.scheme HTTP."""
    pod = pod_of(rendered("webservice", {
        "image": "nginx", "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
        "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 5},
        "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db.local"]}]}))
    container = pod["containers"][0]
    assert container["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
        "initialDelaySeconds": 0, "periodSeconds": 10, "timeoutSeconds": 1,
        "successThreshold": 1, "failureThreshold": 3}
    assert container["readinessProbe"]["periodSeconds"] == 5
    assert container["readinessProbe"]["tcpSocket"] == {"port": 80}
    assert pod["hostAliases"] == [{"ip": "10.0.0.1", "hostnames": ["db.local"]}]


def test_sidecar() -> None:
    """trait/sidecar.cue: a container appended; volumes are name/path mounts; its probe has
    no scheme (the sidecar's #HealthProbe has none)."""
    pod = pod_of(rendered("webservice", {"image": "nginx"}, {"type": "sidecar", "properties": {
        "name": "log", "image": "busybox", "cmd": ["tail"], "args": ["-f", "/l/x"],
        "volumes": [{"name": "logs", "path": "/l"}],
        "livenessProbe": {"exec": {"command": ["true"]}}}}))
    assert pod["containers"][1] == {
        "name": "log", "image": "busybox", "command": ["tail"], "args": ["-f", "/l/x"],
        "volumeMounts": [{"mountPath": "/l", "name": "logs"}],
        "livenessProbe": {"exec": {"command": ["true"]}, "initialDelaySeconds": 0,
                          "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1,
                          "failureThreshold": 3}}


def test_gateway() -> None:
    """trait/gateway.cue on a 1.19+ cluster: a Service port-N per http entry, an Ingress
    with the class annotation, the path type ImplementationSpecific."""
    objects = rendered("webservice", {"image": "nginx", "ports": [{"port": 80,
                                                                   "expose": True}]},
                       {"type": "gateway", "properties": {"domain": "shop.example.com",
                                                          "http": {"/": 80, "/api": 8080}}})
    assert [o["kind"] for o in objects] == ["Deployment", "Service", "Ingress"]
    service, ingress = objects[1], objects[2]
    assert service == {"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": "web", "namespace": "ns", "labels": LABELS},
                       "spec": {"selector": {"app.oam.dev/component": "web"}, "ports": [
                           {"name": "port-80", "port": 80, "targetPort": 80},
                           {"name": "port-8080", "port": 8080, "targetPort": 8080}]}}
    assert ingress == {
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "ns", "labels": LABELS,
                     "annotations": {"kubernetes.io/ingress.class": "nginx"}},
        "spec": {"rules": [{"host": "shop.example.com", "http": {"paths": [
            {"path": "/", "pathType": "ImplementationSpecific",
             "backend": {"service": {"name": "web", "port": {"number": 80}}}},
            {"path": "/api", "pathType": "ImplementationSpecific",
             "backend": {"service": {"name": "web", "port": {"number": 8080}}}}]}}]}}


def test_gateway_options() -> None:
    """classInSpec, secretName, a name suffix and an existing Service."""
    objects = rendered("worker", {"image": "x"}, {"type": "gateway", "properties": {
        "domain": "a.example.com", "http": {"/": 80}, "classInSpec": True, "class": "traefik",
        "secretName": "tls", "name": "public", "existingServiceName": "front"}})
    ingress = objects[-1]
    assert [o["kind"] for o in objects] == ["Deployment", "Ingress"]
    assert ingress["metadata"]["name"] == "web-public"
    assert ingress["metadata"]["annotations"] == {}
    assert ingress["spec"]["ingressClassName"] == "traefik"
    assert ingress["spec"]["tls"] == [{"hosts": ["a.example.com"], "secretName": "tls"}]
    assert ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] == \
        "front"


@pytest.mark.parametrize(("trait", "api", "backend"), [
    ("ingress", "networking.k8s.io/v1beta1", {"serviceName": "web", "servicePort": 80}),
    ("ingress-1-20", "networking.k8s.io/v1",
     {"service": {"name": "web", "port": {"number": 80}}}),
])
def test_ingress_traits(trait: str, api: str, backend: dict[str, Any]) -> None:
    """deprecated/ingress.cue and ingress-1-20.cue: a Service of unnamed ports, an Ingress."""
    objects = rendered("webservice", {"image": "nginx"}, {"type": trait, "properties": {
        "domain": "testsvc.example.com", "http": {"/": 80}}})
    service, ingress = objects[1], objects[2]
    assert service["spec"]["ports"] == [{"port": 80, "targetPort": 80}]
    assert ingress["apiVersion"] == api
    assert ingress["spec"]["rules"][0]["host"] == "testsvc.example.com"
    assert ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"] == backend


@pytest.mark.parametrize(("properties", "traits", "words"), [
    ({"volumeMounts": {"pvc": [{"name": "d", "mountPath": "/d"}]}}, [],
     "properties.volumeMounts.pvc[0].claimName: required"),
    ({"volumeMounts": {"nfs": []}}, [], "properties.volumeMounts.nfs: not supported"),
    ({"livenessProbe": {"httpGet": {"path": "/"}}}, [],
     "properties.livenessProbe.httpGet.port: must be an integer"),
    ({"livenessProbe": {"grpc": {}}}, [], "properties.livenessProbe.grpc: not supported"),
    ({"hostAliases": {"ip": "1.2.3.4"}}, [], "properties.hostAliases: must be a list"),
    ({}, [{"type": "sidecar", "properties": {"name": "web", "image": "x"}}],
     "traits[0].properties.name: the pod already has a container 'web'"),
    ({}, [{"type": "gateway", "properties": {"http": {"/": "80"}}}],
     "traits[0].properties.http./: must be an integer"),
    ({}, [{"type": "ingress", "properties": {"http": {"/": 80}}}],
     "traits[0].properties.domain: required"),
])
def test_malformed_parameters_are_refused_by_path(properties: dict[str, Any],
                                                  traits: list[dict[str, Any]],
                                                  words: str) -> None:
    with pytest.raises(model.AppError) as caught:
        rendered("webservice", {"image": "nginx", **properties}, *traits)
    assert words in str(caught.value)


def test_apply_component_steps_deploy_one_component_each() -> None:
    """workflowstep/apply-component.cue: ``component``, ``cluster`` (default: the local
    cluster), ``namespace`` (default: the Application's); the step waits for health like a
    deploy step (the same state machine)."""
    from federation.applications import compile as compile_
    from federation.applications import scope, workflow
    from federation.placement import clusters as clusters_
    db = {"name": "db", "type": "worker", "properties": {"image": "pg"}}
    spec: dict[str, Any] = {
        "components": [db, {"name": "web", "type": "webservice",
                            "properties": {"image": "nginx"}}],
        "workflow": {"steps": [
            {"name": "db", "type": "apply-component", "properties": {"component": "db"}},
            {"name": "web", "type": "apply-component",
             "properties": {"component": "web", "cluster": "m2", "namespace": "front"}}]}}
    fleet = [clusters_.Cluster(name="m1"), clusters_.Cluster(name="m2")]
    compiled = compile_.compile_app(spec, "app", "ns", {}, fleet, "m1",
                                    scope.Grant("ns", frozenset({"front"})))
    assert [(s.type, s.targets) for s in compiled.steps] == [
        ("apply-component", ("m1",)), ("apply-component", ("m2",))]
    assert [m["metadata"]["name"] for m in compiled.targets["db"].clusters["m1"]] == ["db"]
    assert [m["metadata"]["namespace"] for m in compiled.targets["web"].clusters["m2"]] == [
        "front"]
    assert "apply-component" in workflow.DEPLOYING
    broken = {**spec, "components": [db, {
        "name": "web", "type": "webservice", "properties": {"image": "nginx", "cpu": []}}]}
    with pytest.raises(model.AppError, match=r"^spec\.components\[1\]\.properties\.cpu"):
        compile_.compile_app(broken, "app", "ns", {}, fleet, "m1",
                             scope.Grant("ns", frozenset({"front"})))
    with pytest.raises(model.AppError, match=r"steps\[0\]\.properties\.component: names no"):
        compile_.compile_app({**spec, "workflow": {"steps": [
            {"name": "x", "type": "apply-component", "properties": {"component": "nope"}}]}},
            "app", "ns", {}, fleet, "m1")
    with pytest.raises(model.AppError, match=r"steps\[1\]\.properties\.namespace: namespace "
                                             "'front' is not this Application's"):
        compile_.compile_app(spec, "app", "ns", {}, fleet, "m1")


def test_k8s_objects_first_object_is_named_after_the_component() -> None:
    """KubeVela's assembleWorkload names a workload without a name after the component; the
    other objects of k8s-objects are traits to it, named by a content hash we do not
    reproduce, so their name stays required."""
    objects = rendered("k8s-objects", {"objects": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}]})
    assert [o["metadata"]["name"] for o in objects] == ["web", "c"]
    with pytest.raises(model.AppError, match=r"objects\[1\]\.metadata\.name: required"):
        rendered("k8s-objects", {"objects": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
            {"apiVersion": "v1", "kind": "ConfigMap"}]})


def test_init_container() -> None:
    """trait/init-container.cue: an emptyDir ``workdir`` shared by the init container
    (initMountPath, then extraVolumeMounts) and the main container (appMountPath);
    imagePullPolicy IfNotPresent by default."""
    pod = pod_of(rendered("webservice", {"image": "nginx"}, {
        "type": "init-container", "properties": {
            "name": "fetch", "image": "busybox", "cmd": ["wget"], "appMountPath": "/usr/share",
            "initMountPath": "/work", "extraVolumeMounts": [{"name": "x", "mountPath": "/x"}]}}))
    assert pod["initContainers"] == [{
        "name": "fetch", "image": "busybox", "imagePullPolicy": "IfNotPresent",
        "command": ["wget"], "volumeMounts": [{"name": "workdir", "mountPath": "/work"},
                                             {"name": "x", "mountPath": "/x"}]}]
    assert pod["containers"][0]["volumeMounts"] == [{"name": "workdir",
                                                     "mountPath": "/usr/share"}]
    assert pod["volumes"] == [{"name": "workdir", "emptyDir": {}}]


def test_cpuscaler() -> None:
    """trait/cpuscaler.cue: an autoscaling/v1 HPA of the component's Deployment."""
    objects = rendered("webservice", {"image": "nginx"}, {"type": "cpuscaler",
                                                          "properties": {"max": 5}})
    assert objects[-1] == {
        "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "ns", "labels": LABELS},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": "web"},
                 "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 50}}


def test_storage_secret_host_path_and_environment() -> None:
    """trait/storage.cue: volumes named <kind>-<name> in the order pvc, configMap, secret,
    emptyDir, hostPath; a configMap without mountPath only feeds env; every mountToEnv of a
    kind before its mountToEnvs; Secrets and ConfigMaps rendered unless mountOnly; a Block
    claim is a volumeDevice; hostPath type Directory by default."""
    objects = rendered("worker", {"image": "x"}, {"type": "storage", "properties": {
        "hostPath": [{"name": "logs", "path": "/var/log", "mountPath": "/logs"}],
        "secret": [{"name": "tls", "mountPath": "/tls", "readOnly": True,
                    "stringData": {"a": "b"}, "mountToEnv": {"envName": "A",
                                                             "secretKey": "a"}}],
        "configMap": [{"name": "env-only", "mountToEnvs": [{"envName": "C1",
                                                             "configMapKey": "c1"}]},
                      {"name": "conf", "mountPath": "/conf", "mountOnly": True,
                       "mountToEnv": {"envName": "C0", "configMapKey": "c0"}}],
        "pvc": [{"name": "raw", "mountPath": "/dev/xvda", "volumeMode": "Block",
                 "resources": {"requests": {"storage": "1Gi"}}}]}})
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Deployment", "web"), ("PersistentVolumeClaim", "raw"), ("ConfigMap", "env-only"),
        ("Secret", "tls")]
    pod = pod_of(objects)
    assert [v["name"] for v in pod["volumes"]] == ["pvc-raw", "configmap-conf", "secret-tls",
                                                   "hostpath-logs"]
    assert pod["volumes"][-1] == {"name": "hostpath-logs",
                                  "hostPath": {"path": "/var/log", "type": "Directory"}}
    container = pod["containers"][0]
    assert container["volumeDevices"] == [{"name": "pvc-raw", "devicePath": "/dev/xvda"}]
    assert container["volumeMounts"] == [
        {"name": "configmap-conf", "mountPath": "/conf"},
        {"name": "secret-tls", "mountPath": "/tls", "readOnly": True},
        {"name": "hostpath-logs", "mountPath": "/logs"}]
    assert [e["name"] for e in container["env"]] == ["C0", "C1", "A"]
    assert container["env"][2]["valueFrom"] == {"secretKeyRef": {"name": "tls", "key": "a"}}
    assert objects[1]["spec"] == {"accessModes": ["ReadWriteOnce"], "volumeMode": "Block",
                                  "resources": {"requests": {"storage": "1Gi"}}}
    assert objects[3]["stringData"] == {"a": "b"}


def test_command_container_image_and_hostalias() -> None:
    """trait/command.cue (command replaced; addArgs appended unless present or deleted;
    args always written), container-image.cue (image, and the pull policy when given),
    hostalias.cue (merged by ip)."""
    pod = pod_of(rendered(
        "webservice", {"image": "nginx", "args": ["-a", "-b"],
                       "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}]},
        {"type": "command", "properties": {"command": ["run"], "addArgs": ["-b", "-c"],
                                           "delArgs": ["-a"]}},
        {"type": "container-image", "properties": {"image": "nginx:2",
                                                   "imagePullPolicy": "Always"}},
        {"type": "hostalias", "properties": {"hostAliases": [
            {"ip": "10.0.0.1", "hostnames": ["a"]}, {"ip": "10.0.0.2", "hostnames": ["b"]}]}}))
    container = pod["containers"][0]
    assert container["command"] == ["run"] and container["args"] == ["-b", "-c"]
    assert container["image"] == "nginx:2" and container["imagePullPolicy"] == "Always"
    assert [a["ip"] for a in pod["hostAliases"]] == ["10.0.0.1", "10.0.0.2"]
    pod = pod_of(rendered("worker", {"image": "x"}, {"type": "command", "properties": {
        "containers": [{"containerName": "web", "command": ["sh"]}]}}))
    assert pod["containers"][0]["command"] == ["sh"] and pod["containers"][0]["args"] == []
    for properties, words in (({"containerName": "nope", "image": "y"},
                               "containerName: container nope not found"),
                              ({"containers": [{"image": "y"}]},
                               r"containers\[0\]\.containerName: required")):
        with pytest.raises(model.AppError, match=words):
            rendered("worker", {"image": "x"}, {"type": "container-image",
                                                "properties": properties})
    with pytest.raises(model.AppError, match="cannot set addArgs/delArgs and args"):
        rendered("worker", {"image": "x"}, {"type": "command", "properties": {
            "args": ["a"], "addArgs": ["b"]}})


def test_json_merge_patch_and_json_patch() -> None:
    """trait/json-merge-patch.cue (RFC 7386: null deletes) and json-patch.cue (RFC 6902),
    on the component's workload."""
    objects = rendered(
        "webservice", {"image": "nginx", "replicas": 2},
        {"type": "json-merge-patch", "properties": {
            "spec": {"replicas": 5, "selector": None},
            "metadata": {"annotations": {"a": "b"}}}},
        {"type": "json-patch", "properties": {"operations": [
            {"op": "add", "path": "/spec/template/spec/containers/-",
             "value": {"name": "log", "image": "busybox"}},
            {"op": "replace", "path": "/spec/replicas", "value": 3},
            {"op": "copy", "from": "/metadata/annotations", "path": "/spec/template/metadata"
                                                                     "/annotations"},
            {"op": "test", "path": "/spec/replicas", "value": 3},
            {"op": "remove", "path": "/metadata/annotations/a"}]}})
    deployment = objects[0]
    assert deployment["spec"]["replicas"] == 3 and "selector" not in deployment["spec"]
    assert [c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]] == [
        "web", "log"]
    assert deployment["spec"]["template"]["metadata"]["annotations"] == {"a": "b"}
    assert deployment["metadata"]["annotations"] == {}


@pytest.mark.parametrize(("trait", "words"), [
    ({"type": "json-patch", "properties": {"operations": [{"op": "test", "path": "/kind",
                                                           "value": "Pod"}]}},
     "operations[0]: test failed"),
    ({"type": "json-patch", "properties": {"operations": [{"op": "remove", "path": "/x"}]}},
     "operations[0].path: no member 'x'"),
    ({"type": "json-patch", "properties": {"operations": [
        {"op": "add", "path": "spec", "value": 1}]}},
     "operations[0].path: a JSON pointer"),
    ({"type": "json-patch", "properties": {"operations": [
        {"op": "copy", "from": "", "path": f"/c{i}"} for i in range(40)]}},
     "holds more than 20000 values"),
    ({"type": "json-patch", "properties": {"operations": [{"op": [], "path": "/x"}]}},
     "operations[0].op: must be one of"),
    ({"type": "json-patch", "properties": {"operations": [
        {"op": "remove", "path": "/metadata/name"}]}},
     "(the patched object).metadata.name: must be a non-empty string"),
    ({"type": "json-merge-patch", "properties": {"spec": {"template": "x"}}},
     "traits[0] (the patched object).spec.template: must be a map"),
    ({"type": "json-merge-patch", "properties": {"metadata": {"labels": {"a": 1}}}},
     "(the patched object).metadata.labels: must be a map of strings"),
])
def test_json_patches_that_cannot_apply_or_break_the_object(trait: dict[str, Any],
                                                             words: str) -> None:
    """A failed operation, a pointer that is none, a patch that grows without bound (each
    copy of the root doubles it) or leaves a shape the next trait cannot walk: refused by
    path, never a TypeError."""
    with pytest.raises(model.AppError) as caught:
        rendered("webservice", {"image": "nginx"}, trait, {"type": "scaler",
                                                           "properties": {"replicas": 2}})
    assert words in str(caught.value)


def test_a_patched_kind_or_namespace_meets_the_same_refusals() -> None:
    """json-patch could turn the Deployment into a cluster-scoped kind or move it into
    another namespace: the checks on rendered objects still refuse both."""
    from federation.applications import compile as compile_
    from federation.placement import clusters as clusters_
    for operation, words in (({"op": "replace", "path": "/kind", "value": "ClusterRole"},
                              "ClusterRole web is cluster-scoped"),
                             ({"op": "add", "path": "/metadata/namespace",
                               "value": "kube-system"}, "system namespace")):
        spec = {"components": [{"name": "web", "type": "webservice",
                                "properties": {"image": "nginx"},
                                "traits": [{"type": "json-patch",
                                            "properties": {"operations": [operation]}}]}],
                "policies": [{"name": "t", "type": "topology",
                              "properties": {"clusters": ["m1"]}}]}
        with pytest.raises(model.AppError, match=words):
            compile_.compile_app(spec, "app", "ns", {}, [clusters_.Cluster(name="m1")])


def test_statefulset() -> None:
    """component/statefulset.cue: webservice's template with a StatefulSet, exposed ports as
    a Service."""
    stateful = rendered("statefulset", {"image": "db", "args": ["-x"],
                                        "ports": [{"port": 5432, "expose": True}]},
                        {"type": "scaler", "properties": {"replicas": 3}})
    assert [o["kind"] for o in stateful] == ["StatefulSet", "Service"]
    assert stateful[0]["spec"]["replicas"] == 3
    with pytest.raises(model.AppError, match=r"properties\.limit: not supported"):
        rendered("statefulset", {"image": "db", "limit": {"cpu": "1"}})


def test_scaler_refuses_a_workload_without_replicas() -> None:
    """trait/scaler.cue applies to Deployments and StatefulSets: a DaemonSet (here from
    k8s-objects) has no replicas to set."""
    with pytest.raises(model.AppError, match="scaler applies to Deployments and "
                                             "StatefulSets, not a DaemonSet"):
        rendered("k8s-objects", {"objects": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                              "spec": {}}]},
                 {"type": "scaler", "properties": {"replicas": 2}})
