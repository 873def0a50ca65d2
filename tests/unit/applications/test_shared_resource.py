"""KubeVela's ``shared-resource`` policy, within one hub namespace: the first Application
to create a selected object owns it (writes it, marked shareable), another Application of
the same namespace whose policy selects it shares it (writes nothing, records it as
shared, reads it for health), and the object outlives its owner while a sharer is left
(it goes to that sharer). KubeVela's own e2e case is re-typed on the in-memory fleet.
The attacks: an Application of another namespace claiming or inheriting the object, a
sharer changing its content or deleting it, a forged tracker naming it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from federation.applications import compile as compile_
from federation.applications import model, resource_policies, tracker
from federation.controllers import applications
from federation.controllers.applications.settings import ApplicationSettings
from federation.hub import manifests
from federation.placement import clusters as clusters_
from federation.runtime.reconcile import Request
from tests.unit.applications.test_controller import MC
from tests.unit.applications.test_controller_workflow_io import without_nulls
from tests.unit.controllers import fakes
from tests.unit.controllers.applications import fakes as app_fakes

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2", "member3")]
SETTINGS = ApplicationSettings(local_cluster="member1")


def config_map(name: str, value: str = "value") -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"key": value}}


def sharing_app(name: str, namespace: str = "shop", value: str = "value",
                policy: bool = True) -> JSON:
    """KubeVela's ``Test applications sharing resources`` (test/e2e-multicluster-test):
    a shared ConfigMap ``shared`` and one of its own, the policy selecting the first by
    component name."""
    spec: JSON = {"components": [
        {"name": f"shared-resource-{name}", "type": "k8s-objects",
         "properties": {"objects": [config_map("shared", value)]}},
        {"name": f"no-shared-resource-{name}", "type": "k8s-objects",
         "properties": {"objects": [config_map(f"non-shared-{name}")]}}]}
    if policy:
        spec["policies"] = [{"name": "shared-resource", "type": "shared-resource",
                             "properties": {"rules": [{"selector": {
                                 "componentNames": [f"shared-resource-{name}"]}}]}}]
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


async def reconcile(mc: MC, namespace: str, name: str, times: int = 3) -> JSON | None:
    """Reconciles of one Application as it is on the hub (its clean-up once it is gone),
    each by a new controller; its status after them."""
    for _ in range(times):
        reconciler = app_fakes.reconciler(mc, app_fakes.Recorder(), SETTINGS)
        await reconciler.reconcile(Request("hub", applications.APP_KIND, namespace, name))
        live = mc.find("hub", "Application", name, namespace)
        if live is None:
            continue
        live["status"] = without_nulls(live["status"])
        mc.put("hub", live)
    live = mc.find("hub", "Application", name, namespace)
    return live["status"] if live is not None else None


def delete_app(mc: MC, namespace: str, name: str) -> None:
    key = next(k for k in mc.objects if k[0] == "hub" and k[1] == "applications"
               and k[2:] == (namespace, name))
    del mc.objects[key]


def cm(mc: MC, name: str, namespace: str = "shop") -> JSON | None:
    return mc.find("member1", "ConfigMap", name, namespace)


def owner_of(obj: JSON | None) -> str | None:
    assert obj is not None
    return manifests.application_of(obj)


def entries(mc: MC, namespace: str, name: str) -> dict[str, tracker.Entry]:
    rt = mc.find("hub", "ResourceTracker", name, namespace)
    assert rt is not None
    found = [tracker.Entry.from_json(e) for e in rt["spec"]["resources"]]
    return {e.name: e for e in found}


@pytest.fixture
def mc() -> MC:
    fleet = MC(fakes.cluster_set(*fakes.MEMBERS))
    fleet.put("member1", {"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": "shop"}})
    return fleet


async def deploy(mc: MC, *apps: JSON) -> None:
    for body in apps:
        mc.put("hub", body)
        status = await reconcile(mc, body["metadata"]["namespace"], body["metadata"]["name"])
        assert status is not None and status["status"] == "running", status


# -- KubeVela's case -------------------------------------------------------------------------


async def test_kubevelas_three_applications_share_one_configmap(mc: MC) -> None:
    """app1 creates ``shared``, app2 and app3 share it; deleting app2 keeps it, deleting
    app1 (its owner) hands it to app3, deleting app3 deletes it."""
    await deploy(mc, sharing_app("app1"), sharing_app("app2"), sharing_app("app3"))
    assert owner_of(cm(mc, "shared")) == "shop/app1"
    shared = cm(mc, "shared")
    assert shared is not None
    assert shared["metadata"]["annotations"][resource_policies.SHARED_ANNOTATION] == "true"
    assert entries(mc, "shop", "app2")["shared"].shared
    assert not entries(mc, "shop", "app1")["shared"].shared
    assert all(cm(mc, f"non-shared-app{n}") is not None for n in (1, 2, 3))

    delete_app(mc, "shop", "app2")
    await reconcile(mc, "shop", "app2", 1)
    assert owner_of(cm(mc, "shared")) == "shop/app1"
    assert cm(mc, "non-shared-app2") is None

    delete_app(mc, "shop", "app1")
    await reconcile(mc, "shop", "app1", 1)
    assert owner_of(cm(mc, "shared")) == "shop/app3"
    assert cm(mc, "non-shared-app1") is None
    assert mc.find("hub", "ResourceTracker", "app1", "shop") is None

    await reconcile(mc, "shop", "app3")  # the heir now writes it as its own
    assert not entries(mc, "shop", "app3")["shared"].shared
    delete_app(mc, "shop", "app3")
    await reconcile(mc, "shop", "app3", 1)
    assert cm(mc, "shared") is None
    assert cm(mc, "non-shared-app3") is None


def stop_rendering_the_shared_object(mc: MC, name: str) -> None:
    """shop/``name`` on the hub without its first component (the one rendering the shared
    ConfigMap), its metadata and status kept."""
    without = sharing_app(name)
    del without["spec"]["components"][0]
    live = mc.find("hub", "Application", name, "shop")
    assert live is not None
    mc.put("hub", {**without, "metadata": live["metadata"], "status": live["status"]})


async def test_the_owner_no_longer_rendering_it_hands_it_to_a_sharer(mc: MC) -> None:
    await deploy(mc, sharing_app("app1"), sharing_app("app2"))
    stop_rendering_the_shared_object(mc, "app1")
    await reconcile(mc, "shop", "app1", 1)
    assert owner_of(cm(mc, "shared")) == "shop/app2"
    assert "shared" not in entries(mc, "shop", "app1")  # handed over: out of its tracker


async def test_the_sharer_reads_the_owners_content_and_is_healthy(mc: MC) -> None:
    """Its own render differs: the owner's content stays, the sharer's step succeeds."""
    await deploy(mc, sharing_app("app1", value="one"), sharing_app("app2", value="two"))
    shared = cm(mc, "shared")
    assert shared is not None and shared["data"] == {"key": "one"}


async def test_without_the_owners_policy_the_object_is_not_shared(mc: MC) -> None:
    """KubeVela: 'controlled by app1 but is not sharable'."""
    await deploy(mc, sharing_app("app1", policy=False))
    mc.put("hub", sharing_app("app2"))
    status = await reconcile(mc, "shop", "app2")
    assert "exists and was placed by Application shop/app1; not shared: its owner's " \
           "shared-resource policy does not select it" in str(status)
    assert "shared" not in entries(mc, "shop", "app2")


# -- attacks --------------------------------------------------------------------------------


async def test_attack_an_application_of_another_namespace_cannot_share_or_inherit(
        mc: MC) -> None:
    """bank's Application, granted the member namespace shop, names shop's shared
    ConfigMap under the same policy: refused, nothing recorded, nothing written; and
    when shop's owner goes, the object is deleted, not handed to bank."""
    mc.put("hub", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "bank", "annotations": {"apps.federation.io/target-namespaces": "shop"}}})
    await deploy(mc, sharing_app("app1"))
    intruder = sharing_app("thief", namespace="bank", value="stolen")
    for component in intruder["spec"]["components"]:
        for obj in component["properties"]["objects"]:
            obj["metadata"]["namespace"] = "shop"
    mc.put("hub", intruder)
    before = copy.deepcopy(cm(mc, "shared"))
    status = await reconcile(mc, "bank", "thief")
    assert "not shared: its owner is of another namespace than bank" in str(status)
    assert cm(mc, "shared") == before
    assert "shared" not in entries(mc, "bank", "thief")

    delete_app(mc, "shop", "app1")
    await reconcile(mc, "shop", "app1", 1)
    assert cm(mc, "shared") is None


