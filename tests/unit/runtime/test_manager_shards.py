"""A sharded manager on virtual time: sharded controllers run on every replica (after the
claim wait, only their own keys), cluster-wide ones only on the leader."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from federation.contexts import client as kube
from federation.contexts import kubeconfig
from federation.runtime import controller, leader, manager, peers, reconcile, shards
from tests.unit.runtime import virtual
from tests.unit.runtime.test_manager import cluster_set
from tests.unit.runtime.test_peers import Hub, LeaseClient, clock

pytestmark = pytest.mark.timeout(30)

KEYS = [f"t{i}" for i in range(40)]
SETTINGS_CLAIM = leader.LeaderSettings().lease_duration


def object_key(request: reconcile.Request) -> str:
    return f"{request.namespace}/{request.name}"


def sharded_manager(hub: Hub, monkeypatch: pytest.MonkeyPatch, identity: str,
                    rival_leads: bool) -> tuple[manager.Manager, dict[str, list[str]]]:
    hub_client = kube.ClusterClient(kubeconfig.Context(name="hub", server="http://127.0.0.1:9"))
    mgr = manager.Manager(cluster_set(hub_client), manager.ManagerSettings(
        health_probe_bind_address="0", metrics_bind_address="0", leader_elect=True,
        cache_sync_timeout=1.0, identity=identity, shards=2))
    election = LeaseClient(hub)
    if rival_leads:
        hub.leases["federation-controller-manager"] = {
            "metadata": {"name": "federation-controller-manager", "resourceVersion": "1"},
            "spec": {"holderIdentity": "rival", "leaseDurationSeconds": 10_000}}
    elector = leader.LeaderElector(election, mgr.settings.leader, identity, clock=clock)
    monkeypatch.setattr(mgr, "_make_elector", lambda: elector)
    monkeypatch.setattr(mgr, "_make_peers", lambda: peers.Peers(
        LeaseClient(hub), mgr.settings.leader, 2, identity, clock=clock))
    done: dict[str, list[str]] = {"sharded": [], "leader-only": [], "keys": []}

    def recorder(name: str) -> reconcile.ReconcileFunc:
        async def record(request: reconcile.Request) -> None:
            done[name].append(request.name)
            done["keys"].append(str(kube.WRITING_FOR.get()))
        return record

    sharded = mgr.add(controller.Controller("sharded", recorder("sharded")))
    sharded.shard_key = object_key
    mgr.add(controller.Controller("leader-only", recorder("leader-only")))
    for ctl in mgr.controllers:
        for name in KEYS:
            ctl.queue.add(reconcile.Request("hub", "ConfigMap", "ns", name))
    return mgr, done


def test_every_replica_reconciles_its_own_keys_and_only_the_leader_the_rest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        hub = Hub()
        mgr, done = sharded_manager(hub, monkeypatch, "r1", rival_leads=True)
        running = asyncio.create_task(mgr.run())
        await asyncio.sleep(10)  # within the claim wait: nothing is ours yet
        assert done["sharded"] == [] and done["leader-only"] == []
        hub_client = mgr.clusters.hub.client
        assert hub_client is not None and isinstance(hub_client.fence, kube.ShardedPermit)
        await asyncio.sleep(12)
        assert sorted(done["sharded"]) == sorted(KEYS)  # the only live shard: every key
        assert done["keys"] == [f"ns/{n}" for n in done["sharded"]]
        assert done["leader-only"] == []  # a rival leads: cluster-wide duties are its
        assert mgr.peers is not None and mgr.peers.shard == "federation-controller-manager-shard-0"
        mgr.stop()
        await asyncio.wait_for(running, 40)
        released: Any = hub.leases["federation-controller-manager-shard-0"]["spec"]
        assert released["holderIdentity"] == ""

    virtual.run(scenario())


def test_two_replicas_split_the_keys_and_the_leader_runs_the_rest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        hub = Hub()
        first, done1 = sharded_manager(hub, monkeypatch, "r1", rival_leads=False)
        second, done2 = sharded_manager(hub, monkeypatch, "r2", rival_leads=False)
        tasks = [asyncio.create_task(m.run()) for m in (first, second)]
        await asyncio.sleep(25)
        assert sorted(done1["sharded"] + done2["sharded"]) == sorted(KEYS)
        assert done1["sharded"] and done2["sharded"]
        seed = first.peers.seed if first.peers else None
        assert seed is not None and first.peers and second.peers
        for done, member in ((done1, first.peers), (done2, second.peers)):
            assert all(shards.owner(seed, member.view.live, f"ns/{n}") == member.shard
                       for n in done["sharded"])
        assert sorted(done1["leader-only"] + done2["leader-only"]) == sorted(KEYS)
        assert not (done1["leader-only"] and done2["leader-only"])
        for m in (first, second):
            m.stop()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 40)

    virtual.run(scenario())


def test_a_deposed_leader_exits_and_gives_its_shard_up_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Leadership lost: the process exits (LeadershipLost), and its shard, still validly
    held, is released on the way so its keys move at the others' next round."""

    async def scenario() -> None:
        hub = Hub()
        mgr, _ = sharded_manager(hub, monkeypatch, "r1", rival_leads=False)
        running = asyncio.create_task(mgr.run())
        await asyncio.sleep(20)
        assert mgr.is_leader
        election = hub.leases["federation-controller-manager"]
        election["spec"]["holderIdentity"] = "rival"
        hub.version += 1
        election["metadata"]["resourceVersion"] = str(hub.version)
        with pytest.raises(manager.LeadershipLost):
            await asyncio.wait_for(running, 10)
        assert hub.leases["federation-controller-manager-shard-0"]["spec"][
            "holderIdentity"] == ""

    virtual.run(scenario())



