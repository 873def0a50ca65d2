"""A compromised agent, speaking with its own valid certificate, against the hub's side of
its stream (issue 20, findings 5, 6, 11, 12): each test makes the attack on a PullState
driven directly, the way the work server's reader hands it the agent's messages."""

from __future__ import annotations

import asyncio
import datetime
import logging

import pytest

from federation.contexts.client import DEPLOYMENTS, ApiError
from federation.untrusted.text import ELLIPSIS
from federation.work import identity, wire
from federation.work.proto import work_pb2 as pb
from federation.work.pull import DETAIL_LIMIT, MESSAGE_LIMIT, PullSettings, PullState, WorkClient
from federation.work.wire import MAX_GENERATION
from tests.unit.work.test_pull_state import Clock, answer, deployment, drain, hello, key, works


def state() -> PullState:
    return PullState("member3", PullSettings(), clock=Clock())


def many(count: int, prefix: str) -> pb.Hello:
    return pb.Hello(cluster_name="member3", applied=[
        pb.Applied(key=wire.key_to_pb(key(f"{prefix}{i}")), generation=1)
        for i in range(count)])


def peer(days_old: float = 61) -> identity.Presented:
    start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=days_old)
    return identity.Presented("a1", b"key", start, start + identity.AGENT_VALIDITY)


RENEW = pb.AgentMessage(renew=pb.RenewRequest(csr_pem=b"csr"))


def renewals(messages: list[pb.HubMessage]) -> list[pb.RenewAnswer]:
    return [m.renew for m in messages if m.WhichOneof("body") == "renew"]


# -- finding 5: the hub's memory and loop ---------------------------------------------------

async def test_results_for_keys_the_hub_never_sent_are_dropped(
        caplog: pytest.LogCaptureFixture) -> None:
    """Results for invented keys used to add one entry each to ``applied``, never dropped
    (50,000 in the finding)."""
    s = state()
    s.connect(hello())
    with caplog.at_level(logging.WARNING, "federation.work"):
        for i in range(5_000):
            answer(s, f"invented-{i}", 1)
    assert s.applied == {} and s.ignored == 5_000
    assert len(caplog.records) == 1 and "did not send" in caplog.text  # one line, not 5,000


async def test_a_result_for_a_generation_not_in_flight_changes_nothing() -> None:
    s = state()
    s.connect(hello())
    write = asyncio.ensure_future(WorkClient(s).create(DEPLOYMENTS, deployment("web")))
    await asyncio.sleep(0)
    assert works(drain(s)) == [("web", 1)]
    answer(s, "web", 7)  # a generation the hub never chose: it would skip six writes
    assert s.applied == {} and not write.done() and s.inflight == {key("web"): 1}
    answer(s, "web", 1)
    assert (await write)["metadata"]["resourceVersion"] == "7"
    assert s.applied == {key("web"): 1}


async def test_hellos_replace_what_the_agent_reported_instead_of_adding_up() -> None:
    """Hellos of 10,000 new keys each used to add 10,000 entries per reconnect, for ever."""
    s = state()
    s.connect(hello())
    write = asyncio.ensure_future(WorkClient(s).create(DEPLOYMENTS, deployment("web")))
    await asyncio.sleep(0)
    drain(s)
    answer(s, "web", 1)
    await write
    for round_ in range(4):
        s.disconnect("reconnect")
        s.connect(many(10_000, f"r{round_}-"))
    assert len(s.applied) == 10_001  # the last Hello's keys, and the hub's own object
    assert s.applied[key("web")] == 1  # what the hub wrote keeps its generation


async def test_one_renewal_at_a_time_and_one_granted_per_stream() -> None:
    """10,000 RenewRequests on one stream were all signed, their answers queued without
    bound: now one is outstanding at a time, a second is a protocol error (the server
    closes the stream), and its answer is the only control message an agent causes."""
    s = state()
    s.connect(hello(), peer())
    drain(s)
    gate = asyncio.Event()
    signed: list[bytes] = []

    async def renew(csr: bytes, presented: identity.Presented) -> bytes:
        signed.append(csr)
        await gate.wait()
        return b"CERT"

    s.renew = renew
    refused = 0
    for _ in range(10_000):
        try:
            s.receive(RENEW)
        except ValueError:
            refused += 1
    await asyncio.sleep(0)
    assert refused == 9_999 and len(signed) == 1 and len(s.control) == 0
    gate.set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert [a.cert_pem for a in renewals(drain(s))] == [b"CERT"]
    with pytest.raises(ValueError, match="granted on this stream"):
        s.receive(RENEW)
    assert len(signed) == 1


async def test_a_refused_renewal_may_be_asked_again_once_answered() -> None:
    s = state()
    s.connect(hello(), peer(days_old=1))

    async def renew(csr: bytes, presented: identity.Presented) -> bytes:
        raise identity.IdentityError("renewal: the certificate is not due")

    s.renew = renew
    drain(s)
    s.receive(RENEW)
    with pytest.raises(ValueError, match="outstanding"):
        s.receive(RENEW)  # its answer is not sent yet
    await asyncio.sleep(0)
    assert [a.error for a in renewals(drain(s))] == ["renewal: the certificate is not due"]
    s.receive(RENEW)  # answered: the agent may ask again (an hour later, say)


