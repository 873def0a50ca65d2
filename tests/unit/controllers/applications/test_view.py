"""The cache view and the status writer over the multi-cluster client's surface."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from federation.contexts import client as kube
from federation.contexts.cache import ReadOnly
from federation.contexts.client import Resource
from federation.contexts.multicluster import ListView
from federation.controllers.applications import ApplicationSettings, CacheView, HubStatus
from federation.hub import api
from tests.unit.controllers import fakes


class Port:
    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    async def resource(self, obj: dict[str, Any]) -> Resource:
        return kube.DEPLOYMENTS

    async def patch_status(self, resource: Resource, name: str, patch: dict[str, Any], *,
                           namespace: str | None = None,
                           resource_version: str | None = None) -> dict[str, Any]:
        self.calls.append((resource.kind, name, namespace, patch))
        return patch


class Client:
    """The multi-cluster client's cached reads and one cluster's port, as lists."""

    def __init__(self, listing: ListView) -> None:
        self.listing = listing
        self.calls: list[Any] = []

    def cluster(self, name: str) -> Port:
        self.calls.append(("cluster", name))
        return Port(self.calls)

    async def view(self, resource: Resource, name: str, namespace: str | None = None, *,
                   cluster: str, allow_stale: bool = False) -> ReadOnly | None:
        self.calls.append(("view", resource.kind, name, namespace, cluster))
        return {"metadata": {"name": name}}

    async def list_view(self, resource: Resource, namespace: str | None = None, *,
                        clusters: Sequence[str] | None = None,
                        label_selector: str | Mapping[str, str] | None = None,
                        allow_stale: bool = False) -> ListView:
        self.calls.append(("list", resource.kind, namespace, clusters))
        return self.listing


def view_over(client: Client) -> CacheView:
    return CacheView(client, fakes.cluster_set("member1", "member2"),
                     ApplicationSettings(workers=2), lambda: 42.0)


async def test_reads_go_to_the_caches_of_the_cluster_asked() -> None:
    listing = ListView(items={"hub": [{"metadata": {"name": "a"}}]})
    client = Client(listing)
    view = view_over(client)
    assert (view.hub, view.now(), view.settings.workers) == ("hub", 42.0, 2)
    assert [m.name for m in view.members()] == ["member1", "member2"]
    assert await view.get(kube.DEPLOYMENTS, "web", "shop", "member1") == {
        "metadata": {"name": "web"}}
    assert await view.list(api.APPLICATIONS, "shop") == [{"metadata": {"name": "a"}}]
    assert await view.resource("member2", {"kind": "Deployment"}) is kube.DEPLOYMENTS
    assert client.calls == [("view", "Deployment", "web", "shop", "member1"),
                            ("list", "Application", "shop", ["hub"]),
                            ("cluster", "member2")]


async def test_a_hub_list_that_failed_raises_instead_of_reading_as_empty() -> None:
    """No revision or MemberCluster list is taken for empty when the hub did not answer."""
    error = kube.ClusterUnavailable("hub", "unavailable")
    view = view_over(Client(ListView(errors={"hub": error})))
    with pytest.raises(kube.ClusterUnavailable):
        await view.list(api.APPLICATION_REVISIONS, "shop")


async def test_the_status_writer_patches_the_applications_status_on_the_hub() -> None:
    client = Client(ListView())
    await HubStatus(client, "hub").application_status("shop", "web", {"status": "running"})
    assert client.calls == [("cluster", "hub"),
                            ("Application", "web", "shop", {"status": {"status": "running"}})]
