"""The applications controller on the in-memory fleet: staged writes, health, requests,
foreign objects, garbage collection and deletion with a member away."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from federation.contexts import client as kube
from federation.contexts.client import Resource
from federation.controllers import applications
from federation.hub import api
from federation.runtime.reconcile import Request
from tests.unit.controllers import fakes
from tests.unit.controllers.applications import fakes as app_fakes

SERVICES = Resource("", "v1", "services", "Service")
for _resource in (SERVICES, api.APPLICATIONS, api.APPLICATION_REVISIONS,
                  api.RESOURCE_TRACKERS, api.OAM_POLICIES, api.OAM_WORKFLOWS):
    fakes.KINDS.setdefault(_resource.kind, _resource)
NO_STATUS_SUBRESOURCE = {api.APPLICATION_REVISIONS, api.RESOURCE_TRACKERS}


class Writer(fakes.FakeWriter):
    async def update(self, obj: dict[str, Any], *, resource: Resource | None = None
                     ) -> dict[str, Any]:
        resource = resource or fakes.KINDS[obj["kind"]]
        if resource not in NO_STATUS_SUBRESOURCE:
            return await super().update(obj, resource=resource)
        stored = self._stored(resource, obj["metadata"]["name"], obj["metadata"]["namespace"])
        if obj["metadata"].get("resourceVersion") not in (None,
                                                           stored["metadata"]["resourceVersion"]):
            raise kube.ApiError(self.name, 409, "Conflict", "modified")
        self._record("update", resource, obj["metadata"]["name"])
        return self.mc.put(self.name, {**copy.deepcopy(obj),
                                       "metadata": {**obj["metadata"],
                                                    "uid": stored["metadata"]["uid"]}})


class MC(fakes.FakeMC):
    def cluster(self, name: str) -> Writer:
        self.clusters.get(name)
        return Writer(self, name)

    async def view(self, resource: Resource, name: str, namespace: str | None = None, *,
                   cluster: str, allow_stale: bool = False) -> Any:
        return await self.get(resource, name, namespace, cluster=cluster, copy=False)

    async def list_view(self, resource: Resource, namespace: str | None = None,
                        **kw: Any) -> Any:
        return await self.list(resource, namespace, copy=False, **kw)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def app(image: str = "web:1", **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "shop", "namespace": "shop", "annotations": annotations},
        "spec": {
            "components": [{"name": "web", "type": "webservice",
                            "properties": {"image": image, "ports": [{"port": 80,
                                                                      "expose": True}]}}],
            "policies": [
                {"name": "canary", "type": "topology", "properties": {"clusters": ["member1"]}},
                {"name": "rest", "type": "topology",
                 "properties": {"clusters": ["member2", "member3"]}}],
            "workflow": {"steps": [
                {"name": "canary", "type": "deploy", "properties": {"policies": ["canary"]}},
                {"name": "approval", "type": "approve"},
                {"name": "rollout", "type": "deploy",
                 "properties": {"policies": ["rest"], "parallelism": 1}}]}}}


@pytest.fixture
def world() -> tuple[MC, applications.Reconciler, Clock]:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    clock = Clock()
    reconciler = app_fakes.reconciler(mc, app_fakes.Recorder(), clock=clock)
    return mc, reconciler, clock


def must(mc: MC, cluster: str, kind: str, name: str) -> dict[str, Any]:
    found = mc.find(cluster, kind, name, "shop")
    assert found is not None, f"{kind} {name} not in {cluster}"
    return found


REQUEST = Request("hub", applications.APP_KIND, "shop", "shop")


def ready_everywhere(mc: MC) -> None:
    """The simulator's part: every Deployment reports all replicas ready."""
    for key, obj in list(mc.objects.items()):
        if key[1] == "deployments":
            replicas = obj["spec"].get("replicas", 1)
            obj["status"] = {"observedGeneration": obj["metadata"].get("generation", 0),
                             "readyReplicas": replicas, "updatedReplicas": replicas}


