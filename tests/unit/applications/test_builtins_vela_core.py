"""The built-ins added for vela-core's definitions table, each against what its CUE
definition renders for a representative parameter set. The expected objects are worked
out by hand from the definition named in each docstring
(vela-templates/definitions/internal/...), defaults included, then the labels every
object gets here (``app.oam.dev/name``, ``app.oam.dev/component``) and the namespace."""

from __future__ import annotations

from typing import Any

import pytest

from federation.applications import model, render

JSON = dict[str, Any]
LABELS = {"app.oam.dev/name": "app", "app.oam.dev/component": "web"}


def rendered(type_: str, properties: JSON, *traits: JSON) -> list[JSON]:
    component = model.Component.model_validate(
        {"name": "web", "type": type_, "properties": properties, "traits": list(traits)})
    return render.render_component(component, "app", "ns")


def with_trait(type_: str, properties: JSON, base: str = "webservice",
               base_props: JSON | None = None) -> list[JSON]:
    return rendered(base, base_props or {"image": "nginx"},
                    {"type": type_, "properties": properties})


def pod_of(objects: list[JSON]) -> JSON:
    pod: JSON = objects[0]["spec"]["template"]["spec"]
    return pod


# -- components ------------------------------------------------------------------------------


def test_daemon() -> None:
    """component/daemon.cue: a DaemonSet selecting the component; pods labelled with the
    Application and component; ports named port-N; cpu as request and limit; exposed ports
    as a Service of port, targetPort and name."""
    objects = rendered("daemon", {
        "image": "fluentd", "imagePullPolicy": "Always", "cmd": ["run"], "cpu": "100m",
        "labels": {"tier": "log"}, "annotations": {"a": "b"}, "imagePullSecrets": ["reg"],
        "ports": [{"port": 24224, "expose": True}, {"port": 9880, "protocol": "UDP",
                                                     "name": "http"}],
        "volumeMounts": {"hostPath": [{"name": "logs", "mountPath": "/var/log",
                                       "path": "/var/log"}]},
        "exposeType": "NodePort"})
    assert objects == [
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {"name": "web", "namespace": "ns", "labels": LABELS},
         "spec": {"selector": {"matchLabels": {"app.oam.dev/component": "web"}},
                  "template": {"metadata": {"labels": {"tier": "log", **LABELS},
                                            "annotations": {"a": "b"}},
                               "spec": {"containers": [{
                                   "name": "web", "image": "fluentd",
                                   "imagePullPolicy": "Always", "command": ["run"],
                                   "resources": {"limits": {"cpu": "100m"},
                                                 "requests": {"cpu": "100m"}},
                                   "ports": [{"containerPort": 24224, "protocol": "TCP",
                                              "name": "port-24224"},
                                             {"containerPort": 9880, "protocol": "UDP",
                                              "name": "http"}],
                                   "volumeMounts": [{"mountPath": "/var/log",
                                                     "name": "logs"}]}],
                                   "volumes": [{"name": "logs",
                                                "hostPath": {"path": "/var/log"}}],
                                   "imagePullSecrets": [{"name": "reg"}]}}}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "web", "namespace": "ns", "labels": LABELS},
         "spec": {"selector": {"app.oam.dev/component": "web"}, "type": "NodePort",
                  "ports": [{"port": 24224, "targetPort": 24224, "name": "port-24224"}]}}]


def test_daemon_single_port_and_refusals() -> None:
    """daemon.cue's deprecated ``port`` is a bare containerPort; it has no ``args``,
    ``replicas`` or ``limit`` (``addRevisionLabel``: test_revision_label.py)."""
    container = pod_of(rendered("daemon", {"image": "x", "port": 80}))["containers"][0]
    assert container["ports"] == [{"containerPort": 80}]
    for key, value in (("args", ["-v"]), ("replicas", 2), ("limit", {"cpu": "1"})):
        with pytest.raises(model.AppError, match=rf"properties\.{key}: not supported"):
            rendered("daemon", {"image": "x", key: value})


