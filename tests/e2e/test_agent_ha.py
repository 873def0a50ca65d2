"""Issue 22: the pull agent's side of running in-cluster, on the local fleet.

Two `fedctl run --leader-elect` processes serve the work port against one hub, each on
its own address, behind a TCP proxy that chooses a replica per connection as a Service
does (``Service``). member3's agent dials the proxy:

- an agent the proxy first sends to the standby still gets its work, within seconds
  (gap 2: the standby says it does not lead and the agent dials again at once);
- an agent reading its certificate from its member Secret (``--tls-secret``, as the shipped
  Deployment runs it, with the token of the shipped ServiceAccount) renews a certificate
  that is due, keeps it in the Secret, and a restart of the process reconnects with it,
  without a re-join (gap 1); the Role of that Secret grants no other Secret;
- killing the leader: the standby takes over and the agent follows it.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import random
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.work import identity
from tests.conftest import TestFleet, kubectl_binary
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, free_port, get_json, get_or_none, wait_for
from tests.e2e.test_agent import Agent, _only, deployment, ready, weighted

MC = "memberclusters.cluster.federation.io"
CONFIG = Path(__file__).resolve().parents[2] / "config" / "agent"
AGENT_NS, TLS_SECRET = "federation-agent", "federation-agent-tls"
REACH_LEADER_BOUND = 15.0
"""From the agent's start to its stream on the leader, with the proxy's first two
connections on the standby: three TLS handshakes and two 0.5 s retries, on a loaded box."""
OLD = datetime.timedelta(days=61)
"""Age of a certificate due for renewal (two thirds of 90 days and more)."""


class Service:
    """A TCP proxy on 127.0.0.1: each connection goes to the next of ``first`` (in order),
    then to a random one of ``backends``, as kube-proxy picks an endpoint per connection."""

    def __init__(self, backends: list[int]) -> None:
        self.backends = list(backends)
        self.first: list[int] = []
        self.chosen: list[int] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, name="service proxy", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            port = self.first.pop(0) if self.first else random.choice(self.backends)
            self.chosen.append(port)
            try:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def close(self) -> None:
        self.listener.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


class Replica:
    def __init__(self, plane: ControlPlane, work_port: int) -> None:
        self.plane, self.work_port = plane, work_port
        self.metrics_port = int(plane.argv[plane.argv.index("--metrics-bind-address") + 1]
                                .rpartition(":")[2])

    def leading(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                        timeout=2) as response:
                return "\nfederation_leader 1.0" in response.read().decode()
        except OSError:
            return False


class HA:
    def __init__(self, fleet: TestFleet, directory: Path, replicas: list[Replica],
                 service: Service) -> None:
        self.fleet, self.directory = fleet, directory
        self.replicas, self.service = replicas, service

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.service.port}"

    def leader(self) -> Replica:
        found: Replica = wait_for(lambda: next((r for r in self.replicas if r.leading()),
                                               None), timeout=60, what="a leader")
        return found

    def standby(self) -> Replica:
        leader = self.leader()
        return next(r for r in self.replicas if r is not leader)

    def agent(self, name: str, joined: bool = True) -> Agent:
        """An agent with the certificate `fedctl join` wrote, recorded again as member3's
        (another test's renewal replaced it) unless ``joined`` is False."""
        directory = self.directory / name
        directory.mkdir()
        (directory / "tls").symlink_to(self.directory / "tls")
        if joined:
            _record(self.fleet, (self.directory / "tls" / "tls.crt").read_bytes())
        return Agent(self.fleet, directory, self.address)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def ha(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HA]:
    fleet = fleet_session
    directory = tmp_path_factory.mktemp("agent-ha")
    lease = f"agent-ha-{uuid.uuid4().hex[:6]}"
    ports = [free_port(), free_port()]
    planes = [ControlPlane(fleet, directory / f"replica{i}.log", "--cleanup-wait", "8",
                           "--leader-elect", "--leader-election-id", lease,
                           "--work-bind-address", f"127.0.0.1:{port}")
              for i, port in enumerate(ports)]
    source = yaml.safe_load(planes[0].kubeconfig.read_text())
    without = directory / "control-plane.yaml"  # as `local up --pull member3` writes it
    without.write_text(yaml.safe_dump(_only(source, {"hub", "member1", "member2"}, "hub")))
    for plane in planes:
        plane.argv[plane.argv.index("--kubeconfig") + 1] = str(without)
    planes[0].install("--leader-election-id", lease)
    service = Service(ports)
    setup = HA(fleet, directory, [Replica(p, port) for p, port in zip(planes, ports,
                                                                        strict=True)], service)
    joined = subprocess.run(
        [*planes[0].argv[:3], "join", "member3", "--mode", "pull", "--hub-kubeconfig",
         str(fleet.kubeconfig), "--hub-context", "hub", "--out-dir", str(directory / "tls"),
         "--hub-address", setup.address], capture_output=True, text=True, timeout=60)
    assert joined.returncode == 0, joined.stderr
    planes[0].launch()
    wait_for(setup.replicas[0].leading, timeout=60, what="the first replica leads")
    planes[1].launch()
    wait_for(lambda: all(_listening(p) for p in ports), timeout=60,
             what="both replicas' work ports")
    try:
        yield setup
    finally:
        service.close()
        for plane in planes:
            plane.stop()
        fleet.kubectl("hub", "patch", MC, "member3", "--type", "merge", "-p",
                      '{"spec":{"mode":null}}', check=False)
        # Not the namespace: the fleet has no namespace controller to finish deleting it.
        fleet.kubectl("member3", "-n", AGENT_NS, "delete", "secret,serviceaccount",
                      "--all", check=False)


def agent_connected(agent: Agent) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{agent.port}/metrics", timeout=2) as r:
            return "\nfederation_agent_connected 1.0" in r.read().decode()
    except OSError:
        return False


@pytest.fixture
def ns(fleet: TestFleet, ha: HA) -> Iterator[str]:
    name = f"ha-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    # The templates, not the namespace: the fleet has no namespace controller, so a deleted
    # namespace would keep its templates (and their copies on member3) for later modules.
    for kinds in ("deployments",
                  "propagationpolicies.policy.federation.io,overridepolicies.policy.federation.io"):
        fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false", check=False)


def on_member3(fleet: TestFleet, name: str, namespace: str) -> int | None:
    found = get_or_none(fleet, "member3", "deployment", name, "-n", namespace)
    return found["spec"]["replicas"] if found else None


@pytest.mark.timeout(240)
def test_an_agent_sent_to_the_standby_gets_its_work_from_the_leader(
        fleet: TestFleet, ha: HA, ns: str) -> None:
    leader, standby = ha.leader(), ha.standby()
    ha.service.first = [standby.work_port, standby.work_port]  # the Service's bad luck
    agent = ha.agent("standby-first")
    started = time.monotonic()
    agent.start()
    try:
        wait_for(lambda: agent_connected(agent), timeout=REACH_LEADER_BOUND,
                 what=f"the agent's stream, through the standby\n{agent.log_tail()}")
        took = time.monotonic() - started
        chosen = ha.service.chosen[-3:]
        assert chosen[:2] == [standby.work_port] * 2, ha.service.chosen
        assert "does not lead" in agent.log_path.read_text()
        print(f"agent on the leader {took:.1f}s after its start; connections: {chosen}")
        apply(fleet, "hub", deployment("web", ns, 2),
              weighted("web", ns, {"member3": 1}))
        wait_for(lambda: on_member3(fleet, "web", ns) == 2, timeout=60,
                 what=f"the work on member3\n{agent.log_tail()}")
        assert leader.leading()
    finally:
        agent.stop()


def _work_ca(fleet: TestFleet) -> identity.CA:
    secret = get_json(fleet, "hub", "secret", "federation-work-ca", "-n", "federation-system")
    return identity.CA(*(base64.b64decode(secret["data"][k]) for k in ("tls.crt", "tls.key")))


def _record(fleet: TestFleet, cert: bytes) -> None:
    """What `fedctl join` does when it issues a certificate: record its serial."""
    patch = identity.CertificateRecord(identity.serial_of(cert)).status_patch()
    fleet.kubectl("hub", "patch", MC, "member3", "--subresource=status", "--type", "merge",
                  "-p", json.dumps(patch))


def _token_kubeconfig(fleet: TestFleet, account: str, path: Path) -> Path:
    """member3 as ``account`` of the agent's namespace, by a TokenRequest token (what the
    kubelet mounts into the agent's pod)."""
    token = fleet.kubectl("member3", "create", "token", account, "-n", AGENT_NS,
                          "--duration", "1h").stdout.strip()
    source = yaml.safe_load(fleet.kubeconfig.read_text())
    cluster = next(c for c in source["clusters"] if c["name"] == "member3")
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "member3",
        "clusters": [cluster], "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "member3", "context": {"cluster": "member3", "user": account}}]}))
    path.chmod(0o600)
    return path


def _as(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl_binary(), "--kubeconfig", str(kubeconfig), "--context",
                           "member3", "-n", AGENT_NS, *args], capture_output=True, text=True,
                          timeout=60)


