"""The hub's side of a pull member on virtual time: resume, flow control, mirror, health."""

import asyncio
from typing import Any

import pytest

from federation.contexts.client import DEPLOYMENTS, ApiError, ClusterUnavailable
from federation.work import wire
from federation.work.proto import work_pb2 as pb
from federation.work.pull import PullSettings, PullState, WorkClient
from federation.work.wire import Key


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def key(name: str) -> Key:
    return Key(DEPLOYMENTS, "shop", name)


def deployment(name: str, rv: str = "", replicas: int = 1) -> dict[str, Any]:
    meta = {"name": name, "namespace": "shop"}
    if rv:
        meta["resourceVersion"] = rv
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": replicas}}


def hello(**applied: int) -> pb.Hello:
    return pb.Hello(cluster_name="member3", applied=[
        pb.Applied(key=wire.key_to_pb(key(n)), generation=g) for n, g in applied.items()])


def drain(state: PullState) -> list[pb.HubMessage]:
    out = []
    while (message := state.next_message()) is not None:
        out.append(message)
    return out


def works(messages: list[pb.HubMessage]) -> list[tuple[str, int]]:
    return [(m.work.key.name, m.work.generation) for m in messages
            if m.WhichOneof("body") == "work"]


def answer(state: PullState, name: str, generation: int, ok: bool = True, obj=None,
           status: int = 0) -> None:
    state.receive(pb.AgentMessage(result=pb.Result(
        key=wire.key_to_pb(key(name)), generation=generation, ok=ok, status=status,
        object=wire.encode(obj or deployment(name, "7")) if ok else b"")))


def state(**kw) -> PullState:
    return PullState("member3", PullSettings(**kw), clock=Clock())


async def test_write_waits_for_the_agent_and_reports_its_answer():
    s = state()
    s.connect(hello())
    client = WorkClient(s)
    write = asyncio.create_task(client.create(DEPLOYMENTS, deployment("web")))
    await asyncio.sleep(0)
    sent = drain(s)
    assert sent[0].WhichOneof("body") == "welcome"
    assert works(sent) == [("web", 1)]
    assert not write.done()  # never success before the member answered
    answer(s, "web", 1)
    assert (await write)["metadata"]["resourceVersion"] == "7"


async def test_a_refusal_is_the_members_error():
    s = state()
    s.connect(hello())
    write = asyncio.create_task(WorkClient(s).create(DEPLOYMENTS, deployment("web")))
    await asyncio.sleep(0)
    drain(s)
    s.receive(pb.AgentMessage(result=pb.Result(key=wire.key_to_pb(key("web")), generation=1,
                                               ok=False, status=409, reason="AlreadyExists")))
    with pytest.raises(ApiError) as err:
        await write
    assert err.value.status == 409 and err.value.reason == "AlreadyExists"


async def test_no_agent_means_no_write_and_a_retryable_error():
    s = state()
    with pytest.raises(ClusterUnavailable):
        await WorkClient(s).create(DEPLOYMENTS, deployment("web"))
    assert not s.desired


async def test_resume_sends_only_what_the_agent_has_not_applied():
    s = state()
    s.connect(hello())
    for name in ("a", "b", "c"):
        s.submit(key(name), pb.CREATE, deployment(name))
    drain(s)
    answer(s, "a", 1)  # b and c were in flight when the stream broke
    s.disconnect("test")
    s.connect(hello(a=1, b=1))  # the agent applied b but its answer was lost
    assert works(drain(s)) == [("c", 1)]


async def test_hub_restart_continues_generations_from_the_agent():
    s = state()  # a fresh hub: nothing desired, nothing sent
    s.connect(hello(web=5))
    assert works(drain(s)) == []
    s.submit(key("web"), pb.UPDATE, deployment("web", "3"))
    assert works(drain(s)) == [("web", 6)]  # newer than anything the agent applied


async def test_window_bounds_what_is_in_flight():
    s = state(window=2)
    s.connect(hello())
    for name in ("a", "b", "c", "d"):
        s.submit(key(name), pb.CREATE, deployment(name))
    assert works(drain(s)) == [("a", 1), ("b", 1)]
    answer(s, "a", 1)
    assert works(drain(s)) == [("c", 1)]


async def test_a_slow_agent_costs_one_entry_per_object():
    s = state(window=1)
    s.connect(hello())
    first = s.submit(key("a"), pb.UPDATE, deployment("a"))
    assert works(drain(s)) == [("a", 1)]
    futures = [first] + [s.submit(key("a"), pb.UPDATE, deployment("a", replicas=n))
                         for n in range(2, 1001)]
    for n in range(1000):
        s.submit(key("b"), pb.UPDATE, deployment("b", replicas=n))
    assert len(s.desired) == 2 and len(s.pending) == 2 and len(s.waiters) == 3
    # Writes superseded before they were sent failed (retryably), none reported done.
    superseded = [f for f in futures[1:-1] if f.done()]
    assert len(superseded) == 998 and all(isinstance(f.exception(), ApiError)
                                          for f in superseded)


async def test_one_generation_per_object_in_flight():
    s = state()
    s.connect(hello())
    s.submit(key("a"), pb.UPDATE, deployment("a"))
    assert works(drain(s)) == [("a", 1)]
    s.submit(key("a"), pb.UPDATE, deployment("a", replicas=2))
    assert works(drain(s)) == []  # waits for the answer to generation 1
    answer(s, "a", 1)
    assert works(drain(s)) == [("a", 2)]