def test_task() -> None:
    """component/task.cue: a Job <app>-<component>, count as parallelism and completions,
    restartPolicy Never, the older volumes list."""
    objects = rendered("task", {"image": "perl", "cmd": ["perl", "-e", "1"], "count": 2,
                                "memory": "64Mi", "env": [{"name": "A", "value": "1"}],
                                "volumes": [{"name": "cache", "mountPath": "/c"}]})
    assert objects == [{
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "app-web", "namespace": "ns", "labels": LABELS},
        "spec": {"parallelism": 2, "completions": 2, "template": {
            "metadata": {"labels": LABELS},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "web", "image": "perl", "command": ["perl", "-e", "1"],
                "env": [{"name": "A", "value": "1"}],
                "resources": {"limits": {"memory": "64Mi"}, "requests": {"memory": "64Mi"}},
                "volumeMounts": [{"mountPath": "/c", "name": "cache"}]}],
                "volumes": [{"name": "cache", "emptyDir": {"medium": ""}}]}}}}]


@pytest.mark.parametrize(("props", "words"), [
    ({"restart": "Always"}, r"restart: must be Never or OnFailure"),
    ({"livenessProbe": {"exec": {"command": ["x"]}}},
     r"livenessProbe: not supported .its definition accepts a probe and renders none"),
    ({"volumeMounts": {}}, r"volumeMounts: not supported"),
])
def test_task_refusals(props: JSON, words: str) -> None:
    with pytest.raises(model.AppError, match=words):
        rendered("task", {"image": "x", **props})


def test_cron_task() -> None:
    """component/cron-task.cue (1.25+): a CronJob named after the component with the
    definition's defaults (Allow, history 3 and 1, backoffLimit 6, not suspended), the job
    template labelled like its pods."""
    objects = rendered("cron-task", {
        "image": "busybox", "schedule": "*/5 * * * *", "restart": "OnFailure",
        "ttlSecondsAfterFinished": 60, "startingDeadlineSeconds": 10,
        "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db"]}],
        "volumeMounts": {"emptyDir": [{"name": "t", "mountPath": "/t", "subPath": "s"}]}})
    assert objects == [{
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "web", "namespace": "ns", "labels": LABELS},
        "spec": {"schedule": "*/5 * * * *", "concurrencyPolicy": "Allow", "suspend": False,
                 "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                 "startingDeadlineSeconds": 10,
                 "jobTemplate": {"metadata": {"labels": LABELS}, "spec": {
                     "parallelism": 1, "completions": 1, "ttlSecondsAfterFinished": 60,
                     "backoffLimit": 6, "template": {
                         "metadata": {"labels": LABELS},
                         "spec": {"restartPolicy": "OnFailure", "containers": [{
                             "name": "web", "image": "busybox",
                             "volumeMounts": [{"mountPath": "/t", "subPath": "s",
                                               "name": "t"}]}],
                             "volumes": [{"name": "t", "emptyDir": {"medium": ""}}],
                             "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db"]}]}}}}}}]
    with pytest.raises(model.AppError, match=r"properties\.schedule: required"):
        rendered("cron-task", {"image": "x"})
    with pytest.raises(model.AppError, match="concurrencyPolicy: must be Allow"):
        rendered("cron-task", {"image": "x", "schedule": "@daily",
                               "concurrencyPolicy": "Sometimes"})


def test_the_resource_trait_reaches_a_cron_jobs_pod() -> None:
    """trait/resource.cue applies to cronjobs too, under spec.jobTemplate."""
    objects = rendered("cron-task", {"image": "x", "schedule": "@daily"},
                       {"type": "resource", "properties": {"cpu": "250m", "memory": "1Gi"}})
    pod = objects[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"] == {
        "requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"cpu": "250m", "memory": "1Gi"}}
    with pytest.raises(model.AppError, match="trait 'affinity' applies to Deployment, "
                                             "StatefulSet, DaemonSet, Job; the component "
                                             "renders none"):
        rendered("cron-task", {"image": "x", "schedule": "@daily"},
                 {"type": "affinity", "properties": {}})


# -- traits ----------------------------------------------------------------------------------


def test_affinity() -> None:
    """trait/affinity.cue: each block under its scheduling field names, operators default
    In (selectors) and Equal (tolerations)."""
    pod = pod_of(with_trait("affinity", {
        "podAntiAffinity": {"preferred": [{"weight": 50, "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchExpressions": [{"key": "app", "values": ["web"]}]}}}]},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "disk", "operator": "Exists"}]}]}},
        "tolerations": [{"key": "gpu", "effect": "NoSchedule"}]}))
    assert pod["affinity"] == {
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "podAffinityTerm": {
                "topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchExpressions": [
                    {"key": "app", "operator": "In", "values": ["web"]}]}}}]},
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "disk",
                                                         "operator": "Exists"}]}]}}}
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Equal", "effect": "NoSchedule"}]