def _secret(cert: bytes, key: bytes, ca: bytes) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": TLS_SECRET, "namespace": AGENT_NS},
            "data": {k: base64.b64encode(v).decode()
                     for k, v in (("tls.crt", cert), ("tls.key", key), ("ca.crt", ca))}}


def _stored_serial(fleet: TestFleet) -> str:
    secret = get_json(fleet, "member3", "secret", TLS_SECRET, "-n", AGENT_NS)
    return identity.serial_of(base64.b64decode(secret["data"]["tls.crt"]))


def _recorded(fleet: TestFleet) -> dict[str, Any]:
    return dict((get_json(fleet, "hub", MC, "member3").get("status") or {})
                .get("agentCertificate") or {})


@pytest.mark.timeout(300)
def test_a_renewal_is_kept_in_the_secret_and_a_restarted_agent_reconnects(
        fleet: TestFleet, ha: HA) -> None:
    for name in ("namespace", "service_account", "rbac", "certificate_rbac"):
        fleet.kubectl("member3", "apply", "-f", str(CONFIG / f"{name}.yaml"))
    ca = _work_ca(fleet)
    cert, key = identity.issue_agent(ca, "member3",
                                     now=datetime.datetime.now(datetime.UTC) - OLD)
    old = identity.serial_of(cert)
    apply(fleet, "member3", _secret(cert, key, ca.cert_pem))
    _record(fleet, cert)
    kubeconfig = _token_kubeconfig(fleet, "federation-agent", ha.directory / "sa.yaml")

    def in_pod(name: str) -> Agent:
        agent = ha.agent(name, joined=False)
        argv = agent.argv
        for flag in ("--tls-cert", "--tls-key", "--tls-ca"):
            at = argv.index(flag)
            del argv[at:at + 2]
        argv[argv.index("--kubeconfig") + 1] = str(kubeconfig)
        argv += ["--tls-secret", f"{AGENT_NS}/{TLS_SECRET}"]
        return agent

    first = in_pod("pod-1")
    first.start()
    try:
        wait_for(lambda: _stored_serial(fleet) != old, timeout=60,
                 what=f"the renewal in the Secret\n{first.log_tail()}")
        new = _stored_serial(fleet)
        wait_for(lambda: _recorded(fleet) == {"serial": new}, timeout=30,
                 what=f"the renewed certificate in use (the old one revoked)\n"
                      f"{first.log_tail()}")
        wait_for(lambda: agent_connected(first), timeout=30, what="the renewed stream")
    finally:
        first.stop()
    second = in_pod("pod-2")  # the pod restarted: a new process, no file, the Secret
    second.start()
    try:
        wait_for(lambda: agent_connected(second), timeout=REACH_LEADER_BOUND * 2,
                 what=f"the restarted agent's stream\n{second.log_tail()}")
        log = second.log_path.read_text()
        assert "PERMISSION_DENIED" not in log and "renewed" not in log
        assert _stored_serial(fleet) == new and _recorded(fleet) == {"serial": new}
        wait_for(lambda: ready(fleet) == "True", timeout=30, what="member3 Ready")
    finally:
        second.stop()
    text = first.log_path.read_text() + second.log_path.read_text()
    assert "PRIVATE KEY" not in text and key.decode().splitlines()[1] not in text


