"""Membership of pull members: the agent certificate's serial recorded in the MemberCluster
status is what the work server accepts (issue 20, finding 6), and a MemberCluster that is
gone makes the work server tell its agent so (finding 8)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from federation.contexts import client as kube
from federation.contexts import clusters, kubeconfig
from federation.contexts.credentials import ExecAllowlist
from federation.controllers import membership
from federation.hub import api
from federation.runtime.reconcile import Request
from federation.work import identity
from federation.work.server import WorkServer
from tests.unit.clients import UnservedFleet, UnservedWrites

REQUEST = Request("hub", "MemberCluster.cluster.federation.io", "", "edge")


def member(serial: str = "", previous: str = "", version: str = "1") -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "cluster.federation.io/v1alpha1",
                           "kind": "MemberCluster",
                           "metadata": {"name": "edge", "resourceVersion": version},
                           "spec": {"mode": "Pull"}}
    if serial:
        doc["status"] = {"agentCertificate": {"serial": serial, "previousSerial": previous}}
    return doc


class Hub(UnservedFleet):
    """The hub as the membership controller reads and writes it: a cached copy of the
    MemberCluster (possibly behind) and the live one."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.cached = self.live = doc
        self.patches: list[tuple[dict[str, Any], str | None]] = []

    async def get(self, resource: kube.Resource, name: str, namespace: str | None = None, *,
                  cluster: str, allow_stale: bool = False, copy: bool = True
                  ) -> dict[str, Any]:
        return self.cached

    def cluster(self, name: str) -> HubWrites:
        return HubWrites(self)


class HubWrites(UnservedWrites):
    """The hub's writer: the live MemberCluster, and conditional status patches."""

    name = "hub"

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    async def get(self, resource: kube.Resource, name: str, namespace: str | None = None
                  ) -> dict[str, Any]:
        return self.hub.live

    async def patch_status(self, resource: kube.Resource, name: str, patch: dict[str, Any], *,
                           namespace: str | None = None,
                           resource_version: str | None = None) -> dict[str, Any]:
        self.hub.patches.append((patch, resource_version))
        return self.hub.live


class Manager:
    def __init__(self, hub: Hub) -> None:
        document = {"clusters": [{"name": "hub", "cluster": {"server": "https://127.0.0.1:2"}}],
                    "users": [{"name": "hub", "user": {"token": "t"}}],
                    "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "hub"}}]}
        settings = clusters.ClusterSettings(
            client=kube.ClientSettings(exec_allowlist=ExecAllowlist.of()))
        self.clusters = clusters.ClusterSet.from_kubeconfig(
            kubeconfig.merge([(Path("t"), document)]), hub_context="hub", settings=settings)
        self.client = hub
        self.is_leader = True

    def engage(self, cluster: clusters.Cluster) -> None:
        pass

    async def disengage(self, name: str) -> None:
        await self.clusters.leave(name)


class Recorder:
    async def emit(self, obj: Any, kind: str, reason: str, message: str) -> None:
        pass

    def forget(self, obj: Any) -> None:
        pass


def setup(doc: dict[str, Any]) -> tuple[Hub, WorkServer, membership.Reconciler, Manager]:
    hub, work = Hub(doc), WorkServer()
    mgr = Manager(hub)
    reconciler = membership.Reconciler(mgr, Recorder(), work=work)
    return hub, work, reconciler, mgr


async def test_the_recorded_serial_is_what_the_work_server_accepts() -> None:
    hub, work, reconciler, mgr = setup(member("a1"))
    assert work.recorder == reconciler.record_certificate
    await reconciler.reconcile(REQUEST)
    state = work.states["edge"]
    assert state.certificate == identity.CertificateRecord("a1")
    # A re-join records another serial: handed to the work server (which revokes a1).
    hub.cached = hub.live = member("b2", version="2")
    await reconciler.reconcile(REQUEST)
    assert state.certificate == identity.CertificateRecord("b2")
    await mgr.clusters.close()


async def test_a_cache_behind_the_work_servers_own_renewal_does_not_undo_it() -> None:
    hub, work, reconciler, mgr = setup(member("a1"))
    await reconciler.reconcile(REQUEST)
    state = work.states["edge"]
    renewed = identity.CertificateRecord("b2", "a1")
    state.track(renewed)  # the work server renewed and recorded (the live object says so)
    hub.live = member("b2", "a1", version="2")
    await reconciler.reconcile(REQUEST)  # the cache still says a1 alone
    assert state.certificate == renewed
    await mgr.clusters.close()


async def test_a_renewal_is_recorded_only_if_the_presented_serial_still_holds() -> None:
    hub, _, reconciler, mgr = setup(member("a1", version="5"))
    record = identity.CertificateRecord("b2", "a1")
    await reconciler.record_certificate("edge", record, "a1")
    assert hub.patches == [(record.status_patch(), "5")]  # conditional on what was read
    hub.live = member("c3", version="6")  # a re-join meanwhile: the thief's renewal loses
    with pytest.raises(identity.IdentityError, match="revoked meanwhile"):
        await reconciler.record_certificate("edge", identity.CertificateRecord("d4", "a1"),
                                            "a1")
    assert len(hub.patches) == 1
    await mgr.clusters.close()


async def test_whether_a_cluster_is_a_pull_member_is_known_only_from_a_synced_cache() -> None:
    _, _, reconciler, mgr = setup(member("a1"))
    assert reconciler.is_pull_member("edge") is None  # no cache of MemberClusters yet
    cache = mgr.clusters.hub.cache
    assert cache is not None
    informer = cache.informer(api.MEMBER_CLUSTERS)
    assert reconciler.is_pull_member("edge") is None  # not listed yet
    informer.store.put(member("a1"))
    informer.synced.set()
    assert reconciler.is_pull_member("edge") is True
    assert reconciler.is_pull_member("gone") is False
    informer.store.put({**member(), "metadata": {"name": "push"}, "spec": {}})
    assert reconciler.is_pull_member("push") is False
    mgr.is_leader = False  # a standby does not know: its agent is told to retry
    assert reconciler.is_pull_member("gone") is None
    await asyncio.sleep(0)
    await mgr.clusters.close()
