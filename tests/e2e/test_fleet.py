"""The local fleet: real API servers, verified TLS, RBAC, fault injection, simulator."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.local import fleet as fleet_module
from tests.conftest import TestFleet
from tests.e2e.helpers import apply, get_json, wait_for


def test_kubeconfig_has_verified_tls_for_every_context(fleet: TestFleet) -> None:
    """Every context carries its own CA and client certificate; nothing skips verification."""
    document = yaml.safe_load(fleet.kubeconfig.read_text())
    assert [c["name"] for c in document["contexts"]] == ["hub", "member1", "member2", "member3"]
    cas = {c["cluster"]["certificate-authority-data"] for c in document["clusters"]}
    assert len(cas) == 4
    assert "insecure-skip-tls-verify" not in fleet.kubeconfig.read_text()
    for user in document["users"]:
        assert user["user"]["client-certificate-data"] and user["user"]["client-key-data"]


def test_server_certificate_is_verified_against_its_own_ca_only(fleet: TestFleet) -> None:
    """member2's server is trusted with member2's CA and rejected with member1's."""
    member2 = fleet.spec("member2")
    good = ssl.create_default_context(cafile=str(fleet.pki("member2").ca_cert))
    with urllib.request.urlopen(member2.server + "/readyz", context=good, timeout=5) as answer:
        # /readyz answers anonymous callers; what matters here is the TLS handshake.
        assert answer.status == 200
    wrong = ssl.create_default_context(cafile=str(fleet.pki("member1").ca_cert))
    with pytest.raises(urllib.error.URLError) as failure:
        urllib.request.urlopen(member2.server + "/readyz", context=wrong, timeout=5)
    assert isinstance(failure.value.reason, ssl.SSLCertVerificationError)


def test_authentication_and_rbac_are_enforced(fleet: TestFleet) -> None:
    """Anonymous requests are denied by RBAC; the admin certificate and token are accepted."""
    hub = fleet.spec("hub")
    anonymous = ssl.create_default_context(cafile=str(fleet.pki("hub").ca_cert))
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(hub.server + "/api/v1/namespaces", context=anonymous, timeout=5)
    assert denied.value.code == 403
    token = fleet.pki("hub").admin_token()
    request = urllib.request.Request(hub.server + "/api/v1/namespaces",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, context=anonymous, timeout=5) as answer:
        assert answer.status == 200
    bad = urllib.request.Request(hub.server + "/api/v1/namespaces",
                                 headers={"Authorization": "Bearer not-a-token"})
    with pytest.raises(urllib.error.HTTPError) as rejected:
        urllib.request.urlopen(bad, context=anonymous, timeout=5)
    assert rejected.value.code == 401


def test_kubectl_lists_namespaces_of_member2(fleet: TestFleet) -> None:
    """kubectl uses the generated kubeconfig unchanged."""
    names = fleet.kubectl("member2", "get", "namespaces", "-o", "name").stdout.split()
    assert "namespace/default" in names and "namespace/kube-system" in names


def test_members_carry_distinct_locations(fleet: TestFleet) -> None:
    """region, zone and provider differ between members, in fleet.json and on the nodes."""
    members = fleet.load().members
    assert len({(m.region, m.zone, m.provider) for m in members}) == len(members)
    clusters = yaml.safe_load(fleet.clusters_file.read_text())["clusters"]
    assert [c["name"] for c in clusters] == ["member1", "member2", "member3"]
    nodes = wait_for(lambda: get_json(fleet, "member2", "nodes")["items"])
    region = nodes[0]["metadata"]["labels"]["topology.kubernetes.io/region"]
    assert region == fleet.spec("member2").region


def test_up_again_changes_nothing(fleet: TestFleet) -> None:
    """A second `up` finds everything running and starts no process."""
    before = {s.name: (s.etcd_pid, s.apiserver_pid) for s in fleet.status()}
    messages: list[str] = []
    fleet.up(3, progress=messages.append)
    after = {s.name: (s.etcd_pid, s.apiserver_pid) for s in fleet.status()}
    assert before == after
    assert "fleet already running" in messages


