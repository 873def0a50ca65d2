"""No-copy reads: the cache hands out its own objects, and readers never change them.

The multi-cluster client here is the real one, over real informer stores; only the
HTTP client under it is a fake that records writes (and whose watch never ends).
Each reader runs a full reconcile that writes; the cache's stored objects must be
exactly what they were before (compared against a deep snapshot).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from federation.contexts import cache
from federation.contexts import client as kube
from federation.contexts.clusters import Cluster, ClusterSet
from federation.contexts.multicluster import ListResult, ListView, MultiClusterClient
from federation.controllers import cleanup, health, policy_validation
from federation.controllers.kit import events
from federation.hub import api, failover
from tests.unit.clients import Unserved
from tests.unit.contexts import probes

JSON = dict[str, Any]


class RecordingClient(Unserved):
    """The verbs :class:`ClusterWriter` calls, recorded; reads answer from ``live``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.writes: list[tuple[str, str]] = []
        self.live: dict[str, JSON] = {}

    async def watch(self, *_: Any, **__: Any) -> AsyncIterator[JSON]:
        await asyncio.Event().wait()  # a quiet stream: the store stays as the test put it
        yield {}

    async def request(self, method: str, path: str, **_: Any) -> JSON:
        """Discovery: this cluster serves ConfigMaps (and, in our group, ResourceBindings)."""
        if api.RESOURCE_BINDINGS.group in path:
            return {"resources": [{"name": "resourcebindings", "kind": "ResourceBinding",
                                   "namespaced": True, "verbs": ["get", "list", "update"]}]}
        return {"resources": [{"name": "configmaps", "kind": "ConfigMap", "namespaced": True,
                               "verbs": ["get", "list", "watch", "create"]}]}

    async def get(self, resource: kube.Resource, name: str, namespace: str | None = None
                  ) -> JSON:
        if name not in self.live:
            raise kube.ApiError(self.name, 404, "NotFound", name)
        return copy.deepcopy(self.live[name])

    async def create(self, resource: kube.Resource, body: JSON, namespace: str | None = None
                     ) -> JSON:
        self.writes.append(("create", resource.kind))
        return body

    async def replace(self, resource: kube.Resource, body: JSON, subresource: str | None = None
                      ) -> JSON:
        self.writes.append(("update", resource.kind))
        return body

    async def patch(self, resource: kube.Resource, name: str, patch: JSON, **_: Any) -> JSON:
        self.writes.append(("patch", resource.kind))
        return {"metadata": {"name": name}, **patch}

    async def delete(self, resource: kube.Resource, name: str, namespace: str | None = None,
                     **_: Any) -> JSON:
        self.writes.append(("delete", resource.kind))
        return {}


def engaged(name: str, *, is_hub: bool = False) -> tuple[Cluster, RecordingClient]:
    fake = RecordingClient(name)
    cluster = Cluster(name, is_hub=is_hub, is_member=not is_hub,
                      client=fake)
    cluster.available = True
    return cluster, fake


def seed(cluster: Cluster, resource: kube.Resource, *objects: JSON) -> cache.Store:
    """A synced, watching informer holding ``objects`` (as a first list leaves it)."""
    assert cluster.cache is not None
    informer = cluster.cache.informer(resource)
    assert isinstance(informer, cache.Informer)
    for obj in objects:
        informer.store.put(obj)
    informer.resource_version = "1"
    informer.state = "watching"
    informer.synced.set()
    return informer.store


@pytest.fixture
def fleet() -> Iterator[tuple[MultiClusterClient, Cluster, Cluster, RecordingClient]]:
    hub, hub_client = engaged("hub", is_hub=True)
    member, _ = engaged("member1")
    yield MultiClusterClient(ClusterSet([hub, member])), hub, member, hub_client


async def stop(*clusters: Cluster) -> None:
    for cluster in clusters:
        assert cluster.cache is not None
        await cluster.cache.stop()


def member_cluster(name: str, ready: str) -> JSON:
    return {"apiVersion": api.MEMBER_CLUSTERS.api_version, "kind": "MemberCluster",
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "7"},
            "spec": {"taints": [{"key": "other", "effect": "NoSchedule"}],
                     "kubeconfigSecretRef": {"name": "s", "namespace": "fed-secrets"}},
            "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "x",
                                       "message": "y"}]}}


async def test_reads_without_copy_hand_out_the_cached_object(fleet: Any) -> None:
    """``copy=False`` (and ``view``/``list_view``) return the stored dict itself, typed
    read-only; the default still returns a copy the caller may change."""
    mc, hub, member, _ = fleet
    doc = member_cluster("member1", "True")
    seed(hub, api.MEMBER_CLUSTERS, doc)
    try:
        assert await mc.get(api.MEMBER_CLUSTERS, "member1", cluster="hub", copy=False) is doc
        assert await mc.view(api.MEMBER_CLUSTERS, "member1", cluster="hub") is doc
        listed = await mc.list(api.MEMBER_CLUSTERS, clusters=["hub"], copy=False)
        assert isinstance(listed, ListView) and listed.items["hub"][0] is doc
        assert (await mc.list_view(api.MEMBER_CLUSTERS, clusters=["hub"])).all() == \
            [("hub", doc)]
        owned = await mc.get(api.MEMBER_CLUSTERS, "member1", cluster="hub")
        assert owned == doc and owned is not doc
        assert owned["spec"]["taints"] is not doc["spec"]["taints"]  # deep, not shallow
        copies = await mc.list(api.MEMBER_CLUSTERS, clusters=["hub"])
        assert isinstance(copies, ListResult) and copies.items["hub"][0] is not doc
    finally:
        await stop(hub, member)


