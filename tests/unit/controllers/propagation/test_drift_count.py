"""Each drift we revert is counted, so a fight with a member's controller is visible."""

from __future__ import annotations

from federation.controllers import propagation
from federation.controllers.kit import plan
from tests.unit.controllers.fakes import FakeKinds, FakeMC, FakeRecorder, cluster_set


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
