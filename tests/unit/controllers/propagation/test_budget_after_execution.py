"""The disruption budget is settled after a reconcile's plan ran, never while it is built:
a failover move is taken once its writes succeeded; a reconcile whose writes fail, or that
stops early on bad input, takes nothing; a move whose template goes gives its budget back."""

from __future__ import annotations

from typing import Any

import pytest

from federation.contexts.client import ApiError, ClientError
from federation.controllers import propagation
from federation.controllers.propagation import disruption
from federation.hub import failover
from tests.unit.controllers.fakes import (
    MEMBERS,
    FakeMC,
    cluster_set,
    reconciler,
    request_for,
)

JSON = dict[str, Any]
T0 = 1_700_000_000.0
NOW = T0 + 60  # member2 went away at T0; the policy tolerates 30 s


def deployment(name: str = "web") -> JSON:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"replicas": 6, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


def divided_policy(clusters: tuple[str, ...] = MEMBERS) -> JSON:
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                     "placement": {
                         "clusterAffinity": {"clusterNames": list(clusters)},
                         "clusterTolerations": [{"key": failover.NOT_READY_TAINT,
                                                 "operator": "Exists", "effect": "NoExecute",
                                                 "tolerationSeconds": 30}],
                         "replicaScheduling": {
                             "replicaSchedulingType": "Divided",
                             "replicaDivisionPreference": "Weighted",
                             "weightPreference": {"staticWeightList": [
                                 {"targetCluster": {"clusterNames": [m]}, "weight": 1}
                                 for m in MEMBERS]}}}}}


def not_ready(name: str) -> JSON:
    return {"apiVersion": "cluster.federation.io/v1alpha1", "kind": "MemberCluster",
            "metadata": {"name": name},
            "spec": {"taints": [{"key": failover.NOT_READY_TAINT, "effect": effect,
                                 "timeAdded": failover.format_time(T0)}
                                for effect in ("NoSchedule", "NoExecute")]}}


class Refusing:
    """The reconciler's writer, refusing (403) every member create and update."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer

    async def create(self, cluster: str, obj: JSON) -> JSON:
        if cluster != "hub":
            raise ApiError(cluster, 403, "Forbidden", "refused")
        return dict(await self.writer.create(cluster, obj))

    async def update(self, cluster: str, obj: JSON) -> JSON:
        if cluster != "hub":
            raise ApiError(cluster, 403, "Forbidden", "refused")
        return dict(await self.writer.update(cluster, obj))

    async def apply(self, cluster: str, obj: JSON) -> JSON:
        return dict(await self.writer.apply(cluster, obj))

    async def patch_status(self, cluster: str, obj: JSON) -> JSON:
        return dict(await self.writer.patch_status(cluster, obj))

    async def delete(self, cluster: str, obj: JSON) -> JSON:
        return dict(await self.writer.delete(cluster, obj))


async def placed_then_lost() -> tuple[FakeMC, propagation.Reconciler, JSON]:
    """Six replicas placed 2/2/2; then member2 goes away (tainted since T0) and the clock
    is past its toleration: the next reconcile moves its 2 replicas."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", divided_policy())
    template = mc.put("hub", deployment())
    r = reconciler(mc)
    r.failover.clock = lambda: NOW
    r.failover.budget.clock = lambda: NOW
    await r.reconcile(request_for(template))
    assert mc.find("member2", "Deployment", "web", "shop") is not None
    mc.put("hub", not_ready("member2"))
    mc.set_down("member2", True)
    return mc, r, template


async def test_a_written_move_takes_budget() -> None:
    """The move's writes succeed: its 2 replicas count against the budget afterwards."""
    mc, r, template = await placed_then_lost()
    with pytest.raises(ClientError):  # member2 itself cannot be reached: retried
        await r.reconcile(request_for(template))
    assert r.failover.budget.in_use == 2
    copy = mc.find("member1", "Deployment", "web", "shop")
    assert copy is not None and copy["spec"]["replicas"] == 3


