"""The pod runner's reading of a Deployment: the shipped ones plan, anything else is refused
by name, and command lines become local ones by documented rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from federation.deploy import manifests
from federation.local import fleet, pods, podspec

IMAGE = manifests.IMAGE


def manager() -> dict[str, Any]:
    return copy.deepcopy(manifests.deployment(manifests.Options()))


def agent() -> dict[str, Any]:
    return copy.deepcopy(manifests.agent_deployment(manifests.Options()))


def server_defaults(deployment: dict[str, Any]) -> dict[str, Any]:
    """What a v1.20 API server adds to the shipped Deployment when it stores it."""
    spec = deployment["spec"]
    spec.update(progressDeadlineSeconds=600, revisionHistoryLimit=10)
    template = spec["template"]
    template["metadata"]["creationTimestamp"] = None
    pod = template["spec"]
    pod.update(dnsPolicy="ClusterFirst", restartPolicy="Always",
               schedulerName="default-scheduler", serviceAccount=pod["serviceAccountName"])
    for container in pod["containers"]:
        container.update(terminationMessagePath="/dev/termination-log",
                         terminationMessagePolicy="File")
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            if probe in container:
                container[probe]["successThreshold"] = 1
                container[probe]["httpGet"]["scheme"] = "HTTP"
    return deployment


def test_image_is_the_deploy_packages() -> None:
    """The runner's image name is the one the manifests ship (it may not import deploy)."""
    assert pods.IMAGE == manifests.IMAGE


def test_the_fleets_deployment_names_are_the_deploy_packages() -> None:
    """The fleet runs the pods of the Deployments the manifests ship, by name."""
    assert fleet.Fleet.AGENT == (manifests.AGENT_NAMESPACE, manifests.AGENT_NAME)
    assert (manifests.Options().rbac.namespace, manifests.NAME) == fleet.Fleet.CONTROL_PLANE


def test_the_shipped_manager_deployment_plans_as_served() -> None:
    """The manager Deployment, as the API server returns it, is planned: its replicas,
    command, ports, probes and security settings honoured, the rest named as waived."""
    plan = podspec.plan(server_defaults(manager()), IMAGE)
    assert plan.replicas == 2 and not plan.recreate and plan.max_unavailable == 1
    assert plan.service_account == "federation-control-plane" and plan.automount_token
    assert plan.grace == manifests.termination_grace()
    (container,) = plan.containers
    assert container.command == ("fedctl",) and container.args[0] == "run"
    assert dict(container.ports) == {"metrics": 8443, "health": 8081, "work": 9443}
    assert container.readiness == podspec.Probe("http", "health", "/readyz", "HTTP", 0, 5, 5,
                                                3, 1)
    assert container.startup is not None and container.startup.failures == 30
    assert container.drop_capabilities and container.no_new_privileges
    assert {"resources", "securityContext.runAsUser", "securityContext.readOnlyRootFilesystem",
            "affinity", "dnsPolicy"} <= set(plan.waived)
    assert set(plan.waived) <= set(podspec.WAIVED)


def test_the_shipped_agent_deployment_plans() -> None:
    """The agent: Recreate, no init container and no Secret on any volume (it reads its
    certificate Secret through the API), env from its ConfigMap and the downward API."""
    plan = podspec.plan(server_defaults(agent()), IMAGE)
    assert plan.recreate and plan.replicas == 1
    assert not plan.init_containers
    assert {v.kind for v in plan.volumes} == {"emptyDir"}
    env = {e.name: e.ref for e in plan.containers[0].env}
    assert env["CLUSTER_NAME"] == podspec.KeyRef("ConfigMap", manifests.AGENT_CONFIG,
                                                 "cluster-name")


def at(deployment: dict[str, Any], path: str) -> dict[str, Any]:
    node: Any = deployment
    for part in path.split("."):
        node = node[int(part)] if part.isdigit() else node[part]
    return node  # type: ignore[no-any-return]


