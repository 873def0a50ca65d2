"""Pull agents and their keys on the local fleet (issue 20, findings 6, 7 and 8).

The module's control plane serves the work stream without a member3 context; `fedctl join
member3 --mode pull` issues the agent's certificate and records its serial in the
MemberCluster; a real `fedctl agent` serves member3. The "thief" holds a copy of that
agent's certificate and key, taken from its directory, and dials the work server itself.
"""

from __future__ import annotations

import asyncio
import base64
import shutil
import stat
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
import yaml

from federation.work import identity
from federation.work.proto import work_pb2 as pb
from federation.work.server import METHOD
from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import (
    apply,
    free_port,
    get_json,
    get_or_none,
    grant_secrets,
    wait_for,
)
from tests.e2e.test_agent import Agent, _only, ready

MC = "memberclusters.cluster.federation.io"
STOP_REASSERTING_BOUND = 10.0
"""The issue's bound: a deleted member's agent stops putting copies back within 10 s."""


class Pull:
    """The control plane, member3's agent and what joining printed."""

    def __init__(self, plane: ControlPlane, agent: Agent, address: str, directory: Path
                 ) -> None:
        self.plane, self.agent, self.address, self.directory = plane, agent, address, directory

    @property
    def tls(self) -> Path:
        return self.directory / "tls"

    def join(self, fleet: TestFleet) -> None:
        """`fedctl join member3 --mode pull` as admin, into the agent's own files."""
        joined = subprocess.run(
            [sys.executable, "-m", "federation", "join", "member3", "--mode", "pull",
             "--hub-kubeconfig", str(fleet.kubeconfig), "--hub-context", "hub",
             "--out-dir", str(self.tls), "--hub-address", self.address],
            capture_output=True, text=True, timeout=60)
        assert joined.returncode == 0, joined.stderr

    def steal(self, into: Path) -> tuple[bytes, bytes, bytes]:
        """A copy of the agent's certificate, key and CA, as a thief with its disk has."""
        shutil.copytree(self.tls, into)
        return ((into / "tls.crt").read_bytes(), (into / "tls.key").read_bytes(),
                (into / "ca.crt").read_bytes())


@pytest.fixture(scope="module")
def pull(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pull]:
    fleet = fleet_session
    directory = tmp_path_factory.mktemp("agent-security")
    address = f"127.0.0.1:{free_port()}"
    plane = ControlPlane(fleet, directory / "fedctl-run.log", "--cleanup-wait", "8",
                         "--work-bind-address", address)
    source = yaml.safe_load(plane.kubeconfig.read_text())
    without = directory / "control-plane.yaml"
    without.write_text(yaml.safe_dump(_only(source, {"hub", "member1", "member2"}, "hub")))
    plane.argv[plane.argv.index("--kubeconfig") + 1] = str(without)
    plane.install()
    setup = Pull(plane, Agent(fleet, directory, address), address, directory)
    setup.join(fleet)
    plane.launch()
    setup.agent.start()
    try:
        # Ready=True alone may be the push member's condition left by an earlier module:
        # the agent's own gauge says its stream is open.
        wait_for(lambda: ready(fleet) == "True" and
                 agent_metric(setup.agent, "federation_agent_connected") == 1, timeout=90,
                 what=f"member3 Ready through its agent\n{setup.agent.log_tail()}")
        yield setup
    finally:
        setup.agent.stop()
        plane.stop()
        if get_or_none(fleet, "hub", MC, "member3") is None:
            plane.install()  # the deletion test removed it: back as the fleet's push member
        fleet.kubectl("hub", "patch", MC, "member3", "--type", "merge", "-p",
                      '{"spec":{"mode":null}}', check=False)


