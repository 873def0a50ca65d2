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



def test_the_collector_is_held_while_the_caches_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold start with slow caches (12 s here): no collector pass over the caches while
    they list, everything frozen once synced; the shard is taken after the sync (a shard
    round competing with the lists of a 10,000-template fleet missed its renew deadline)."""

    async def scenario() -> None:
        hub = Hub()
        mgr, done = sharded_manager(hub, monkeypatch, "r1", rival_leads=True)

        async def slow_sync() -> None:
            await asyncio.sleep(12)

        monkeypatch.setattr(mgr, "_sync", slow_sync)
        running = asyncio.create_task(mgr.run())
        await asyncio.sleep(11)
        assert mgr.heap.held and mgr.peers is not None and mgr.peers.shard is None
        await asyncio.sleep(2)
        assert not mgr.heap.held and mgr.heap.passes == 1  # synced: frozen once
        await asyncio.sleep(17)  # the shard taken at 12 s, claimed 15 s later
        assert sorted(done["sharded"]) == sorted(KEYS)
        mgr.stop()
        await asyncio.wait_for(running, 40)

    virtual.run(scenario())
