"""The pod runner's kubelet duties against a fake API: tokens, environment, volumes, the
rollout and the Deployment's status; one real container process for what only a process
shows (its environment, mounts, capabilities)."""

from __future__ import annotations

import asyncio
import base64
import datetime
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from federation.contexts import client as kube
from federation.contexts import kubeconfig
from federation.local import pods, podspec

JSON = dict[str, Any]
IMAGE = pods.IMAGE


class FakeApi:
    """Objects by (plural, namespace, name); TokenRequests answered with numbered tokens."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], JSON] = {}
        self.token_requests: list[tuple[str, JSON]] = []
        self.deleted: list[str] = []
        self.uids = itertools.count(1)

    def key(self, resource: kube.Resource, name: str,
            namespace: str | None) -> tuple[str, str, str]:
        return resource.plural, namespace or "", name

    async def get(self, resource: kube.Resource, name: str, namespace: str | None = None) -> JSON:
        found = self.objects.get(self.key(resource, name, namespace))
        if found is None:
            raise kube.ApiError("hub", 404, "NotFound", f"{name} not found")
        return found

    async def create(self, resource: kube.Resource, body: JSON,
                     namespace: str | None = None) -> JSON:
        meta = body["metadata"]
        key = self.key(resource, meta["name"], meta.get("namespace"))
        if key in self.objects:
            raise kube.ApiError("hub", 409, "AlreadyExists", f"{meta['name']} already exists")
        stored = {**body, "metadata": {**meta, "uid": f"uid-{next(self.uids)}"}}
        self.objects[key] = stored
        return stored

    async def replace(self, resource: kube.Resource, body: JSON,
                      subresource: str | None = None) -> JSON:
        meta = body["metadata"]
        self.objects[self.key(resource, meta["name"], meta.get("namespace"))] = body
        return body

    async def delete(self, resource: kube.Resource, name: str, namespace: str | None = None,
                     **body: Any) -> JSON:
        self.deleted.append(name)
        return self.objects.pop(self.key(resource, name, namespace), {})

    async def request(self, method: str, path: str, *, params: Any = None, body: Any = None,
                      content_type: str = "application/json", timeout: float | None = None
                      ) -> JSON:
        self.token_requests.append((path, body))
        expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=600)
        return {"status": {"token": f"token-{len(self.token_requests)}",
                           "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}


def deployment(container: JSON, *, volumes: list[JSON] | None = None, replicas: int = 1,
               strategy: JSON | None = None) -> JSON:
    labels = {"app": "x"}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "x", "namespace": "ns", "generation": 3},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "strategy": strategy or {"type": "RollingUpdate", "rollingUpdate": {
                         "maxSurge": 0, "maxUnavailable": 1}},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "serviceAccountName": "sa", "enableServiceLinks": False,
                         "containers": [{"name": "c", "image": f"{IMAGE}:1", **container}],
                         "volumes": volumes or []}}}}


@pytest.fixture
def cluster(tmp_path: Path) -> pods.Cluster:
    ca = tmp_path / "ca.crt"
    ca.write_text("CA")
    context = kubeconfig.KubeConfig(
        clusters={"hub": {"server": "https://127.0.0.1:6443"}}, users={"hub": {}},
        contexts={"hub": {"cluster": "hub", "user": "hub"}}, current_context="hub",
        sources=()).context("hub")
    return pods.Cluster("hub", 6443, ca, context)


def pod_of(plan: podspec.PodPlan, cluster: pods.Cluster, api: FakeApi, root: Path,
           **settings: Any) -> pods.Pod:
    return pods.Pod(plan, cluster, api, root, pods.Settings(**settings))


def test_backoff_is_the_kubelets() -> None:
    assert [pods.backoff(n) for n in range(1, 9)] == [0, 10, 20, 40, 80, 160, 300, 300]


async def test_tokens_are_requested_bound_rotated_and_revoked(
        tmp_path: Path, cluster: pods.Cluster) -> None:
    """Each token is bound to a Secret of its own (deleting it revokes that token only);
    a new one replaces the file at the rotation period; a replaced token's Secret goes
    when it expires, every token's when the pod stops; the pod's directory is private."""
    api = FakeApi()
    plan = podspec.plan(deployment({}), IMAGE)
    pod = pod_of(plan, cluster, api, tmp_path, token_rotate=20)
    await pod.prepare()
    assert pod.dir.stat().st_mode & 0o777 == 0o700
    await pod.refresh(100.0)
    mount = pod.dir / "serviceaccount"
    assert (mount / "token").read_text() == "token-1"
    assert (mount / "ca.crt").read_text() == "CA" and (mount / "namespace").read_text() == "ns"
    path, request = api.token_requests[0]
    assert path == "/api/v1/namespaces/ns/serviceaccounts/sa/token"
    bound = request["spec"]["boundObjectRef"]
    binding = api.objects[("secrets", "ns", bound["name"])]
    assert bound["uid"] == binding["metadata"]["uid"] and bound["kind"] == "Secret"
    assert binding["metadata"]["labels"][pods.POD_LABEL] == pod.name
    assert request["spec"]["expirationSeconds"] == 600

    await pod.refresh(110.0)  # not due yet
    assert len(api.token_requests) == 1
    await pod.refresh(121.0)
    assert (mount / "token").read_text() == "token-2" and len(api.token_requests) == 2
    assert api.deleted == []  # the first token is still valid: the kubelet keeps it
    await pod.refresh(710.0)  # past the first token's expiry (700); the third is due
    assert api.deleted == [bound["name"]]
    assert (mount / "token").read_text() == "token-3"
    await pod.refresh(731.0)  # the second expired too; a fourth, named after no live one
    assert (mount / "token").read_text() == "token-4"
    assert [n for (plural, _, n) in api.objects if plural == "secrets"] == \
        [f"{pod.name}-token-3", f"{pod.name}-token-4"]
    await pod.stop()
    assert not mount.exists(), "a token file outlived its pod"
    assert not [k for k in api.objects if k[0] == "secrets"], "a token outlived its pod"


async def test_a_failed_token_request_leaves_no_binding_and_is_retried(
        tmp_path: Path, cluster: pods.Cluster) -> None:
    api = FakeApi()

    async def refused(*args: Any, **kwargs: Any) -> JSON:
        raise kube.ApiError("hub", 403, "Forbidden", "no")

    api.request = refused  # type: ignore[method-assign]
    pod = pod_of(podspec.plan(deployment({}), IMAGE), cluster, api, tmp_path)
    await pod.prepare()
    await pod.refresh(50.0)
    assert not [k for k in api.objects if k[0] == "secrets"]
    assert pod.token_due == 55.0


async def test_the_environment_is_the_pods_own(tmp_path: Path, cluster: pods.Cluster,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """No KUBECONFIG or other variable of the runner leaks in; the service variables, the
    mount, the downward API, ConfigMap and Secret keys, $(VAR) of earlier variables."""
    monkeypatch.setenv("KUBECONFIG", "/root/.kube/admin.yaml")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    api = FakeApi()
    await api.create(pods.CONFIG_MAPS, {"metadata": {"name": "cfg", "namespace": "ns"},
                                        "data": {"name": "edge"}})
    await api.create(pods.SECRETS, {"metadata": {"name": "sec", "namespace": "ns"},
                                    "data": {"k": base64.b64encode(b"s3").decode()}})
    env = [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "NAME", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "name"}}},
           {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "k"}}},
           {"name": "BOTH", "value": "$(POD)/$(NAME)"},
           {"name": "GONE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "no",
                                                              "optional": True}}}]
    plan = podspec.plan(deployment({"env": env}), IMAGE)
    pod = pod_of(plan, cluster, api, tmp_path)
    built = await pod.environment(plan.containers[0])
    assert "KUBECONFIG" not in built and "AWS_SECRET_ACCESS_KEY" not in built
    assert built["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert built["KUBERNETES_SERVICE_PORT"] == "6443"
    assert built["FEDERATION_SERVICE_ACCOUNT_MOUNT"] == str(pod.dir / "serviceaccount")
    assert built["HOSTNAME"] == built["POD"] == pod.name
    assert built["HOME"] == str(pod.dir / "home")
    assert (built["NAME"], built["KEY"], built["BOTH"]) == ("edge", "s3", f"{pod.name}/edge")
    assert "GONE" not in built

    missing = podspec.plan(deployment({"env": [{"name": "X", "valueFrom": {
        "configMapKeyRef": {"name": "cfg", "key": "absent"}}}]}), IMAGE)
    with pytest.raises(pods.ContainerConfigError, match="has no key 'absent'"):
        await pod_of(missing, cluster, api, tmp_path).environment(missing.containers[0])


async def test_a_volume_missing_a_key_holds_the_pod(tmp_path: Path,
                                                    cluster: pods.Cluster) -> None:
    """The kubelet does not start a pod whose Secret volume lacks a listed key; neither
    does the runner, until the key appears."""
    api = FakeApi()
    await api.create(pods.SECRETS, {"metadata": {"name": "tls", "namespace": "ns"},
                                    "data": {"tls.crt": base64.b64encode(b"C").decode()}})
    volumes = [{"name": "tls", "secret": {"secretName": "tls", "items": [
        {"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]}}]
    plan = podspec.plan(deployment({"command": ["python3"], "args": ["-c", "pass"],
                                    "volumeMounts": [{"name": "tls", "mountPath": "/t"}]},
                                   volumes=volumes), IMAGE)
    pod = pod_of(plan, cluster, api, tmp_path)
    await pod.prepare()
    await pod.step(10.0)
    assert "has no key 'tls.key'" in pod.volume_problem
    assert pod.containers[0].proc is None
    status = json.loads((pod.dir / "status.json").read_text())
    assert "tls.key" in status["problem"]


async def test_a_container_runs_with_its_mounts_environment_and_no_capabilities(
        tmp_path: Path, cluster: pods.Cluster) -> None:
    """A real process: its args' mounted path rewritten to the volume's directory, the
    environment the pod's, every capability dropped and no new privileges (podexec)."""
    code = ("import json, os, sys; status = open('/proc/self/status').read(); "
            "json.dump({'env': dict(os.environ), 'cwd': os.getcwd(), 'status': status}, "
            "open(sys.argv[1], 'w'))")
    container = {"command": ["python3"], "args": ["-c", code, "/data/out.json"],
                 "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                  {"name": "tmp", "mountPath": "/tmp"}],
                 "securityContext": {"allowPrivilegeEscalation": False,
                                     "capabilities": {"drop": ["ALL"]}}}
    plan = podspec.plan(deployment(container, volumes=[
        {"name": "data", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}]), IMAGE)
    api = FakeApi()
    pod = pod_of(plan, cluster, api, tmp_path, python=sys.executable)
    await pod.prepare()
    await pod.refresh(1.0)
    state = pod.containers[0]
    await pod.launch(state, 1.0)
    assert state.proc is not None
    assert await asyncio.to_thread(state.proc.wait, 30) == 0, \
        (pod.dir / "c.log").read_text()
    out = json.loads((pod.volume_dir("data") / "out.json").read_text())
    assert out["cwd"] == str(pod.volume_dir("tmp")) == out["env"]["TMPDIR"]
    assert "CapEff:\t0000000000000000" in out["status"]
    assert "CapBnd:\t0000000000000000" in out["status"]
    assert "NoNewPrivs:\t1" in out["status"]


