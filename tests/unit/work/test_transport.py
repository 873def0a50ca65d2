"""The work server on loopback with real mutual TLS: who may open which stream."""

import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
import pytest_asyncio

from federation.agent.agent import Agent, AgentSettings
from federation.contexts.client import DEPLOYMENTS
from federation.work import identity
from federation.work.proto import work_pb2 as pb
from federation.work.pull import WorkClient
from federation.work.server import METHOD, WorkServer
from tests.unit.clients import Unserved


async def open_stream(address: str, ca: identity.CA, cert: bytes, key: bytes,
                      cluster: str) -> tuple[grpc.StatusCode, str, list[pb.HubMessage]]:
    credentials = grpc.ssl_channel_credentials(ca.cert_pem, key, cert)
    received: list[pb.HubMessage] = []
    async with grpc.aio.secure_channel(address, credentials) as channel:
        sync = channel.stream_stream(METHOD, request_serializer=pb.AgentMessage.SerializeToString,
                                     response_deserializer=pb.HubMessage.FromString)

        async def hello() -> AsyncIterator[pb.AgentMessage]:
            yield pb.AgentMessage(hello=pb.Hello(cluster_name=cluster))

        try:
            async for message in sync(hello()):
                received.append(message)
                break
        except grpc.aio.AioRpcError as exc:
            return exc.code(), exc.details() or "", received
    return grpc.StatusCode.OK, "", received


def issue(work: WorkServer, ca: identity.CA, cluster: str = "member3", **kw: Any
          ) -> tuple[bytes, bytes]:
    """An agent certificate for ``cluster``, recorded as its current one (what join does)."""
    cert, key = identity.issue_agent(ca, cluster, **kw)
    work.register(cluster, identity.CertificateRecord(identity.serial_of(cert)))
    return cert, key


@pytest_asyncio.fixture(loop_scope="function")  # grpc.aio binds to the test's loop
async def server() -> AsyncIterator[tuple[WorkServer, str, identity.CA]]:
    ca = identity.new_ca()
    work = WorkServer()
    work.register("member3")
    port = await work.start("127.0.0.1:0", ca)
    try:
        yield work, f"127.0.0.1:{port}", ca
    finally:
        await work.stop(0)


async def test_the_clusters_own_certificate_opens_its_stream(server) -> None:
    work, address, ca = server
    cert, key = issue(work, ca)
    code, _, received = await open_stream(address, ca, cert, key, "member3")
    assert code == grpc.StatusCode.OK
    assert received[0].WhichOneof("body") == "welcome"


async def test_another_clusters_certificate_is_refused(server) -> None:
    work, address, ca = server
    cert, key = identity.issue_agent(ca, "member2")
    code, details, received = await open_stream(address, ca, cert, key, "member3")
    assert code == grpc.StatusCode.PERMISSION_DENIED and received == []
    assert "member2" in details and work.refused == 1
    assert not work.states["member3"].connected


async def test_a_certificate_from_another_ca_fails_the_handshake(server) -> None:
    _, address, ca = server
    cert, key = identity.issue_agent(identity.new_ca(), "member3")
    code, _, _ = await open_stream(address, ca, cert, key, "member3")
    assert code == grpc.StatusCode.UNAVAILABLE  # no TLS session: nothing reaches the servicer


async def test_an_unregistered_cluster_is_told_to_retry(server) -> None:
    _, address, ca = server
    cert, key = identity.issue_agent(ca, "member9")
    code, details, _ = await open_stream(address, ca, cert, key, "member9")
    assert code == grpc.StatusCode.UNAVAILABLE and "not a pull member" in details


