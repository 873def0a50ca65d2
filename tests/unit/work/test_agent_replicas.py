"""An agent of a sharded control plane streams to every replica (docs/runtime.md, "Pull
members with shards"): each replica's writes arrive on its own stream, numbered by it."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from federation.agent import credentials
from federation.contexts.client import CONFIGMAPS
from federation.work import identity
from federation.work.proto import work_pb2 as pb
from federation.work.pull import WorkClient
from federation.work.server import ANOTHER_STREAM, WorkServer
from tests.unit.work.test_agent_credentials import until
from tests.unit.work.test_standby import Service, agent_for
from tests.unit.work.test_transport import Member

pytestmark = pytest.mark.timeout(20)
Replicas = tuple[list[WorkServer], identity.CA, bytes, bytes]


@pytest_asyncio.fixture(loop_scope="function")
async def sharded() -> AsyncIterator[Replicas]:
    """Three shard holders of one CA, each knowing member3 and its certificate."""
    ca = identity.new_ca()
    cert, key = identity.issue_agent(ca, "member3")
    record = identity.CertificateRecord(identity.serial_of(cert))
    works = [WorkServer(replica=f"replica-{n}", replicas=3) for n in "abc"]
    for work in works:
        work.leading = lambda: True
        work.register("member3", record)
        await work.start("127.0.0.1:0", ca)
    try:
        yield works, ca, cert, key
    finally:
        for work in works:
            await work.stop(0)


def config_map(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "shop"}, "data": {"k": name}}


async def test_one_address_behind_a_service_reaches_every_replica(
        sharded: Replicas, tmp_path: Path) -> None:
    """The Service hands the first connections to replicas a, a, b, a, c: the agent learns
    from the Welcome that there are three, keeps dialling past the replica it has, and ends
    with one stream to each; each replica's first write (generation 1 of the same object
    for all three) is written, none taken for a duplicate of another replica's."""
    works, ca, cert, key = sharded
    ports = [w.port for w in works]
    assert all(ports)
    service = Service([ports[0], ports[0], ports[1], ports[0], ports[2]])  # type: ignore[list-item]
    address = f"127.0.0.1:{await service.start()}"
    agent = agent_for(address, ca, cert, key, tmp_path, standby_retry=0.01)
    member = agent.worker.client
    assert isinstance(member, Member)
    running = asyncio.create_task(agent.run())
    try:
        await until(lambda: agent.streams == 3, "3 streams")  # each Welcome read
        assert all(w.states["member3"].connected for w in works) and len(agent.slots) == 3
        assert {s.replica for s in agent.slots} == {"replica-a", "replica-b", "replica-c"}
        for n, work in enumerate(works):
            body = config_map("web")
            body["data"] = {"written-by": str(n)}
            await WorkClient(work.states["member3"]).create(CONFIGMAPS, body)
        assert member.writes == 3
        assert member.objects["web"]["data"] == {"written-by": "2"}
        assert [agent.worker.applied.get(k, f"replica-{n}")
                for n in "abc" for k in agent.worker.applied.table(f"replica-{n}")] == [1] * 3
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        assert all(slot.task is None for slot in agent.slots)  # run ends every stream
        await agent.worker.stop()
        await service.stop()


async def test_a_replica_gone_leaves_the_others_streams_and_the_hub_is_not_away(
        sharded: Replicas, tmp_path: Path) -> None:
    """One address per replica (``--hub-address a,b,c``). Replica a stops: its slot dials
    again; b and c keep their streams and the agent's sessions (the hub is not away)."""
    works, ca, cert, key = sharded
    address = ",".join(f"127.0.0.1:{w.port}" for w in works)
    agent = agent_for(address, ca, cert, key, tmp_path, backoff_initial=0.05)
    running = asyncio.create_task(agent.run())
    try:
        await until(lambda: agent.streams == 3, "3 streams")
        await works[0].stop(0)
        await until(lambda: agent.streams == 2, "a's stream ended")
        assert len(agent.worker.sessions) == 2 and agent.connected
        assert all(w.states["member3"].connected for w in works[1:])
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        assert all(slot.task is None for slot in agent.slots)  # run ends every stream
        await agent.worker.stop()


def test_a_renewal_refused_by_a_replica_that_does_not_record_it_is_asked_on_another(
        tmp_path: Path) -> None:
    """One renewal at a time; a replica that says another one records this cluster's
    renewals is not asked again, and the next stream is asked at once (not an hour later)."""
    ca = identity.new_ca()
    old = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=61)
    cert, key = identity.issue_agent(ca, "member3", now=old)
    agent = agent_for("127.0.0.1:1,127.0.0.1:2", ca, cert, key, tmp_path)
    agent.bundle = credentials.Bundle(cert, key, ca.cert_pem)
    first, second = agent.worker.session(), agent.worker.session()
    agent._maybe_renew(first)
    agent._maybe_renew(second)  # one outstanding at a time
    assert (first.outbox.qsize(), second.outbox.qsize()) == (1, 0)
    agent._renewed(first, pb.RenewAnswer(
        error=f"renewal: this replica does not record the certificate of member3; "
              f"{ANOTHER_STREAM}"))
    assert first.renews_elsewhere and second.renewing and second.outbox.qsize() == 1
    agent._maybe_renew(first)
    assert first.outbox.qsize() == 1  # not asked again
