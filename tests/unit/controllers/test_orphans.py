"""No orphans: a re-created template finishes its predecessor's clean-up; a template that
placement refused still takes its binding with it when deleted."""

from __future__ import annotations

from typing import Any

import pytest

from federation.contexts.client import ClusterUnavailable
from federation.controllers import cleanup
from federation.hub import bindings, manifests
from tests.unit.controllers.fakes import (
    MEMBERS,
    FakeMC,
    FakeRecorder,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)


def old_copy(name: str) -> dict[str, Any]:
    """The member copy a deleted template (UID old-uid) left behind."""
    return manifests.mark(manifests.render(config_map(name), None, False), "old-uid")


def leftover_binding(name: str, pending: list[str]) -> dict[str, Any]:
    """What the propagation controller leaves when it released a deleted template."""
    deleted = config_map(name)
    deleted["metadata"]["uid"] = "old-uid"
    return bindings.binding_for(deleted, bindings.BindingRecord(
        bindings.TemplateRef.of(deleted), template_deleted=True,
        pending_cleanup=tuple(pending)))


def fleet_with_leftover(name: str, policy_clusters: tuple[str, ...]) -> FakeMC:
    """member2 down, holding the copy of a deleted `name`; `name` created again on the hub."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy(name, policy_clusters))
    mc.put("hub", leftover_binding(name, ["member2"]))
    mc.put("member2", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    mc.put("member2", old_copy(name))
    mc.put("hub", config_map(name))
    mc.set_down("member2", True)
    return mc


def pending_of(mc: FakeMC, name: str) -> list[str]:
    """The pending clean-up on the template's record, its binding."""
    binding = mc.find("hub", "ResourceBinding", f"{name}-configmap", "shop")
    assert binding is not None
    return list(binding["spec"]["pendingCleanup"])


async def test_recreated_template_inherits_the_pending_cleanup_and_finishes_it() -> None:
    """The leftover's pending member2 moves into the new template's record (never lost to
    an overwrite); when member2 is back the old copy is deleted and nothing stays pending."""
    mc = fleet_with_leftover("a", ("member1", "member3"))
    r = reconciler(mc)
    template = mc.find("hub", "ConfigMap", "a", "shop")
    assert template is not None
    with pytest.raises(ClusterUnavailable):  # member2 away: retried quietly
        await r.reconcile(request_for(template))
    assert pending_of(mc, "a") == ["member2"]
    binding = mc.find("hub", "ResourceBinding", "a-configmap", "shop")
    assert binding is not None
    assert binding["spec"]["templateDeleted"] is False
    assert binding["spec"]["resource"]["uid"] == template["metadata"]["uid"]
    assert binding["spec"]["pendingCleanup"] == ["member2"]

    mc.set_down("member2", False)
    assert await r.reconcile(request_for(template)) is None
    assert mc.find("member2", "ConfigMap", "a", "shop") is None
    assert pending_of(mc, "a") == []
    binding = mc.find("hub", "ResourceBinding", "a-configmap", "shop")
    assert binding is not None and binding["spec"]["pendingCleanup"] == []
    assert "CleanupPending" not in {c["type"] for c in binding["status"]["conditions"]}
    assert {mc.find(m, "ConfigMap", "a", "shop") is not None for m in ("member1", "member3")} \
        == {True}


async def test_recreated_template_placed_on_the_member_ends_with_its_own_copy_only() -> None:
    """Re-created with a policy that places on member2: back, member2 holds one copy, the
    new template's (its UID), and nothing is pending any more."""
    mc = fleet_with_leftover("b", MEMBERS)
    r = reconciler(mc)
    template = mc.find("hub", "ConfigMap", "b", "shop")
    assert template is not None
    with pytest.raises(ClusterUnavailable):
        await r.reconcile(request_for(template))
    mc.set_down("member2", False)
    for _ in range(2):  # back: the old copy goes (pending), then the new one is placed
        await r.reconcile(request_for(template))
    copy = mc.find("member2", "ConfigMap", "b", "shop")
    assert copy is not None
    assert copy["metadata"]["annotations"][manifests.TEMPLATE_UID_ANNOTATION] == \
        template["metadata"]["uid"]
    assert pending_of(mc, "b") == []


async def test_cleanup_never_deletes_a_copy_the_recreated_template_took_over() -> None:
    """The clean-up controller, looking at a leftover, leaves alone a copy that carries the
    UID of the live template of that name."""
    mc = fleet_with_leftover("c", MEMBERS)
    mc.set_down("member2", False)
    live = mc.find("hub", "ConfigMap", "c", "shop")
    assert live is not None
    taken = manifests.mark(manifests.render(config_map("c"), None, False),
                           live["metadata"]["uid"])
    mc.put("member2", taken)
    result = await cleanup.Reconciler(mc, "hub", FakeRecorder()).reconcile(
        request_for(leftover_binding("c", [])))
    assert result is None
    assert mc.find("member2", "ConfigMap", "c", "shop") is not None
    assert ("delete", "member2", "ConfigMap/c") not in mc.writes


