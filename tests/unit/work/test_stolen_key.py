"""Issue 20, findings 6 and 8, on the real work server over loopback mutual TLS: what a
copy of an agent's certificate and key can do (nothing the agent does not), what a re-join
revokes, and what a member that left is told."""

from __future__ import annotations

import asyncio
import datetime
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
import pytest_asyncio

from federation.agent.agent import Agent, AgentSettings
from federation.contexts import cache
from federation.contexts.client import DEPLOYMENTS
from federation.work import identity, wire
from federation.work.proto import work_pb2 as pb
from federation.work.server import METHOD, WorkServer
from federation.work.wire import Key
from tests.unit.work.test_transport import Member, issue

Server = tuple[WorkServer, str, identity.CA]
OLD = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=61)
"""When a certificate due for renewal was issued (two thirds of 90 days ago and more)."""


class Stream:
    """A raw agent stream: the test says what the "agent" sends and reads what comes."""

    def __init__(self, address: str, ca: identity.CA, cert: bytes, key: bytes) -> None:
        self.channel = grpc.aio.secure_channel(
            address, grpc.ssl_channel_credentials(ca.cert_pem, key, cert))
        self.outbox: asyncio.Queue[pb.AgentMessage | None] = asyncio.Queue()
        self.received: asyncio.Queue[pb.HubMessage] = asyncio.Queue()
        self.code: grpc.StatusCode | None = None
        self.details = ""
        self.ended = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def _requests(self) -> AsyncIterator[pb.AgentMessage]:
        yield pb.AgentMessage(hello=pb.Hello(cluster_name="member3"))
        while (message := await self.outbox.get()) is not None:
            yield message

    async def _run(self) -> None:
        sync = self.channel.stream_stream(
            METHOD, request_serializer=pb.AgentMessage.SerializeToString,
            response_deserializer=pb.HubMessage.FromString)
        try:
            async for message in sync(self._requests()):
                self.received.put_nowait(message)
            self.code = grpc.StatusCode.OK
        except grpc.aio.AioRpcError as exc:
            self.code, self.details = exc.code(), exc.details() or ""
        finally:
            self.ended.set()

    async def open(self) -> Stream:
        self.task = asyncio.create_task(self._run())
        return self

    async def next(self, body: str) -> pb.HubMessage:
        while True:
            message = await asyncio.wait_for(self.received.get(), 10)
            if message.WhichOneof("body") == body:
                return message

    async def refusal(self) -> tuple[grpc.StatusCode | None, str]:
        await asyncio.wait_for(self.ended.wait(), 10)
        return self.code, self.details

    async def close(self) -> None:
        self.outbox.put_nowait(None)
        if self.task is not None:
            await asyncio.wait_for(asyncio.gather(self.task, return_exceptions=True), 10)
        await self.channel.close(None)


class Recorder:
    """The membership controller's record of the current serial, as a list of writes."""

    def __init__(self, work: WorkServer) -> None:
        self.work = work
        self.writes: list[tuple[identity.CertificateRecord, str]] = []
        work.recorder = self

    async def __call__(self, name: str, record: identity.CertificateRecord,
                      presented: str) -> None:
        if not self.work.states[name].certificate.accepts(presented):
            raise identity.IdentityError("revoked meanwhile")
        self.writes.append((record, presented))


@pytest_asyncio.fixture(loop_scope="function")
async def server() -> AsyncIterator[Server]:
    ca = identity.new_ca()
    work = WorkServer()
    port = await work.start("127.0.0.1:0", ca)
    try:
        yield work, f"127.0.0.1:{port}", ca
    finally:
        await work.stop(0)


async def test_a_copy_of_the_live_agents_certificate_cannot_displace_it(server: Server
                                                                         ) -> None:
    """The holder of a stolen key used to take the member's stream (newest wins) and so its
    Work, Secrets included."""
    work, address, ca = server
    cert, key = issue(work, ca)
    agent = await Stream(address, ca, cert, key).open()
    await agent.next("welcome")
    thief = await Stream(address, ca, cert, key).open()
    code, details = await thief.refusal()
    assert code == grpc.StatusCode.ALREADY_EXISTS and "live agent stream" in details
    state = work.states["member3"]
    assert state.connected and state.stream == 1  # the agent's stream, untouched
    await agent.close()
    await thief.close()


async def test_an_unrecorded_certificate_is_refused_and_a_rejoin_revokes_the_live_one(
        server: Server) -> None:
    work, address, ca = server
    old_cert, old_key = issue(work, ca)
    other, other_key = identity.issue_agent(ca, "member3")  # the CA signed it; nobody recorded it
    stray = await Stream(address, ca, other, other_key).open()
    code, details = await stray.refusal()
    assert code == grpc.StatusCode.PERMISSION_DENIED and "not cluster 'member3'" in details
    await stray.close()

    agent = await Stream(address, ca, old_cert, old_key).open()
    await agent.next("welcome")
    new_cert, new_key = issue(work, ca)  # a re-join: the membership controller's record
    code, _ = await agent.refusal()
    assert code == grpc.StatusCode.OK and not work.states["member3"].connected
    again = await Stream(address, ca, old_cert, old_key).open()
    code, details = await again.refusal()
    assert code == grpc.StatusCode.PERMISSION_DENIED and "revoked" in details
    rejoined = await Stream(address, ca, new_cert, new_key).open()
    await rejoined.next("welcome")
    for stream in (agent, again, rejoined):
        await stream.close()