def test_the_collector_is_held_and_the_claim_wait_runs_while_the_caches_sync(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold start with slow caches (12 s here): no collector pass over the caches while
    they list, everything frozen once synced; the shard is taken as the sync starts, so
    its claim wait (15 s) ends 3 s after the sync, not 15 s after it."""

    async def scenario() -> None:
        hub = Hub()
        mgr, done = sharded_manager(hub, monkeypatch, "r1", rival_leads=True)

        async def slow_sync() -> None:
            await asyncio.sleep(12)

        monkeypatch.setattr(mgr, "_sync", slow_sync)
        running = asyncio.create_task(mgr.run())
        await asyncio.sleep(11)
        assert mgr.heap.held and mgr.peers is not None and mgr.peers.shard is not None
        assert not done["sharded"]
        await asyncio.sleep(2)
        assert not mgr.heap.held and mgr.heap.passes == 1  # synced: frozen once
        assert not done["sharded"]  # synced, still in the claim wait
        await asyncio.sleep(3)  # claimed at 15 s (plus a round)
        assert sorted(done["sharded"]) == sorted(KEYS)
        assert not mgr.peers.lost.is_set() and not mgr.peers.permitted
        # A write through the manager's fence is what makes a later lapse fatal.
        token = kube.WRITING_FOR.set(object_key(reconcile.Request("hub", "ConfigMap", "ns",
                                                                   KEYS[0])))
        try:
            mgr.fence.check("hub", "POST", "/api/v1/namespaces/ns/configmaps")
        finally:
            kube.WRITING_FOR.reset(token)
        assert mgr.peers.permitted
        mgr.stop()
        await asyncio.wait_for(running, 40)

    virtual.run(scenario())


def test_a_sync_that_starves_the_shard_rounds_costs_a_claim_wait_not_the_replica(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The loop held for 12 s inside the sync (a 10,000-template list on two busy cores):
    the shard's renew deadline passes with nothing written, so the replica takes its
    own shard again with a new claim wait instead of exiting, then reconciles its keys."""

    async def scenario() -> None:
        hub = Hub()
        mgr, done = sharded_manager(hub, monkeypatch, "r1", rival_leads=True)

        async def starving_sync() -> None:
            await asyncio.sleep(1)  # the shard is taken meanwhile
            loop = asyncio.get_running_loop()
            # Every round is late: the lease client answers only once the sync is over.
            assert mgr.peers is not None
            client = mgr.peers.client
            get = client.get

            async def late_get(*args: Any, **kwargs: Any) -> Any:
                await asyncio.sleep(max(13 - loop.time(), 0))
                return await get(*args, **kwargs)

            monkeypatch.setattr(client, "get", late_get)
            await asyncio.sleep(12)
            monkeypatch.setattr(client, "get", get)

        monkeypatch.setattr(mgr, "_sync", starving_sync)
        running = asyncio.create_task(mgr.run())
        await asyncio.sleep(12)
        assert mgr.peers is not None
        taken = mgr.peers.shard
        await asyncio.sleep(3)
        assert not mgr.peers.lost.is_set() and not done["sharded"]
        assert mgr.peers.shard == taken  # its own Lease, taken again
        assert "before any write was permitted; taking a shard again" in caplog.text
        await asyncio.sleep(SETTINGS_CLAIM + 3)
        assert sorted(done["sharded"]) == sorted(KEYS)
        assert not mgr.peers.lost.is_set()
        lease = hub.leases[str(taken)]
        assert lease["spec"]["holderIdentity"] == "r1"
        mgr.stop()
        await asyncio.wait_for(running, 40)

    virtual.run(scenario())


def test_the_shard_is_taken_before_the_caches_start_listing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first shard round runs before any informer starts, so the claim wait does not
    queue behind the first lists' decoding; a hub that hangs holds the lists up for one
    retry period at most."""
    answer = LeaseClient.get

    async def scenario(hub_answers: bool) -> float:
        hub = Hub()
        mgr, _ = sharded_manager(hub, monkeypatch, "r1", rival_leads=True)
        engaged_at: list[tuple[float, str | None]] = []
        assert mgr.peers is None

        def engage(cluster: Any) -> None:
            assert mgr.peers is not None
            engaged_at.append((clock(), mgr.peers.shard))

        async def no_sync() -> None:
            await asyncio.sleep(1)

        monkeypatch.setattr(mgr, "_engage", engage)
        monkeypatch.setattr(mgr, "_sync", no_sync)
        if not hub_answers:
            async def hanging(*args: Any, **kwargs: Any) -> Any:
                await asyncio.sleep(60)
                return await answer(*args, **kwargs)

            monkeypatch.setattr(LeaseClient, "get", hanging)
        started = clock()
        running = asyncio.create_task(mgr.run())
        await asyncio.sleep(3)
        assert engaged_at
        if hub_answers:
            assert all(shard is not None for _, shard in engaged_at)
        else:
            assert all(shard is None for _, shard in engaged_at)
        mgr.stop()
        await asyncio.wait_for(running, 40)
        return engaged_at[0][0] - started

    assert virtual.run(scenario(True)) < 0.5
    waited = virtual.run(scenario(False))
    retry = leader.LeaderSettings().retry_period
    assert retry <= waited < retry + 0.5
