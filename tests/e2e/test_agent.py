"""Pull mode on the local fleet: member3's agent dials the control plane (issue 12).

The module's control plane gets a kubeconfig without member3 (as ``fedctl local up --pull
member3`` writes it) and serves the work stream; ``fedctl join member3 --mode pull``
issues the agent's certificate; the agent runs as a local process with member3's
least-privilege identity. member1 and member2 stay push members: one fleet mixes both.
Writes to member3 are counted by member3's API server itself (``apiserver_request_total``).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
import yaml

from federation.contexts import client as kube
from federation.contexts import kubeconfig
from federation.work import identity
from federation.work.proto import work_pb2 as pb
from federation.work.server import METHOD
from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, free_port, get_json, get_or_none, wait_for

MEMBERS = ("member1", "member2", "member3")
POLICY_API = "policy.federation.io/v1alpha1"
NOT_READY = "cluster.federation.io/not-ready"
NOT_READY_BOUND = 20.0
"""docs/agent.md: a stopped agent closes its stream, so member3 is NotReady after the
three failed probes of push members (6-8 s); 20 s on a loaded 2-core box."""
_SAMPLE = re.compile(r'^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
NOT_OURS = frozenset({"nodes", "leases", "events", "endpoints", "endpointslices"})
"""Written in member3 by others: the simulator (nodes), the API server itself."""


def writes(fleet: TestFleet, context: str) -> Counter[tuple[str, str]]:
    """Mutating requests member3's API server served, per (resource, verb); status writes
    (the simulator's) and other components' resources are left out."""
    text = fleet.kubectl(context, "get", "--raw", "/metrics").stdout
    counts: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        if labels.get("verb") in ("POST", "PUT", "PATCH", "DELETE", "APPLY") and \
                labels.get("subresource", "") == "" and \
                labels.get("resource") not in NOT_OURS:
            counts[(labels.get("resource", ""), labels["verb"])] += int(float(match["value"]))
    return counts


class Agent:
    def __init__(self, fleet: TestFleet, directory: Path, hub_address: str) -> None:
        self.directory = directory
        self.log_path = directory / "agent.log"
        source = yaml.safe_load(fleet.ensure_control_plane_identity().read_text())
        self.kubeconfig = directory / "member3.yaml"
        self.kubeconfig.write_text(yaml.safe_dump(_only(source, {"member3"}, "member3")))
        tls = directory / "tls"
        self.port = free_port()
        self.argv = [sys.executable, "-m", "federation", "agent", "--hub-address", hub_address,
                     "--cluster-name", "member3", "--kubeconfig", str(self.kubeconfig),
                     "--tls-cert", str(tls / "tls.crt"), "--tls-key", str(tls / "tls.key"),
                     "--tls-ca", str(tls / "ca.crt"), "--state-dir", str(directory),
                     "--health-probe-bind-address", f"127.0.0.1:{self.port}",
                     "--metrics-bind-address", f"127.0.0.1:{self.port}"]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return "(no log)"


def _only(document: dict[str, Any], keep: set[str], current: str) -> dict[str, Any]:
    return {**document, "current-context": current,
            "clusters": [c for c in document["clusters"] if c["name"] in keep],
            "users": [u for u in document["users"] if u["name"].split("-")[0] in keep],
            "contexts": [c for c in document["contexts"] if c["name"] in keep]}


def member_cluster(fleet: TestFleet) -> dict[str, Any]:
    return get_json(fleet, "hub", "memberclusters.cluster.federation.io", "member3")


def ready(fleet: TestFleet) -> str | None:
    for condition in (member_cluster(fleet).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status"))
    return None


@pytest.fixture(scope="module")
def pull(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[ControlPlane, Agent]]:
    fleet = fleet_session
    directory = tmp_path_factory.mktemp("agent")
    port = free_port()
    address = f"127.0.0.1:{port}"
    plane = ControlPlane(fleet, directory / "fedctl-run.log", "--cleanup-wait", "8",
                         "--work-bind-address", address)
    source = yaml.safe_load(plane.kubeconfig.read_text())
    without = directory / "control-plane.yaml"  # as `local up --pull member3` writes it
    without.write_text(yaml.safe_dump(_only(source, {"hub", "member1", "member2"}, "hub")))
    plane.argv[plane.argv.index("--kubeconfig") + 1] = str(without)
    plane.install()
    joined = subprocess.run(
        [sys.executable, "-m", "federation", "join", "member3", "--mode", "pull",
         "--hub-kubeconfig", str(fleet.kubeconfig), "--hub-context", "hub",
         "--out-dir", str(directory / "tls"), "--hub-address", address],
        capture_output=True, text=True, timeout=60)
    assert joined.returncode == 0, joined.stderr
    assert "fedctl agent --hub-address" in joined.stdout
    assert "PRIVATE KEY" not in joined.stdout + joined.stderr  # no key is ever printed
    plane.launch()
    agent = Agent(fleet, directory, address)
    agent.start()
    try:
        wait_for(lambda: ready(fleet) == "True", timeout=90,
                 what=f"member3 Ready through its agent\n{agent.log_tail()}")
        yield plane, agent
    finally:
        agent.stop()
        plane.stop()
        fleet.kubectl("hub", "patch", "memberclusters.cluster.federation.io", "member3",
                      "--type", "merge", "-p", '{"spec":{"mode":null}}', check=False)


@pytest.fixture
def ns(fleet: TestFleet, pull: tuple[ControlPlane, Agent]) -> Iterator[str]:
    name = f"pull-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    plane = pull[0]
    if plane.process is not None and plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{plane.log_tail()}")
    for kinds in ("deployments",
                  "propagationpolicies.policy.federation.io,overridepolicies.policy.federation.io"):
        fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false", check=False)


def deployment(name: str, namespace: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app",
                                                           "image": "registry.local/app:1.0"}]}}}}


def weighted(name: str, namespace: str, weights: dict[str, int],
             tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    placement: dict[str, Any] = {
        "clusterAffinity": {"clusterNames": sorted(weights)},
        "replicaScheduling": {"replicaSchedulingType": "Divided",
                              "replicaDivisionPreference": "Weighted",
                              "weightPreference": {"staticWeightList": [
                                  {"targetCluster": {"clusterNames": [c]}, "weight": w}
                                  for c, w in weights.items()]}}}
    if tolerations is not None:
        placement["clusterTolerations"] = tolerations
    return {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": name}], "placement": placement}}


def replicas(fleet: TestFleet, name: str, namespace: str) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for member in MEMBERS:
        obj = get_or_none(fleet, member, "deployment", name, "-n", namespace)
        found[member] = obj["spec"]["replicas"] if obj else None
    return found


def image(fleet: TestFleet, member: str, name: str, namespace: str) -> str | None:
    obj = get_or_none(fleet, member, "deployment", name, "-n", namespace)
    return obj["spec"]["template"]["spec"]["containers"][0]["image"] if obj else None


def test_pull_member_gets_its_share_status_override_and_deletion(
        fleet: TestFleet, ns: str) -> None:
    """5:3:2 over member1..3 with member3 pulled lands 5/3/2; the hub aggregates 10 ready;
    an override for member3 applies there only; deleting the template removes member3's
    copy (through the agent)."""
    override = {"apiVersion": POLICY_API, "kind": "OverridePolicy",
                "metadata": {"name": "m3", "namespace": ns},
                "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                         "overrideRules": [{"targetCluster": {"clusterNames": ["member3"]},
                                            "overriders": {"imageOverrider": [
                                                {"component": "Registry", "operator": "replace",
                                                 "value": "ap.mirror.local"}]}}]}}
    apply(fleet, "hub", override, deployment("web", ns, 10),
          weighted("web", ns, {"member1": 5, "member2": 3, "member3": 2}))
    wait_for(lambda: replicas(fleet, "web", ns) == {"member1": 5, "member2": 3, "member3": 2},
             timeout=90, what="5/3/2")
    wait_for(lambda: get_json(fleet, "hub", "deployment", "web", "-n", ns)
             .get("status", {}).get("readyReplicas") == 10, timeout=90, what="hub 10 ready")
    wait_for(lambda: image(fleet, "member3", "web", ns) == "ap.mirror.local/app:1.0",
             timeout=60, what="member3's override")
    assert image(fleet, "member1", "web", ns) == "registry.local/app:1.0"
    copy = get_json(fleet, "member3", "deployment", "web", "-n", ns)
    assert copy["metadata"]["labels"]["federation.io/managed-by"] == "federation"

    fleet.kubectl("hub", "delete", "deployment", "web", "-n", ns, "--wait=false")
    wait_for(lambda: replicas(fleet, "web", ns) ==
             {"member1": None, "member2": None, "member3": None}, timeout=90,
             what="every copy deleted, member3's by its agent")


def test_agent_restart_and_control_plane_restart_write_nothing(
        fleet: TestFleet, ns: str, pull: tuple[ControlPlane, Agent]) -> None:
    """Settled, then the agent restarts: member3 sees no write for the unchanged objects.
    Then the control plane restarts: again none."""
    plane, agent = pull
    apply(fleet, "hub", deployment("calm", ns, 4),
          weighted("calm", ns, {"member1": 1, "member2": 1, "member3": 2}))
    wait_for(lambda: replicas(fleet, "calm", ns)["member3"] == 2, timeout=90, what="copy")
    wait_for(lambda: get_json(fleet, "hub", "deployment", "calm", "-n", ns)
             .get("status", {}).get("readyReplicas") == 4, timeout=90, what="settled")
    time.sleep(3)  # the last status round settles (the simulator, the status controller)
    before = writes(fleet, "member3")
    agent.stop()
    agent.start()
    wait_for(lambda: ready(fleet) == "True" and _agent_ready(agent), timeout=60,
             what=f"agent back\n{agent.log_tail()}")
    time.sleep(8)  # resync and a few reconciles' worth of time
    assert writes(fleet, "member3") - before == Counter(), "the restarted agent wrote"

    plane.stop()
    plane.launch()
    wait_for(lambda: _agent_ready(agent), timeout=60, what="agent reconnected")
    time.sleep(10)  # the new control plane's first reconciles of every template
    assert writes(fleet, "member3") - before == Counter(), "a control plane restart re-applied"
    assert "PRIVATE KEY" not in agent.log_tail() + plane.log_tail()


def _agent_ready(agent: Agent) -> bool:
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{agent.port}/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def test_agent_stop_makes_member3_not_ready_and_a_tolerant_policy_fails_over(
        fleet: TestFleet, ns: str, pull: tuple[ControlPlane, Agent]) -> None:
    _, agent = pull
    tolerate = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 5}]
    apply(fleet, "hub", deployment("fo", ns, 6),
          weighted("fo", ns, {"member1": 1, "member2": 1, "member3": 1}, tolerate))
    wait_for(lambda: replicas(fleet, "fo", ns) == {"member1": 2, "member2": 2, "member3": 2},
             timeout=90, what="2/2/2")
    agent.stop()
    started = time.monotonic()
    try:
        wait_for(lambda: ready(fleet) == "False", timeout=60, interval=0.3,
                 what="member3 NotReady")
        detection = time.monotonic() - started
        assert detection <= NOT_READY_BOUND, f"NotReady after {detection:.1f}s"
        # member3's copy stays (its agent is away: nothing can delete it), its replicas
        # move to the members that are ready.
        wait_for(lambda: _decision(fleet, "fo", ns) == {"member1": 3, "member2": 3},
                 timeout=60, what="failover to member1+member2")
    finally:
        agent.start()
    wait_for(lambda: ready(fleet) == "True", timeout=60, what="member3 Ready again")


def _decision(fleet: TestFleet, name: str, namespace: str) -> dict[str, int]:
    binding = get_json(fleet, "hub", "resourcebindings.work.federation.io",
                       f"{name}-deployment", "-n", namespace)
    return {e["name"]: e["replicas"] for e in binding["spec"].get("clusters") or []
            if e.get("replicas")}


def test_a_certificate_for_member2_cannot_open_member3s_stream(
        fleet: TestFleet, pull: tuple[ControlPlane, Agent]) -> None:
    plane = pull[0]
    address = plane.argv[plane.argv.index("--work-bind-address") + 1]

    async def attempt() -> tuple[grpc.StatusCode, str]:
        admin = kube.ClusterClient(kubeconfig.load(fleet.kubeconfig).context("hub"))
        try:
            ca = await identity.load_ca(admin)
        finally:
            await admin.close()
        cert, key = identity.issue_agent(ca, "member2")
        credentials = grpc.ssl_channel_credentials(ca.cert_pem, key, cert)
        async with grpc.aio.secure_channel(address, credentials) as channel:
            sync = channel.stream_stream(METHOD,
                                         request_serializer=pb.AgentMessage.SerializeToString,
                                         response_deserializer=pb.HubMessage.FromString)

            async def hello() -> Any:
                yield pb.AgentMessage(hello=pb.Hello(cluster_name="member3"))
                await asyncio.sleep(5)

            try:
                async for _ in sync(hello()):
                    return grpc.StatusCode.OK, "a work message reached member2's certificate"
            except grpc.aio.AioRpcError as exc:
                return exc.code(), exc.details() or ""
        return grpc.StatusCode.OK, "stream ended without refusal"

    code, details = asyncio.run(attempt())
    assert code == grpc.StatusCode.PERMISSION_DENIED, details
    assert "member2" in details and "member3" in details