async def test_cleanup_deletes_the_old_copy_and_then_the_binding() -> None:
    """No live template claims the copy: it is deleted (with its version as a precondition),
    then the leftover binding; an unreachable member stays pending without an error."""
    mc = fleet_with_leftover("d", MEMBERS)
    mc.objects = {k: v for k, v in mc.objects.items() if k[1] != "configmaps" or k[0] != "hub"}
    leftovers = cleanup.Reconciler(mc, "hub", FakeRecorder(), retry=1.5)
    request = request_for(leftover_binding("d", []))
    result = await leftovers.reconcile(request)
    assert result is not None and result.requeue_after == 1.5  # member2 still down
    mc.set_down("member2", False)
    assert await leftovers.reconcile(request) is None
    assert mc.find("member2", "ConfigMap", "d", "shop") is None
    assert mc.find("hub", "ResourceBinding", "d-configmap", "shop") is None


async def test_cleanup_does_not_delete_a_binding_rewritten_since_it_was_read() -> None:
    """The binding changed between our read and our delete (the new template took it over):
    the delete's resourceVersion precondition fails and the binding stays."""
    mc = fleet_with_leftover("e", MEMBERS)
    mc.set_down("member2", False)
    mc.objects = {k: v for k, v in mc.objects.items() if not (k[0] == "member2"
                                                              and k[1] == "configmaps")}
    stale = mc.find("hub", "ResourceBinding", "e-configmap", "shop")
    assert stale is not None
    current = dict(stale, spec={**stale["spec"], "templateDeleted": False})
    mc.put("hub", current)
    real_get = mc.get

    async def stale_get(resource: Any, name: str, namespace: str | None = None,
                        **kw: Any) -> dict[str, Any] | None:
        return stale if resource.kind == "ResourceBinding" else await real_get(
            resource, name, namespace, **kw)

    mc.get = stale_get  # type: ignore[method-assign]
    leftovers = cleanup.Reconciler(mc, "hub", FakeRecorder())
    result = await leftovers.reconcile(request_for(stale))
    assert result is not None and result.requeue_after == 0.0
    assert mc.find("hub", "ResourceBinding", "e-configmap", "shop") is not None


async def test_failed_placement_gets_a_binding_that_goes_with_its_template() -> None:
    """A policy naming an unknown cluster: Scheduled=False on a binding, no finalizer on the
    template; once the template is gone, its reconcile deletes the binding."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("lost", ("member1", "member9")))
    template = mc.put("hub", config_map("lost"))
    r = reconciler(mc)
    assert await r.reconcile(request_for(template)) is None
    binding = mc.find("hub", "ResourceBinding", "lost-configmap", "shop")
    assert binding is not None
    scheduled = {c["type"]: c for c in binding["status"]["conditions"]}["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "UnknownCluster")
    held = mc.find("hub", "ConfigMap", "lost", "shop")
    assert held is not None and not held["metadata"].get("finalizers")

    del mc.objects[("hub", "configmaps", "shop", "lost")]
    assert await r.reconcile(request_for(template)) is None
    assert mc.find("hub", "ResourceBinding", "lost-configmap", "shop") is None


async def test_failed_placement_still_cleans_what_it_inherited() -> None:
    """A re-created template whose policy fails keeps cleaning the predecessor's copies:
    the old copy goes when member2 is back, though nothing new is placed."""
    mc = fleet_with_leftover("f", ("member1", "member9"))
    r = reconciler(mc)
    template = mc.find("hub", "ConfigMap", "f", "shop")
    assert template is not None
    result = await r.reconcile(request_for(template))
    assert result is not None and result.requeue_after == r.settings.retry_pending
    assert pending_of(mc, "f") == ["member2"]
    mc.set_down("member2", False)
    assert await r.reconcile(request_for(template)) is None
    assert mc.find("member2", "ConfigMap", "f", "shop") is None
    assert pending_of(mc, "f") == []


@pytest.mark.parametrize("spec", [
    {"pendingCleanup": "member2"},  # a string: read as a list, its letters became clusters
    {"resource": {"apiVersion": "v1", "kind": "ConfigMap"}},  # no name: nothing to look up
])
async def test_cleanup_never_acts_on_a_malformed_binding(spec: dict[str, Any]) -> None:
    """Someone who can write bindings in a namespace writes a leftover whose spec has the
    wrong shape: the clean-up writes nothing (no patch of the record, no member delete) and
    leaves the binding and the member copy as they are."""
    mc = fleet_with_leftover("f", MEMBERS)
    mc.set_down("member2", False)
    hostile = leftover_binding("f", ["member2"])
    hostile["spec"].update(spec)
    stored = mc.put("hub", hostile)
    result = await cleanup.Reconciler(mc, "hub", FakeRecorder()).reconcile(
        request_for(hostile))
    assert result is None
    assert mc.writes == []
    assert mc.find("hub", "ResourceBinding", "f-configmap", "shop") == stored
    assert mc.find("member2", "ConfigMap", "f", "shop") is not None
