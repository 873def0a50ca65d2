"""The applications controller and ``spec.workflow.ref``: the Workflow of the Application's
own namespace read from the cache, kept in the revision, watched; a change is a new
revision whose steps run; rollback runs the old revision's Workflow."""

from __future__ import annotations

from typing import Any, cast

import pytest

from federation.contexts import client as kube
from federation.contexts.cache import ClusterCache, Event
from federation.controllers import applications
from federation.controllers.applications import compilation, revisions, rollback
from federation.controllers.kit.chain import Problem
from federation.hub import api
from tests.unit.applications.test_controller import MC, REQUEST, Clock, must, set_app
from tests.unit.controllers import fakes
from tests.unit.controllers.applications import fakes as app_fakes
from tests.unit.controllers.applications.fakes import FakeView, build_of

JSON = dict[str, Any]


def referring(ref: Any = "release", namespace: str = "shop") -> JSON:
    body = app_fakes.app()
    body["metadata"]["namespace"] = namespace
    body["spec"]["workflow"] = {"ref": ref}
    return body


def workflow(*clusters: str, namespace: str = "shop", name: str = "release") -> JSON:
    """A Workflow with one deploy step per cluster (external Policies ``to-<cluster>``)."""
    return {"apiVersion": "core.oam.dev/v1alpha1", "kind": "Workflow",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-wf-{namespace}",
                         "resourceVersion": "1"},
            "steps": [{"name": f"to-{c}", "type": "deploy",
                       "properties": {"policies": [f"to-{c}"]}} for c in clusters]}


def policy(cluster: str) -> JSON:
    return {"apiVersion": "core.oam.dev/v1alpha1", "kind": "Policy", "type": "topology",
            "metadata": {"name": f"to-{cluster}", "namespace": "shop"},
            "properties": {"clusters": [cluster]}}


async def test_the_revision_keeps_the_workflow_and_its_steps_policies() -> None:
    view = FakeView([("hub", workflow("member1", "member2")), ("hub", policy("member1")),
                     ("hub", policy("member2"))])
    build = build_of(referring())
    await revisions.load_revision(view, build)
    assert [s["name"] for s in build.steps_spec["workflow"]["steps"]] == \
        ["to-member1", "to-member2"]
    assert sorted(build.external) == ["to-member1", "to-member2"]  # named by its steps
    assert build.revision_vertex is not None
    kept = build.revision_vertex.obj["spec"]
    assert kept["application"]["spec"]["workflow"] == {"ref": "release"}  # as written
    assert kept["workflow"]["metadata"] == {"name": "release", "namespace": "shop"}
    assert [s["name"] for s in kept["workflow"]["steps"]] == ["to-member1", "to-member2"]
    edited = FakeView([("hub", workflow("member1")), ("hub", policy("member1")),
                       ("hub", policy("member2"))])
    again = build_of(referring())
    await revisions.load_revision(edited, again)
    assert again.digest != build.digest  # a changed Workflow is new content


async def test_only_the_applications_own_namespace_is_read() -> None:
    """The attack: the tenant of ``shop`` names a Workflow that exists only in ``bank``
    (by its name, or with a namespace in the ref): the Application is refused, ``bank``'s
    Workflow is never used."""
    view = FakeView([("hub", workflow("member1", namespace="bank"))])
    with pytest.raises(Problem) as caught:
        await revisions.load_revision(view, build_of(referring()))
    assert str(caught.value) == (
        "spec.workflow.ref: Workflow shop/release not found on the hub (the Application "
        "is rendered once it exists in its namespace)")
    with pytest.raises(Problem, match="must be the name of a Workflow"):
        await revisions.load_revision(view, build_of(referring("bank/release")))


