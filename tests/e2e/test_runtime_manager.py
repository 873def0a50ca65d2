"""The manager on the real fleet: hub + 3 members, a test controller, a member outage."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from federation.contexts import cache, clusters, health, kubeconfig
from federation.contexts import client as kube
from federation.runtime import controller, manager, reconcile
from federation.runtime.reconcile import Request
from tests.conftest import TestFleet

NAMESPACE = f"rt-manager-{uuid.uuid4().hex[:6]}"  # fresh per run: no leftovers

# Async fixtures run in the session's loop (pyproject); the tests must share it.
pytestmark = pytest.mark.asyncio(loop_scope="session")


class Recorder:
    """A reconciler that records when each request arrived and lets tests wait for one."""

    def __init__(self) -> None:
        self.seen: dict[Request, float] = {}
        self.changed = asyncio.Condition()

    async def reconcile(self, request: reconcile.Request) -> reconcile.Result | None:
        async with self.changed:
            self.seen[request] = time.monotonic()
            self.changed.notify_all()
        return None

    async def wait_for(self, request: Request, after: float,
                       timeout: float = 10.0) -> float:
        """The time ``request`` was reconciled at or after ``after``."""
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(
                lambda: self.seen.get(request, -1.0) >= after), timeout)
            return self.seen[request]


def configmap(name: str, data: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NAMESPACE}, "data": data or {"k": "v"}}


def request(cluster: str, name: str) -> reconcile.Request:
    return reconcile.Request(cluster, "ConfigMap", NAMESPACE, name)


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def ensure_namespace(cluster_set: clusters.ClusterSet, name: str) -> None:
    for cluster in cluster_set.engaged:
        assert cluster.client is not None
        try:
            await cluster.client.create(kube.NAMESPACES, {"metadata": {"name": name}})
        except kube.ApiError as exc:
            assert exc.status == 409


@pytest.fixture
async def running(fleet: TestFleet) -> AsyncIterator[tuple[manager.Manager, Recorder]]:
    config = kubeconfig.load(fleet.kubeconfig)
    settings = clusters.ClusterSettings(
        cache=cache.CacheSettings(backoff_max=4.0), health=health.HealthSettings(period=1.0))
    cluster_set = clusters.ClusterSet.from_kubeconfig(config, hub_context="hub",
                                                      settings=settings)
    await ensure_namespace(cluster_set, NAMESPACE)
    mgr = manager.Manager(cluster_set, manager.ManagerSettings(
        metrics_bind_address="127.0.0.1:0", health_probe_bind_address="127.0.0.1:0",
        cache_sync_timeout=10.0, shutdown_timeout=10.0))
    recorder = Recorder()
    mgr.add(controller.Controller("recorder", recorder, workers=4)
            .watch(kube.CONFIGMAPS, clusters="members"))
    task = asyncio.create_task(mgr.run())
    await asyncio.wait_for(mgr.started.wait(), 30)
    await asyncio.sleep(0.5)  # let the controller workers start
    try:
        yield mgr, recorder
    finally:
        mgr.stop()
        await asyncio.wait_for(task, 30)


async def kubectl(fleet: TestFleet, context: str, *args: str) -> float:
    """Run kubectl off the event loop; the monotonic time it returned."""
    await asyncio.to_thread(fleet.kubectl, context, *args)
    return time.monotonic()


def metric(text: str, name: str, **labels: str) -> float | None:
    wanted = name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
    for line in text.splitlines():
        if line.startswith(name + "{"):
            key, _, value = line.rpartition(" ")
            parts = sorted(key[len(name) + 1:-1].split(","))
            if name + "{" + ",".join(parts) + "}" == wanted:
                return float(value)
    return None


async def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.1)


@pytest.mark.timeout(240)
async def test_member_outage_leaves_others_flowing_and_member_catches_up(
        fleet: TestFleet, running: tuple[manager.Manager, Recorder]) -> None:
    """kubectl changes reach reconcile within 1 s; a stopped member is reported, refuses
    writes and, once started, relists and catches up while the others keep flowing."""
    mgr, recorder = running
    health = f"http://127.0.0.1:{mgr.ports['health']}"
    metrics_url = f"http://127.0.0.1:{mgr.ports['metrics']}/metrics"
    status, body = await asyncio.to_thread(http_get, health + "/readyz")
    assert status == 200 and "[+]cluster/member2 ok" in body

    # 1. A change made with kubectl in member2 reaches reconcile within a second.
    start = time.monotonic()
    done = await kubectl(fleet, "member2", "-n", NAMESPACE, "create", "configmap", "probe-1",
                         "--from-literal=a=1")
    reconciled = await recorder.wait_for(request("member2", "probe-1"), start)
    assert reconciled - done < 1.0, f"reconciled {reconciled - done:.3f}s after kubectl"

    # 2. member2 goes down: it is marked unavailable; the others keep reconciling.
    await asyncio.to_thread(fleet.stop, "member2")
    member2 = mgr.clusters.get("member2")
    await wait_until(lambda: member2.available is False, 15, "member2 unavailable")
    informer2 = member2.cache.informers[kube.CONFIGMAPS] if member2.cache else None
    assert informer2 is not None
    await wait_until(lambda: informer2.state == "backoff", 15, "member2 watch in backoff")
    for name in ("member1", "member3"):
        start = time.monotonic()
        await mgr.client.cluster(name).create(configmap(f"during-outage-{name}"))
        reconciled = await recorder.wait_for(request(name, f"during-outage-{name}"), start)
        assert reconciled - start < 1.0

    status, body = await asyncio.to_thread(http_get, health + "/readyz")
    assert status == 200  # members do not fail readiness
    assert "[-]cluster/member2 unavailable" in body
    _, report = await asyncio.to_thread(http_get, health + "/readyz?format=json")
    assert json.loads(report)["clusters"]["member2"]["state"] == "unavailable"
    _, text = await asyncio.to_thread(http_get, metrics_url)
    assert metric(text, "federation_cluster_available", cluster="member2") == 0.0
    assert metric(text, "federation_cluster_available", cluster="member1") == 1.0
    assert metric(text, "federation_watch_state", cluster="member2", resource="configmaps",
                  state="backoff") == 1.0
    assert (metric(text, "federation_reconcile_total", controller="recorder",
                   cluster="member1", result="success") or 0) >= 1

    # 3. Writes to member2 fail loudly and retryably; member1 still takes its own.
    with pytest.raises(kube.ClusterUnavailable) as single:
        await mgr.client.cluster("member2").create(configmap("never"))
    assert single.value.retryable and "write not done" in str(single.value)
    await mgr.client.cluster("member1").create(configmap("beside-outage"))
    with pytest.raises(kube.ClusterUnavailable):
        await mgr.client.get(kube.CONFIGMAPS, "probe-1", NAMESPACE, cluster="member2")
    listing = await mgr.client.list(kube.CONFIGMAPS, NAMESPACE)
    assert set(listing.errors) == {"member2"} and "member1" in listing.items

    # 4. member2 comes back: its cache relists and catches up with changes made meanwhile.
    relists_before = informer2.relists
    await asyncio.to_thread(fleet.start, "member2")
    start = time.monotonic()
    await kubectl(fleet, "member2", "-n", NAMESPACE, "delete", "configmap", "probe-1")
    await kubectl(fleet, "member2", "-n", NAMESPACE, "create", "configmap", "probe-2",
                  "--from-literal=b=2")
    await recorder.wait_for(request("member2", "probe-2"), start, timeout=30)
    await recorder.wait_for(request("member2", "probe-1"), start, timeout=30)
    await wait_until(lambda: informer2.state == "watching" and member2.available is True,
                     30, "member2 watching again")
    assert informer2.store.get(NAMESPACE, "probe-1") is None
    assert informer2.store.get(NAMESPACE, "probe-2") is not None
    assert informer2.relists > relists_before, "member2's cache did not relist"
    await mgr.client.cluster("member2").create(configmap("after-recovery"))
    found = await mgr.client.get(kube.CONFIGMAPS, "probe-2", NAMESPACE, cluster="member2")
    assert found is not None and found["data"] == {"b": "2"}
    for name in ("beside-outage", "after-recovery", "during-outage-member1"):
        for cluster in ("member1", "member2", "member3"):
            client = mgr.clusters.get(cluster).client
            assert client is not None
            with contextlib.suppress(kube.ApiError):
                await client.delete(kube.CONFIGMAPS, name, NAMESPACE)


@contextlib.asynccontextmanager
async def hub_only_manager(fleet: TestFleet, **settings: Any
                           ) -> AsyncIterator[manager.Manager]:
    """A manager on the hub alone with the default probe timing (what `fedctl run` uses)."""
    config = kubeconfig.load(fleet.kubeconfig)
    cluster_set = clusters.ClusterSet.from_kubeconfig(config, hub_context="hub", contexts=[])
    mgr = manager.Manager(cluster_set, manager.ManagerSettings(
        metrics_bind_address="127.0.0.1:0", health_probe_bind_address="127.0.0.1:0",
        cache_sync_timeout=10.0, shutdown_timeout=10.0, **settings))
    mgr.cache(kube.NAMESPACES, "hub")
    task = asyncio.create_task(mgr.run())
    await asyncio.wait_for(mgr.started.wait(), 30)
    try:
        yield mgr
    finally:
        mgr.stop()
        await asyncio.wait_for(task, 30)


async def wait_for_status(url: str, ok: bool, timeout: float) -> tuple[float, str]:
    """Seconds until GET url answers 200 (ok) or anything else (not ok), and the body."""
    started = time.monotonic()
    while True:
        status, body = await asyncio.to_thread(http_get, url)
        if (status == 200) == ok:
            return time.monotonic() - started, body
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{url} still {status} after {timeout}s: {body}")
        await asyncio.sleep(0.2)


@pytest.mark.timeout(240)
async def test_readyz_fails_within_10s_of_the_hub_stopping_and_recovers(
        fleet: TestFleet) -> None:
    """Hub API server stopped: /readyz is not 200 within 10 s (default probe timing);
    started again: 200."""
    async with hub_only_manager(fleet) as mgr:
        readyz = f"http://127.0.0.1:{mgr.ports['health']}/readyz"
        await wait_for_status(readyz, ok=True, timeout=15)
        # Timed from the SIGTERM: the API server takes a while to exit (it drains its
        # watches) but fails its own /readyz at once, so it is "stopping" from then on.
        stop = asyncio.create_task(asyncio.to_thread(fleet.stop, "hub"))
        took, body = await wait_for_status(readyz, ok=False, timeout=10)
        assert "[-]hub-available failed: hub unavailable" in body
        stopping = time.monotonic()
        await stop
        print(f"/readyz not ready {took:.1f}s after `stop hub` began; the hub took "
              f"{took + time.monotonic() - stopping:.1f}s to stop")
        await asyncio.to_thread(fleet.start, "hub")
        took, body = await wait_for_status(readyz, ok=True, timeout=15)
        assert "[+]hub-available ok" in body
        print(f"/readyz ready {took:.1f}s after the hub answered again")


async def service_account_token(client: kube.ObjectClient, namespace: str, name: str) -> str:
    """A token for a ServiceAccount from the TokenRequest API (no controller needed)."""
    answer = await client.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"expirationSeconds": 600}})
    token = answer["status"]["token"]
    assert isinstance(token, str)
    return token


async def scrape(url: str, token: str | None) -> tuple[int, str]:
    """GET over TLS without verifying (the certificate is self-signed, made at start)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with aiohttp.ClientSession() as session, \
            session.get(url, headers=headers, ssl=False) as response:
        return response.status, await response.text()


