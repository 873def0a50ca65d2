"""A stop (SIGTERM) ends in bounded time, on virtual time: a reconcile that waits on
something that will not come in time is cancelled after ``drain_timeout``, and a hub that
does not answer the Lease releases holds the stop ``release_timeout`` at most.

The first scenario is what held a control plane 26-30 s in tests/e2e/test_agent_ha.py: the
new leader's reconcile was writing to a pull member whose agent had just left, and such a
write waits up to ``PullSettings.write_timeout`` (30 s) for the agent to come back; the
manager waited for it as long as ``shutdown_timeout`` allowed (30 s), so the kubelet's
SIGKILL (or the test's) could come before the Leases were released.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from federation.contexts import client as kube
from federation.contexts import kubeconfig
from federation.runtime import controller, leader, manager, peers, reconcile
from tests.unit.runtime import virtual
from tests.unit.runtime.test_manager import cluster_set
from tests.unit.runtime.test_peers import Hub, LeaseClient, clock

pytestmark = pytest.mark.timeout(30)

SHARD_LEASE = "federation-controller-manager-shard-0"
LEADER_LEASE = "federation-controller-manager"
CLAIMED = 25.0
"""Virtual seconds after start by which a lone replica leads and holds its shard (the
claim wait is one lease duration, 15 s)."""


class SilentHub(LeaseClient):
    """A Lease client whose hub stops answering writes once ``silent`` (a hub partitioned
    away: the request hangs until the client gives up)."""

    silent = False

    async def replace(self, resource: kube.Resource, body: dict[str, Any],
                      subresource: str | None = None) -> dict[str, Any]:
        if self.silent:
            await asyncio.Event().wait()
        return await super().replace(resource, body, subresource)


def lone_replica(hub: Hub, monkeypatch: pytest.MonkeyPatch,
                 reconciler: reconcile.ReconcileFunc) -> tuple[manager.Manager, list[SilentHub]]:
    """One sharded replica (2 shards, alone: it leads and holds shard 0) whose sharded
    controller reconciles with ``reconciler``; its two Lease clients."""
    hub_client = kube.ClusterClient(kubeconfig.Context(name="hub", server="http://127.0.0.1:9"))
    mgr = manager.Manager(cluster_set(hub_client), manager.ManagerSettings(
        health_probe_bind_address="0", metrics_bind_address="0", leader_elect=True,
        cache_sync_timeout=1.0, identity="r1", shards=2))
    clients = [SilentHub(hub), SilentHub(hub)]
    elector = leader.LeaderElector(clients[0], mgr.settings.leader, "r1", clock=clock)
    monkeypatch.setattr(mgr, "_make_elector", lambda: elector)
    monkeypatch.setattr(mgr, "_make_peers", lambda: peers.Peers(
        clients[1], mgr.settings.leader, 2, "r1", clock=clock))
    ctl = mgr.add(controller.Controller("sharded", reconciler, workers=2))
    ctl.shard_key = lambda request: f"{request.namespace}/{request.name}"
    ctl.queue.add(reconcile.Request("hub", "Deployment", "ns", "moved"))
    return mgr, clients


def holder(hub: Hub, lease: str) -> str:
    return str(hub.leases[lease]["spec"]["holderIdentity"])


def test_a_reconcile_waiting_for_an_absent_agent_is_cancelled_and_the_leases_released(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reconcile in hand waits forever (a pull write whose agent left); SIGTERM: it is
    cancelled after the drain, both Leases are cleared, and the stop takes the drain time,
    not the 30 s shutdown timeout."""
    outcome: list[str] = []
    waiting = asyncio.Event()

    async def writes_to_an_absent_agent(request: reconcile.Request) -> None:
        waiting.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise

    async def scenario() -> float:
        hub = Hub()
        mgr, _ = lone_replica(hub, monkeypatch, writes_to_an_absent_agent)
        running = asyncio.create_task(mgr.run())
        await asyncio.sleep(CLAIMED)
        assert waiting.is_set() and holder(hub, SHARD_LEASE) == holder(hub, LEADER_LEASE) == "r1"
        stopped = clock()
        mgr.stop()
        await asyncio.wait_for(running, 60)
        assert holder(hub, SHARD_LEASE) == holder(hub, LEADER_LEASE) == ""
        return clock() - stopped

    took = virtual.run(scenario())
    assert outcome == ["cancelled"]
    drain = manager.ManagerSettings().drain_timeout
    assert drain <= took < drain + 1.0, took


async def idle(request: reconcile.Request) -> None:
    """A reconcile with nothing to do."""
    return None


def test_a_stop_with_nothing_in_hand_releases_the_leases_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> float:
        hub = Hub()
        mgr, _ = lone_replica(hub, monkeypatch, idle)
        running = asyncio.create_task(mgr.run())
        await asyncio.sleep(CLAIMED)
        stopped = clock()
        mgr.stop()
        await asyncio.wait_for(running, 60)
        assert holder(hub, SHARD_LEASE) == holder(hub, LEADER_LEASE) == ""
        return clock() - stopped

    assert virtual.run(scenario()) < 0.5


def test_a_hub_that_does_not_answer_the_releases_holds_the_stop_release_timeout_at_most(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Both releases hang (the hub is partitioned away as SIGTERM comes): the stop ends
    ``release_timeout`` later, the Leases left to expire, the permit revoked all the same."""
    async def scenario() -> float:
        hub = Hub()
        mgr, clients = lone_replica(hub, monkeypatch, idle)
        running = asyncio.create_task(mgr.run())
        await asyncio.sleep(CLAIMED)
        for client in clients:
            client.silent = True
        stopped = clock()
        mgr.stop()
        await asyncio.wait_for(running, 60)
        assert holder(hub, SHARD_LEASE) == holder(hub, LEADER_LEASE) == "r1"  # to expire
        assert mgr.fence is not None
        for key in (None, "ns/moved"):  # the leader's duties, and a key of its shard
            token = kube.WRITING_FOR.set(key)
            try:
                with pytest.raises(kube.WriteRefused):
                    mgr.fence.check("member1", "PUT", "/apis/apps/v1/deployments/x")
            finally:
                kube.WRITING_FOR.reset(token)
        return clock() - stopped

    took = virtual.run(scenario())
    release = manager.ManagerSettings().release_timeout
    assert release <= took < release + 1.0, took
