"""A pull member's writes are fenced as their Work is sent, not only when they are asked for.

A Work waits in the hub's queue for the agent's window; a leader frozen meanwhile past its
lease must not hand it to the agent on resume (a Work to an agent is a member write).
"""

from __future__ import annotations

import asyncio

import pytest

from federation.contexts import client as kube
from federation.contexts import clusters
from federation.runtime import manager
from federation.work import wire
from federation.work.proto import work_pb2 as pb
from federation.work.pull import PullSettings, PullState, WorkClient
from federation.work.wire import Key

pytestmark = pytest.mark.timeout(10)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def config_map(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "shop"}, "data": {}}


def sent(state: PullState) -> list[str]:
    names = []
    while (message := state.next_message()) is not None:
        if message.WhichOneof("body") == "work":
            names.append(message.work.key.name)
    return names


def answer(state: PullState, name: str) -> None:
    key = Key(kube.CONFIGMAPS, "shop", name)
    state.receive(pb.AgentMessage(result=pb.Result(
        key=wire.key_to_pb(key), generation=1, ok=True, object=wire.encode(config_map(name)))))


async def test_a_work_queued_behind_the_window_past_the_lease_is_not_sent() -> None:
    """Window of one: ``b`` passes the fence, queues behind ``a``; the leader is frozen past
    its deadline; ``a``'s answer frees the window. ``b`` must be refused, never sent, and
    its writer told (NotLeader), not left waiting or told it was done."""
    clock = Clock()
    state = PullState("member3", PullSettings(window=1), clock=clock)
    state.connect(pb.Hello(cluster_name="member3"))
    client = WorkClient(state)
    fence = kube.Fence(clock)
    fence.extend(110.0)
    client.fence = fence
    first = asyncio.create_task(client.create(kube.CONFIGMAPS, config_map("a")))
    second = asyncio.create_task(client.create(kube.CONFIGMAPS, config_map("b")))
    await asyncio.sleep(0)
    assert sent(state) == ["a"]  # b waits for the window
    clock.now = 125.0  # frozen past the lease, then resumed
    answer(state, "a")
    assert sent(state) == [], "a Work was handed to the agent after the lease had lapsed"
    assert (await first)["metadata"]["name"] == "a"
    with pytest.raises(kube.NotLeader, match="not sent"):
        await second
    state.disconnect("test")
    state.connect(pb.Hello(cluster_name="member3"))
    assert sent(state) == [], "a refused Work was sent on the next stream"


async def test_works_within_the_lease_are_sent() -> None:
    """The check refuses nothing valid."""
    clock = Clock()
    state = PullState("member3", PullSettings(window=1), clock=clock)
    state.connect(pb.Hello(cluster_name="member3"))
    client = WorkClient(state)
    fence = kube.Fence(clock)
    fence.extend(110.0)
    client.fence = fence
    writes = [asyncio.create_task(client.create(kube.CONFIGMAPS, config_map(n)))
              for n in ("a", "b")]
    await asyncio.sleep(0)
    assert sent(state) == ["a"]
    answer(state, "a")
    assert sent(state) == ["b"]
    answer(state, "b")
    assert [(await w)["metadata"]["name"] for w in writes] == ["a", "b"]


async def test_a_pull_member_engaged_by_the_manager_writes_only_under_its_fence() -> None:
    """The manager hands every cluster's client its fence, a pull member's included (its
    client is a ClusterAPI of its own, not the HTTP client): a write while this process
    does not lead is refused and never queued for the agent."""
    hub = clusters.Cluster("hub", is_hub=True, is_member=False)
    mgr = manager.Manager(clusters.ClusterSet([hub]))
    mgr.fence = kube.Fence()  # leader election started, not won (yet)
    state = PullState("edge")
    state.connect(pb.Hello(cluster_name="edge"))
    client: kube.ClusterAPI = WorkClient(state)  # mypy checks the protocol structurally
    assert not isinstance(client, kube.ClusterClient)
    edge = clusters.Cluster("edge", client=client)
    mgr.engage(edge)
    try:
        with pytest.raises(kube.NotLeader, match="not sent"):
            await client.create(kube.CONFIGMAPS, config_map("a"))
        assert sent(state) == [] and not state.desired
    finally:
        assert edge.engagement is not None
        await edge.engagement.stop()
