"""A binding nobody can read: whoever may write ResourceBindings in a namespace can write
anything in their schemaless spec. Propagation reads the record once, typed; one it cannot
read is reported (a Warning event naming the field) and nothing is acted on: no copy
written or deleted on its word, the binding not overwritten (it may list copies still to
delete). Whole reconciles against the in-memory fleet."""

from __future__ import annotations

from typing import Any

from federation.controllers.propagation.schedule import schedule
from federation.hub import bindings
from tests.unit.controllers.fakes import (
    MEMBERS,
    FakeContext,
    FakeMC,
    FakeRecorder,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)
from tests.unit.controllers.propagation.test_karmada_groups import (
    affinity_policy,
    peer_binding,
    scheduled,
    template,
)


async def placed_fleet() -> tuple[FakeMC, Any]:
    """ConfigMap shop/a propagated to member1 and member2, its binding written."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("a", ("member1", "member2")))
    mc.put("hub", config_map("a"))
    r = reconciler(mc)
    assert await r.reconcile(request_for(config_map("a"))) is None
    assert mc.find("member2", "ConfigMap", "a", "shop") is not None
    return mc, r


def tamper(mc: FakeMC, **spec: Any) -> dict[str, Any]:
    binding = mc.find("hub", "ResourceBinding", "a-configmap", "shop")
    assert binding is not None
    binding["spec"].update(spec)
    return mc.put("hub", binding)


async def test_a_tampered_record_stops_the_template_and_is_not_overwritten() -> None:
    """The attack: ``spec.pendingCleanup`` written as a string (the old reader took its
    letters for clusters and rewrote the record without the list), and the policy narrowed
    to member1. Now: a Warning naming the field, no member write, no delete, the binding as
    the tenant left it."""
    mc, r = await placed_fleet()
    tampered = tamper(mc, pendingCleanup="member3")
    mc.put("hub", duplicated_policy("a", ("member1",)))
    writes = len(mc.writes)
    result = await r.reconcile(request_for(config_map("a")))
    assert result is not None and result.requeue_after is not None  # looked at again
    assert mc.writes[writes:] == []
    assert mc.find("member2", "ConfigMap", "a", "shop") is not None
    assert mc.find("hub", "ResourceBinding", "a-configmap", "shop") == tampered
    recorder = r.recorder
    assert isinstance(recorder, FakeRecorder)
    (kind, reason, message), = recorder.events
    assert (kind, reason) == ("Warning", "BindingUnreadable")
    assert "spec.pendingCleanup is not a list" in message and "member3" not in message


async def test_a_fixed_record_is_taken_up_again() -> None:
    """Once the field is put right, the next look acts on the record as before."""
    mc, r = await placed_fleet()
    tamper(mc, pendingCleanup="member3")
    mc.put("hub", duplicated_policy("a", ("member1",)))
    await r.reconcile(request_for(config_map("a")))
    tamper(mc, pendingCleanup=[])
    assert await r.reconcile(request_for(config_map("a"))) is None
    assert mc.find("member2", "ConfigMap", "a", "shop") is None


async def test_an_unknown_field_is_refused_too() -> None:
    """A field we never write is not ours to keep or drop: the record is refused by it."""
    mc, r = await placed_fleet()
    tamper(mc, clusterz=["member3"])
    writes = len(mc.writes)
    await r.reconcile(request_for(config_map("a")))
    assert mc.writes[writes:] == []
    assert isinstance(r.recorder, FakeRecorder)
    assert "spec has unknown field 'clusterz'" in r.recorder.events[-1][2]


async def test_a_gone_template_with_an_unreadable_record_deletes_nothing() -> None:
    """The template is deleted while its record is unreadable (``spec`` a string: the old
    reader crashed on it): no copy is deleted on its word and the binding stays."""
    mc, r = await placed_fleet()
    binding = mc.find("hub", "ResourceBinding", "a-configmap", "shop")
    assert binding is not None
    binding["spec"] = "gone"
    mc.put("hub", binding)
    del mc.objects[("hub", "configmaps", "shop", "a")]
    writes = len(mc.writes)
    assert await r.reconcile(request_for(config_map("a"))) is None
    assert mc.writes[writes:] == []
    assert mc.find("member1", "ConfigMap", "a", "shop") is not None


async def test_an_unreadable_peer_binding_is_no_peer() -> None:
    """Another binding of the namespace, unreadable (``clusters`` of strings), is skipped
    by the reader of workload-affinity peers (as the old lenient reader skipped its
    entries): it says nothing a neighbour could be held to, and the neighbour is still
    placed by its readable peer."""
    garbage = {"apiVersion": "work.federation.io/v1alpha1", "kind": "ResourceBinding",
               "metadata": {"name": "x-configmap", "namespace": "shop"},
               "spec": {"clusters": ["member1"],
                        bindings.AFFINITY_GROUPS: {"affinityGroup": "group=x"}}}
    ctx = FakeContext({"ResourceBinding": [garbage, peer_binding("b", ["member3"],
                                                                 affinity="group=x")]})
    found = scheduled(ctx, template("a", {"group": "x"}), affinity_policy())
    assert await schedule(ctx, found) is None
    assert found.decision is not None and list(found.decision.clusters) == ["member3"]