async def test_a_missing_then_created_then_deleted_workflow(world: tuple[MC, Any, Clock]
                                                             ) -> None:
    """Missing: renderFailed with the one-line reason, nothing written to a member; once
    it exists, the next reconcile (the watch's) renders and deploys its steps; deleted,
    refused again, and nothing deployed is touched."""
    mc, reconciler, _ = world
    set_app(mc, referring())
    await reconciler.reconcile(REQUEST)
    status = must(mc, "hub", "Application", "shop")["status"]
    assert status["status"] == "renderFailed"
    assert "Workflow shop/release not found" in status["conditions"][0]["message"]
    assert not [w for w in mc.writes if w[1] != "hub"]
    for cluster in ("member1", "member2"):
        mc.put("hub", policy(cluster))
    mc.put("hub", workflow("member1", "member2"))
    await run_until_done(mc, reconciler)
    assert mc.find("member1", "Deployment", "web", "shop") is not None
    assert mc.find("member2", "Deployment", "web", "shop") is not None
    steps = must(mc, "hub", "Application", "shop")["status"]["workflow"]["steps"]
    assert [s["name"] for s in steps] == ["to-member1", "to-member2"]
    # deleted under the running Application: refused again, what it deployed left as is
    del mc.objects[("hub", "workflows", "shop", "release")]
    writes = len(mc.writes)
    await reconciler.reconcile(REQUEST)
    assert must(mc, "hub", "Application", "shop")["status"]["status"] == "renderFailed"
    assert [w for w in mc.writes[writes:] if w[1] != "hub"] == []
    assert mc.find("member2", "Deployment", "web", "shop") is not None


async def test_an_edited_workflow_is_a_new_revision_and_rollback_runs_the_old_one(
        world: tuple[MC, Any, Clock]) -> None:
    mc, reconciler, _ = world
    for cluster in ("member1", "member2", "member3"):
        mc.put("hub", policy(cluster))
    mc.put("hub", workflow("member1"))
    set_app(mc, referring())
    await run_until_done(mc, reconciler)
    mc.put("hub", workflow("member3"))  # edited: member3 instead of member1
    await run_until_done(mc, reconciler)
    assert must(mc, "hub", "ApplicationRevision", "shop-v2")["spec"]["workflow"]["steps"][0][
        "name"] == "to-member3"
    assert mc.find("member3", "Deployment", "web", "shop") is not None
    assert mc.find("member1", "Deployment", "web", "shop") is None  # no longer rendered
    # the old revision compiles with the Workflow it kept, not today's
    build = build_of(must(mc, "hub", "Application", "shop"))
    view = reconciler.view
    await revisions.load_revision(view, build)
    await compilation.compile_app(view, build)
    assert build.compiled is not None and list(build.compiled.targets) == ["to-member3"]
    old = await rollback.compile_old(view, build, 1)
    assert list(old.targets) == ["to-member1"]


async def run_until_done(mc: MC, reconciler: applications.Reconciler) -> None:
    """Reconcile, the members reporting ready, until the workflow has succeeded."""
    for _ in range(10):
        await reconciler.reconcile(REQUEST)
        for key, obj in list(mc.objects.items()):
            if key[1] == "deployments":
                obj["status"] = {"observedGeneration": obj["metadata"].get("generation", 0),
                                 "readyReplicas": 1, "updatedReplicas": 1}
        status = must(mc, "hub", "Application", "shop").get("status") or {}
        if (status.get("workflow") or {}).get("phase") == "succeeded" and \
                status.get("status") == "running":
            return
    raise AssertionError(must(mc, "hub", "Application", "shop").get("status"))


def test_a_workflow_event_requeues_the_applications_naming_it_in_its_namespace() -> None:
    clusters = fakes.cluster_set("member1")
    clusters.hub.cache = ClusterCache(cast(kube.ClusterClient, object()), cluster="hub")
    store = clusters.hub.cache.informer(api.APPLICATIONS).store
    for namespace, name, ref in (("shop", "a", "release"), ("shop", "b", "other"),
                                 ("shop", "c", None), ("bank", "d", "release")):
        store.put({"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                   "metadata": {"name": name, "namespace": namespace},
                   "spec": {"workflow": {"ref": ref} if ref else ["not", "a", "map"]}})
    changed = Event("MODIFIED", "hub", api.OAM_WORKFLOWS, workflow("member1"))
    found = applications.wiring.apps_referring(clusters, "hub", changed)
    assert [(r.namespace, r.name) for r in found] == [("shop", "a")]


@pytest.fixture
def world() -> tuple[MC, applications.Reconciler, Clock]:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    clock = Clock()
    return mc, app_fakes.reconciler(mc, app_fakes.Recorder(), clock=clock), clock