def dial(address: str, cert: bytes, key: bytes, ca: bytes,
         then: pb.AgentMessage | None = None) -> tuple[grpc.StatusCode, str, list[pb.HubMessage]]:
    """Open member3's stream with these credentials, send ``then`` once welcomed, and read
    until a renewal answer, a refusal or 5 s: (code, details, messages received)."""

    async def attempt() -> tuple[grpc.StatusCode, str, list[pb.HubMessage]]:
        received: list[pb.HubMessage] = []
        welcomed = asyncio.Event()

        async def requests() -> Any:
            yield pb.AgentMessage(hello=pb.Hello(cluster_name="member3"))
            await welcomed.wait()
            if then is not None:
                yield then
            await asyncio.sleep(5)

        credentials = grpc.ssl_channel_credentials(ca, key, cert)
        async with grpc.aio.secure_channel(address, credentials) as channel:
            sync = channel.stream_stream(METHOD,
                                         request_serializer=pb.AgentMessage.SerializeToString,
                                         response_deserializer=pb.HubMessage.FromString)
            try:
                async with asyncio.timeout(8):
                    async for message in sync(requests()):
                        received.append(message)
                        welcomed.set()
                        if message.WhichOneof("body") == "renew" or then is None:
                            break
            except grpc.aio.AioRpcError as exc:
                return exc.code(), exc.details() or "", received
            except TimeoutError:
                pass
        return grpc.StatusCode.OK, "", received

    return asyncio.run(attempt())


def agent_metric(agent: Agent, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{agent.port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def recorded(fleet: TestFleet) -> dict[str, Any]:
    status = get_json(fleet, "hub", MC, "member3").get("status") or {}
    return dict(status.get("agentCertificate") or {})


def test_a_stolen_certificate_cannot_displace_the_agent_nor_renew_for_a_new_key(
        fleet: TestFleet, pull: Pull, tmp_path: Path) -> None:
    cert, key, ca = pull.steal(tmp_path / "stolen")
    assert recorded(fleet)["serial"] == identity.serial_of(cert)
    reconnects = agent_metric(pull.agent, "federation_agent_reconnects_total")

    code, details, received = dial(pull.address, cert, key, ca)
    assert code == grpc.StatusCode.ALREADY_EXISTS, (code, details)
    assert received == []  # no Welcome, no Work
    time.sleep(1)
    assert agent_metric(pull.agent, "federation_agent_reconnects_total") == reconnects
    assert ready(fleet) == "True"

    # With the agent away the copy is let in (it is the agent's own key), but a renewal
    # for a key the thief made is refused and nothing is recorded.
    before = recorded(fleet)
    pull.agent.stop()
    try:
        csr = identity.csr("member3", identity.new_key())
        deadline = time.monotonic() + 20
        while True:  # until the hub saw the agent's stream end
            code, details, received = dial(pull.address, cert, key, ca,
                                           pb.AgentMessage(renew=pb.RenewRequest(csr_pem=csr)))
            if code != grpc.StatusCode.ALREADY_EXISTS or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        answers = [m.renew for m in received if m.WhichOneof("body") == "renew"]
        assert code == grpc.StatusCode.OK and len(answers) == 1, (code, details)
        assert not answers[0].cert_pem
        assert "not the key of the certificate" in answers[0].error
        assert recorded(fleet) == before
    finally:
        pull.agent.start()
    wait_for(lambda: ready(fleet) == "True", timeout=60,
             what=f"member3 Ready again\n{pull.agent.log_tail()}")


def test_a_rejoin_revokes_the_stolen_certificate(fleet: TestFleet, pull: Pull,
                                                 tmp_path: Path) -> None:
    cert, key, ca = pull.steal(tmp_path / "stolen")
    reconnects = agent_metric(pull.agent, "federation_agent_reconnects_total") or 0
    pull.join(fleet)  # the admin re-joins: new key and certificate, into the agent's files
    new = identity.serial_of((pull.tls / "tls.crt").read_bytes())
    assert new != identity.serial_of(cert)
    wait_for(lambda: recorded(fleet).get("serial") == new, timeout=10,
             what="the new serial recorded")
    # The agent's stream (old certificate) is closed; it reconnects with the new files.
    wait_for(lambda: agent_metric(pull.agent, "federation_agent_connected") == 1 and
             (agent_metric(pull.agent, "federation_agent_reconnects_total") or 0) > reconnects,
             timeout=60, what=f"the agent back with its new certificate\n"
                              f"{pull.agent.log_tail()}")
    code, details, received = dial(pull.address, cert, key, ca)
    assert code == grpc.StatusCode.PERMISSION_DENIED, (code, details)
    assert "revoked" in details and received == []
    wait_for(lambda: ready(fleet) == "True", timeout=60,
             what=f"member3 Ready with the new certificate\n{pull.agent.log_tail()}")


def test_a_deleted_members_agent_stops_reasserting(fleet: TestFleet, pull: Pull) -> None:
    """Finding 8 (and 7: what the agent keeps on disk). After the MemberCluster is deleted,
    the agent must neither re-create a copy the member's admin deletes nor revert a Secret
    the admin rotates."""
    ns = f"left-{uuid.uuid4().hex[:6]}"
    token = base64.b64encode(f"token-{uuid.uuid4().hex}".encode()).decode()
    fleet.kubectl("hub", "create", "namespace", ns)
    grant_secrets(fleet, ns)  # the hub's Secrets are readable only where granted
    apply(fleet, "hub",
          {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf", "namespace": ns},
           "data": {"a": "1"}},
          {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": ns},
           "type": "Opaque", "data": {"token": token}},
          {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
           "metadata": {"name": "to-member3", "namespace": ns},
           "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"},
                                          {"apiVersion": "v1", "kind": "Secret"}],
                    "placement": {"clusterAffinity": {"clusterNames": ["member3"]}}}})
    wait_for(lambda: get_or_none(fleet, "member3", "secret", "creds", "-n", ns) and
             get_or_none(fleet, "member3", "configmap", "conf", "-n", ns), timeout=60,
             what=f"copies on member3 through the agent\ncontrol plane:\n"
                  f"{pull.plane.log_tail(80)}\nagent:\n{pull.agent.log_tail()}")
    state = pull.directory / "applied.json"
    assert token not in state.read_text()  # a digest, not the data
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert stat.S_IMODE(pull.directory.stat().st_mode) == 0o700

    try:
        _delete_and_tamper(fleet, pull, ns)
    finally:
        _rejoin_and_clean_up(fleet, pull, ns)


