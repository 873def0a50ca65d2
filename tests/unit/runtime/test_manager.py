"""The manager's endpoints and its reaction to a lost election, without a cluster.

Readiness is served by the real aiohttp server on loopback; the hub's
availability is set the way its probe sets it. The election runs on an
in-memory Lease and virtual time (see test_leader.py).
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import AsyncIterator

import aiohttp
import pytest

from federation.commands import run as run_command
from federation.contexts import client as kube
from federation.contexts import clusters, kubeconfig
from federation.runtime import controller, leader, manager, reconcile
from tests.unit.contexts import probes as probes_
from tests.unit.runtime.test_leader import Leases, VirtualTime

pytestmark = pytest.mark.timeout(20)
in_session_loop = pytest.mark.asyncio(loop_scope="session")
"""Async fixtures run in the session's loop (pyproject); the tests using them must too."""


def cluster_set(hub_client: kube.ClusterClient | None = None) -> clusters.ClusterSet:
    hub = clusters.Cluster("hub", is_hub=True, is_member=False, client=hub_client)
    member = clusters.Cluster("member1", error="context 'member1' not found in kubeconfig")
    return clusters.ClusterSet([hub, member])


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


@pytest.fixture
async def probes() -> AsyncIterator[tuple[manager.Manager, str]]:
    """A manager's probe server on loopback, caches started, the hub not yet probed."""
    mgr = manager.Manager(cluster_set(), manager.ManagerSettings(
        health_probe_bind_address="127.0.0.1:0", metrics_bind_address="0"))
    await mgr._serve("health", "127.0.0.1:0", [("/readyz", mgr._readyz)])
    mgr.caches_started = True
    try:
        yield mgr, f"http://127.0.0.1:{mgr.ports['health']}/readyz"
    finally:
        await mgr.close()


def test_endpoints_listen_on_loopback_unless_told_otherwise() -> None:
    """Defaults (settings and flags) are 127.0.0.1; ':8080' is an explicit choice."""
    defaults = manager.ManagerSettings()
    for address in (defaults.metrics_bind_address, defaults.health_probe_bind_address):
        assert manager.parse_bind_address(address) in (("127.0.0.1", 8080),
                                                       ("127.0.0.1", 8081))
    flags = {p.name: p.default for p in run_command.run.params}
    assert flags["metrics_bind_address"] == "127.0.0.1:8080"
    assert flags["health_probe_bind_address"] == "127.0.0.1:8081"
    assert manager.is_loopback("127.0.0.1:8081") and manager.is_loopback("localhost:1")
    assert manager.is_loopback("[::1]:8081")
    for exposed in (":8081", "0.0.0.0:8081", "10.1.2.3:8081", "myhost:8081"):
        assert not manager.is_loopback(exposed)


@in_session_loop
async def test_readyz_follows_the_hubs_probe_both_ways(
        probes: tuple[manager.Manager, str]) -> None:
    """Not ready until the hub answers; not ready when it stops; ready when it returns."""
    mgr, url = probes
    hub = mgr.clusters.hub
    status, text = await get(url)
    assert status == 503 and "[-]hub-available failed: hub not probed yet" in text
    await probes_.settle(hub, probes_.result(True))
    status, text = await get(url)
    assert status == 200 and "[+]hub-available ok" in text
    await probes_.probe(hub, probes_.result(False, "GET /readyz: connection refused"))
    assert (await get(url))[0] == 200  # one failure is not an outage
    await probes_.settle(hub, probes_.result(False, "GET /readyz: connection refused"))
    status, text = await get(url)
    assert status == 503 and "hub unavailable: GET /readyz: connection refused" in text
    status, text = await get(url + "?format=json")
    assert status == 503 and '"hub-available": "hub unavailable' in text
    await probes_.probe(hub, probes_.result(True))
    assert (await get(url))[0] == 503  # one answer while it restarts is not a recovery
    await probes_.probe(hub, probes_.result(True))
    assert (await get(url))[0] == 200


@in_session_loop
async def test_causes_and_clusters_are_withheld_off_loopback(
        probes: tuple[manager.Manager, str]) -> None:
    """A probe server reachable from elsewhere says which checks fail, never why, and
    names no cluster (kube-apiserver's 'reason withheld')."""
    mgr, url = probes
    assert mgr.detail  # loopback: full detail for local users
    assert "cluster/member1" in (await get(url))[1]
    exposed = manager.Manager(cluster_set(), manager.ManagerSettings(
        health_probe_bind_address=":8081"))
    assert not exposed.detail
    mgr.detail = False  # the same server, as if bound to every interface
    await probes_.settle(mgr.clusters.hub,
                         probes_.result(False, "GET https://10.0.0.1:6443/readyz: refused"))
    for query in ("", "?format=json"):
        status, text = await get(url + query)
        assert status == 503 and "reason withheld" in text
        assert "10.0.0.1" not in text and "member1" not in text and "refused" not in text


@in_session_loop
async def test_a_lost_election_cancels_reconciles_in_flight_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Deposed while a reconcile waits: the reconcile is cancelled (not awaited for the
    30 s shutdown), every cluster client holds the revoked fence, and no Event.wait()
    coroutine is left un-awaited."""
    time, leases = VirtualTime(), Leases()
    hub_client = kube.ClusterClient(kubeconfig.Context(name="hub", server="http://127.0.0.1:9"))
    mgr = manager.Manager(cluster_set(hub_client), manager.ManagerSettings(
        health_probe_bind_address="0", metrics_bind_address="0", leader_elect=True,
        shutdown_timeout=30.0, cache_sync_timeout=1.0, identity="me"))
    elector = leader.LeaderElector(leases, mgr.settings.leader,
                                   "me", clock=time.clock, sleep=time.sleep)
    monkeypatch.setattr(mgr, "_make_elector", lambda: elector)
    reconciling, outcome = asyncio.Event(), []

    async def forever(request: reconcile.Request) -> reconcile.Result | None:
        reconciling.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        return None

    ctl = mgr.add(controller.Controller("slow", forever, workers=1))
    ctl.queue.add(reconcile.Request("hub", "ConfigMap", "ns", "x"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        running = asyncio.create_task(mgr.run())
        await asyncio.wait_for(reconciling.wait(), 5)
        assert hub_client.fence is elector.fence and elector.fence.valid
        leases.take_over("rival")
        started = asyncio.get_running_loop().time()
        await time.advance(mgr.settings.leader.retry_period)
        with pytest.raises(manager.LeadershipLost):
            await asyncio.wait_for(running, 5)
        assert asyncio.get_running_loop().time() - started < 2.0
        del running
        gc.collect()
    assert outcome == ["cancelled"]
    assert not elector.fence.valid and hub_client.fence is elector.fence
    never_awaited = [w for w in caught if "never awaited" in str(w.message)]
    assert never_awaited == []


@in_session_loop
async def test_close_is_safe_before_run_and_twice() -> None:
    """`fedctl run` closes the manager on every exit path, even when run() never started."""
    hub_client = kube.ClusterClient(kubeconfig.Context(name="hub", server="http://127.0.0.1:9"))
    mgr = manager.Manager(cluster_set(hub_client))
    with pytest.raises(kube.ClusterUnavailable):
        await hub_client.get(kube.NAMESPACES, "x")  # opens the session
    await mgr.close()
    await mgr.close()
    assert hub_client._session is not None and hub_client._session.closed