async def test_attack_a_forged_tracker_of_another_namespace_inherits_nothing(
        mc: MC) -> None:
    """bank writes its own tracker listing shop's object as shared, with a live
    Application: shop's owner looks for heirs in shop only, and deletes it."""
    await deploy(mc, sharing_app("app1"))
    mc.put("hub", sharing_app("thief", namespace="bank", policy=False))
    mc.put("hub", {"apiVersion": "core.oam.dev/v1beta1", "kind": "ResourceTracker",
                   "metadata": {"name": "thief", "namespace": "bank"},
                   "spec": {"applicationName": "thief", "applicationUID": "x", "resources": [
                       {"cluster": "member1", "apiVersion": "v1", "kind": "ConfigMap",
                        "namespace": "shop", "name": "shared", "shared": True}]}})
    delete_app(mc, "shop", "app1")
    await reconcile(mc, "shop", "app1", 1)
    assert cm(mc, "shared") is None


async def test_attack_a_sharer_never_writes_the_object(mc: MC) -> None:
    """app2's render of ``shared`` differs (another value, a label): no write of it."""
    await deploy(mc, sharing_app("app1", value="one"))
    mc.writes.clear()
    greedy = sharing_app("app2", value="mine")
    greedy["spec"]["components"][0]["traits"] = [
        {"type": "labels", "properties": {"owner": "app2"}}]
    await deploy(mc, greedy)
    assert not [w for w in mc.writes if w[1] == "member1" and w[2].endswith("/shared")]
    shared = cm(mc, "shared")
    assert shared is not None and shared["data"] == {"key": "one"}
    assert "owner" not in (shared["metadata"].get("labels") or {})