@pytest.mark.parametrize(("props", "words"), [
    ({"podAffinity": {"required": [{"topologyKey": "z", "namespace": "other"}]}},
     r"podAffinity\.required\[0\]\.namespace: not supported .Kubernetes' PodAffinityTerm"),
    ({"podAffinity": {"preferred": [{"weight": 101, "podAffinityTerm": {"topologyKey": "z"}}]}},
     r"podAffinity\.preferred\[0\]\.weight: must be an integer from 1 to 100"),
    ({"tolerations": [{"operator": "Maybe"}]}, r"tolerations\[0\]\.operator: must be one of"),
    ({"nodeAffinty": {}}, r"properties\.nodeAffinty: not supported"),
])
def test_affinity_refusals(props: JSON, words: str) -> None:
    with pytest.raises(model.AppError, match=words):
        with_trait("affinity", props)


def test_container_ports() -> None:
    """trait/container-ports.cue: the container's ports keep their names and get hostPort
    where protocol and number match; others are appended; a container without ports gets
    the given ones."""
    pod = pod_of(with_trait("container-ports", {"ports": [
        {"containerPort": 80, "hostPort": 8080}, {"containerPort": 53, "protocol": "UDP"}]},
        base_props={"image": "nginx", "ports": [{"port": 80}]}))
    assert pod["containers"][0]["ports"] == [
        {"containerPort": 80, "protocol": "TCP", "name": "port-80", "hostPort": 8080},
        {"containerPort": 53, "protocol": "UDP"}]
    pod = pod_of(with_trait("container-ports", {"containers": [{"containerName": "web", "ports": [
        {"containerPort": 9000, "hostIP": "0.0.0.0", "hostPort": 9000}]}]}))
    assert pod["containers"][0]["ports"] == [
        {"containerPort": 9000, "protocol": "TCP", "hostIP": "0.0.0.0", "hostPort": 9000}]
    with pytest.raises(model.AppError, match=r"containers\[0\]\.containerName: required"):
        with_trait("container-ports", {"containers": [{"ports": []}]})
    with pytest.raises(model.AppError, match=r"containerName: container side not found"):
        with_trait("container-ports", {"containerName": "side", "ports": []})


def test_hpa() -> None:
    """trait/hpa.cue on 1.23+: autoscaling/v2 with the cpu metric (Utilization 50) first,
    then memory, then pod metrics."""
    objects = with_trait("hpa", {"max": 5, "mem": {"type": "AverageValue", "value": 100},
                                 "podCustomMetrics": [{"name": "qps", "value": "10"}]})
    assert objects[-1] == {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "ns", "labels": LABELS},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": "web"},
                 "minReplicas": 1, "maxReplicas": 5, "metrics": [
                     {"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": 50}}},
                     {"type": "Resource", "resource": {"name": "memory", "target": {
                         "type": "AverageValue", "averageValue": 100}}},
                     {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {
                         "type": "AverageValue", "averageValue": "10"}}}]}}