async def test_delete_forgets_the_object_but_not_its_generation():
    s = state()
    s.connect(hello(a=4))
    future = s.submit(key("a"), pb.DELETE, None, "uid-1")
    sent = drain(s)
    assert works(sent) == [("a", 5)] and sent[-1].work.uid == "uid-1"
    s.receive(pb.AgentMessage(result=pb.Result(key=wire.key_to_pb(key("a")), generation=5,
                                               ok=True)))
    assert (await future).ok and key("a") not in s.desired
    s.submit(key("a"), pb.CREATE, deployment("a"))
    assert works(drain(s)) == [("a", 6)]


def observe(s: PullState, kind: str, obj: dict[str, Any]) -> None:
    s.receive(pb.AgentMessage(observed=pb.Observed(
        resource=wire.resource_to_pb(DEPLOYMENTS), type=kind, object=wire.encode(obj))))


def synced(s: PullState) -> None:
    s.receive(pb.AgentMessage(synced=pb.Synced(resource=wire.resource_to_pb(DEPLOYMENTS))))


async def test_list_subscribes_and_serves_the_agents_snapshot():
    s = state()
    s.connect(hello())
    drain(s)
    client = WorkClient(s)
    listing = asyncio.create_task(client.list(DEPLOYMENTS))
    await asyncio.sleep(0)
    assert [m.WhichOneof("body") for m in drain(s)] == ["subscribe"]
    observe(s, "ADDED", deployment("web", "9"))
    synced(s)
    result = await listing
    assert [o["metadata"]["name"] for o in result["items"]] == ["web"]
    assert result["items"][0]["metadata"]["resourceVersion"] == "9"  # the member's own


async def test_watch_follows_the_mirror_and_a_new_snapshot_is_a_410():
    s = state()
    s.connect(hello())
    client = WorkClient(s)
    listing = asyncio.create_task(client.list(DEPLOYMENTS))
    await asyncio.sleep(0)
    synced(s)
    version = (await listing)["metadata"]["resourceVersion"]
    events = []

    async def watch() -> None:
        async for event in client.watch(DEPLOYMENTS, resource_version=version,
                                        timeout_seconds=3600):
            events.append(event)

    task = asyncio.create_task(watch())
    await asyncio.sleep(0)
    observe(s, "ADDED", deployment("web", "10"))
    await asyncio.sleep(0)
    assert [e["type"] for e in events] == ["ADDED"]
    s.disconnect("test")  # the watch ends as an outage, not silently
    with pytest.raises(ClusterUnavailable):
        await task
    s.connect(hello())
    synced(s)
    with pytest.raises(ApiError) as err:
        async for _ in client.watch(DEPLOYMENTS, resource_version=version):
            pass
    assert err.value.status == 410  # the informer relists and diffs


async def test_health_follows_stream_and_heartbeats():
    clock = Clock()
    s = PullState("member3", PullSettings(heartbeat_timeout=6.0), clock=clock)
    client = WorkClient(s)
    with pytest.raises(ClusterUnavailable):
        await client.request_raw("/readyz")
    s.connect(hello())
    assert await client.request_raw("/readyz") == b"ok"
    s.receive(pb.AgentMessage(heartbeat=pb.Heartbeat(cluster_ready=False, detail="etcd down")))
    with pytest.raises(ApiError) as err:
        await client.request_raw("/readyz")
    assert err.value.status == 503
    s.receive(pb.AgentMessage(heartbeat=pb.Heartbeat(cluster_ready=True)))
    clock.now += 7  # a hung agent: the stream is open but silent
    with pytest.raises(ClusterUnavailable, match="no heartbeat"):
        await client.request_raw("/readyz")


async def test_patch_and_status_writes_are_refused_not_dropped():
    s = state()
    s.connect(hello())
    client = WorkClient(s)
    with pytest.raises(ApiError, match="not served for a pull member"):
        await client.patch(DEPLOYMENTS, "web", {}, namespace="shop")
    with pytest.raises(ApiError, match="status"):
        await client.replace(DEPLOYMENTS, deployment("web"), subresource="status")
    with pytest.raises(ApiError):
        await client.request("POST", "/api/v1/namespaces")
    assert not s.desired


async def test_protocol_errors_are_refused():
    s = state()
    s.connect(hello())
    with pytest.raises(ValueError, match="not subscribed"):
        observe(s, "ADDED", deployment("web"))
    with pytest.raises(ValueError, match="twice"):
        s.receive(pb.AgentMessage(hello=hello()))


async def test_the_same_write_twice_is_made_once_and_answers_both():
    """Templates sharing a Namespace each create it: one Work, one answer for all."""
    s = state()
    s.connect(hello())
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
    first = s.submit(key("ns"), pb.CREATE, namespace)
    second = s.submit(key("ns"), pb.CREATE, dict(namespace))
    assert works(drain(s)) == [("ns", 1)]
    third = s.submit(key("ns"), pb.CREATE, dict(namespace))  # while in flight: joins it
    answer(s, "ns", 1)
    assert first is second is third and (await first).ok
    assert works(drain(s)) == []