def set_app(mc: MC, body: dict[str, Any]) -> None:
    live = mc.find("hub", "Application", "shop", "shop")
    if live is not None:
        body = {**body, "metadata": {**body["metadata"], "uid": live["metadata"]["uid"]},
                "status": live.get("status")}
    mc.put("hub", body)


async def test_staged_rollout_on_the_fakes(world: tuple[MC, Any, Clock]) -> None:
    mc, reconciler, clock = world
    set_app(mc, app())
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after
    assert mc.find("member1", "Deployment", "web", "shop") is not None
    assert mc.find("member2", "Deployment", "web", "shop") is None
    assert mc.find("hub", "ApplicationRevision", "shop-v1", "shop") is not None
    tracker = mc.find("hub", "ResourceTracker", "shop", "shop")
    assert tracker is not None and tracker["spec"]["count"] == 2  # Deployment + Service
    ready_everywhere(mc)
    clock.now += 5
    await reconciler.reconcile(REQUEST)
    status = must(mc, "hub", "Application", "shop")["status"]
    assert status["status"] == "workflowSuspending"
    writes = len(mc.writes)
    await reconciler.reconcile(REQUEST)
    assert len(mc.writes) == writes  # nothing changed: no write at all
    set_app(mc, app(**{applications.RESUME: "n1"}))
    await reconciler.reconcile(REQUEST)
    assert mc.find("member2", "Deployment", "web", "shop") is not None
    assert mc.find("member3", "Deployment", "web", "shop") is None  # parallelism 1
    ready_everywhere(mc)
    await reconciler.reconcile(REQUEST)
    ready_everywhere(mc)
    await reconciler.reconcile(REQUEST)
    status = must(mc, "hub", "Application", "shop")["status"]
    assert status["status"] == "running" and status["healthy"] is True
    assert status["handledRequests"] == {applications.RESUME: "n1"}
    assert must(mc, "hub", "ApplicationRevision", "shop-v1")["status"]["succeeded"]


OURS = {"federation.io/managed-by": "federation"}


@pytest.mark.parametrize(("labels", "placer", "said"), [
    ({}, {}, "is not managed by federation"),
    (OURS, {"federation.io/application": "shop/other"},
     "was placed by Application shop/other"),
    (OURS, {"federation.io/template-uid": "uid-t"}, "is a propagated template's copy")])
async def test_an_object_someone_else_placed_is_never_overwritten(
        world: tuple[MC, Any, Clock], labels: dict[str, str], placer: dict[str, str],
        said: str) -> None:
    """A foreign object, another Application's, or a propagated template's copy, of the
    same identity: none is updated (two of our writers would rewrite it in turn for
    ever); the condition names who placed it."""
    mc, reconciler, _ = world
    mc.put("member1", {"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "web", "namespace": "shop", "labels": labels,
                                    "annotations": placer},
                       "spec": {"replicas": 9}})
    set_app(mc, app())
    await reconciler.reconcile(REQUEST)
    assert must(mc, "member1", "Deployment", "web")["spec"] == {"replicas": 9}
    conditions = {c["type"]: c for c in
                  must(mc, "hub", "Application", "shop")["status"]["conditions"]}
    assert conditions["Applied"]["status"] == "False"
    assert said in conditions["Applied"]["message"]