def test_renewal_signs_only_the_streams_own_cluster() -> None:
    ca = identity.new_ca()
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert, pem = identity.issue_agent(ca, "member3", now=start)
    key, peer = identity.load_key(pem), identity.presented(cert)
    due = start + datetime.timedelta(days=61)
    renewed = identity.sign_csr(ca, identity.csr("member3", key), "member3", peer, due)
    assert identity.common_name(renewed) == "member3"
    assert identity.presented(renewed).public_key == peer.public_key  # the same key
    with pytest.raises(identity.IdentityError, match="exactly cluster 'member3'"):
        identity.sign_csr(ca, identity.csr("member2", key), "member3", peer, due)
    with pytest.raises(identity.IdentityError):
        identity.sign_csr(ca, b"not a csr", "member3", peer, due)


def test_renewal_is_for_the_presented_key_only_and_only_when_due() -> None:
    """Finding 6: a stolen certificate could be renewed for a key its thief made, so the
    thief kept a certificate of their own forever."""
    ca = identity.new_ca()
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert, pem = identity.issue_agent(ca, "member3", now=start)
    peer = identity.presented(cert)
    due = start + datetime.timedelta(days=61)
    thief = identity.new_key()
    with pytest.raises(identity.IdentityError, match="not the key of the certificate"):
        identity.sign_csr(ca, identity.csr("member3", thief), "member3", peer, due)
    with pytest.raises(identity.IdentityError, match="not due for renewal before"):
        identity.sign_csr(ca, identity.csr("member3", identity.load_key(pem)), "member3",
                          peer, start + datetime.timedelta(days=50))


def test_renewal_is_due_at_two_thirds_of_the_lifetime() -> None:
    ca = identity.new_ca()
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert, _ = identity.issue_agent(ca, "member3", now=start)
    assert not identity.needs_renewal(cert, start + datetime.timedelta(days=50))
    assert identity.needs_renewal(cert, start + datetime.timedelta(days=61))


class Member(Unserved):
    """A member API server as the agent's client sees it, in memory."""

    name = "member3"

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, object]] = {}
        self.writes = 0

    async def create(self, resource, body, namespace=None):
        self.writes += 1
        obj = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.writes)}}
        self.objects[body["metadata"]["name"]] = obj
        return obj

    async def request_raw(self, path, *, params=None, timeout=None):
        return b"ok"


async def test_an_agent_applies_and_a_reconnect_applies_nothing_again(
        server, tmp_path: Path) -> None:
    """The real agent loop over the real transport: a write made through the WorkClient
    arrives, is applied once, and after the stream is dropped and reopened nothing is
    written twice (the Hello's generations)."""
    import asyncio

    work, address, ca = server
    cert, key = issue(work, ca)
    for name, data in (("tls.crt", cert), ("tls.key", key), ("ca.crt", ca.cert_pem)):
        (tmp_path / name).write_bytes(data)
    member = Member()
    agent = Agent(AgentSettings(address, "member3", tmp_path / "tls.crt",
                                tmp_path / "tls.key", tmp_path / "ca.crt", tmp_path),
                  member)
    state = work.states["member3"]

    opened = asyncio.Event()
    work.listeners.append(lambda name, up: opened.set() if up else opened.clear())

    async def connected() -> None:
        await opened.wait()

    task = asyncio.create_task(agent.connect_once())
    await asyncio.wait_for(connected(), 10)
    client = WorkClient(state)
    body = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"}}
    written = await asyncio.wait_for(client.create(DEPLOYMENTS, body), 10)
    assert written["metadata"]["resourceVersion"] == "1" and member.writes == 1
    state.disconnect("test")  # the hub drops the stream; the agent sees it end
    await asyncio.wait_for(task, 10)
    opened.clear()
    state.applied.clear()  # as if the hub restarted: it must learn from the Hello
    state.desired[next(iter(state.desired))].generation = 1
    task = asyncio.create_task(agent.connect_once())
    await asyncio.wait_for(connected(), 10)
    assert state.connected and state.stream == 2
    await asyncio.sleep(0.2)  # time for a (wrong) re-send to arrive and be applied
    assert member.writes == 1 and state.writes_sent == 1
    state.disconnect("done")
    await asyncio.wait_for(task, 10)
    await agent.worker.stop()