@pytest.mark.timeout(120)
def test_the_certificate_role_grants_that_secret_alone(fleet: TestFleet, ha: HA) -> None:
    """The attack: the agent's certificate write is a way to write any Secret. Bound to the
    certificate Role alone (the member role, which grants Secrets when they are a
    propagated kind, is not what is tested here), a token may read and update the agent's
    Secret and nothing else."""
    for name in ("namespace", "service_account", "certificate_rbac"):
        fleet.kubectl("member3", "apply", "-f", str(CONFIG / f"{name}.yaml"))
    account = "certificate-only"
    fleet.kubectl("member3", "create", "serviceaccount", account, "-n", AGENT_NS,
                  check=False)
    fleet.kubectl("member3", "create", "rolebinding", account, "-n", AGENT_NS,
                  "--role=federation:agent:certificate", f"--serviceaccount={AGENT_NS}:{account}",
                  check=False)
    ca = identity.new_ca()
    cert, key = identity.issue_agent(ca, "member3")
    if get_or_none(fleet, "member3", "secret", TLS_SECRET, "-n", AGENT_NS) is None:
        apply(fleet, "member3", _secret(cert, key, ca.cert_pem))
    other = f"other-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("member3", "create", "secret", "generic", other, "-n", AGENT_NS,
                  "--from-literal=k=v")
    token = _token_kubeconfig(fleet, account, ha.directory / f"{account}.yaml")
    own = _as(token, "get", "secret", TLS_SECRET, "-o", "json")
    assert own.returncode == 0, own.stderr
    body = json.loads(own.stdout)
    body["metadata"].setdefault("labels", {})["touched"] = "yes"
    updated = subprocess.run([kubectl_binary(), "--kubeconfig", str(token), "--context",
                              "member3", "replace", "-f", "-"], input=json.dumps(body),
                             capture_output=True, text=True, timeout=60)
    assert updated.returncode == 0, updated.stderr
    refused = [
        _as(token, "get", "secret", other),
        _as(token, "label", "secret", other, "touched=yes"),
        _as(token, "create", "secret", "generic", f"new-{other}", "--from-literal=k=v"),
        _as(token, "delete", "secret", TLS_SECRET),
        _as(token, "get", "secrets"),
        _as(token, "get", "secret", "x", "-n", "default"),
    ]
    for result in refused:
        assert result.returncode != 0 and re.search(r"forbidden|Forbidden", result.stderr), \
            (result.args, result.stdout, result.stderr)
    assert get_json(fleet, "member3", "secret", other, "-n", AGENT_NS)["metadata"].get(
        "labels") is None