def test_k8s_update_strategy() -> None:
    """trait/k8s-update-strategy.cue: a Deployment's strategy, a StatefulSet's partition."""
    deployment = with_trait("k8s-update-strategy", {"strategy": {
        "type": "RollingUpdate", "rollingStrategy": {"maxSurge": "50%"}}})[0]
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%", "maxUnavailable": "25%"}}
    assert with_trait("k8s-update-strategy", {"strategy": {"type": "Recreate"}})[0][
        "spec"]["strategy"] == {"type": "Recreate"}
    stateful = with_trait("k8s-update-strategy", {"targetKind": "StatefulSet", "strategy": {
        "rollingStrategy": {"partition": 2}}}, base="statefulset")[0]
    assert stateful["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                                  "rollingUpdate": {"partition": 2}}
    daemon = with_trait("k8s-update-strategy", {"targetKind": "DaemonSet"}, base="daemon")[0]
    assert daemon["spec"]["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}


@pytest.mark.parametrize(("props", "base", "words"), [
    ({"strategy": {"type": "OnDelete"}}, "webservice",
     r"strategy\.type: a Deployment has no OnDelete strategy"),
    ({"targetKind": "StatefulSet", "strategy": {"type": "Recreate"}}, "statefulset",
     r"a StatefulSet has no Recreate strategy"),
    ({"targetKind": "DaemonSet"}, "webservice",
     r"targetKind: DaemonSet, but the component's workload is a Deployment"),
    ({"targetAPIVersion": "apps/v1beta1"}, "webservice", r"targetAPIVersion: must be one of"),
])
def test_k8s_update_strategy_refusals(props: JSON, base: str, words: str) -> None:
    with pytest.raises(model.AppError, match=words):
        with_trait("k8s-update-strategy", props, base=base)


def test_lifecycle_on_every_container() -> None:
    """trait/lifecycle.cue patches ``containers: [...{lifecycle}]``: every container; an
    httpGet handler's scheme defaults to HTTP."""
    objects = rendered("webservice", {"image": "nginx"},
                       {"type": "sidecar", "properties": {"name": "log", "image": "busybox"}},
                       {"type": "lifecycle", "properties": {
                           "preStop": {"exec": {"command": ["sleep", "5"]}},
                           "postStart": {"httpGet": {"port": 80, "path": "/up"}}}})
    for container in pod_of(objects)["containers"]:
        assert container["lifecycle"] == {
            "preStop": {"exec": {"command": ["sleep", "5"]}},
            "postStart": {"httpGet": {"port": 80, "path": "/up", "scheme": "HTTP"}}}
    with pytest.raises(model.AppError, match=r"postStart\.httpGet\.port: must be an integer "
                                             "from 1 to 65535"):
        with_trait("lifecycle", {"postStart": {"httpGet": {"port": 0}}})


def test_pod_and_container_security_contexts() -> None:
    """trait/podsecuritycontext.cue (runAsNonRoot true by default) and
    securitycontext.cue (its defaults, and an always-present capabilities map)."""
    pod = pod_of(rendered("webservice", {"image": "nginx"},
                          {"type": "podsecuritycontext", "properties": {
                              "fsGroup": 2000, "seccompProfile": {"type": "RuntimeDefault"}}},
                          {"type": "securitycontext", "properties": {
                              "runAsUser": 1000, "dropCapabilities": ["ALL"]}}))
    assert pod["securityContext"] == {"fsGroup": 2000, "runAsNonRoot": True,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["containers"][0]["securityContext"] == {
        "capabilities": {"drop": ["ALL"]}, "runAsUser": 1000,
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": False,
        "privileged": False, "runAsNonRoot": True}
    with pytest.raises(model.AppError, match=r"properties\.runAsUser: must be an integer"):
        with_trait("securitycontext", {"runAsUser": "root"})


@pytest.mark.parametrize(("props", "expected"), [
    ({"cpu": 0.5, "memory": "512Mi"}, {"requests": {"cpu": 0.5, "memory": "512Mi"},
                                       "limits": {"cpu": 0.5, "memory": "512Mi"}}),
    ({"requests": {"cpu": "100m"}}, {"requests": {"cpu": "100m", "memory": "2048Mi"}}),
    ({"requests": {}, "limits": {"memory": "1Gi"}},
     {"requests": {"cpu": 1, "memory": "2048Mi"}, "limits": {"cpu": 1, "memory": "1Gi"}}),
])
def test_resource(props: JSON, expected: JSON) -> None:
    """trait/resource.cue: cpu and memory together set both; requests/limits (defaults cpu
    1, memory 2048Mi) replace the container's (retainKeys)."""
    container = pod_of(with_trait("resource", props))["containers"][0]
    assert container["resources"] == expected


@pytest.mark.parametrize(("props", "words"), [
    ({"cpu": "1"}, r"properties\.memory: required with cpu"),
    ({"memory": "1Gi"}, r"properties\.cpu: required with memory"),
    ({"cpu": 1, "memory": "lots"}, r"properties\.memory: must be a quantity"),
    ({"requests": {"cpu": True}}, r"requests\.cpu: must be a number or a string"),
    ({"cpu": "1", "memory": "1Gi", "limits": {}},
     r"properties\.cpu: not supported with requests or limits"),
])
def test_resource_refusals(props: JSON, words: str) -> None:
    with pytest.raises(model.AppError, match=words):
        with_trait("resource", props)


def test_service_account() -> None:
    """trait/service-account.cue: serviceAccountName; a ServiceAccount with create."""
    objects = with_trait("service-account", {"name": "robot", "create": True})
    assert pod_of(objects)["serviceAccountName"] == "robot"
    assert objects[-1] == {"apiVersion": "v1", "kind": "ServiceAccount",
                           "metadata": {"name": "robot", "namespace": "ns", "labels": LABELS}}
    assert [o["kind"] for o in with_trait("service-account", {"name": "robot"})] == \
        ["Deployment"]


def test_service_account_privileges_are_refused() -> None:
    """The attack: a tenant asks the trait for a ClusterRole binding its ServiceAccount to
    everything; KubeVela would write the ClusterRole and binding with the controller's
    identity. Here RBAC objects are never written, so ``privileges`` is refused."""
    with pytest.raises(model.AppError, match=r"privileges: not supported .Roles and "
                                             "RoleBindings are RBAC objects"):
        with_trait("service-account", {"name": "robot", "privileges": [
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "scope": "cluster"}]})


def test_startup_probe() -> None:
    """trait/startup-probe.cue: the timings' defaults; probes[] per container."""
    pod = pod_of(with_trait("startup-probe", {"tcpSocket": {"port": 80},
                                              "failureThreshold": 30}))
    assert pod["containers"][0]["startupProbe"] == {
        "tcpSocket": {"port": 80}, "initialDelaySeconds": 0, "periodSeconds": 10,
        "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 30}
    pod = pod_of(with_trait("startup-probe", {"probes": [
        {"containerName": "web", "grpc": {"port": 9000}, "terminationGracePeriodSeconds": 5}]}))
    assert pod["containers"][0]["startupProbe"]["grpc"] == {"port": 9000}
    assert pod["containers"][0]["startupProbe"]["terminationGracePeriodSeconds"] == 5
    with pytest.raises(model.AppError, match=r"probes\[0\]\.containerName: required"):
        with_trait("startup-probe", {"probes": [{"exec": {"command": ["true"]}}]})


def test_topology_spread_constraints() -> None:
    """trait/topologyspreadconstraints.cue: whenUnsatisfiable DoNotSchedule by default."""
    pod = pod_of(with_trait("topologyspreadconstraints", {"constraints": [
        {"maxSkew": 1, "topologyKey": "zone", "labelSelector": {"matchLabels": {"a": "b"}},
         "nodeTaintsPolicy": "Honor"}]}))
    assert pod["topologySpreadConstraints"] == [
        {"maxSkew": 1, "topologyKey": "zone", "labelSelector": {"matchLabels": {"a": "b"}},
         "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Honor"}]
    with pytest.raises(model.AppError, match=r"constraints\[0\]\.labelSelector: required"):
        with_trait("topologyspreadconstraints",
                   {"constraints": [{"maxSkew": 1, "topologyKey": "zone"}]})


def test_service_binding() -> None:
    """trait/service-binding.cue: env from Secret keys, the key defaulting to the name, in
    the order written, on the component's container."""
    container = pod_of(with_trait("service-binding", {"envMappings": {
        "DB_PASSWORD": {"secret": "db-conn", "key": "password"},
        "DB_HOST": {"secret": "db-conn"}}},
        base_props={"image": "nginx", "env": [{"name": "A", "value": "1"}]}))["containers"][0]
    assert container["env"] == [
        {"name": "A", "value": "1"},
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db-conn",
                                                               "key": "password"}}},
        {"name": "DB_HOST", "valueFrom": {"secretKeyRef": {"name": "db-conn",
                                                           "key": "DB_HOST"}}}]
    with pytest.raises(model.AppError, match=r"envMappings\.A: the container already sets"):
        with_trait("service-binding", {"envMappings": {"A": {"secret": "s"}}},
                   base_props={"image": "nginx", "env": [{"name": "A", "value": "1"}]})
    with pytest.raises(model.AppError, match=r"envMappings\.X\.secret: required"):
        with_trait("service-binding", {"envMappings": {"X": {"key": "k"}}})
    with pytest.raises(model.AppError, match=r"envMappings: required"):
        with_trait("service-binding", {"mappings": {}})


