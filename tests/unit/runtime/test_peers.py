"""Shard Leases on virtual time: replicas divide keys, never overlap, and hand over.

Every replica runs on one virtual-time loop against one in-memory hub of Leases, so a
crash is a cancelled task, a lease duration is an instant, and "no two writers" is
checked at every quarter second of the timeline.
"""

from __future__ import annotations

import asyncio
import collections
import copy
from typing import Any

import pytest

from federation.contexts import client as kube
from federation.runtime import leader, peers
from tests.unit.clients import Unserved
from tests.unit.runtime import virtual

pytestmark = pytest.mark.timeout(60)

SETTINGS = leader.LeaderSettings(name="fcm", namespace="ns")
KEYS = [f"shop/t{i}-deployment" for i in range(300)]


class Hub:
    """The hub's Leases in memory, with resourceVersion conflicts."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.down = False


class LeaseClient(Unserved):
    """One replica's Lease client on the shared :class:`Hub`; its permit is checked as
    each write is sent, as the HTTP client does."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.name = "hub"
        self.fence: kube.WritePermit | None = None
        self.down = False
        """This replica alone cannot reach the hub."""

    def _reach(self) -> None:
        if self.hub.down or self.down:
            raise kube.ClusterUnavailable("hub", "connection refused")

    async def get(self, resource: kube.Resource, name: str, namespace: str | None = None
                  ) -> dict[str, Any]:
        self._reach()
        await asyncio.sleep(0.01)
        if name not in self.hub.leases:
            raise kube.ApiError("hub", 404, "NotFound", "not found")
        return copy.deepcopy(self.hub.leases[name])

    async def create(self, resource: kube.Resource, body: dict[str, Any],
                     namespace: str | None = None) -> dict[str, Any]:
        self._reach()
        if self.fence is not None:
            self.fence.check("hub", "POST", "/leases")
        if body["metadata"]["name"] in self.hub.leases:
            raise kube.ApiError("hub", 409, "AlreadyExists", "exists")
        return self._store(body)

    async def replace(self, resource: kube.Resource, body: dict[str, Any],
                      subresource: str | None = None) -> dict[str, Any]:
        self._reach()
        if self.fence is not None:
            self.fence.check("hub", "PUT", "/leases")
        current = self.hub.leases[body["metadata"]["name"]]
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise kube.ApiError("hub", 409, "Conflict", "stale")
        return self._store(body)

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.hub.version += 1
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(self.hub.version)
        self.hub.leases[stored["metadata"]["name"]] = stored
        return copy.deepcopy(stored)


def clock() -> float:
    return asyncio.get_running_loop().time()


def replica(hub: Hub, name: str, shards: int = 3) -> tuple[peers.Peers, asyncio.Task[None]]:
    member = peers.Peers(LeaseClient(hub), SETTINGS, shards, name, clock=clock)
    return member, asyncio.create_task(member.run(), name=name)