@pytest.mark.timeout(120)
async def test_secure_metrics_authorize_by_hub_rbac(fleet: TestFleet) -> None:
    """--metrics-secure on the real hub: a ServiceAccount bound to a ClusterRole allowing
    get on /metrics gets 200; one without it 403; no token or a bad token 401."""
    suffix = uuid.uuid4().hex[:6]
    namespace, role = f"rt-metrics-{suffix}", f"rt-metrics-reader-{suffix}"
    fleet.kubectl("hub", "create", "namespace", namespace)
    try:
        for account in ("scraper", "nobody"):
            fleet.kubectl("hub", "-n", namespace, "create", "serviceaccount", account)
        fleet.kubectl("hub", "create", "clusterrole", role, "--verb=get",
                      "--non-resource-url=/metrics")
        fleet.kubectl("hub", "create", "clusterrolebinding", role, f"--clusterrole={role}",
                      f"--serviceaccount={namespace}:scraper")
        async with hub_only_manager(fleet, metrics_secure=True) as mgr:
            hub = mgr.clusters.hub.client
            assert hub is not None
            allowed = await service_account_token(hub, namespace, "scraper")
            denied = await service_account_token(hub, namespace, "nobody")
            url = f"https://127.0.0.1:{mgr.ports['metrics']}/metrics"
            status, text = await scrape(url, allowed)
            assert status == 200 and "federation_cluster_available" in text
            status, text = await scrape(url, denied)
            assert status == 403 and f"system:serviceaccount:{namespace}:nobody" in text
            assert (await scrape(url, None))[0] == 401
            assert (await scrape(url, allowed[:-4] + "AAAA"))[0] == 401
            report = url.replace("/metrics", "/debug/clusters")
            assert (await scrape(report, allowed))[0] == 403  # only /metrics was granted
    finally:
        fleet.kubectl("hub", "delete", "clusterrolebinding,clusterrole", role, check=False)
        fleet.kubectl("hub", "-n", namespace, "delete", "serviceaccounts", "--all",
                      check=False)
        fleet.kubectl("hub", "delete", "namespace", namespace, "--wait=false", check=False)
