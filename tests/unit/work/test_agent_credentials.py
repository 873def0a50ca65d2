"""Issue 22, gap 1: an agent in a pod keeps its renewed certificate in its member Secret.

The agent used to write a renewal only to the file it read (an emptyDir in the shipped
Deployment), and the hub stops accepting the replaced certificate once the new one has
connected: the pod's next start presented the Secret's superseded certificate and was
refused PERMISSION_DENIED until someone re-joined the member. These tests run the real
work server over loopback mutual TLS and a member Secret held in memory."""

from __future__ import annotations

import asyncio
import base64
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio

from federation.agent import credentials
from federation.agent.agent import Agent, AgentSettings
from federation.contexts.client import JSON, ApiError, Resource
from federation.work import identity
from federation.work.server import WorkServer
from tests.unit.work.test_stolen_key import Recorder, Stream
from tests.unit.work.test_transport import Member, issue

OLD = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=61)
NAMESPACE, NAME = "federation-agent", "federation-agent-tls"
Server = tuple[WorkServer, str, identity.CA]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class SecretMember(Member):
    """A member API server holding Secrets (and whatever the agent applies), in memory;
    ``forbidden`` makes every Secret update a 403, as RBAC without the Role would."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: dict[tuple[str, str], JSON] = {}
        self.forbidden = False
        self.updates: list[JSON] = []

    def put_secret(self, cert: bytes, key: bytes, ca: bytes) -> None:
        version = str(len(self.updates) + len(self.secrets) + 1)
        self.secrets[(NAMESPACE, NAME)] = {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "resourceVersion": version},
            "data": {"tls.crt": b64(cert), "tls.key": b64(key), "ca.crt": b64(ca)}}

    def field(self, key: str) -> bytes:
        return base64.b64decode(self.secrets[(NAMESPACE, NAME)]["data"][key])

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        found = self.secrets.get((namespace or "", name))
        if resource.plural != "secrets" or found is None:
            raise ApiError(self.name, 404, "NotFound", f'secrets "{name}" not found')
        return {**found, "metadata": dict(found["metadata"]), "data": dict(found["data"])}

    async def replace(self, resource: Resource, body: JSON, subresource: str | None = None
                      ) -> JSON:
        meta = body["metadata"]
        if self.forbidden:
            raise ApiError(self.name, 403, "Forbidden", "cannot update secrets")
        live = self.secrets[(meta["namespace"], meta["name"])]
        if meta.get("resourceVersion") != live["metadata"]["resourceVersion"]:
            raise ApiError(self.name, 409, "Conflict", "the object has been modified")
        stored = {**body, "metadata": {**meta, "resourceVersion": f"{meta['name']}-u"
                                                                   f"{len(self.updates)}"}}
        self.secrets[(meta["namespace"], meta["name"])] = stored
        self.updates.append(stored)
        return stored


@pytest_asyncio.fixture(loop_scope="function")
async def server() -> AsyncIterator[Server]:
    ca = identity.new_ca()
    work = WorkServer()
    port = await work.start("127.0.0.1:0", ca)
    try:
        yield work, f"127.0.0.1:{port}", ca
    finally:
        await work.stop(0)


def in_pod(address: str, member: SecretMember, state: Path) -> Agent:
    """The agent as the shipped Deployment runs it: ``--tls-secret``, no certificate file."""
    return Agent(AgentSettings(address, "member3", None, None, None, state,
                               tls_secret=(NAMESPACE, NAME)), member)


async def until(condition: Any, what: str) -> None:
    for _ in range(250):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_pod_restarted_after_a_renewal_reconnects_with_the_secrets_certificate(
        server: Server, tmp_path: Path) -> None:
    """The attack on availability the gap was: renew, restart, be locked out. Now the
    renewal is in the Secret before it is used, and a fresh agent (the restarted pod)
    reading that Secret is let in after the hub revoked the old serial."""
    work, address, ca = server
    recorder = Recorder(work)
    cert, key = issue(work, ca, now=OLD)  # due for renewal
    old = identity.serial_of(cert)
    member = SecretMember()
    member.put_secret(cert, key, ca.cert_pem)
    agent = in_pod(address, member, tmp_path / "a")
    assert await asyncio.wait_for(agent.attempt(), 10)  # renewed, stored, closed to reconnect
    stored = member.field("tls.crt")
    new = identity.serial_of(stored)
    assert new != old and member.field("tls.key") == key  # the same key, the new certificate
    assert recorder.writes == [(identity.CertificateRecord(new, old), old)]
    assert member.updates[0]["metadata"]["resourceVersion"] != "1"  # a conditional update

    opened = asyncio.Event()
    work.listeners.append(lambda _, up: opened.set() if up else None)
    state = work.states["member3"]
    second = asyncio.create_task(agent.attempt())  # uses the renewal: the old serial goes
    await asyncio.wait_for(opened.wait(), 10)
    await until(lambda: state.certificate == identity.CertificateRecord(new), "first use")
    state.disconnect("the pod is deleted")
    await asyncio.wait_for(second, 10)
    await agent.worker.stop()

    old_pod = await Stream(address, ca, cert, key).open()  # what the gap presented
    code, details = await old_pod.refusal()
    assert code == grpc.StatusCode.PERMISSION_DENIED and "revoked" in details
    await old_pod.close()
    opened.clear()
    restarted = in_pod(address, member, tmp_path / "b")  # a new pod: no file, the Secret
    third = asyncio.create_task(restarted.attempt())
    await asyncio.wait_for(opened.wait(), 10)
    assert state.connected and identity.serial_of(restarted.bundle.cert_pem) == new  # type: ignore[union-attr]
    state.disconnect("test over")
    await asyncio.wait_for(third, 10)
    await restarted.worker.stop()


async def test_a_renewal_that_cannot_be_stored_is_not_used(server: Server,
                                                           tmp_path: Path) -> None:
    """RBAC refuses the update: the agent keeps presenting the stored certificate, which
    the hub still accepts, instead of locking its next start out."""
    work, address, ca = server
    recorder = Recorder(work)
    cert, key = issue(work, ca, now=OLD)
    old = identity.serial_of(cert)
    member = SecretMember()
    member.put_secret(cert, key, ca.cert_pem)
    member.forbidden = True
    agent = in_pod(address, member, tmp_path)
    opened = asyncio.Event()
    work.listeners.append(lambda _, up: opened.set() if up else None)
    task = asyncio.create_task(agent.attempt())
    await asyncio.wait_for(opened.wait(), 10)
    await until(lambda: recorder.writes, "the renewal")
    await asyncio.sleep(0.2)  # time for a (wrong) reconnect with the unstored certificate
    state = work.states["member3"]
    assert state.connected and state.stream == 1  # the first stream, never closed
    assert member.field("tls.crt") == cert and member.updates == []
    assert state.certificate.accepts(old)  # still the previous serial: a restart gets in
    state.disconnect("test over")
    await asyncio.wait_for(task, 10)
    await agent.worker.stop()


async def test_a_renewal_is_not_written_over_a_rejoins_new_key() -> None:
    """A re-join put a new pair into the Secret while the old agent ran: its renewal (for
    the old key) must not replace the re-join's certificate."""
    ca = identity.new_ca()
    old_cert, old_key = identity.issue_agent(ca, "member3", now=OLD)
    rejoin_cert, rejoin_key = identity.issue_agent(ca, "member3")
    renewed = identity.sign_csr(ca, identity.csr("member3", identity.load_key(old_key)),
                                "member3", identity.presented(old_cert))
    member = SecretMember()
    member.put_secret(rejoin_cert, rejoin_key, ca.cert_pem)
    store = credentials.SecretStore(member, NAMESPACE, NAME)
    with pytest.raises(credentials.CredentialsError, match="holds another key now"):
        await store.save_certificate(renewed)
    assert member.field("tls.crt") == rejoin_cert and member.updates == []