def owners(members: list[peers.Peers]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = collections.defaultdict(list)
    for member in members:
        for key in KEYS:
            if member.owns(key):
                found[key].append(member.identity)
    return found


async def watch(members: list[peers.Peers], seconds: float) -> dict[str, list[str]]:
    """Advance ``seconds``, checking every 0.25 s that no key has two owners."""
    for _ in range(int(seconds * 4)):
        await asyncio.sleep(0.25)
        doubled = {k: v for k, v in owners(members).items() if len(v) > 1}
        assert not doubled, f"two writers at {clock():.2f}: {list(doubled.items())[:3]}"
    return owners(members)


def test_three_replicas_divide_the_keys_after_the_claim_wait() -> None:
    """Nothing is claimed before a lease duration; then every key has one owner and each
    replica holds 20-47% of 300."""

    async def scenario() -> None:
        hub = Hub()
        started = [replica(hub, f"r{i}") for i in range(3)]
        members = [m for m, _ in started]
        assert not await watch(members, SETTINGS.lease_duration - 1)
        found = await watch(members, 4)
        assert set(found) == set(KEYS) and all(len(v) == 1 for v in found.values())
        counts = collections.Counter(v[0] for v in found.values())
        assert all(60 <= counts[m.identity] <= 141 for m in members), counts
        assert {m.shard for m in members} == set(peers.shard_names("fcm", 3))
        assert len(hub.leases) == 4  # three shards and the seed
        for _, task in started:
            task.cancel()

    virtual.run(scenario())


def test_a_crashed_replica_hands_its_keys_over_within_the_lease_duration() -> None:
    """Killed (no release): its keys are nobody's until its lease expires, then the
    survivors' (only its keys move); never two owners on the way."""

    async def scenario() -> None:
        hub = Hub()
        started = [replica(hub, f"r{i}") for i in range(3)]
        members = [m for m, _ in started]
        before = await watch(members, SETTINGS.lease_duration + 4)
        started[1][1].cancel()  # SIGKILL
        killed = members[1].identity
        # Frozen in place: its own permit lapses at its renew deadline, whatever it thinks.
        after = await watch(members, SETTINGS.lease_duration + 2 * SETTINGS.retry_period + 1)
        assert set(after) == set(KEYS)
        moved = {k for k in KEYS if before[k] != after[k]}
        assert moved == {k for k in KEYS if before[k] == [killed]}
        assert all(killed not in v for v in after.values())
        for _, task in started:
            task.cancel()

    virtual.run(scenario())


def test_a_joining_replica_waits_and_takes_at_most_45_percent() -> None:
    """2 -> 3: the old owners release the moving keys before the new one claims them."""

    async def scenario() -> None:
        hub = Hub()
        started = [replica(hub, f"r{i}") for i in range(2)]
        members = [m for m, _ in started]
        before = await watch(members, SETTINGS.lease_duration + 4)
        assert set(before) == set(KEYS)
        third, task = replica(hub, "r2")
        members.append(third)
        after = await watch(members, SETTINGS.lease_duration + 4)
        assert set(after) == set(KEYS)
        moved = {k for k in KEYS if before[k] != after[k]}
        assert 0 < len(moved) <= 0.45 * len(KEYS)
        assert all(after[k] == ["r2"] for k in moved)
        for _, t in [*started, (third, task)]:
            t.cancel()

    virtual.run(scenario())


def test_a_replica_that_cannot_reach_the_hub_stops_writing_and_exits() -> None:
    """Renewals failing after a write was permitted: refused from the renew deadline on
    (before anyone may take the shard over at the lease duration), and :attr:`lost` is
    set."""

    async def scenario() -> None:
        hub = Hub()
        member, task = replica(hub, "r0", shards=1)
        await asyncio.sleep(SETTINGS.lease_duration + 3)
        assert all(member.owns(k) for k in KEYS)
        assert member.permit(KEYS[0]) is None  # a write sent: a lapse must end the replica
        renewed = member.view.valid_until - SETTINGS.renew_deadline
        hub.down = True
        await asyncio.sleep(renewed + SETTINGS.renew_deadline - clock() - 0.05)
        assert member.owns(KEYS[0])
        await asyncio.sleep(0.1)
        assert not member.owns(KEYS[0]) and "renew" in str(member.holds(KEYS[0]))
        await asyncio.wait_for(task, 5)
        assert member.lost.is_set()

    virtual.run(scenario())


def test_a_fourth_replica_stands_by_and_takes_a_dead_shard_over() -> None:
    """More replicas than shards: the extra holds nothing, then takes the expired shard."""

    async def scenario() -> None:
        hub = Hub()
        started = [replica(hub, f"r{i}") for i in range(3)]
        await asyncio.sleep(1)
        spare, spare_task = replica(hub, "spare")
        members = [m for m, _ in started] + [spare]
        await watch(members, SETTINGS.lease_duration + 4)
        assert spare.shard is None and "standby" in str(spare.holds(KEYS[0]))
        started[0][1].cancel()
        await watch(members, 2 * SETTINGS.lease_duration + 6)
        assert spare.shard == members[0].shard
        assert any(spare.owns(k) for k in KEYS)
        for _, t in [*started, (spare, spare_task)]:
            t.cancel()

    virtual.run(scenario())


def test_release_hands_over_at_the_next_round() -> None:
    """A clean shutdown revokes first, then clears the Lease: others take over at once."""

    async def scenario() -> None:
        hub = Hub()
        started = [replica(hub, f"r{i}") for i in range(2)]
        members = [m for m, _ in started]
        await watch(members, SETTINGS.lease_duration + 4)
        started[0][1].cancel()
        await members[0].release()
        assert not any(members[0].owns(k) for k in KEYS)
        after = await watch(members, 2 * SETTINGS.retry_period + 1)
        assert all(v == ["r1"] for v in after.values()) and len(after) == len(KEYS)
        started[1][1].cancel()

    virtual.run(scenario())


def test_an_unusable_seed_is_refused_by_name() -> None:
    """A seed Lease whose annotation is not 16 hex bytes: no shard is taken, nothing owned."""

    async def scenario() -> None:
        hub = Hub()
        hub.leases["fcm-shard-seed"] = {"metadata": {
            "name": "fcm-shard-seed", "resourceVersion": "1",
            "annotations": {peers.SEED_ANNOTATION: "short"}}, "spec": {}}
        member, task = replica(hub, "r0")
        await asyncio.sleep(30)
        assert member.seed is None and member.shard is None and not member.owns(KEYS[0])
        task.cancel()

    virtual.run(scenario())


def test_shard_count_is_bounded() -> None:
    with pytest.raises(ValueError, match="between 1 and 16"):
        peers.Peers(LeaseClient(Hub()), SETTINGS, 17, "r")


def test_a_round_that_ends_after_the_permit_lapsed_queues_what_waited() -> None:
    """Found by bench/scale_bench.py at load 8: a shard round slower than the renew deadline
    (it still succeeds) leaves a moment where this replica owns nothing; the reconciles
    refused then were parked, and the live set did not change, so nothing queued them
    again: 116 of 500 templates were never propagated. The round after the lapse must call
    the listeners (the manager unparks)."""

    async def scenario() -> None:
        hub = Hub()
        member, task = replica(hub, "r0", shards=1)
        calls: list[float] = []
        member.listeners.append(lambda: calls.append(clock()))
        await asyncio.sleep(SETTINGS.lease_duration + 3)
        assert all(member.owns(k) for k in KEYS)
        before = len(calls)
        slow_get = LeaseClient.get

        async def get(self: LeaseClient, resource: kube.Resource, name: str,
                      namespace: str | None = None) -> dict[str, Any]:
            await asyncio.sleep(2.2)  # a round (get, put, get) 4.4 s; rounds 6.4 s apart
            return await slow_get(self, resource, name, namespace)

        LeaseClient.get = get  # type: ignore[method-assign]
        try:
            lapsed = False
            for _ in range(80):
                await asyncio.sleep(0.25)
                lapsed = lapsed or not member.owns(KEYS[0])
        finally:
            LeaseClient.get = slow_get  # type: ignore[method-assign]
        await asyncio.sleep(5)
        assert lapsed, "the slow rounds never let the permit lapse: the test proves nothing"
        assert not member.lost.is_set() and not task.done()
        assert member.owns(KEYS[0])
        assert len(calls) > before, "renewed after a lapse without telling the listeners"
        task.cancel()

    virtual.run(scenario())


def test_a_replica_that_lapses_before_any_write_takes_its_own_shard_again() -> None:
    """Cut off from the hub during its claim wait for longer than a lease (its caches'
    first lists starving its rounds): it had written nothing, so it neither exits nor
    leaves its shard's keys unowned; it takes its own Lease again with a new claim wait,
    and no key has two owners at any quarter second on the way."""

    async def scenario() -> None:
        hub = Hub()
        started = [replica(hub, f"r{i}") for i in range(3)]
        members = [m for m, _ in started]
        await watch(members, 2)
        cut = members[1]
        taken = cut.shard
        assert taken is not None and not cut.permitted
        assert isinstance(cut.client, LeaseClient)
        cut.client.down = True
        during = await watch(members, SETTINGS.lease_duration + 6)
        assert not cut.lost.is_set() and cut.shard is None
        assert all(v != [cut.identity] for v in during.values())  # it claimed nothing
        cut.client.down = False
        await watch(members, SETTINGS.retry_period + 1)
        assert cut.shard == taken and not cut.lost.is_set()
        assert not any(cut.owns(k) for k in KEYS)  # a new claim wait
        after = await watch(members, SETTINGS.lease_duration + 1)
        assert set(after) == set(KEYS) and all(len(v) == 1 for v in after.values())
        assert hub.leases[taken]["spec"]["holderIdentity"] == cut.identity
        mine = next(k for k, v in after.items() if v == [cut.identity])
        assert cut.permit(mine) is None and cut.permitted
        for _, task in started:
            task.cancel()

    virtual.run(scenario())