def make_ready(pod: pods.Pod) -> None:
    pod.initialized = True
    for state in pod.containers:
        state.ready = True


async def test_a_rolling_update_replaces_one_pod_at_a_time_as_they_become_ready(
        tmp_path: Path, cluster: pods.Cluster) -> None:
    """maxSurge 0, maxUnavailable 1: one old pod goes, one new comes; the next old one
    goes only when the new one is ready. Recreate: every old pod goes before any new."""
    api = FakeApi()
    runner = pods.Runner(cluster, "ns", "x", tmp_path, api)
    first = podspec.plan(deployment({}, replicas=2), IMAGE)
    await runner.scale(first)
    assert len(runner.pods) == 2
    for pod in runner.pods:
        make_ready(pod)
    second = podspec.plan(deployment({"args": ["v2"]}, replicas=2), IMAGE)
    await runner.scale(second)
    hashes = [p.plan.template_hash for p in runner.pods]
    assert sorted(hashes) == sorted([first.template_hash, second.template_hash])
    await runner.scale(second)  # the new one is not ready: nothing more goes
    assert len([p for p in runner.pods if p.plan.template_hash == first.template_hash]) == 1
    for pod in runner.pods:
        make_ready(pod)
    await runner.scale(second)
    assert [p.plan.template_hash for p in runner.pods] == [second.template_hash] * 2
    await asyncio.gather(*runner.retiring)

    recreate = podspec.plan(deployment({"args": ["v3"]}, replicas=2,
                                       strategy={"type": "Recreate"}), IMAGE)
    await runner.scale(recreate)
    assert runner.pods == []
    await asyncio.gather(*runner.retiring)
    await runner.scale(recreate)
    assert [p.plan.template_hash for p in runner.pods] == [recreate.template_hash] * 2