def test_pure_ingress() -> None:
    """trait/pure-ingress.cue: a v1beta1 Ingress to the component's Service, no Service."""
    objects = with_trait("pure-ingress", {"domain": "a.example.com", "http": {"/": 80}})
    assert [o["kind"] for o in objects] == ["Deployment", "Ingress"]
    assert objects[1] == {
        "apiVersion": "networking.k8s.io/v1beta1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "ns", "labels": LABELS},
        "spec": {"rules": [{"host": "a.example.com", "http": {"paths": [
            {"path": "/", "backend": {"serviceName": "web", "servicePort": 80}}]}}]}}
    with pytest.raises(model.AppError, match=r"properties\.http: must be a map of path"):
        with_trait("pure-ingress", {"domain": "a", "http": {"/": "80"}})
    with pytest.raises(model.AppError, match=r"properties\.domain: required"):
        with_trait("pure-ingress", {"http": {"/": 80}})


def test_daemon_host_path_mount_options_are_honoured() -> None:
    """daemon.cue declares hostPath's mountPropagation and readOnly and drops them; here
    they are set on the mount (the docs' node-exporter example), never accepted and lost;
    webservice's hostPath has neither."""
    container = pod_of(rendered("daemon", {"image": "node-exporter", "volumeMounts": {
        "hostPath": [{"name": "sys", "mountPath": "/host/sys", "path": "/sys",
                      "mountPropagation": "HostToContainer", "readOnly": True}]}}))[
        "containers"][0]
    assert container["volumeMounts"] == [{"mountPath": "/host/sys", "name": "sys",
                                          "mountPropagation": "HostToContainer",
                                          "readOnly": True}]
    with pytest.raises(model.AppError, match="mountPropagation: must be None"):
        rendered("daemon", {"image": "x", "volumeMounts": {"hostPath": [
            {"name": "s", "mountPath": "/s", "path": "/s", "mountPropagation": "Both"}]}})
    with pytest.raises(model.AppError, match=r"hostPath\[0\]\.readOnly: not supported"):
        rendered("webservice", {"image": "x", "volumeMounts": {"hostPath": [
            {"name": "s", "mountPath": "/s", "path": "/s", "readOnly": True}]}})