async def test_attack_a_sharer_leaving_or_deleted_never_deletes_it(mc: MC) -> None:
    await deploy(mc, sharing_app("app1"), sharing_app("app2"))
    stop_rendering_the_shared_object(mc, "app2")
    await reconcile(mc, "shop", "app2")
    assert owner_of(cm(mc, "shared")) == "shop/app1"
    assert "shared" not in entries(mc, "shop", "app2")
    await deploy(mc, sharing_app("app3"))
    delete_app(mc, "shop", "app3")
    await reconcile(mc, "shop", "app3", 1)
    assert owner_of(cm(mc, "shared")) == "shop/app1"


async def test_a_sharer_whose_application_is_gone_is_no_heir(mc: MC) -> None:
    """app2's tracker still lists it (its clean-up not run yet), app2 itself is gone:
    the owner deletes the object rather than handing it to nobody."""
    await deploy(mc, sharing_app("app1"), sharing_app("app2"))
    delete_app(mc, "shop", "app2")
    delete_app(mc, "shop", "app1")
    await reconcile(mc, "shop", "app1", 1)
    assert cm(mc, "shared") is None


# -- the policy ------------------------------------------------------------------------------


def test_the_policy_marks_what_it_selects_and_nothing_else() -> None:
    result = compile_.compile_app(sharing_app("app1")["spec"], "app1", "shop", {}, FLEET,
                                  local_cluster="member1")
    objects = {o["metadata"]["name"]: o for t in result.targets.values()
               for objs in t.clusters.values() for o in objs}
    assert objects["shared"]["metadata"]["annotations"] == {
        resource_policies.SHARED_ANNOTATION: "true"}
    assert resource_policies.SHARED_ANNOTATION not in (
        objects["non-shared-app1"]["metadata"].get("annotations") or {})


@pytest.mark.parametrize(("props", "words"), [
    ({"rules": [{"selector": {"componentNames": "x"}}]}, r"componentNames"),
    ({"rules": [{}]}, r"selector"),
    ({"rules": [{"selector": {"resourceTypes": ["ConfigMap"]}, "strategy": "x"}]},
     r"strategy"),
    ({"rule": []}, r"rule"),
])
def test_a_malformed_policy_is_refused_by_name(props: JSON, words: str) -> None:
    spec = sharing_app("app1")["spec"]
    spec["policies"][0]["properties"] = props
    with pytest.raises(model.AppError, match=words):
        compile_.compile_app(spec, "app1", "shop", {}, FLEET, local_cluster="member1")


@pytest.mark.parametrize(("annotations", "labels", "words"), [
    ({manifests.APPLICATION_ANNOTATION: "bank/x", resource_policies.SHARED_ANNOTATION:
      "true"}, {manifests.MANAGED_BY_LABEL: manifests.MANAGER}, "another namespace"),
    ({manifests.APPLICATION_ANNOTATION: "shop/x"},
     {manifests.MANAGED_BY_LABEL: manifests.MANAGER}, "does not select it"),
    ({resource_policies.SHARED_ANNOTATION: "true"}, {}, "only an object an Application"),
    ({resource_policies.SHARED_ANNOTATION: "true"},
     {manifests.MANAGED_BY_LABEL: manifests.MANAGER}, "only an object an Application"),
])
def test_who_may_share_an_object(annotations: dict[str, str], labels: dict[str, str],
                                 words: str) -> None:
    live = {"metadata": {"annotations": annotations, "labels": labels}}
    assert words in str(resource_policies.not_shared(live, "shop"))
    ok = {"metadata": {"annotations": {manifests.APPLICATION_ANNOTATION: "shop/x",
                                       resource_policies.SHARED_ANNOTATION: "true"},
                       "labels": {manifests.MANAGED_BY_LABEL: manifests.MANAGER}}}
    assert resource_policies.not_shared(ok, "shop") is None
