"""Issue 22, gap 2: a pull agent behind the Service of two replicas reaches the leader.

Only the leader knows the pull members; a standby used to answer "not a pull member of this
federation" (UNAVAILABLE) and the agent backed off as from any failure (1, 2, 4 ... 30 s),
so an agent the Service sent to the standby a few times in a row waited up to half a
minute, with the leader up all along. The standby now says it does not lead
(``STANDBY`` trailing metadata) and the agent dials again at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest_asyncio

from federation.agent.agent import Agent, AgentSettings
from federation.work import identity
from federation.work.server import STANDBY, WorkServer
from tests.unit.work.test_stolen_key import Stream
from tests.unit.work.test_transport import Member, issue


class Service:
    """A TCP proxy choosing a backend per connection, as kube-proxy does for a Service
    (here in a fixed order, so the test knows which replica each connection reaches)."""

    def __init__(self, backends: list[int]) -> None:
        self.backends = backends
        self.chosen: list[int] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._connect, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                       ) -> None:
        port = self.backends[len(self.chosen) % len(self.backends)]
        self.chosen.append(port)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer),
                             return_exceptions=True)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(OSError):
            writer.close()


Pair = tuple[WorkServer, WorkServer, identity.CA]


@pytest_asyncio.fixture(loop_scope="function")
async def replicas() -> AsyncIterator[Pair]:
    """Two work servers of one CA: the leader knows member3, the standby knows nothing."""
    ca = identity.new_ca()
    leader, standby = WorkServer(), WorkServer()
    leader.leading, standby.leading = (lambda: True), (lambda: False)
    for work in (leader, standby):
        await work.start("127.0.0.1:0", ca)
    try:
        yield leader, standby, ca
    finally:
        for work in (leader, standby):
            await work.stop(0)


def agent_for(address: str, ca: identity.CA, cert: bytes, key: bytes, tmp_path: Path,
              **settings: Any) -> Agent:
    for name, data in (("tls.crt", cert), ("tls.key", key), ("ca.crt", ca.cert_pem)):
        (tmp_path / name).write_bytes(data)
    return Agent(AgentSettings(address, "member3", tmp_path / "tls.crt", tmp_path / "tls.key",
                               tmp_path / "ca.crt", tmp_path / "state", **settings),
                 Member())


async def test_a_standby_refuses_every_stream_saying_it_does_not_lead(replicas: Pair) -> None:
    leader, standby, ca = replicas
    cert, key = issue(leader, ca)
    stream = await Stream(f"127.0.0.1:{standby.port}", ca, cert, key).open()
    code, details = await stream.refusal()
    assert code == grpc.StatusCode.UNAVAILABLE and "does not lead" in details
    await stream.close()
    assert standby.states == {} and standby.refused == 0  # no warning: it is expected


async def test_an_agent_sent_to_the_standby_reaches_the_leader_at_once(
        replicas: Pair, tmp_path: Path) -> None:
    """The Service sends the first three connections to the standby. With a 60 s backoff
    the agent could only get in within the test's 10 s by the standby's fast retry."""
    leader, standby, ca = replicas
    cert, key = issue(leader, ca)
    assert leader.port is not None and standby.port is not None
    service = Service([standby.port, standby.port, standby.port, leader.port])
    port = await service.start()
    agent = agent_for(f"127.0.0.1:{port}", ca, cert, key, tmp_path, backoff_initial=60.0,
                      backoff_max=60.0, standby_retry=0.05)
    opened = asyncio.Event()
    leader.listeners.append(lambda _, up: opened.set() if up else None)
    running = asyncio.create_task(agent.run())
    try:
        await asyncio.wait_for(opened.wait(), 10)
        assert service.chosen == [standby.port] * 3 + [leader.port]
        assert leader.states["member3"].connected
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await agent.worker.stop()
        await service.stop()


async def test_the_agent_counts_standby_answers_from_the_trailing_metadata(
        replicas: Pair, tmp_path: Path) -> None:
    leader, standby, ca = replicas
    cert, key = issue(leader, ca)
    agent = agent_for(f"127.0.0.1:{standby.port}", ca, cert, key, tmp_path)
    for _ in range(2):
        assert not await asyncio.wait_for(agent.attempt(), 10)
    assert agent.standbys == 2
    leader.register("member3")  # a leader that has not registered member3 yet: no STANDBY
    agent.slots[0].address = f"127.0.0.1:{leader.port}"
    leader.unregister("member3")
    assert not await asyncio.wait_for(agent.attempt(), 10)
    assert agent.standbys == 0


def test_the_delay_is_fast_for_standby_answers_then_backs_off(tmp_path: Path) -> None:
    agent = Agent(AgentSettings("127.0.0.1:1", "member3", Path("c"), Path("k"), Path("a"),
                                tmp_path), Member())
    s = agent.settings
    assert agent.delay(0) == s.backoff_initial  # a stream ended: dial again soon
    assert [agent.delay(n) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]  # failures back off
    delays = []
    for failures in range(1, s.standby_tries + 4):
        agent.standbys = failures
        delays.append(agent.delay(failures))
    assert delays[:s.standby_tries] == [s.standby_retry] * s.standby_tries
    assert delays[s.standby_tries:] == [1.0, 2.0, 4.0]  # no leader at all: an election
    agent.standbys = 0
    assert agent.delay(40) == s.backoff_max
    assert STANDBY == ("federation-work-standby", "true")