# -- deprecated definitions the corpus still uses -----------------------------------------------


def test_raw() -> None:
    """deprecated/raw.cue: ``output: parameter``, named after the component when unnamed."""
    objects = rendered("raw", {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"},
                               "metadata": {"resourceVersion": "9"}})
    assert objects == [{"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"},
                        "metadata": {"name": "web", "namespace": "ns", "labels": LABELS}}]
    with pytest.raises(model.AppError, match=r"properties\.kind: required"):
        rendered("raw", {"apiVersion": "v1"})


def test_volumes_trait() -> None:
    """deprecated/volumes.cue: pod volumes only, emptyDir by default, merged by name."""
    pod = pod_of(with_trait("volumes", {"volumes": [
        {"name": "cache"}, {"name": "conf", "type": "configMap", "cmName": "c"}]}))
    assert pod["volumes"] == [{"name": "cache", "emptyDir": {"medium": ""}},
                              {"name": "conf", "configMap": {"defaultMode": 420, "name": "c"}}]
    assert "volumeMounts" not in pod["containers"][0]
    for props, words in (({"volumes": [{"name": "x", "type": "nfs"}]}, r"type: must be"),
                         ({"volumes": [{"name": "x", "claimName": "c"}]},
                          r"volumes\[0\]\.claimName: not supported"),
                         ({"vols": []}, r"properties\.vols: not supported")):
        with pytest.raises(model.AppError, match=words):
            with_trait("volumes", props)


