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

pytestmark = pytest.mark.timeout(30)


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


class Owned:
    """Shard ownership by key, as :meth:`federation.runtime.peers.Peers.holds` answers."""

    def __init__(self, *keys: str) -> None:
        self.keys = set(keys)

    def holds(self, key: str) -> str | None:
        return None if key in self.keys else f"the key {key} is another shard's"


async def write_for(key: str, client: WorkClient, name: str) -> asyncio.Task[object]:
    """A write made by a sharded reconcile of ``key`` (its task inherits WRITING_FOR)."""
    token = kube.WRITING_FOR.set(key)
    try:
        task: asyncio.Task[object] = asyncio.create_task(
            client.create(kube.CONFIGMAPS, config_map(name)))
    finally:
        kube.WRITING_FOR.reset(token)
    await asyncio.sleep(0)
    return task


async def test_a_leader_does_not_send_a_work_for_a_key_it_no_longer_owns() -> None:
    """With shards, a Work queued while its key was ours and sent from the stream's task
    (which writes for no key) after the key moved must be refused for the key, not let
    through by the leader's fence: the key's new owner writes it now (two writers)."""
    clock = Clock()
    state = PullState("member3", PullSettings(window=1), clock=clock, replica="replica-a")
    state.connect(pb.Hello(cluster_name="member3"))
    client = WorkClient(state)
    leader = kube.Fence(clock)
    leader.extend(1000.0)  # this replica leads throughout
    owned = Owned("shop/a", "shop/b")
    client.fence = kube.ShardedPermit(owned.holds, leader)
    first = await write_for("shop/a", client, "a")
    second = await write_for("shop/b", client, "b")
    assert sent(state) == ["a"]  # b waits for the window
    owned.keys.discard("shop/b")  # a handover: shop/b is another replica's now
    answer(state, "a")
    assert sent(state) == [], "a Work was sent for a key this replica no longer owns"
    await first
    with pytest.raises(kube.NotShardOwner, match="another shard"):
        await second


async def test_an_owner_that_does_not_lead_sends_its_keys_work() -> None:
    """The check as the Work is sent asks for the key's shard, not for leadership."""
    clock = Clock()
    state = PullState("member3", PullSettings(window=1), clock=clock, replica="replica-b")
    state.connect(pb.Hello(cluster_name="member3"))
    client = WorkClient(state)
    client.fence = kube.ShardedPermit(Owned("shop/a", "shop/b").holds, kube.Fence(clock))
    writes = [await write_for(f"shop/{n}", client, n) for n in ("a", "b")]
    assert sent(state) == ["a"]
    answer(state, "a")
    assert sent(state) == ["b"]
    answer(state, "b")
    assert [(await w)["metadata"]["name"] for w in writes] == ["a", "b"]  # type: ignore[index]
