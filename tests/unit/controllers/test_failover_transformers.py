"""The failover transformers inside a propagation Build: budget, requeue, graceful eviction."""

from __future__ import annotations

from typing import Any

from federation.contexts import client as kube
from federation.controllers import propagation
from federation.controllers.kit import plan
from federation.controllers.propagation import disruption, eviction
from federation.controllers.propagation import failover as transformers
from federation.hub import failover
from federation.placement import clusters as clusters_
from federation.placement import policy as policy_
from tests.unit.controllers.fakes import FakeContext

T0 = 1_700_000_000.0


def context(members: list[dict[str, Any]], budget: int = 100) -> FakeContext:
    return FakeContext(failover=disruption.Failover(
        disruption.FailoverSettings(max_moving_replicas=budget), clock=lambda: T0 + 60),
        now=T0 + 60)


def member(name: str, down_since: float | None = None) -> dict[str, Any]:
    taints = [] if down_since is None else [
        {"key": failover.NOT_READY_TAINT, "effect": effect,
         "timeAdded": failover.format_time(down_since)} for effect in ("NoSchedule", "NoExecute")]
    return {"metadata": {"name": name}, "spec": {"taints": taints}}


def recorded(decision: dict[str, int]) -> dict[str, Any]:
    """A binding whose spec records ``decision`` (the previous round's)."""
    return {"metadata": {"name": "b"}, "spec": {"clusters": [
        {"name": n, "replicas": r} for n, r in decision.items()]}}


def build(name: str, tolerate: int | None, members: list[dict[str, Any]],
          failover_spec: dict[str, Any] | None = None) -> propagation.Build:
    tolerations = [] if tolerate is None else [
        {"key": failover.NOT_READY_TAINT, "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": tolerate}]
    spec: dict[str, Any] = {
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
        "placement": {"clusterTolerations": tolerations}}
    if failover_spec is not None:
        spec["failover"] = failover_spec
    policy = policy_.Policy.model_validate({
        "apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": "shop"}, "spec": spec})
    template = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": "shop"}}
    found = propagation.Build(template=template, resource=kube.DEPLOYMENTS, hub="hub",
                              binding=recorded({"member1": 2, "member2": 2, "member3": 2}))
    found.policy = policy
    found.member_docs = {str(m["metadata"]["name"]): m for m in members}
    found.clusters = [clusters_.Cluster(name="member1"),
                      clusters_.Cluster(name="member2", ready=False),
                      clusters_.Cluster(name="member3")]
    return found


async def test_evicted_cluster_is_shown_not_ready_and_its_move_claims_budget() -> None:
    """Past the toleration: member2 is not ready for the engine; 2 replicas count as moving,
    claimed on the build (the budget itself is taken after the plan ran, not here)."""
    members = [member("member2", down_since=T0)]
    r = context(members)
    b = build("web", 30, members)
    await transformers.apply_failover(r, b)
    shown = {c.name: c.ready for c in b.clusters}
    assert shown == {"member1": True, "member2": False, "member3": True}
    assert b.failover.evicted == {"member2": T0 + 30}
    assert b.budget == disruption.Claim(moving=2)
    assert r.failover.budget.in_use == 0


async def test_held_cluster_requeues_the_template_at_its_deadline() -> None:
    """Within the toleration: held (ready, NoSchedule) and revisited when it runs out."""
    members = [member("member2", down_since=T0)]
    r = context(members)
    b = build("web", 100, members)
    verdict = await transformers.apply_failover(r, b)
    member2 = next(c for c in b.clusters if c.name == "member2")
    assert member2.ready and any(t.effect == "NoSchedule" for t in member2.taints)
    assert verdict is not None and not verdict.stop
    assert verdict.requeue_after is not None and round(verdict.requeue_after, 1) == 40.1


async def test_budget_refusal_holds_the_move_and_retries() -> None:
    """A move the fleet's budget cannot take now stays held and asks again shortly."""
    members = [member("member2", down_since=T0)]
    r = context(members, budget=2)
    assert r.failover.budget.admit("someone-else", 2)
    b = build("web", 30, members)
    verdict = await transformers.apply_failover(r, b)
    assert all(c.ready for c in b.clusters)
    assert "disruption budget" in b.failover.judgements["member2"].reason
    assert b.budget == disruption.Claim()
    assert verdict is not None and verdict.requeue_after == r.failover.settings.budget_retry