def test_pvc_trait() -> None:
    """deprecated/pvc.cue: the claim, each volumesToMount a mount and a pod volume."""
    objects = with_trait("pvc", {"claimName": "data", "accessModes": ["ReadWriteOnce"],
                                 "resources": {"requests": {"storage": "1Gi"}},
                                 "volumesToMount": [{"name": "d", "mountPath": "/data"}]})
    pod = pod_of(objects)
    assert pod["containers"][0]["volumeMounts"] == [{"name": "d", "mountPath": "/data"}]
    assert pod["volumes"] == [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    assert objects[-1] == {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                           "metadata": {"name": "data", "namespace": "ns", "labels": LABELS},
                           "spec": {"accessModes": ["ReadWriteOnce"],
                                    "volumeMode": "Filesystem",
                                    "resources": {"requests": {"storage": "1Gi"}}}}
    block = with_trait("pvc", {"claimName": "raw", "accessModes": ["ReadWriteOnce"],
                               "volumeMode": "Block",
                               "resources": {"requests": {"storage": "1Gi"}},
                               "volumesToMount": [{"name": "r", "devicePath": "/dev/x"}]})
    assert pod_of(block)["containers"][0]["volumeDevices"] == [{"name": "r",
                                                                "devicePath": "/dev/x"}]
    for extra, words in (({"selector": {}}, r"selector: not supported"),
                         ({"volumesToMount": [{"name": "d", "devicePath": "/x"}]},
                          r"volumesToMount\[0\]: mountPath .only. with volumeMode Filesystem"),
                         ({"resources": {"requests": {"storage": "lots"}}},
                          r"requests\.storage: must be a quantity")):
        with pytest.raises(model.AppError, match=words):
            with_trait("pvc", {"claimName": "data", "accessModes": ["ReadWriteOnce"],
                               "resources": {"requests": {"storage": "1Gi"}},
                               "volumesToMount": [], **extra})


def test_configmap_trait() -> None:
    """deprecated/configmap.cue: volume-<name> mounted (readOnly false by default), a
    ConfigMap for each entry with data."""
    objects = with_trait("configmap", {"volumes": [
        {"name": "conf", "mountPath": "/etc/conf", "data": {"k": "v"}},
        {"name": "other", "mountPath": "/o", "readOnly": True}]})
    pod = pod_of(objects)
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "volume-conf", "mountPath": "/etc/conf", "readOnly": False},
        {"name": "volume-other", "mountPath": "/o", "readOnly": True}]
    assert pod["volumes"] == [{"name": "volume-conf", "configMap": {"name": "conf"}},
                              {"name": "volume-other", "configMap": {"name": "other"}}]
    assert [o["kind"] for o in objects] == ["Deployment", "ConfigMap"]
    assert objects[1]["data"] == {"k": "v"}
    with pytest.raises(model.AppError, match=r"volume-conf' is already in the pod"):
        with_trait("configmap", {"volumes": [{"name": "conf", "mountPath": "/a"},
                                             {"name": "conf", "mountPath": "/b"}]})


def test_nocalhost() -> None:
    """trait/nocalhost.cue: the workload's annotations (the configuration as compact JSON,
    keys in the definition's order, a language's dev image, the port forwarded by
    default) and a ClusterIP Service of the port."""
    objects = with_trait("nocalhost", {"port": 9080, "image": "java",
                                       "env": [{"name": "A", "value": "1"}]})
    annotations = objects[0]["metadata"]["annotations"]
    assert annotations["dev.nocalhost/application-name"] == "app"
    assert annotations["dev.nocalhost/application-namespace"] == "ns"
    assert annotations["dev.nocalhost"] == (
        '{"name":"web","serviceType":"deployment","containers":[{"name":"web","dev":{'
        '"image":"nocalhost-docker.pkg.coding.net/nocalhost/dev-images/java:latest",'
        '"shell":"bash","workDir":"/home/nocalhost-dev","resources":{"limits":{'
        '"memory":"2Gi","cpu":"2"},"requests":{"memory":"512Mi","cpu":"0.5"}},'
        '"command":{"run":["sh","run.sh"],"debug":["sh","debug.sh"]},"hotReload":true,'
        '"sync":{"type":"send","filePattern":["./"],"ignoreFilePattern":[".git",".vscode",'
        '".idea",".gradle","build"]},"env":[{"name":"A","value":"1"}],'
        '"portForward":["9080:9080"]}}]}')
    assert objects[-1]["spec"] == {"selector": {"app.oam.dev/component": "web"},
                                   "ports": [{"port": 9080, "targetPort": 9080}],
                                   "type": "ClusterIP"}
    with pytest.raises(model.AppError, match=r"properties\.port: required"):
        with_trait("nocalhost", {"image": "go"})
