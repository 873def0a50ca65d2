"""Each drift we revert is counted, so a fight with a member's controller is visible."""

from __future__ import annotations

from federation.controllers import propagation
from federation.controllers.kit import plan
from tests.unit.controllers.fakes import (
    FakeKinds,
    FakeMC,
    FakeRecorder,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)


def outcome(action: plan.Action, reason: str, ok: bool = True) -> plan.Outcome:
    vertex = plan.Vertex("member1", action, {"kind": "Deployment",
                                             "metadata": {"name": "web", "namespace": "s"}},
                         reason=reason)
    return plan.Outcome(vertex, ok=ok)


def test_only_successful_drift_reverts_are_counted() -> None:
    counted: list[tuple[str, str]] = []
    mc = FakeMC(cluster_set())
    reconciler = propagation.Reconciler(mc, mc.clusters, FakeKinds(), FakeRecorder(),
                                        on_drift=lambda c, k: counted.append((c, k)))
    report = plan.Report({str(i): o for i, o in enumerate([
        outcome(plan.Action.UPDATE, "drift at /spec/replicas"),
        outcome(plan.Action.UPDATE, "drift at /spec/paused", ok=False),
        outcome(plan.Action.UPDATE, "content changed"),
        outcome(plan.Action.NOOP, "up to date")])})
    reconciler._count_drift(report)
    assert counted == [("member1", "Deployment")]


def reverts(mc: FakeMC) -> object:
    binding = mc.find("hub", "ResourceBinding", "cfg-configmap", "shop")
    assert binding is not None
    return binding["status"].get("driftReverts")


def drift(mc: FakeMC) -> None:
    """A member's controller changes our copy."""
    copy = mc.find("member1", "ConfigMap", "cfg", "shop")
    assert copy is not None
    copy["data"] = {"k": "theirs"}
    mc.put("member1", copy)


async def test_the_binding_counts_the_reverts_and_nothing_is_written_without_drift() -> None:
    """The count is a field of the binding, written with the revert; a round without
    drift writes nothing at all (the write budget holds)."""
    mc = FakeMC(cluster_set("member1", "member2"))
    mc.put("hub", duplicated_policy("cfg", ["member1", "member2"]))
    template = mc.put("hub", config_map("cfg"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert reverts(mc) is None
    before = len(mc.writes)
    await r.reconcile(request_for(template))
    assert mc.writes[before:] == []
    for expected in (1, 2):
        drift(mc)
        await r.reconcile(request_for(template))
        assert reverts(mc) == {"member1": expected}
        assert mc.find("member1", "ConfigMap", "cfg", "shop")["data"] == {"k": "v"}  # type: ignore[index]
    before = len(mc.writes)
    await r.reconcile(request_for(template))
    assert mc.writes[before:] == []