def test_stopping_member2_leaves_the_others_and_keeps_its_data(fleet: TestFleet) -> None:
    """stop makes only member2 unreachable; start brings it back with its objects."""
    name = f"survivor-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("member2", "create", "configmap", name, "--from-literal=k=v")
    fleet.stop("member2")
    status = {s.name: s for s in fleet.status()}
    assert not status["member2"].ready
    assert status["member2"].apiserver_pid is None and status["member2"].etcd_pid is None
    assert all(status[n].ready for n in ("hub", "member1", "member3"))
    failed = fleet.kubectl("member2", "get", "namespaces", check=False, timeout=30)
    assert failed.returncode != 0
    fleet.kubectl("member1", "get", "namespaces")
    fleet.start("member2")
    data = get_json(fleet, "member2", "configmap", name)["data"]
    assert data == {"k": "v"}
    fleet.kubectl("member2", "delete", "configmap", name)


def test_frozen_member_times_out_and_thaws(fleet: TestFleet) -> None:
    """freeze (SIGSTOP) makes calls hang until they time out; thaw restores service."""
    member = fleet.spec("member3")
    fleet.freeze("member3")
    started = time.monotonic()
    assert not fleet.probe(member, timeout=1.0)
    assert time.monotonic() - started >= 0.9
    assert {s.name: s.frozen for s in fleet.status()}["member3"]
    fleet.thaw("member3")
    wait_for(lambda: fleet.probe(member), timeout=30)


def _deployment(name: str, namespace: str, replicas: int, cpu: str | None = None
                ) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": "registry.local/app:1"}
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu}}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [container]}}},
    }


@pytest.fixture
def namespace(fleet: TestFleet) -> Any:
    name = f"sim-{uuid.uuid4().hex[:6]}"
    for member in fleet.member_names:
        fleet.kubectl(member, "create", "namespace", name)
    yield name
    for member in fleet.member_names:
        fleet.kubectl(member, "delete", "deployments,statefulsets,replicasets", "--all",
                      "-n", name, check=False)


def test_simulator_makes_a_deployment_ready(fleet: TestFleet, namespace: str) -> None:
    """A member Deployment goes from 0 to all replicas ready, with realistic status fields."""
    apply(fleet, "member1", _deployment("web", namespace, 4))

    def status() -> dict[str, Any]:
        return dict(get_json(fleet, "member1", "deployment", "web", "-n", namespace)
                    .get("status", {}))

    final = wait_for(lambda: (s := status()).get("readyReplicas") == 4 and s, timeout=30)
    assert final["observedGeneration"] == 1
    assert final["replicas"] == final["updatedReplicas"] == final["availableReplicas"] == 4
    conditions = {c["type"]: c["status"] for c in final["conditions"]}
    assert conditions == {"Available": "True", "Progressing": "True"}


def test_simulator_reports_fewer_ready_replicas_on_a_full_member(
        fleet: TestFleet, namespace: str) -> None:
    """Requests beyond the member's allocatable cpu leave replicas unready."""
    nodes = get_json(fleet, "member3", "nodes", "-l", "federation.io/simulated=true")["items"]
    cores = sum(int(n["status"]["allocatable"]["cpu"]) for n in nodes)
    apply(fleet, "member3", _deployment("big", namespace, cores + 5, cpu="1"))

    def ready() -> int:
        found = get_json(fleet, "member3", "deployment", "big", "-n", namespace)
        return int(found.get("status", {}).get("readyReplicas") or 0)

    wait_for(lambda: ready() == cores, timeout=30)
    time.sleep(1.5)  # past the ready delay: still capped by capacity
    final = get_json(fleet, "member3", "deployment", "big", "-n", namespace)["status"]
    assert final["readyReplicas"] == cores
    assert final["unavailableReplicas"] == 5
    assert {c["type"]: c["status"] for c in final["conditions"]}["Available"] == "False"


def test_simulator_drives_statefulsets_and_replicasets(fleet: TestFleet, namespace: str) -> None:
    """StatefulSets and ReplicaSets get status written through the status subresource."""
    for kind in ("StatefulSet", "ReplicaSet"):
        manifest = _deployment(kind.lower(), namespace, 2)
        manifest["kind"] = kind
        if kind == "StatefulSet":
            manifest["spec"]["serviceName"] = kind.lower()
        apply(fleet, "member2", manifest)
    def all_ready(kind: str) -> bool:
        found = get_json(fleet, "member2", kind, kind, "-n", namespace)
        return bool(found.get("status", {}).get("readyReplicas") == 2)

    wait_for(lambda: all_ready("statefulset") and all_ready("replicaset"), timeout=30)


