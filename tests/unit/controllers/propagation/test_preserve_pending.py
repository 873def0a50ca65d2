"""``preserveResourcesOnDeletion`` with members that were away, and with ``propagateDeps``:
only the template's deletion preserves, and only on the clusters of its decision. A
cluster the template had left while it was away still loses its copy (at the deletion,
or through the clean-up controller when it returns); a member of the decision away at the
deletion gets its copy released when it returns; the workload's dependencies are released
with it (not left marked ours for another workload's clean-up to delete), unless another
workload still carries them there. Whole reconciles against the in-memory fleet."""

from __future__ import annotations

import pytest

from federation.contexts.client import ClusterUnavailable
from federation.controllers import cleanup
from federation.controllers.propagation.reconciler import Reconciler
from federation.hub import bindings, manifests, preservation
from tests.unit.controllers.fakes import (
    FakeMC,
    FakeRecorder,
    cluster_set,
    config_map,
    reconciler,
    request_for,
)
from tests.unit.controllers.propagation.test_karmada_behaviour import (
    MEMBERS,
    deployment_policy,
    edit,
    mounting,
)

WEB_KEY = ("hub", "deployments", "shop", "web")


async def placed_on_both(mc: FakeMC) -> tuple[Reconciler, cleanup.Reconciler]:
    """web (preserving, carrying app-config) placed on both members; propagation and the
    clean-up controller wired as ``fedctl run`` wires them."""
    mc.put("hub", deployment_policy(preserveResourcesOnDeletion=True, propagateDeps=True))
    mc.put("hub", config_map("app-config"))
    r = reconciler(mc)
    await r.reconcile(request_for(mc.put("hub", mounting("app-config"))))
    for member in MEMBERS:
        assert manifests.is_ours(mc.find(member, "Deployment", "web", "shop") or {})
        assert manifests.is_ours(mc.find(member, "ConfigMap", "app-config", "shop") or {})
    leftovers = cleanup.Reconciler(mc, "hub", FakeRecorder())
    return r, leftovers


async def leave_member2_while_away(mc: FakeMC, r: Reconciler) -> None:
    """The policy drops member2 while it is away: its copy is pending clean-up."""
    mc.set_down("member2", True)
    edit(mc, "PropagationPolicy", "web", "shop", lambda p: p["spec"]["placement"].update(
        clusterAffinity={"clusterNames": ["member1"]}))
    with pytest.raises(ClusterUnavailable):  # member2's copy could not go: retried later
        await r.reconcile(request_for(mc.find("hub", "Deployment", "web", "shop") or {}))
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None and binding["spec"]["pendingCleanup"] == ["member2"]


def kept_and_released(mc: FakeMC, member: str, kind: str, name: str) -> bool:
    found = mc.find(member, kind, name, "shop")
    return found is not None and not manifests.is_ours(found) and not any(
        k.startswith("federation.io/") for k in (found["metadata"].get("annotations") or {}))


async def test_a_cluster_left_while_away_loses_its_copy_at_the_deletion() -> None:
    """The auditor's case: member2 left while away, back when the template is deleted;
    member1 (the decision) keeps its copy released, member2's copy and dependency go."""
    mc = FakeMC(cluster_set(*MEMBERS))
    r, _ = await placed_on_both(mc)
    await leave_member2_while_away(mc, r)
    template = mc.find("hub", "Deployment", "web", "shop")
    assert template is not None
    mc.set_down("member2", False)
    del mc.objects[WEB_KEY]
    await r.reconcile(request_for(template))
    assert kept_and_released(mc, "member1", "Deployment", "web")
    assert kept_and_released(mc, "member1", "ConfigMap", "app-config")
    assert mc.find("member2", "Deployment", "web", "shop") is None
    assert mc.find("member2", "ConfigMap", "app-config", "shop") is None
    assert mc.find("hub", "ResourceBinding", "web-deployment", "shop") is None