POD = "spec.template.spec"
CONTAINER = f"{POD}.containers.0"
REFUSED = [
    (POD, "hostNetwork", True, "spec.template.spec.hostNetwork: not supported"),
    (POD, "hostPID", True, "spec.template.spec.hostPID: not supported"),
    (POD, "restartPolicy", "Never", "restartPolicy: \"Never\" is not supported"),
    (POD, "enableServiceLinks", True, "enableServiceLinks: true is not supported"),
    (POD, "nodeSelector", {"a": "b"}, "nodeSelector: not supported"),
    (POD, "volumes", [{"name": "root", "hostPath": {"path": "/"}}],
     "volumes[0].hostPath: not supported"),
    (POD, "affinity", {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
     "requiredDuringSchedulingIgnoredDuringExecution: not supported"),
    (CONTAINER, "command", ["/bin/sh", "-c", "id"], "'/bin/sh' is not a program of the image"),
    (CONTAINER, "image", "docker.io/library/busybox:1.36", "is not fedctl's image"),
    (CONTAINER, "image", "ghcr.io/federation/fedctl-evil:0.1.0", "is not fedctl's image"),
    (CONTAINER, "securityContext", {"privileged": True}, "securityContext.privileged: not"),
    (CONTAINER, "securityContext", {"capabilities": {"add": ["SYS_ADMIN"]}},
     "adding capabilities is not supported"),
    (CONTAINER, "securityContext", {"capabilities": {"drop": ["NET_RAW"]}}, "only [ALL]"),
    (CONTAINER, "securityContext", {"runAsNonRoot": True, "runAsUser": 0},
     "0 contradicts runAsNonRoot"),
    (CONTAINER, "securityContext", {"seccompProfile": {"type": "Unconfined"}},
     "\"Unconfined\" is not supported"),
    (CONTAINER, "volumeMounts", [{"name": "tmp", "mountPath": "/tmp", "subPath": "x"}],
     "volumeMounts[0].subPath: not supported"),
    (CONTAINER, "volumeMounts", [{"name": "tmp", "mountPath": "/a/../etc"}], "without '..'"),
    (CONTAINER, "volumeMounts", [{"name": "nope", "mountPath": "/x"}],
     "mounts volume 'nope', which the pod does not have"),
    (CONTAINER, "volumeMounts", [{"name": "tmp",
                                  "mountPath": podspec.SERVICE_ACCOUNT_MOUNT}],
     "at the ServiceAccount token's path"),
    (CONTAINER, "env", [{"name": "X", "valueFrom": {"resourceFieldRef": {
        "resource": "limits.cpu"}}}], "valueFrom.resourceFieldRef: not supported"),
    (CONTAINER, "env", [{"name": "X", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.labels['a']"}}}], "is not supported"),
    (CONTAINER, "envFrom", [{"secretRef": {"name": "s"}}], "envFrom: not supported"),
    (CONTAINER, "ports", [{"containerPort": 80, "hostPort": 80}], "hostPort: not supported"),
    (CONTAINER, "ports", [{"containerPort": 53, "protocol": "UDP"}], "\"UDP\" is not supported"),
    (CONTAINER, "livenessProbe", {"exec": {"command": ["true"]}},
     "livenessProbe.exec: not supported"),
    (CONTAINER, "stdin", True, "stdin: not supported"),
    (CONTAINER, "workingDir", "/etc", "workingDir must be under one of its volume mounts"),
    ("spec.strategy", "rollingUpdate", {"maxSurge": 1, "maxUnavailable": 1},
     "maxSurge: only 0"),
    ("spec", "paused", True, "paused: true is not supported"),
    ("spec.selector", "matchLabels", {"app": "other"}, "must be non-empty and match"),
]


@pytest.mark.parametrize(("where", "key", "value", "message"), REFUSED,
                         ids=[f"{w.rsplit('.', 1)[-1]}.{k}" for w, k, _, _ in REFUSED])
def test_what_it_cannot_honour_is_refused_by_name(where: str, key: str, value: Any,
                                                  message: str) -> None:
    """Whoever may edit the Deployment gets no host access or other program through the
    runner: every such field is a one-line refusal naming it, and no pod is planned."""
    deployment = manager()
    at(deployment, where)[key] = value
    with pytest.raises(podspec.PodSpecError) as refused:
        podspec.plan(deployment, IMAGE)
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_an_unsafe_volume_item_path_is_refused() -> None:
    """A Secret item written outside its volume ('../..') is refused, not skipped."""
    deployment = agent()
    at(deployment, POD)["volumes"].append({"name": "tls", "secret": {
        "secretName": manifests.AGENT_TLS_SECRET,
        "items": [{"key": "tls.crt", "path": "../../etc/cron.d/x"}]}})
    with pytest.raises(podspec.PodSpecError, match=r"items\[0\]\.path: must be relative"):
        podspec.plan(deployment, IMAGE)


def test_template_hash_follows_the_template() -> None:
    one, two = manager(), manager()
    assert podspec.plan(one, IMAGE).template_hash == podspec.plan(two, IMAGE).template_hash
    at(two, CONTAINER)["args"].append("--workers=8")
    assert podspec.plan(one, IMAGE).template_hash != podspec.plan(two, IMAGE).template_hash
    two["spec"]["replicas"] = 5  # replicas are not the template
    assert podspec.plan(two, IMAGE).replicas == 5


def test_expansion_is_kubernetes() -> None:
    """$(VAR) from the env, $$ escapes, an undefined reference stays as written."""
    env = {"A": "1", "HUB_ADDRESS": "h:9443"}
    assert podspec.expand("$(A)-$$(A)-$(B)", env) == "1-$(A)-$(B)"
    assert podspec.expand("--hub-address=$(HUB_ADDRESS)", env) == "--hub-address=h:9443"


def test_bind_addresses_of_declared_ports_are_remapped_and_nothing_else() -> None:
    ports = {8081: 40001, 9443: 40002}
    assert podspec.remap_ports("--health-probe-bind-address=:8081", ports) == \
        "--health-probe-bind-address=127.0.0.1:40001"
    assert podspec.remap_ports("0.0.0.0:9443", ports) == "127.0.0.1:40002"
    assert podspec.remap_ports("--work-bind-address=[::]:9443", ports) == \
        "--work-bind-address=127.0.0.1:40002"
    for kept in ("--hub-address=hub.example.com:9443", "--metrics-bind-address=:8443",
                 "--x=10.0.0.1:8081", "8081"):
        assert podspec.remap_ports(kept, ports) == kept


def test_mounted_paths_are_remapped_whole_or_after_a_flag() -> None:
    mounts = {"/var/run/agent/tls": "/state/tls", "/var/run/agent": "/state/agent",
              "/tmp": "/state/tmp"}
    assert podspec.remap_paths("--tls-cert=/var/run/agent/tls/tls.crt", mounts) == \
        "--tls-cert=/state/tls/tls.crt"
    assert podspec.remap_paths("/var/run/agent/state", mounts) == "/state/agent/state"
    assert podspec.remap_paths("/tmp", mounts) == "/state/tmp"
    for kept in ("/var/run/agentx/y", "--x=/etc/passwd", "-c", "tmp"):
        assert podspec.remap_paths(kept, mounts) == kept


def test_command_line_maps_the_image_programs() -> None:
    plan = podspec.plan(manager(), IMAGE)
    argv = podspec.command_line(plan.containers[0], {}, "/venv/python", {8081: 1, 8443: 2,
                                                                         9443: 3}, {})
    assert argv[:4] == ["/venv/python", "-m", "federation", "run"]
    assert "--health-probe-bind-address=127.0.0.1:1" in argv
    assert "--work-bind-address=127.0.0.1:3" in argv
