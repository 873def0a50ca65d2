"""``/metrics?name[]=...`` renders only the named series (what a poller such as the bench
asks for), and the whole exposition without it."""

from __future__ import annotations

import typing

import aiohttp
import prometheus_client
import pytest

from federation.contexts import clusters, kubeconfig
from federation.runtime import controller, manager, metrics

in_session_loop = pytest.mark.asyncio(loop_scope="session")


async def _scrape(port: int, path: str) -> str:
    async with aiohttp.ClientSession() as session, \
            session.get(f"http://127.0.0.1:{port}{path}") as response:
        assert response.status == 200
        return await response.text()


def _series(text: str) -> set[str]:
    return {line.split("{", 1)[0].split(" ", 1)[0] for line in text.splitlines()
            if line and not line.startswith("#")}


@in_session_loop
async def test_name_filter_renders_only_the_named_series() -> None:
    context = kubeconfig.Context(name="hub", server="http://127.0.0.1:9")
    mgr = manager.Manager(clusters.ClusterSet([clusters.Cluster("hub", is_hub=True,
                                                                context=context)]),
                          manager.ManagerSettings(metrics_bind_address="127.0.0.1:0"))

    async def reconcile(request: object) -> None:
        return None

    mgr.add(controller.Controller("demo", reconcile))
    await mgr._serve_metrics()
    try:
        port = mgr.ports["metrics"]
        everything = _series(await _scrape(port, "/metrics"))
        wanted = {"federation_workqueue_depth", "federation_workqueue_adds_total"}
        assert wanted < everything and len(everything) > len(wanted) + 5
        only = _series(await _scrape(
            port, "/metrics?name[]=federation_workqueue_depth"
                  "&name[]=federation_workqueue_adds_total"))
        assert only == wanted
    finally:
        await mgr.close()


class _CountingClusters:
    """A cluster set that counts how often a scrape reads its clusters."""

    def __init__(self) -> None:
        self.reads = 0

    @property
    def clusters(self) -> dict[str, clusters.Cluster]:
        self.reads += 1
        return {}


def test_a_scrape_by_name_reads_only_the_part_it_names() -> None:
    """Asked for the queue series only, the collector reads no cluster and no informer (the
    bench polls this several times a second); the whole exposition reads them all."""
    counting = _CountingClusters()
    registry = prometheus_client.CollectorRegistry()
    metrics.StateCollector(typing.cast(clusters.ClusterSet, counting), lambda: [],
                           lambda: True).register(registry)
    before = counting.reads
    text = prometheus_client.generate_latest(
        registry.restricted_registry(["federation_workqueue_depth", "federation_leader"])).decode()
    assert counting.reads == before
    assert "federation_leader 1.0" in text
    everything = prometheus_client.generate_latest(registry).decode()
    assert counting.reads == before + 2  # clusters and watches, once each
    assert "federation_cluster_available" in everything and "federation_leader" in everything
