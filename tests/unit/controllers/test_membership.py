"""Membership: a joined cluster's Secret that breaks the exec policy is refused, visibly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.contexts import client as kube
from federation.contexts import clusters, kubeconfig
from federation.contexts.credentials import ExecAllowlist
from federation.controllers import health, membership
from federation.controllers.kit.kinds import KindTracker
from federation.runtime.reconcile import Request
from tests.unit.clients import UnservedFleet, UnservedWrites

V1 = "client.authentication.k8s.io/v1"


class FakeHub(UnservedFleet):
    """The hub as membership and health see it: one MemberCluster, one Secret, the same
    in the cache and on the server."""

    def __init__(self, member: dict[str, Any], secret: dict[str, Any]) -> None:
        self.member, self.secret = member, secret
        self.status_patches: list[dict[str, Any]] = []

    def read(self, resource: kube.Resource, name: str, namespace: str | None
             ) -> dict[str, Any]:
        return self.secret if resource.kind == "Secret" else self.member

    async def get(self, resource: kube.Resource, name: str, namespace: str | None = None, *,
                  cluster: str, allow_stale: bool = False, copy: bool = True
                  ) -> dict[str, Any]:
        return self.read(resource, name, namespace)

    def cluster(self, name: str) -> HubWrites:
        return HubWrites(self)


class HubWrites(UnservedWrites):
    """The hub's writer: live reads and status patches."""

    name = "hub"

    def __init__(self, hub: FakeHub) -> None:
        self.hub = hub

    async def get(self, resource: kube.Resource, name: str, namespace: str | None = None
                  ) -> dict[str, Any]:
        return self.hub.read(resource, name, namespace)

    async def patch_status(self, resource: kube.Resource, name: str, patch: dict[str, Any], *,
                           namespace: str | None = None,
                           resource_version: str | None = None) -> dict[str, Any]:
        self.hub.status_patches.append(patch)
        return self.hub.member


class FakeManager:
    def __init__(self, cluster_set: clusters.ClusterSet, hub: FakeHub) -> None:
        self.clusters, self.client = cluster_set, hub
        self.engaged: list[str] = []
        self.is_leader = True

    def engage(self, cluster: clusters.Cluster) -> None:
        self.engaged.append(cluster.name)

    async def disengage(self, name: str) -> None:
        await self.clusters.leave(name)


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    async def emit(self, obj: Any, kind: str, reason: str, message: str) -> None:
        self.events.append((kind, reason, message))

    def forget(self, obj: Any) -> None:
        return None