async def test_health_reconcile_leaves_the_cache_as_it_was(fleet: Any) -> None:
    """A member gone unready: health writes taints, status and an event, reading the
    MemberCluster (and the member's nodes and workloads) without copies; the cached
    objects are unchanged afterwards."""
    mc, hub, member, hub_client = fleet
    stores = [seed(hub, api.MEMBER_CLUSTERS, member_cluster("member1", "True"))]
    stores += [seed(member, kube.NODES, {"kind": "Node", "metadata": {"name": "n1"},
                                         "status": {"allocatable": {"cpu": "4"}}})]
    stores += [seed(member, r) for r in health.WORKLOADS]
    snapshot = copy.deepcopy([s.objects for s in stores])
    controller = health.HealthController(mc.clusters, mc, events.Recorder(mc, "hub"))
    await probes.settle(member, probes.result(False, reachable=False))
    try:
        await controller.reconcile(controller.request("member1"))
    finally:
        await stop(hub, member)
    assert ("update", "MemberCluster") in hub_client.writes  # taints written
    assert ("patch", "MemberCluster") in hub_client.writes  # status written
    assert ("create", "Event") in hub_client.writes
    assert [s.objects for s in stores] == snapshot


async def test_health_reconcile_of_a_member_back_leaves_the_cache_as_it_was(fleet: Any
                                                                            ) -> None:
    """A member ready again: its not-ready taint is removed (a PUT of the MemberCluster
    built from the cached one) and its status written; the cached object is unchanged."""
    mc, hub, member, hub_client = fleet
    doc = member_cluster("member1", "False")
    doc["spec"]["taints"].append({"key": failover.NOT_READY_TAINT, "effect": "NoSchedule",
                                  "timeAdded": "2026-01-01T00:00:00Z"})
    stores = [seed(hub, api.MEMBER_CLUSTERS, doc), seed(member, kube.NODES)]
    stores += [seed(member, r) for r in health.WORKLOADS]
    snapshot = copy.deepcopy([s.objects for s in stores])
    controller = health.HealthController(mc.clusters, mc, events.Recorder(mc, "hub"))
    await probes.settle(member, probes.result(True))
    try:
        await controller.reconcile(controller.request("member1"))
    finally:
        await stop(hub, member)
    assert hub_client.writes[0] == ("update", "MemberCluster")
    assert [s.objects for s in stores] == snapshot


async def test_policy_reconcile_leaves_the_cache_as_it_was(fleet: Any) -> None:
    """An invalid policy: its status and a warning are written; the cached policy and
    MemberClusters are unchanged."""
    mc, hub, member, hub_client = fleet
    policy = {"apiVersion": api.PROPAGATION_POLICIES.api_version, "kind": "PropagationPolicy",
              "metadata": {"name": "p", "namespace": "shop", "uid": "u1"},
              "spec": {"resourceSelectors": "not a list"}}
    stores = [seed(hub, api.PROPAGATION_POLICIES, policy),
              seed(hub, api.MEMBER_CLUSTERS, member_cluster("member1", "True"))]
    snapshot = copy.deepcopy([s.objects for s in stores])
    reconciler = policy_validation.Reconciler(mc, "hub", events.Recorder(mc, "hub"))
    try:
        from federation.runtime.reconcile import Request, group_kind
        await reconciler.reconcile(Request("hub", group_kind(api.PROPAGATION_POLICIES),
                                           "shop", "p"))
    finally:
        await stop(hub, member)
    assert ("patch", "PropagationPolicy") in hub_client.writes
    assert [s.objects for s in stores] == snapshot


async def test_cleanup_reconcile_leaves_the_cache_as_it_was(fleet: Any) -> None:
    """A deleted template's binding: member1 holds no copy any more, another member is
    off: the binding's spec and status are written (one update through the kit's executor:
    bindings have no status subresource); the cached binding is unchanged."""
    mc, hub, member, hub_client = fleet
    binding = {"apiVersion": api.RESOURCE_BINDINGS.api_version, "kind": "ResourceBinding",
               "metadata": {"name": "b", "namespace": "shop", "uid": "u2",
                            "resourceVersion": "9"},
               "spec": {"templateDeleted": True, "pendingCleanup": ["member1", "gone"],
                        "resource": {"apiVersion": "v1", "kind": "ConfigMap", "name": "b",
                                     "namespace": "shop"}},
               "status": {"conditions": []}}
    store = seed(hub, api.RESOURCE_BINDINGS, binding)
    snapshot = copy.deepcopy(store.objects)
    reconciler = cleanup.Reconciler(mc, "hub", events.Recorder(mc, "hub"))
    mc.clusters.clusters["gone"] = Cluster("gone", disabled=True)  # and one that is off
    try:
        from federation.runtime.reconcile import Request, group_kind
        await reconciler.reconcile(Request("hub", group_kind(api.RESOURCE_BINDINGS),
                                           "shop", "b"))
    finally:
        await stop(hub, member)
    assert hub_client.writes == [("update", "ResourceBinding")]
    assert store.objects == snapshot
    assert store.objects[("shop", "b")] is binding