# -- a private fleet for the tests that create and destroy whole fleets -----------------


def fedctl(*args: str, env: dict[str, str] | None = None, timeout: float = 180
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "federation", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_down_leaves_no_process_behind(tmp_path: Path, fleet_binaries: Any) -> None:
    """A one-member fleet started by the CLI is gone entirely after `down`; with
    --export-kubeconfig, `fedctl get clusters` works with no flags in between (the
    user's kubeconfig, here $KUBECONFIG, has hub current) and `down` takes the
    fleet's contexts out of it again, leaving the user's own."""
    state, kubeconfig = tmp_path / "state", tmp_path / "kc.yaml"
    users = tmp_path / "home-kubeconfig"
    users.write_text("apiVersion: v1\nkind: Config\ncurrent-context: mine\n"
                     "clusters: [{name: x, cluster: {server: 'https://192.0.2.1:6443'}}]\n"
                     "users: [{name: y, user: {}}]\n"
                     "contexts: [{name: mine, context: {cluster: x, user: y}}]\n")
    env = {**os.environ, "KUBECONFIG": str(users)}
    common = ["--state-dir", str(state), "--kubeconfig", str(kubeconfig)]
    started = fedctl("local", "up", "--members", "1", "--export-kubeconfig", *common, env=env)
    assert started.returncode == 0, started.stderr
    assert f"written to {users}" in started.stdout
    pids = [json.loads(p.read_text())["pid"] for p in state.rglob("*.pid")]
    assert len(pids) == 5  # two clusters x (etcd, apiserver) + simulator
    assert all(_alive(pid) for pid in pids)
    reached = fedctl("get", "ns", "--contexts", "member1", env=env)  # no --kubeconfig
    assert reached.returncode == 0 and "member1" in reached.stdout, reached.stderr
    stopped = fedctl("local", "down", *common, env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert not any(_alive(pid) for pid in pids)
    assert not state.exists() and not kubeconfig.exists()
    left = yaml.safe_load(users.read_text())
    assert [c["name"] for c in left["contexts"]] == ["mine"]
    assert left["current-context"] == "mine"


def test_port_in_use_is_one_clear_line(tmp_path: Path, fleet_binaries: Any) -> None:
    """A base port someone else listens on is refused with a one-line error, nothing started."""
    import socket

    def free(port: int) -> bool:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
        return True

    def held_port() -> socket.socket:
        """A bound socket whose port's followers are free now: other fleets on this machine
        (tests run beside benchmarks) must not hold one of the ports the fleet tries after
        it (the last one tried, after 50)."""
        for _ in range(50):
            holder = socket.socket()
            holder.bind(("127.0.0.1", 0))
            port = holder.getsockname()[1]
            if port < 60000 and all(free(port + n) for n in range(1, 40)):
                return holder
            holder.close()
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        return holder

    with held_port() as holder:
        holder.listen()
        port = holder.getsockname()[1]
        result = fedctl("local", "up", "--members", "1", "--base-port", str(port),
                        "--state-dir", str(tmp_path / "s"), "--kubeconfig", str(tmp_path / "k"))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == (f"error: port {port} (hub kube-apiserver) is in use by another process; "
                         "free it or start over with `fedctl local down` and another --base-port")
    assert "Traceback" not in result.stderr
    assert not list((tmp_path / "s").rglob("*.pid"))


def test_a_second_fleet_gets_its_own_ports(fleet: TestFleet) -> None:
    """The shared fleet's recorded ports are all distinct and all listening."""
    ports = [p for c in fleet.load().clusters
             for p in (c.apiserver_port, c.etcd_client_port, c.etcd_peer_port)]
    assert len(set(ports)) == len(ports)
    assert all(fleet_module.port_in_use(p) for p in ports)


def test_missing_binary_without_a_way_to_build_is_one_clear_line(tmp_path: Path) -> None:
    """No kube-apiserver/etcd anywhere and no apt-get: one line saying so, no traceback."""
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": str(empty), "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join(sys.path)}
    result = fedctl("local", "up", "--state-dir", str(tmp_path / "s"),
                    "--kubeconfig", str(tmp_path / "k"), env=env)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert "apt-get" in errors[0]