def hub_only() -> clusters.ClusterSet:
    document = {"clusters": [{"name": "hub", "cluster": {"server": "https://127.0.0.1:2"}}],
                "users": [{"name": "hub", "user": {"token": "t"}}],
                "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "hub"}}]}
    settings = clusters.ClusterSettings(
        client=kube.ClientSettings(exec_allowlist=ExecAllowlist.of()))
    return clusters.ClusterSet.from_kubeconfig(kubeconfig.merge([(Path("t"), document)]),
                                               hub_context="hub", settings=settings)


def secret_with(user: dict[str, Any]) -> dict[str, Any]:
    document = {"apiVersion": "v1", "kind": "Config", "current-context": "edge",
                "clusters": [{"name": "edge", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "edge", "user": user}],
                "contexts": [{"name": "edge", "context": {"cluster": "edge", "user": "edge"}}]}
    return {"metadata": {"name": "edge-kubeconfig", "namespace": "federation-system",
                         "resourceVersion": "7"},
            "stringData": {"kubeconfig": yaml.safe_dump(document)}}


MEMBER: dict[str, Any] = {"metadata": {"name": "edge", "uid": "u1"},
          "spec": {"kubeconfigSecretRef": {"name": "edge-kubeconfig",
                                           "namespace": "federation-system",
                                           "key": "kubeconfig"}}}


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "PWNED"
    evil = tmp_path / "evil"
    evil.mkdir()
    credential = json.dumps({"apiVersion": V1, "kind": "ExecCredential",
                             "status": {"token": "x"}})
    (evil / "aws").write_text(f"#!/bin/sh\necho ran >> '{marker}'\necho '{credential}'\n")
    (evil / "aws").chmod(0o755)
    return evil, marker


async def test_hostile_secret_gives_an_event_and_a_condition_naming_the_reason(
        planted: tuple[Path, Path]) -> None:
    """exec aws + env PATH=<dir> in a Secret written on the hub: nothing is engaged, one
    JoinFailed event names PATH, the cluster is recorded with the reason, the health
    controller's condition carries it; the planted aws never runs."""
    evil, marker = planted
    user = {"exec": {"apiVersion": V1, "command": "aws", "args": ["eks", "get-token"],
                     "env": [{"name": "PATH", "value": str(evil)}]}}
    hub = FakeHub(MEMBER, secret_with(user))
    cluster_set = hub_only()
    mgr, recorder = FakeManager(cluster_set, hub), FakeRecorder()
    reconciler = membership.Reconciler(mgr, recorder)
    request = Request("hub", "MemberCluster.cluster.federation.io", "", "edge")
    result = await reconciler.reconcile(request)
    assert result is not None and result.requeue_after == membership.RETRY
    assert mgr.engaged == []
    [(kind, reason, message)] = recorder.events
    assert (kind, reason) == ("Warning", "JoinFailed")
    assert "exec env may not set PATH" in message and str(evil) not in message
    edge = cluster_set.clusters["edge"]
    assert edge.state == "misconfigured" and edge.client is None

    await reconciler.reconcile(request)  # the retry: the same reason is not repeated
    assert len(recorder.events) == 1

    checker = health.HealthController(cluster_set, hub, recorder)
    await checker.reconcile(Request("hub", "MemberCluster.cluster.federation.io", "", "edge"))
    conditions = hub.status_patches[-1]["status"]["conditions"]
    ready = next(c for c in conditions if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("Unknown", "NotEngaged")
    assert "exec env may not set PATH" in ready["message"]
    assert not marker.exists()
    await cluster_set.close()


async def test_a_fixed_secret_joins_and_a_deleted_member_is_forgotten(
        planted: tuple[Path, Path]) -> None:
    """Once the Secret is fixed the cluster is engaged in place of the refusal record;
    deleting the MemberCluster removes it."""
    _, marker = planted
    hub = FakeHub(MEMBER, secret_with({"exec": {"apiVersion": V1, "command": "/bin/sh"}}))
    cluster_set = hub_only()
    mgr, recorder = FakeManager(cluster_set, hub), FakeRecorder()
    reconciler = membership.Reconciler(mgr, recorder)
    request = Request("hub", "MemberCluster.cluster.federation.io", "", "edge")
    await reconciler.reconcile(request)
    assert "not on the allowlist" in recorder.events[-1][2]
    hub.secret = secret_with({"token": "good"})
    assert await reconciler.reconcile(request) is None
    assert mgr.engaged == ["edge"] and cluster_set.clusters["edge"].engaged
    assert recorder.events[-1][:2] == ("Normal", "Joined")
    hub.member = {**MEMBER, "metadata": {**MEMBER["metadata"], "deletionTimestamp": "now"}}
    await reconciler.reconcile(request)
    assert "edge" not in cluster_set.clusters and not reconciler.refusals
    assert not marker.exists()
    await cluster_set.close()


async def test_leaving_is_one_call_that_reaches_every_listener() -> None:
    """A deleted MemberCluster: the membership reconciler's one disengage stops the
    engagement and the leave listeners forget the member's discovered kinds."""
    cluster_set = hub_only()
    hub = FakeHub(MEMBER, secret_with({"token": "good"}))
    mgr = FakeManager(cluster_set, hub)
    reconciler = membership.Reconciler(mgr, FakeRecorder())

    kinds = KindTracker(cluster_set, lambda _request, _priority: None)
    kinds.member_resources = {("edge", "Deployment.apps"): kube.DEPLOYMENTS,
                              ("member1", "Deployment.apps"): kube.DEPLOYMENTS}
    cluster_set.on_leave(membership.forget_kinds(kinds))
    request = Request("hub", "MemberCluster.cluster.federation.io", "", "edge")
    assert await reconciler.reconcile(request) is None
    engagement = cluster_set.clusters["edge"].engagement
    assert engagement is not None
    engagement.start()
    hub.member = {**MEMBER, "metadata": {**MEMBER["metadata"], "deletionTimestamp": "now"}}
    await reconciler.reconcile(request)
    assert engagement.stopped and engagement.tasks == []
    assert list(kinds.member_resources) == [("member1", "Deployment.apps")]
    await cluster_set.close()