@pytest.mark.timeout(240)
def test_the_agent_follows_a_new_leader(fleet: TestFleet, ha: HA, ns: str) -> None:
    """The leader stops (SIGTERM releases the Lease); its endpoint leaves the Service; the
    agent's stream ends, and its next connection reaches the new leader."""
    leader, standby = ha.leader(), ha.standby()
    agent = ha.agent("follows")
    agent.start()
    backends = list(ha.service.backends)
    try:
        wait_for(lambda: agent_connected(agent), timeout=REACH_LEADER_BOUND,
                 what=f"the agent's stream\n{agent.log_tail()}")
        assert leader.plane.process is not None
        leader.plane.process.send_signal(signal.SIGTERM)
        leader.plane.process.wait(timeout=40)
        ha.service.backends = [standby.work_port]  # the endpoint leaves the Service
        stopped = time.monotonic()
        wait_for(standby.leading, timeout=20, what="the standby leads")
        wait_for(lambda: agent_connected(agent), timeout=30,
                 what=f"the agent on the new leader\n{agent.log_tail()}")
        print(f"agent on the new leader {time.monotonic() - stopped:.1f}s after the "
              "old one stopped")
        apply(fleet, "hub", deployment("moved", ns, 1), weighted("moved", ns, {"member3": 1}))
        wait_for(lambda: on_member3(fleet, "moved", ns) == 1, timeout=60,
                 what=f"work from the new leader\n{agent.log_tail()}")
    finally:
        agent.stop()
        if leader.plane.process is not None and leader.plane.process.poll() is not None:
            leader.plane.launch()  # back as the standby, for the module's other tests
            wait_for(lambda: _listening(leader.work_port), timeout=60, what="its work port")
        ha.service.backends = backends
