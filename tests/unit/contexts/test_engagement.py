"""Engagement: one object and one cancel scope per engaged cluster; leaving is one call."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from federation.contexts import client as kube
from federation.contexts import clusters, kubeconfig
from federation.contexts.engagement import Engagement
from tests.unit.clients import Unserved


def config(*names: str, server: str = "https://127.0.0.1:1") -> kubeconfig.KubeConfig:
    document: dict[str, Any] = {
        "current-context": names[0],
        "clusters": [{"name": n, "cluster": {"server": server}} for n in names],
        "users": [{"name": n, "user": {"token": f"t-{n}"}} for n in names],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in names],
    }
    return kubeconfig.merge([(Path("test"), document)])


def distinct(*names: str, first: int = 1) -> kubeconfig.KubeConfig:
    document: dict[str, Any] = {
        "current-context": names[0],
        "clusters": [{"name": n, "cluster": {"server": f"https://127.0.0.{i + first}:1"}}
                     for i, n in enumerate(names)],
        "users": [{"name": n, "user": {"token": f"t-{n}"}} for n in names],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in names],
    }
    return kubeconfig.merge([(Path("test"), document)])


class Hanging(Unserved):
    """A client whose every call hangs until cancelled; records close()."""

    name = "edge"

    def __init__(self) -> None:
        self.closed = 0
        self.calls: list[str] = []

    async def request_raw(self, path: str, **_: Any) -> bytes:
        self.calls.append(path)
        await asyncio.sleep(3600)
        return b""

    async def list(self, resource: kube.Resource, namespace: str | None = None,
                   **_: Any) -> dict[str, Any]:
        self.calls.append(f"list {resource.plural}")
        await asyncio.sleep(3600)
        return {}

    async def close(self) -> None:
        self.closed += 1


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.timeout(30)
async def test_leaving_cancels_every_task_and_closes_the_client() -> None:
    """Engaged: prober, two informers and a controller's per-cluster task run; leave():
    all of them are done, the informers stopped, the client closed once; the engagement
    refuses new tasks afterwards."""
    client = Hanging()
    hub = clusters.Cluster("hub", is_hub=True, is_member=False)
    edge = clusters.Cluster("edge", client=client)
    edge.joined = True
    cluster_set = clusters.ClusterSet([hub, edge])
    left: list[str] = []
    cluster_set.on_leave(left.append)
    engagement = edge.engagement
    assert engagement is not None and edge.cache is not None
    informers = [edge.cache.informer(kube.CONFIGMAPS), edge.cache.informer(kube.NAMESPACES)]
    engagement.start()
    extra = engagement.spawn(asyncio.sleep(3600), "a controller's task of edge")
    await settle()
    assert {t.get_name() for t in engagement.tasks} == {"health probe of edge",
                                                        "a controller's task of edge"}
    assert {"/readyz", "list configmaps", "list namespaces"} <= set(client.calls)
    assert {i.state for i in informers} == {"listing"}
    prober = next(t for t in engagement.tasks if t.get_name() == "health probe of edge")

    await cluster_set.leave("edge")

    assert prober.done() and extra.done() and engagement.tasks == []
    assert {i.state for i in informers} == {"stopped"}
    assert client.closed == 1 and left == ["edge"] and "edge" not in cluster_set.clusters
    coroutine = asyncio.sleep(1)
    with pytest.raises(RuntimeError, match="has left"):
        engagement.spawn(coroutine, "too late")
    await engagement.stop()  # again: nothing more happens
    assert client.closed == 1


async def test_a_shared_client_is_closed_by_its_owner_only() -> None:
    """A member context pointing at the hub's server shares the hub's pool: leaving the
    member does not close it; closing the set closes it once."""
    cluster_set = clusters.ClusterSet.from_kubeconfig(config("hub", "alias"),
                                                      hub_context="hub")
    alias = cluster_set.clusters["alias"]
    assert alias.shares_client_of == "hub" and alias.engagement is not None
    assert not alias.engagement.owns_client
    hub_client = cluster_set.hub.client
    assert isinstance(hub_client, kube.ClusterClient)
    session = hub_client.session
    alias.joined = True  # as if it had joined at runtime
    await cluster_set.leave("alias")
    assert not session.closed
    await cluster_set.close()
    assert session.closed


async def test_joined_real_client_session_is_closed_on_leave() -> None:
    """With the real client: a joined member's engagement runs its prober against a
    refusing server; leaving closes its aiohttp session and ends its prober."""
    cluster_set = clusters.ClusterSet.from_kubeconfig(distinct("hub", "member1"),
                                                      hub_context="hub")
    edge = cluster_set.join("edge", distinct("edge", first=9))
    assert edge.engagement is not None and edge.engagement.owns_client
    assert isinstance(edge.client, kube.ClusterClient)
    session = edge.client.session
    edge.engagement.start()
    await asyncio.sleep(0.05)
    tasks = list(edge.engagement.tasks)
    await cluster_set.leave("edge")
    assert session.closed and all(t.done() for t in tasks)
    await cluster_set.close()


async def test_unused_engagement_stop_closes_without_starting() -> None:
    """A cluster made but never engaged (fedctl run failing at start) still closes."""
    client = Hanging()
    edge = clusters.Cluster("edge", client=client)
    assert isinstance(edge.engagement, Engagement)
    await edge.engagement.stop()
    assert client.closed == 1 and client.calls == []
    edge.engagement.start()  # after stop: nothing starts
    assert edge.engagement.tasks == []