async def test_a_cluster_left_while_away_and_still_away_is_deleted_when_back() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    r, leftovers = await placed_on_both(mc)
    await leave_member2_while_away(mc, r)
    template = mc.find("hub", "Deployment", "web", "shop")
    assert template is not None
    del mc.objects[WEB_KEY]
    await r.reconcile(request_for(template))
    assert kept_and_released(mc, "member1", "Deployment", "web")
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None and binding["spec"]["templateDeleted"] is True
    assert binding["spec"]["pendingCleanup"] == ["member2"]
    assert binding["spec"][preservation.LEFT] == ["member2"]
    mc.set_down("member2", False)
    assert await leftovers.reconcile(request_for(binding)) is None
    assert mc.find("member2", "Deployment", "web", "shop") is None
    assert mc.find("member2", "ConfigMap", "app-config", "shop") is None
    assert mc.find("hub", "ResourceBinding", "web-deployment", "shop") is None
    assert kept_and_released(mc, "member1", "ConfigMap", "app-config")


async def test_a_member_of_the_decision_away_at_the_deletion_is_released_when_back() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    r, leftovers = await placed_on_both(mc)
    template = mc.find("hub", "Deployment", "web", "shop")
    assert template is not None
    mc.set_down("member2", True)
    del mc.objects[WEB_KEY]
    await r.reconcile(request_for(template))
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None and binding["spec"]["pendingCleanup"] == ["member2"]
    assert binding["spec"][preservation.LEFT] == []
    assert kept_and_released(mc, "member1", "Deployment", "web")
    mc.set_down("member2", False)
    assert await leftovers.reconcile(request_for(binding)) is None
    assert kept_and_released(mc, "member2", "Deployment", "web")
    assert kept_and_released(mc, "member2", "ConfigMap", "app-config")
    assert mc.find("hub", "ResourceBinding", "web-deployment", "shop") is None


async def test_a_preserved_workloads_dependency_another_carries_stays_ours_there() -> None:
    """api (not preserving) carries app-config on member2: web's deletion releases
    app-config on member1 only; on member2 it stays ours, and api's deletion removes it."""
    mc = FakeMC(cluster_set(*MEMBERS))
    api_policy = deployment_policy("api", propagateDeps=True)
    api_policy["spec"]["placement"] = {"clusterAffinity": {"clusterNames": ["member2"]}}
    mc.put("hub", api_policy)
    api = mounting("app-config")
    api["metadata"]["name"] = "api"
    api["spec"]["selector"]["matchLabels"] = api["spec"]["template"]["metadata"]["labels"] = \
        {"app": "api"}
    r, _ = await placed_on_both(mc)
    api_template = mc.put("hub", api)
    await r.reconcile(request_for(api_template))
    template = mc.find("hub", "Deployment", "web", "shop")
    assert template is not None
    del mc.objects[WEB_KEY]
    await r.reconcile(request_for(template))
    assert kept_and_released(mc, "member1", "ConfigMap", "app-config")
    assert manifests.is_ours(mc.find("member2", "ConfigMap", "app-config", "shop") or {})
    del mc.objects[("hub", "deployments", "shop", "api")]
    await r.reconcile(request_for(api_template))
    assert mc.find("member2", "ConfigMap", "app-config", "shop") is None
    assert kept_and_released(mc, "member1", "ConfigMap", "app-config")


def test_a_record_from_before_the_field_releases_every_pending_copy() -> None:
    """A deleted, preserving binding written before leftBeforeDeletion existed: keeping
    an object loses nothing, so each pending copy is released as it was then."""
    old = {"spec": {"preserveResourcesOnDeletion": True, "templateDeleted": True,
                    "pendingCleanup": ["member2"], "clusters": []}}
    record = bindings.BindingRecord.of
    assert preservation.releases(record(old), "member2")
    assert not preservation.releases(
        record({"spec": {**old["spec"], preservation.LEFT: ["member2"]}}), "member2")
    assert not preservation.releases(record({"spec": {"templateDeleted": True}}), "member2")