async def test_invalid_application_writes_nothing_to_members(
        world: tuple[MC, Any, Clock]) -> None:
    mc, reconciler, _ = world
    body = app()
    body["spec"]["components"].append(
        {"name": "admin", "type": "k8s-objects", "properties": {"objects": [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": "pwn"}}]}})
    set_app(mc, body)
    await reconciler.reconcile(REQUEST)
    assert not [w for w in mc.writes if w[1] != "hub"]
    status = must(mc, "hub", "Application", "shop")["status"]
    assert status["status"] == "renderFailed"
    assert "cluster-scoped" in status["conditions"][0]["message"]


async def test_removed_component_and_delete_with_a_member_away(
        world: tuple[MC, Any, Clock]) -> None:
    mc, reconciler, _ = world
    body = app()
    body["spec"]["workflow"] = {"steps": [{"name": "all", "type": "deploy",
                                           "properties": {"policies": ["canary", "rest"]}}]}
    body["spec"]["components"].append({"name": "cfg", "type": "config",
                                       "properties": {"data": {"a": "b"}}})
    set_app(mc, body)
    await reconciler.reconcile(REQUEST)
    assert all(mc.find(m, "ConfigMap", "cfg", "shop") for m in fakes.MEMBERS)
    body["spec"]["components"].pop()
    set_app(mc, body)
    await reconciler.reconcile(REQUEST)
    assert not any(mc.find(m, "ConfigMap", "cfg", "shop") for m in fakes.MEMBERS)
    mc.set_down("member2", True)
    del mc.objects[("hub", "applications", "shop", "shop")]
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after  # member2 pending
    assert mc.find("member1", "Deployment", "web", "shop") is None
    tracker = must(mc, "hub", "ResourceTracker", "shop")
    assert {e["cluster"] for e in tracker["spec"]["pendingCleanup"]} == {"member2"}
    mc.set_down("member2", False)
    assert await reconciler.reconcile(REQUEST) is None
    assert mc.find("member2", "Deployment", "web", "shop") is None
    assert mc.find("hub", "ResourceTracker", "shop", "shop") is None
    assert mc.find("hub", "ApplicationRevision", "shop-v1", "shop") is None


async def test_a_deletion_pending_past_the_wait_is_warned_once(
        world: tuple[MC, Any, Clock]) -> None:
    """member2 away after the Application's deletion: the tracker records since when;
    one CleanupPending Warning once cleanup_wait has passed, not before, not again."""
    mc, reconciler, clock = world
    body = app()
    body["spec"]["workflow"] = {"steps": [{"name": "all", "type": "deploy",
                                           "properties": {"policies": ["canary", "rest"]}}]}
    set_app(mc, body)
    await reconciler.reconcile(REQUEST)
    mc.set_down("member2", True)
    del mc.objects[("hub", "applications", "shop", "shop")]
    warned = []
    for _ in range(20):  # 20 retries, pending_retry (5 s) apart: 100 s of virtual time
        await reconciler.reconcile(REQUEST)
        warned = [e for e in reconciler.recorder.events if e[1] == "CleanupPending"]
        assert clock.now - 1000.0 >= reconciler.settings.cleanup_wait or not warned
        clock.now += reconciler.settings.pending_retry
    # A few retries fall in the window; the recorder writes each (object, reason,
    # message) once, and every one of them is the same.
    assert len(set(warned)) == 1
    assert warned[0][0] == "Warning" and "member2" in warned[0][2]
    assert len(warned) < 20 - reconciler.settings.cleanup_wait / 5
    assert must(mc, "hub", "ResourceTracker", "shop")["spec"]["pendingSince"]


async def test_a_tracker_that_cannot_be_deleted_is_retried_not_dropped(
        world: tuple[MC, Any, Clock], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every copy deleted but the hub refuses the tracker's delete (not a 404): the
    reconcile fails and is retried; the tracker is not left behind quietly."""
    mc, reconciler, _ = world
    set_app(mc, app())
    await reconciler.reconcile(REQUEST)
    del mc.objects[("hub", "applications", "shop", "shop")]
    real = Writer.delete

    async def refuse(self: Writer, resource: Resource, name: str, *args: Any,
                     **kw: Any) -> Any:
        if resource.kind == "ResourceTracker":
            raise kube.ApiError("hub", 500, "InternalError", "etcd timeout")
        return await real(self, resource, name, *args, **kw)

    monkeypatch.setattr(Writer, "delete", refuse)
    with pytest.raises(kube.ApiError):
        await reconciler.reconcile(REQUEST)
    monkeypatch.undo()
    assert mc.find("hub", "ResourceTracker", "shop", "shop") is not None
    assert await reconciler.reconcile(REQUEST) is None
    assert mc.find("hub", "ResourceTracker", "shop", "shop") is None