async def test_the_deployment_status_counts_the_pods(tmp_path: Path,
                                                     cluster: pods.Cluster) -> None:
    api = FakeApi()
    body = deployment({}, replicas=2)
    runner = pods.Runner(cluster, "ns", "x", tmp_path, api)
    await runner.scale(podspec.plan(body, IMAGE))
    make_ready(runner.pods[0])
    status = pods.deployment_status(body, runner.pods)
    assert {k: status[k] for k in ("observedGeneration", "replicas", "updatedReplicas",
                                   "readyReplicas", "unavailableReplicas")} == \
        {"observedGeneration": 3, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 1,
         "unavailableReplicas": 1}
    assert status["conditions"][0]["status"] == "True"  # 1 ready of 2, maxUnavailable 1
    await runner.report(body)
    stored = api.objects[("deployments", "ns", "x")]
    assert stored["status"]["readyReplicas"] == 1


def test_statuses_read_what_pods_write(tmp_path: Path, cluster: pods.Cluster) -> None:
    root = pods.directory(tmp_path, "hub", "ns", "x")
    root.mkdir(parents=True)
    plan = podspec.plan(deployment({"ports": [{"name": "health", "containerPort": 8081}]}),
                        IMAGE)
    pod = pod_of(plan, cluster, FakeApi(), root)
    pod.write_status()
    (root / "status.json").write_text(json.dumps({"pods": [pod.name], "refused": None}))
    (found,) = pods.statuses(tmp_path, "hub", "ns", "x")
    assert found.name == pod.name and set(found.ports) == {"health"}
    assert found.containers["c"].restarts == 0 and not found.ready
    assert pods.refusal(tmp_path, "hub", "ns", "x") is None