async def test_a_secret_of_another_cluster_or_a_mismatched_pair_is_refused_by_name(
        tmp_path: Path) -> None:
    ca = identity.new_ca()
    cert, key = identity.issue_agent(ca, "member1")
    _, other_key = identity.issue_agent(ca, "member3")
    member = SecretMember()
    member.put_secret(cert, key, ca.cert_pem)
    agent = in_pod("127.0.0.1:1", member, tmp_path)
    with pytest.raises(credentials.CredentialsError) as refused:
        await agent.load()
    assert str(refused.value) == (f"Secret {NAMESPACE}/{NAME}: the certificate names cluster "
                                  "'member1', not 'member3'")
    mine, _ = identity.issue_agent(ca, "member3")
    member.put_secret(mine, other_key, ca.cert_pem)
    with pytest.raises(credentials.CredentialsError, match="not for the key beside it"):
        await agent.load()


async def test_errors_name_the_secret_and_key_never_their_content() -> None:
    ca = identity.new_ca()
    cert, key = identity.issue_agent(ca, "member3")
    member = SecretMember()
    store = credentials.SecretStore(member, NAMESPACE, NAME)
    with pytest.raises(credentials.CredentialsError, match="404 NotFound"):
        await store.load()
    member.put_secret(cert, key, b"")
    member.secrets[(NAMESPACE, NAME)]["data"]["tls.key"] = "not base64!"
    with pytest.raises(credentials.CredentialsError) as refused:
        await store.load()
    message = str(refused.value)
    assert message.startswith(f"Secret {NAMESPACE}/{NAME} has no tls.key")
    assert "PRIVATE" not in message and "not base64" not in message and b64(cert) not in message


@pytest.mark.parametrize("text", ["federation-agent", "a/b/c", "/x", "x/", "Bad/name"])
def test_a_malformed_secret_reference_is_one_line_naming_the_flag(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--tls-secret .*: expected NAMESPACE/NAME"):
        credentials.parse_secret_ref(text)
    assert credentials.parse_secret_ref("federation-agent/tls") == ("federation-agent", "tls")


async def test_the_file_store_keeps_a_renewal_in_the_certificate_file(tmp_path: Path) -> None:
    ca = identity.new_ca()
    cert, key = identity.issue_agent(ca, "member3")
    paths = [tmp_path / n for n in ("tls.crt", "tls.key", "ca.crt")]
    for path, data in zip(paths, (cert, key, ca.cert_pem), strict=True):
        path.write_bytes(data)
    store = credentials.FileStore(*paths)
    renewed, _ = identity.issue_agent(ca, "member3")
    await store.save_certificate(renewed)
    assert (await store.load()).cert_pem == renewed and paths[0].stat().st_mode & 0o777 == 0o600
    store = credentials.FileStore(tmp_path / "gone" / "tls.crt", *paths[1:])
    with pytest.raises(credentials.CredentialsError, match=r"gone/tls\.crt"):
        await store.save_certificate(renewed)