def copy(replicas: int, ready: int) -> dict[str, Any]:
    return {"kind": "Deployment", "metadata": {"generation": 1}, "spec": {"replicas": replicas},
            "status": {"observedGeneration": 1, "readyReplicas": ready}}


async def evicted_build(r: FakeContext, members: list[dict[str, Any]], new_ready: int,
                        failover_spec: dict[str, Any] | None = None) -> propagation.Build:
    b = build("web", 30, members, failover_spec)
    await transformers.apply_failover(r, b)
    b.desired = {"member1": copy(3, 0), "member3": copy(3, 0)}
    b.live = {"member1": copy(3, new_ready), "member3": copy(3, new_ready)}
    b.removals = ["member2"]
    b.dag.add(plan.Vertex("member2", plan.Action.DELETE,
                          {"apiVersion": "apps/v1", "kind": "Deployment",
                           "metadata": {"name": "web", "namespace": "shop"}}))
    return b


async def test_graceful_eviction_keeps_the_old_copy_until_new_ones_are_ready() -> None:
    """The delete on the evicted cluster waits while the new copies are not ready."""
    members = [member("member2", down_since=T0)]
    r = context(members)
    b = await evicted_build(r, members, new_ready=1)
    await eviction.plan_graceful_eviction(r, b)
    assert not [v for v in b.dag if v.action is plan.Action.DELETE]
    assert "member2" in b.failover.held
    assert b.budget == disruption.Claim(moving=2)


async def test_old_copy_goes_once_new_copies_are_ready() -> None:
    """New copies ready: the delete stays in the plan and the move is claimed done (its
    budget is given back after the plan ran)."""
    members = [member("member2", down_since=T0)]
    r = context(members)
    b = await evicted_build(r, members, new_ready=3)
    await eviction.plan_graceful_eviction(r, b)
    assert [v.cluster for v in b.dag if v.action is plan.Action.DELETE] == ["member2"]
    assert not b.failover.held
    assert b.budget.done


async def test_grace_period_bounds_the_wait() -> None:
    """Past gracePeriodSeconds the old copy goes even if the new ones never got ready."""
    members = [member("member2", down_since=T0 - 1000)]
    r = context(members)
    b = await evicted_build(r, members, new_ready=0)
    b.failover.behaviour = policy_.ClusterFailoverBehavior(grace_period_seconds=60)
    await eviction.plan_graceful_eviction(r, b)
    assert [v.cluster for v in b.dag if v.action is plan.Action.DELETE] == ["member2"]


async def test_purge_mode_directly_from_the_policy_deletes_at_once() -> None:
    """spec.failover.cluster.purgeMode: Directly, read from the typed policy: no wait."""
    members = [member("member2", down_since=T0)]
    r = context(members)
    b = await evicted_build(r, members, new_ready=0,
                            failover_spec={"cluster": {"purgeMode": "Directly"}})
    assert b.failover.behaviour.purge_mode == "Directly"
    await eviction.plan_graceful_eviction(r, b)
    assert [v.cluster for v in b.dag if v.action is plan.Action.DELETE] == ["member2"]
    assert not b.failover.held


async def test_grace_period_from_the_policy_bounds_the_wait() -> None:
    """gracePeriodSeconds read from the policy: evicted 270 s ago, past its 60 s grace
    (the same template without the field still waits: the default grace is 600 s)."""
    members = [member("member2", down_since=T0 - 300)]
    r = context(members)
    b = await evicted_build(r, members, new_ready=0,
                            failover_spec={"cluster": {"gracePeriodSeconds": 60}})
    assert b.failover.behaviour.grace_period_seconds == 60
    await eviction.plan_graceful_eviction(r, b)
    assert [v.cluster for v in b.dag if v.action is plan.Action.DELETE] == ["member2"]
    default = context(members)
    held = await evicted_build(default, members, new_ready=0)
    await eviction.plan_graceful_eviction(default, held)
    assert "member2" in held.failover.held


async def test_replica_less_copy_on_a_held_cluster_is_kept() -> None:
    """A duplicated ConfigMap keeps its copy on a NotReady cluster (no policy opt-in)."""
    members = [member("member2", down_since=T0)]
    r = context(members)
    b = build("settings", None, members)
    b.template = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "settings", "namespace": "shop"}}
    b.binding = recorded({"member1": 0, "member2": 0, "member3": 0})
    await transformers.apply_failover(r, b)
    member2 = next(c for c in b.clusters if c.name == "member2")
    assert member2.ready and not member2.taints