async def test_a_renewal_answer_for_a_stream_that_ended_is_dropped() -> None:
    s = state()
    s.connect(hello(), peer())
    gate = asyncio.Event()

    async def renew(csr: bytes, presented: identity.Presented) -> bytes:
        await gate.wait()
        return b"CERT"

    s.renew = renew
    s.receive(RENEW)
    s.disconnect("broke")
    s.connect(hello(), peer())
    gate.set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert renewals(drain(s)) == []
    s.receive(RENEW)  # the new stream's own renewal is not blocked by the old one


# -- finding 6: a copy of the key displaces nobody; a re-join revokes ----------------------

def test_a_live_stream_is_never_displaced_a_silent_one_is() -> None:
    s = state()
    assert s.busy() is None
    s.connect(hello(), peer())
    assert "already has a live agent stream" in (s.busy() or "")
    assert isinstance(s.clock, Clock)
    s.clock.now += PullSettings().heartbeat_timeout + 1  # no heartbeat: a dead connection
    assert s.busy() is None


def test_a_revoked_certificate_ends_its_live_stream() -> None:
    s = state()
    s.track(identity.CertificateRecord("a1"))
    s.connect(hello(), peer())
    s.track(identity.CertificateRecord("a1", previous="0f"))
    assert s.connected  # still accepted
    s.track(identity.CertificateRecord("b2"))  # a re-join issued another
    assert not s.connected and "revoked" in s.agent_detail


def test_certificate_records_accept_only_their_serials() -> None:
    empty = identity.CertificateRecord()
    assert "join it again" in (empty.refusal("a1", "member3") or "")
    record = identity.CertificateRecord.of({"status": {"agentCertificate": {
        "serial": "b2", "previousSerial": "a1"}}})
    assert record.refusal("b2", "member3") is None and record.refusal("a1", "member3") is None
    assert "revoked" in (record.refusal("c3", "member3") or "")
    assert not record.accepts("")
    hostile = identity.CertificateRecord.of({"status": {"agentCertificate": {"serial": 7}}})
    assert hostile == empty
    assert record.status_patch() == {"status": {"agentCertificate": {
        "serial": "b2", "previousSerial": "a1"}}}
    assert identity.CertificateRecord("b2").status_patch()["status"]["agentCertificate"][
        "previousSerial"] is None  # a merge patch removes it


# -- finding 11: text from the agent is one clipped line ------------------------------------

FORGED = "\n2026-11-02 10:00:00 ERROR federation.health: cluster member1 compromised"


def test_a_heartbeat_detail_cannot_forge_a_log_line_or_grow_a_condition() -> None:
    s = state()
    s.connect(hello())
    s.receive(pb.AgentMessage(heartbeat=pb.Heartbeat(cluster_ready=False,
                                                     detail="x" * 800_000 + FORGED)))
    reachable, ready, detail = s.health()
    assert reachable and not ready
    assert "\n" not in detail and len(detail) == DETAIL_LIMIT + len(ELLIPSIS)
    s.receive(pb.AgentMessage(heartbeat=pb.Heartbeat(detail="apiserver down" + FORGED)))
    assert s.health()[2].startswith("apiserver down\\n2026-11-02") and "\n" not in s.health()[2]


async def test_the_probe_reports_the_clipped_detail() -> None:
    s = state()
    s.connect(hello())
    s.receive(pb.AgentMessage(heartbeat=pb.Heartbeat(detail="down" + FORGED)))
    with pytest.raises(ApiError) as raised:
        await WorkClient(s).request_raw("/readyz")
    assert "\n" not in str(raised.value)


async def test_a_refusal_message_from_the_agent_is_one_clipped_line() -> None:
    s = state()
    s.connect(hello())
    write = asyncio.ensure_future(WorkClient(s).create(DEPLOYMENTS, deployment("web")))
    await asyncio.sleep(0)
    drain(s)
    s.receive(pb.AgentMessage(result=pb.Result(
        key=wire.key_to_pb(key("web")), generation=1, ok=False, status=200,
        reason="Bad\nReason", message="m" * 50_000 + FORGED)))
    with pytest.raises(ApiError) as raised:
        await write
    error = raised.value
    assert error.status == 500  # not an HTTP error status: no success in disguise
    assert "\n" not in str(error) and error.reason == "Bad\\nReason"
    assert str(error).endswith("m" * 10 + ELLIPSIS) and len(str(error)) < MESSAGE_LIMIT + 100


# -- finding 12: generations stay encodable --------------------------------------------------

async def test_a_hello_beyond_the_generation_range_is_refused_and_changes_nothing() -> None:
    """``Hello{applied: [(key, 2**63 - 1)]}`` made the next write's generation 2**63: its
    Work could not be encoded and the stream died on every reconnect."""
    s = state()
    for bad in (2**63 - 1, MAX_GENERATION + 1, -5):
        with pytest.raises(ValueError, match=r"outside 0\.\."):
            s.connect(hello(web=bad))
        assert not s.connected and s.applied == {}
    s.connect(hello(web=MAX_GENERATION))
    write = asyncio.ensure_future(WorkClient(s).create(DEPLOYMENTS, deployment("web")))
    await asyncio.sleep(0)
    sent = [m for m in drain(s) if m.WhichOneof("body") == "work"]
    assert sent[0].work.generation == MAX_GENERATION + 1
    assert sent[0].SerializeToString()  # encodable
    write.cancel()