async def test_a_stolen_certificate_cannot_be_renewed_for_the_thiefs_key(server: Server
                                                                          ) -> None:
    """The stream used to sign any CSR naming its cluster, whatever its key: a thief renewed
    a stolen certificate into one for a key of their own, for ever."""
    work, address, ca = server
    recorder = Recorder(work)
    cert, key = issue(work, ca, now=OLD)  # due, so only the key can stop it
    before = work.states["member3"].certificate
    thief = await Stream(address, ca, cert, key).open()
    await thief.next("welcome")
    thief.outbox.put_nowait(pb.AgentMessage(renew=pb.RenewRequest(
        csr_pem=identity.csr("member3", identity.new_key()))))
    answer = (await thief.next("renew")).renew
    assert not answer.cert_pem and "not the key of the certificate" in answer.error
    assert recorder.writes == [] and work.states["member3"].certificate == before
    await thief.close()


async def test_the_agent_renews_its_own_key_and_the_certificate_it_replaced_expires(
        server: Server, tmp_path: Path) -> None:
    work, address, ca = server
    recorder = Recorder(work)
    cert, key = issue(work, ca, now=OLD)
    old = identity.serial_of(cert)
    for name, data in (("tls.crt", cert), ("tls.key", key), ("ca.crt", ca.cert_pem)):
        (tmp_path / name).write_bytes(data)
    agent = Agent(AgentSettings(address, "member3", tmp_path / "tls.crt",
                                tmp_path / "tls.key", tmp_path / "ca.crt", tmp_path / "state"),
                  Member())
    assert await asyncio.wait_for(agent.attempt(), 10)  # renewed, then closed to reconnect
    renewed = (tmp_path / "tls.crt").read_bytes()
    new = identity.serial_of(renewed)
    assert new != old and (tmp_path / "tls.key").read_bytes() == key  # the same key
    assert recorder.writes == [(identity.CertificateRecord(new, old), old)]
    state = work.states["member3"]
    assert state.certificate == identity.CertificateRecord(new, old)  # old: until new is used

    opened = asyncio.Event()
    work.listeners.append(lambda _, up: opened.set() if up else None)
    second = asyncio.create_task(agent.attempt())
    await asyncio.wait_for(opened.wait(), 10)
    for _ in range(50):
        if state.certificate.previous == "":
            break
        await asyncio.sleep(0.02)
    assert state.certificate == identity.CertificateRecord(new)
    assert recorder.writes[-1] == (identity.CertificateRecord(new), new)
    state.disconnect("test over")
    await asyncio.wait_for(second, 10)
    thief = await Stream(address, ca, cert, key).open()  # the replaced certificate
    code, details = await thief.refusal()
    assert code == grpc.StatusCode.PERMISSION_DENIED and "revoked" in details
    await thief.close()
    await agent.worker.stop()


async def test_renewals_are_signed_off_the_event_loop(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """Every renewal used to be signed on the hub's loop (850-1,500 a second of it)."""
    work = WorkServer()
    ca = identity.new_ca()
    work.ca = ca
    Recorder(work)
    cert, key = issue(work, ca, now=OLD)
    threads: list[str] = []
    sign = identity.sign_csr

    def spy(*args: Any, **kw: Any) -> bytes:
        threads.append(threading.current_thread().name)
        return sign(*args, **kw)

    monkeypatch.setattr(identity, "sign_csr", spy)
    renewed = await work._renew("member3", identity.csr("member3", identity.load_key(key)),
                                identity.presented(cert))
    assert identity.common_name(renewed) == "member3"
    assert threads and threads[0].startswith("work renewal signer")
    assert threads[0] != threading.main_thread().name


async def test_a_member_that_left_is_told_so_and_its_agent_keeps_nothing(
        server: Server, tmp_path: Path) -> None:
    """Finding 8: after its MemberCluster was deleted the agent took the hub for "away" and
    kept putting back what the member's admin deleted or changed."""
    work, address, ca = server
    cert, key = issue(work, ca)
    for name, data in (("tls.crt", cert), ("tls.key", key), ("ca.crt", ca.cert_pem)):
        (tmp_path / name).write_bytes(data)
    member = Member()
    agent = Agent(AgentSettings(address, "member3", tmp_path / "tls.crt",
                                tmp_path / "tls.key", tmp_path / "ca.crt", tmp_path / "state"),
                  member)
    web = Key(DEPLOYMENTS, "shop", "web")
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "shop"}}
    await agent.worker.apply(pb.Work(key=wire.key_to_pb(web), generation=1, op=pb.CREATE,
                                     manifest=wire.encode(manifest)))
    assert web in agent.worker.applied.manifests and member.writes == 1

    work.unregister("member3")  # the MemberCluster is gone
    work.membership = lambda name: False
    assert not await asyncio.wait_for(agent.attempt(), 10)
    assert agent.worker.left is not None and "not a member" in agent.worker.left
    assert agent.worker.applied.manifests == {}
    # The member's admin deletes the copy: nothing puts it back.
    agent.worker._changed(cache.Event("DELETED", "member3", DEPLOYMENTS, manifest))
    await asyncio.sleep(0)
    assert member.writes == 1
    # Not known yet (a control plane starting) is not "left": the agent is told to retry.
    work.membership = lambda name: None
    fresh = Agent(AgentSettings(address, "member3", tmp_path / "tls.crt",
                                tmp_path / "tls.key", tmp_path / "ca.crt", tmp_path / "s2"),
                  member)
    assert not await asyncio.wait_for(fresh.attempt(), 10) and fresh.worker.left is None
    await agent.worker.stop()