async def test_a_move_whose_writes_fail_takes_nothing() -> None:
    """Every member write refused: nothing moved, so nothing is taken (the build had found
    that the move fits; before, the build itself reserved it)."""
    _, r, template = await placed_then_lost()
    r.writer = Refusing(r.writer)
    with pytest.raises(ClientError):
        await r.reconcile(request_for(template))
    assert r.failover.budget.in_use == 0
    assert r.failover.budget.fits("another", r.failover.budget.max_moving)


async def test_a_reconcile_stopped_by_bad_input_takes_nothing() -> None:
    """The policy now names a cluster that does not exist: the chain stops after the
    failover step (UnknownCluster), nothing is written, nothing is taken."""
    mc, r, template = await placed_then_lost()
    policy = mc.find("hub", "PropagationPolicy", "web", "shop")
    assert policy is not None
    mc.put("hub", {**divided_policy((*MEMBERS, "nowhere")), "metadata": policy["metadata"]})
    await r.reconcile(request_for(template))
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None
    assert "UnknownCluster" in {c.get("reason") for c in binding["status"]["conditions"]}
    assert r.failover.budget.in_use == 0


async def test_a_deleted_template_gives_its_budget_back() -> None:
    """A template deleted while its move holds budget: the budget goes back at once, not
    after the lease timeout."""
    mc, r, template = await placed_then_lost()
    with pytest.raises(ClientError):
        await r.reconcile(request_for(template))
    assert r.failover.budget.in_use == 2
    del mc.objects[("hub", "deployments", "shop", "web")]
    await r.reconcile(request_for(template))
    assert r.failover.budget.in_use == 0


async def test_an_unselected_template_gives_its_budget_back() -> None:
    """No policy selects the template any more: its copies go, and so does its budget."""
    mc, r, template = await placed_then_lost()
    with pytest.raises(ClientError):
        await r.reconcile(request_for(template))
    del mc.objects[("hub", "propagationpolicies", "shop", "web")]
    await r.reconcile(request_for(template))
    assert r.failover.budget.in_use == 0


def test_reserve_takes_before_the_writes_and_settle_gives_back_a_failure() -> None:
    """The budget's own rule: a claim is taken right before its writes (atomically), given
    back when they failed, kept when written, and released when the move is done."""
    budget = disruption.DisruptionBudget(10, 300, lambda: NOW)
    failed = budget.reserve("a", disruption.Claim(moving=4))
    assert failed is not None and budget.in_use == 4
    budget.settle(failed, disruption.Claim(moving=4), written=False)
    assert budget.in_use == 0
    written = budget.reserve("a", disruption.Claim(moving=4))
    assert written is not None
    budget.settle(written, disruption.Claim(moving=4), written=True)
    assert budget.in_use == 4
    assert not budget.fits("b", 7) and budget.fits("b", 6)
    done = budget.reserve("a", disruption.Claim(done=True))
    assert done is not None
    budget.settle(done, disruption.Claim(done=True), written=True)
    assert budget.in_use == 0


def test_two_builds_that_both_fit_cannot_both_take_the_budget() -> None:
    """The race: two templates' builds each found their move fitting (the budget was free
    when each asked); the first to reach its writes takes it, the second is refused and
    writes nothing, so the budget never runs over."""
    budget = disruption.DisruptionBudget(6, 300, lambda: NOW)
    first, second = disruption.Claim(moving=4), disruption.Claim(moving=4)
    assert budget.fits("a", first.moving) and budget.fits("b", second.moving)
    assert budget.reserve("a", first) is not None
    assert budget.reserve("b", second) is None
    assert budget.in_use == 4


def test_a_failed_round_restores_what_an_earlier_round_held() -> None:
    """A template already moving 2 replicas asks for 4; its writes fail: it holds 2 again,
    not 0 (the earlier move is still under way) and not 4."""
    budget = disruption.DisruptionBudget(10, 300, lambda: NOW)
    earlier = budget.reserve("a", disruption.Claim(moving=2))
    assert earlier is not None
    budget.settle(earlier, disruption.Claim(moving=2), written=True)
    again = budget.reserve("a", disruption.Claim(moving=4))
    assert again is not None and budget.in_use == 4
    budget.settle(again, disruption.Claim(moving=4), written=False)
    assert budget.in_use == 2
