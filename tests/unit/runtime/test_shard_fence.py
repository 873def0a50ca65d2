"""The per-shard fence: a write carries its key, and is refused once the key is not ours.

Attacks: a reconcile still running after its key moved to another replica writes (from
its own task and from a task it started); a write made for no key from a replica that
does not lead. Each is refused unsent.
"""

from __future__ import annotations

import asyncio

import pytest

from federation.contexts import client as kube
from federation.runtime import controller, reconcile
from tests.unit.runtime import virtual

pytestmark = pytest.mark.timeout(20)


class Ownership:
    def __init__(self, *keys: str) -> None:
        self.keys = set(keys)

    def holds(self, key: str) -> str | None:
        return None if key in self.keys else f"the key {key} is another shard's"

    def owns(self, key: str) -> bool:
        return key in self.keys


class Sent:
    """A write permit's consumer: records what the permit let through."""

    def __init__(self, permit: kube.WritePermit) -> None:
        self.permit = permit
        self.sent: list[str] = []

    def write(self, path: str) -> None:
        self.permit.check("member1", "POST", path)
        self.sent.append(path)


def leader_fence(valid: bool) -> kube.Fence:
    fence = kube.Fence(lambda: 0.0)
    if valid:
        fence.extend(1.0)
    return fence


def request(name: str) -> reconcile.Request:
    return reconcile.Request("hub", "Deployment.apps", "shop", name)


def key(req: reconcile.Request) -> str:
    return f"{req.namespace}/{req.name}"


def test_keyed_writes_need_the_shard_and_unkeyed_ones_the_leader() -> None:
    ownership = Ownership("shop/a")
    out = Sent(kube.ShardedPermit(ownership.holds, leader_fence(valid=False)))
    token = kube.WRITING_FOR.set("shop/a")
    out.write("/a")
    kube.WRITING_FOR.reset(token)
    token = kube.WRITING_FOR.set("shop/b")
    with pytest.raises(kube.NotShardOwner, match="another shard"):
        out.write("/b")
    kube.WRITING_FOR.reset(token)
    with pytest.raises(kube.NotLeader):  # a cluster-wide write on a replica not leading
        out.write("/health")
    assert out.sent == ["/a"]
    leading = Sent(kube.ShardedPermit(ownership.holds, leader_fence(valid=True)))
    leading.write("/health")
    assert leading.sent == ["/health"]


def test_a_reconcile_whose_key_moves_mid_way_cannot_write_from_any_task() -> None:
    """The handover happens while the reconcile waits; its next write, and one from a task
    it started before, are refused and not sent."""

    async def scenario() -> None:
        ownership = Ownership("shop/a")
        out = Sent(kube.ShardedPermit(ownership.holds, leader_fence(valid=True)))
        refused: list[BaseException] = []

        async def late_write() -> None:
            await asyncio.sleep(2)
            try:
                out.write("/from-task")
            except kube.WriteRefused as exc:
                refused.append(exc)

        async def reconcile_a(req: reconcile.Request) -> None:
            out.write("/first")
            task = asyncio.create_task(late_write())
            await asyncio.sleep(1)
            ownership.keys.clear()  # handed over to another replica meanwhile
            await task
            out.write("/second")

        ctl = controller.Controller("propagation", reconcile_a, workers=1)
        ctl.shard_key = key
        ctl.shard(ownership.owns)
        ctl.queue.add(request("a"))
        runner = asyncio.create_task(ctl.run())
        await asyncio.sleep(5)
        assert out.sent == ["/first"] and len(refused) == 1
        assert ctl.errors == 1  # the refused write ended the reconcile, not retried
        assert ctl.queue.waiting == 0
        ctl.shutdown()
        await runner

    virtual.run(scenario())