def _delete_and_tamper(fleet: TestFleet, pull: Pull, ns: str) -> None:
    fleet.kubectl("hub", "delete", MC, "member3")
    started = time.monotonic()
    wait_for(lambda: agent_metric(pull.agent, "federation_agent_left") == 1, timeout=30,
             interval=0.2, what=f"the agent told it left\n{pull.agent.log_tail()}")
    took = time.monotonic() - started
    assert took <= STOP_REASSERTING_BOUND, f"the agent stopped keeping copies after {took:.1f}s"

    rotated = base64.b64encode(b"rotated-by-the-member-admin").decode()
    fleet.kubectl("member3", "delete", "configmap", "conf", "-n", ns)
    fleet.kubectl("member3", "patch", "secret", "creds", "-n", ns, "--type", "merge",
                  "-p", f'{{"data":{{"token":"{rotated}"}}}}')
    time.sleep(3)  # a reassert answers a watch event at once: 3 s is plenty to see one
    assert get_or_none(fleet, "member3", "configmap", "conf", "-n", ns) is None
    live = get_json(fleet, "member3", "secret", "creds", "-n", ns)
    assert live["data"]["token"] == rotated
    assert "hub away" not in pull.agent.log_tail()


def _rejoin_and_clean_up(fleet: TestFleet, pull: Pull, ns: str) -> None:
    """Joined again, the agent is let in and the hub's decisions hold again; then the
    templates go and their copies with them, so no later test meets writes of ours (the
    fleet has no namespace controller: deleting a namespace would leave it terminating and
    its templates retried for ever)."""
    pull.join(fleet)
    wait_for(lambda: ready(fleet) == "True", timeout=90,
             what=f"member3 back after a re-join\n{pull.agent.log_tail()}")
    fleet.kubectl("hub", "delete", "propagationpolicy.policy.federation.io,configmap,secret",
                  "--all", "-n", ns)
    wait_for(lambda: get_or_none(fleet, "member3", "secret", "creds", "-n", ns) is None and
             get_or_none(fleet, "member3", "configmap", "conf", "-n", ns) is None,
             timeout=60, what="member3's copies deleted through the agent")
