"""Finalisation of a deleted template: only our copies of this template are deleted; an
orphaned template's copies stay; clusters that left the fleet do not block the record."""

from __future__ import annotations

from federation.controllers import propagation
from federation.hub import api, manifests
from tests.unit.controllers.fakes import (
    FakeMC,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)

MEMBERS = ("member1", "member2")


async def placed(template_doc: dict[str, object]) -> tuple[FakeMC, propagation.Reconciler,
                                                            dict[str, object]]:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("a", MEMBERS))
    template = mc.put("hub", template_doc)
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    return mc, r, template


def delete_template(mc: FakeMC) -> None:
    del mc.objects[("hub", "configmaps", "shop", "a")]


async def test_orphaned_template_leaves_its_copies_and_drops_its_binding() -> None:
    """federation.io/orphan: "true": the template's delete removes the binding only."""
    doc = config_map("a")
    doc["metadata"]["annotations"] = {api.ORPHAN_ANNOTATION: "true"}
    mc, r, template = await placed(doc)
    delete_template(mc)
    await r.reconcile(request_for(template))
    assert all(mc.find(m, "ConfigMap", "a", "shop") is not None for m in MEMBERS)
    assert mc.find("hub", "ResourceBinding", "a-configmap", "shop") is None


async def test_copy_of_a_newer_template_and_foreign_objects_are_not_deleted() -> None:
    """member1 holds a copy marked with another template's uid, member2 an object that is
    not ours: neither is deleted, and the record goes (nothing of this template is left)."""
    mc, r, template = await placed(config_map("a"))
    newer = mc.find("member1", "ConfigMap", "a", "shop")
    assert newer is not None
    newer["metadata"]["annotations"][manifests.TEMPLATE_UID_ANNOTATION] = "newer-uid"
    mc.put("member1", newer)
    mc.put("member2", config_map("a", data="theirs"))
    delete_template(mc)
    await r.reconcile(request_for(template))
    assert mc.writes[-1] == ("delete", "hub", "ResourceBinding/a-configmap")
    assert not [w for w in mc.writes if w[0] == "delete" and w[1] != "hub"]


async def test_cluster_that_left_the_fleet_does_not_hold_the_record() -> None:
    """A recorded cluster no longer in the ClusterSet is skipped, not kept pending for
    ever: the other copies and the binding are deleted."""
    mc, r, template = await placed(config_map("a"))
    binding = mc.find("hub", "ResourceBinding", "a-configmap", "shop")
    assert binding is not None
    binding["spec"]["clusters"].append({"name": "member9", "replicas": 0})
    mc.put("hub", binding)
    delete_template(mc)
    await r.reconcile(request_for(template))
    assert mc.find("hub", "ResourceBinding", "a-configmap", "shop") is None
    assert all(mc.find(m, "ConfigMap", "a", "shop") is None for m in MEMBERS)