def test_each_requests_shard_key_is_worked_out_once_however_many_handovers() -> None:
    """Every handover asks the queue to admit each parked request again; the key of each
    is worked out once (it was a fifth of a replica's CPU at 10,000 templates)."""
    ownership = Ownership("shop/a")
    asked: list[str] = []

    def counted(req: reconcile.Request) -> str:
        asked.append(req.name)
        return key(req)

    async def nothing(req: reconcile.Request) -> None:
        return None

    ctl = controller.Controller("propagation", nothing, workers=1)
    ctl.shard_key = counted
    ctl.shard(ownership.owns)
    for name in ("a", "b", "c"):
        ctl.queue.add(request(name))
    for _ in range(5):
        ctl.queue.unpark()
    ownership.keys.update({"shop/b"})
    assert ctl.queue.unpark() == 1 and request("b") not in ctl.queue.parked
    assert sorted(asked) == ["a", "b", "c"]


def test_a_sharded_queue_parks_what_it_does_not_own_and_takes_it_on_handover() -> None:
    async def scenario() -> None:
        ownership = Ownership("shop/a")
        seen: list[str] = []

        async def record(req: reconcile.Request) -> None:
            seen.append(req.name)
            assert kube.WRITING_FOR.get() == key(req)

        ctl = controller.Controller("propagation", record, workers=2)
        ctl.shard_key = key
        ctl.shard(ownership.owns)
        for name in ("a", "b", "c"):
            ctl.queue.add(request(name))
        runner = asyncio.create_task(ctl.run())
        await asyncio.sleep(1)
        assert seen == ["a"] and ctl.queue.parked == {request("b"), request("c")}
        assert ctl.keys_held() == 1
        ownership.keys.update({"shop/b"})
        assert ctl.queue.unpark() == 1
        await asyncio.sleep(1)
        assert sorted(seen) == ["a", "b"] and ctl.queue.parked == {request("c")}
        assert ctl.keys_held() == 2
        # A key queued while ours but handed over before a worker reached it: parked.
        ownership.keys.discard("shop/a")
        ctl.queue.admit = None
        ctl.queue.add(request("a"))
        await asyncio.sleep(1)
        assert sorted(seen) == ["a", "b"] and request("a") in ctl.queue.parked
        ctl.shutdown()
        await runner

    virtual.run(scenario())


def test_unsharded_controllers_behave_as_before() -> None:
    """No shard: every request is reconciled, with no key set for its writes."""

    async def scenario() -> None:
        seen: list[str | None] = []

        async def record(req: reconcile.Request) -> None:
            seen.append(kube.WRITING_FOR.get())

        ctl = controller.Controller("cluster-health", record, workers=1)
        ctl.queue.add(request("a"))
        runner = asyncio.create_task(ctl.run())
        await asyncio.sleep(1)
        assert seen == [None] and not ctl.queue.known and ctl.keys_held() == 0
        ctl.shutdown()
        await runner

    virtual.run(scenario())


def test_a_write_refused_while_the_shard_lapsed_is_kept_and_done_when_it_is_back() -> None:
    """Found by bench/scale_bench.py at load 8: a reconcile refused because the replica's
    shard round came late (the key stays this replica's) was dropped: its template was
    never propagated. It is parked now, and done at the next unpark."""

    async def scenario() -> None:
        ownership = Ownership("shop/a")
        lapse: list[str] = ["shard lease fcm-shard-0 not renewed in time"]
        out = Sent(kube.ShardedPermit(lambda k: lapse[0] if lapse else ownership.holds(k),
                                      leader_fence(valid=True)))

        async def reconcile_a(req: reconcile.Request) -> None:
            out.write("/copy")

        ctl = controller.Controller("propagation", reconcile_a, workers=1)
        ctl.shard_key = key
        ctl.shard(ownership.owns)
        ctl.queue.admit = None  # the lapse begins after the key was handed to a worker
        ctl.queue.add(request("a"))
        runner = asyncio.create_task(ctl.run())
        await asyncio.sleep(1)
        assert out.sent == [] and request("a") in ctl.queue.parked, "the refused key was lost"
        lapse.clear()
        assert ctl.queue.unpark() == 1  # the round after the lapse (peers' listeners)
        await asyncio.sleep(1)
        assert out.sent == ["/copy"]
        ctl.shutdown()
        await runner

    virtual.run(scenario())
