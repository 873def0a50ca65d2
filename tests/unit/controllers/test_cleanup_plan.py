"""The clean-up controller's removal plan: what it intends for a deleted template's
leftovers (the copy's delete or release, the binding's update or delete), built from reads
alone and run through the kit's executor, never written directly."""

from __future__ import annotations

from typing import Any

from federation.controllers import cleanup
from federation.controllers.kit import plan
from federation.hub import bindings, manifests, preservation
from tests.unit.controllers.fakes import (
    MEMBERS,
    FakeMC,
    FakeRecorder,
    cluster_set,
    config_map,
    request_for,
)
from tests.unit.controllers.test_orphans import leftover_binding, old_copy

JSON = dict[str, Any]


def leftover(spec: JSON | None = None, name: str = "c"
             ) -> tuple[FakeMC, JSON, cleanup.Reconciler]:
    """A deleted template's binding pending on member2, which holds our copy."""
    mc = FakeMC(cluster_set(*MEMBERS))
    binding = leftover_binding(name, ["member2"])
    binding["spec"].update(spec or {})
    stored = mc.put("hub", binding)
    mc.put("member2", old_copy(name))
    return mc, stored, cleanup.Reconciler(mc, "hub", FakeRecorder())


async def plan_of(r: cleanup.Reconciler, binding: JSON) -> cleanup.Removal:
    return await r.removal_plan(binding, bindings.BindingRecord.of(binding))


async def test_the_copy_is_deleted_exactly_and_nothing_is_written_while_planning() -> None:
    """One DELETE of our copy, only of the version read (UID and resourceVersion as
    preconditions), carrying the template's identity for the executor to check."""
    mc, binding, r = leftover()
    removal = await plan_of(r, binding)
    assert mc.writes == []
    [vertex] = list(removal.dag)
    live = mc.find("member2", "ConfigMap", "c", "shop")
    assert live is not None
    assert (vertex.cluster, vertex.action) == ("member2", plan.Action.DELETE)
    assert vertex.obj[plan.PRECONDITIONS] == {
        "uid": live["metadata"]["uid"], "resourceVersion": live["metadata"]["resourceVersion"]}
    assert vertex.expect == plan.Identity("", "ConfigMap", "shop", "c")


async def test_a_preserving_template_releases_its_copy() -> None:
    """preserveResourcesOnDeletion: an UPDATE without our marks, not a delete; a cluster
    the template had left before its deletion still loses its copy."""
    _, binding, r = leftover({preservation.FIELD: True})
    [vertex] = list((await plan_of(r, binding)).dag)
    assert vertex.action is plan.Action.UPDATE
    assert not manifests.is_propagated(vertex.obj)
    _, left, r = leftover({preservation.FIELD: True, preservation.LEFT: ["member2"]})
    [vertex] = list((await plan_of(r, left)).dag)
    assert vertex.action is plan.Action.DELETE


async def test_nothing_is_planned_for_a_copy_that_is_not_ours_any_more() -> None:
    """Someone else's object of the name, or the copy a re-created template took over:
    no vertex, and the cluster is done."""
    mc, binding, r = leftover()
    foreign = config_map("c")
    mc.put("member2", foreign)
    assert len((await plan_of(r, binding)).dag) == 0
    mc, binding, r = leftover()
    again = mc.put("hub", config_map("c"))
    mc.put("member2", manifests.mark(manifests.render(config_map("c"), None, False),
                                     again["metadata"]["uid"]))
    assert len((await plan_of(r, binding)).dag) == 0
    assert await r.reconcile(request_for(binding)) is None
    assert mc.find("member2", "ConfigMap", "c", "shop") is not None


async def test_an_unreadable_member_stays_pending_and_nothing_is_planned_there() -> None:
    mc, binding, r = leftover()
    mc.set_down("member2", True)
    removal = await plan_of(r, binding)
    assert len(removal.dag) == 0 and set(removal.unread) == {"member2"}
    result = await r.reconcile(request_for(binding))
    assert result is not None and result.requeue_after == r.retry
    assert mc.writes == []


async def test_the_binding_goes_through_the_executor_after_its_copies() -> None:
    """Every write (the member delete, then the binding's delete) is one of the writer's:
    a recording writer in its place sees them all, and the fleet sees nothing else."""
    mc, binding, r = leftover()
    seen: list[tuple[str, str, str]] = []
    inner = r.writer

    class Recording:
        async def create(self, cluster: str, obj: JSON) -> JSON:
            raise AssertionError("clean-up creates nothing")

        async def update(self, cluster: str, obj: JSON) -> JSON:
            seen.append(("update", cluster, obj["kind"]))
            return await inner.update(cluster, obj)

        async def apply(self, cluster: str, obj: JSON) -> JSON:
            raise AssertionError("clean-up applies nothing")

        async def patch_status(self, cluster: str, obj: JSON) -> JSON:
            raise AssertionError("bindings have no status subresource")

        async def delete(self, cluster: str, obj: JSON) -> JSON:
            seen.append(("delete", cluster, obj["kind"]))
            return await inner.delete(cluster, obj)

    r.writer = Recording()
    assert await r.reconcile(request_for(binding)) is None
    assert seen == [("delete", "member2", "ConfigMap"), ("delete", "hub", "ResourceBinding")]
    assert [(w[0], w[1]) for w in mc.writes] == [("delete", "member2"), ("delete", "hub")]


async def test_a_binding_naming_another_namespaces_template_is_not_acted_on() -> None:
    """The attack: a tenant of `shop` writes a leftover binding in `shop` whose
    spec.resource names `bank`'s template (deleted on the hub, its copy ours in member2).
    Clean-up deletes nothing in `bank` and leaves the binding alone."""
    mc = FakeMC(cluster_set(*MEMBERS))
    victim = old_copy("ledger")
    victim["metadata"]["namespace"] = "bank"
    mc.put("member2", victim)
    hostile = leftover_binding("ledger", ["member2"])
    hostile["spec"]["resource"]["namespace"] = "bank"
    stored = mc.put("hub", hostile)
    assert stored["metadata"]["namespace"] == "shop"
    r = cleanup.Reconciler(mc, "hub", FakeRecorder())
    assert await r.reconcile(request_for(stored)) is None
    assert mc.writes == []
    assert mc.find("member2", "ConfigMap", "ledger", "bank") is not None
    # And were a plan built for it anyway, the executor would refuse the delete: the copy's
    # identity is pinned to the binding's own namespace.
    removal = await plan_of(r, stored)
    for vertex in removal.dag:
        assert vertex.expect is not None and vertex.expect.namespace == "shop"


async def test_a_leftover_binding_nobody_can_read_is_not_acted_on() -> None:
    """The attack: a leftover binding rewritten with a field we never write (or one of the
    wrong shape) names member2's copy. Clean-up plans nothing on its word: no member delete,
    the binding neither updated nor deleted."""
    for tampered in ({"pendingCleanupAt": "now"}, {"pendingCleanup": "member2"}):
        mc, binding, r = leftover()
        binding["spec"].update(tampered)
        stored = mc.put("hub", binding)
        assert bindings.read(stored) is None
        assert await r.reconcile(request_for(stored)) is None
        assert mc.writes == []
        assert mc.find("member2", "ConfigMap", "c", "shop") is not None
        assert mc.find("hub", "ResourceBinding", "c-configmap", "shop") is not None
