"""The failover transformers inside a propagation Build: budget, requeue, graceful eviction."""

from __future__ import annotations

from typing import Any

from federation.contexts import client as kube
from federation.contexts.multicluster import ListResult
from federation.controllers import failover, plan, propagation
from federation.placement import clusters as clusters_
from federation.placement import policy as policy_
from federation.runtime.reconcile import Request

T0 = 1_700_000_000.0


class FakeClient:
    def __init__(self, members: list[dict[str, Any]]) -> None:
        self.members = members

    async def list(self, resource: kube.Resource, namespace: str | None = None,
                   **_: Any) -> ListResult:
        return ListResult(items={"hub": list(self.members)})


class FakeReconciler:
    def __init__(self, members: list[dict[str, Any]], budget: int = 100) -> None:
        self.hub = "hub"
        self.mc = FakeClient(members)
        self.requeued: list[tuple[Request, float]] = []
        self.failover = failover.Failover(
            failover.FailoverSettings(max_moving_replicas=budget),
            requeue=lambda request, delay: self.requeued.append((request, delay)),
            clock=lambda: T0 + 60)


def member(name: str, down_since: float | None = None) -> dict[str, Any]:
    taints = [] if down_since is None else [
        {"key": failover.NOT_READY_TAINT, "effect": effect,
         "timeAdded": failover.format_time(down_since)} for effect in ("NoSchedule", "NoExecute")]
    return {"metadata": {"name": name}, "spec": {"taints": taints}}


def build(name: str, tolerate: int | None,
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
                "metadata": {"name": name, "namespace": "shop", "annotations": {
                    "federation.io/replicas": '{"member1": 2, "member2": 2, "member3": 2}'}}}
    found = propagation.Build(template=template, resource=kube.DEPLOYMENTS, hub="hub")
    found.policy = policy
    found.clusters = [clusters_.Cluster(name="member1"),
                      clusters_.Cluster(name="member2", ready=False),
                      clusters_.Cluster(name="member3")]
    return found


async def test_evicted_cluster_is_shown_not_ready_and_its_move_takes_budget() -> None:
    """Past the toleration: member2 is not ready for the engine; 2 replicas count as moving."""
    r = FakeReconciler([member("member2", down_since=T0)])
    b = build("web", 30)
    await failover.apply_failover(r, b)  # type: ignore[arg-type]
    shown = {c.name: c.ready for c in b.clusters}
    assert shown == {"member1": True, "member2": False, "member3": True}
    assert b.failover.evicted == {"member2": T0 + 30}
    assert r.failover.budget.in_use == 2


async def test_held_cluster_requeues_the_template_at_its_deadline() -> None:
    """Within the toleration: held (ready, NoSchedule) and revisited when it runs out."""
    r = FakeReconciler([member("member2", down_since=T0)])
    b = build("web", 100)
    await failover.apply_failover(r, b)  # type: ignore[arg-type]
    member2 = next(c for c in b.clusters if c.name == "member2")
    assert member2.ready and any(t.effect == "NoSchedule" for t in member2.taints)
    assert [round(delay, 1) for _, delay in r.requeued] == [40.1]
    assert r.requeued[0][0] == Request("hub", "Deployment.apps", "shop", "web")


async def test_budget_refusal_holds_the_move_and_retries() -> None:
    """A move the fleet's budget cannot take now stays held and asks again shortly."""
    r = FakeReconciler([member("member2", down_since=T0)], budget=2)
    assert r.failover.budget.admit("someone-else", 2)
    b = build("web", 30)
    await failover.apply_failover(r, b)  # type: ignore[arg-type]
    assert all(c.ready for c in b.clusters)
    assert "disruption budget" in b.failover.judgements["member2"].reason
    assert any(delay == r.failover.settings.budget_retry for _, delay in r.requeued)


def copy(replicas: int, ready: int) -> dict[str, Any]:
    return {"kind": "Deployment", "metadata": {"generation": 1}, "spec": {"replicas": replicas},
            "status": {"observedGeneration": 1, "readyReplicas": ready}}


async def evicted_build(r: FakeReconciler, new_ready: int,
                        failover_spec: dict[str, Any] | None = None) -> propagation.Build:
    b = build("web", 30, failover_spec)
    await failover.apply_failover(r, b)  # type: ignore[arg-type]
    b.desired = {"member1": copy(3, 0), "member3": copy(3, 0)}
    b.live = {"member1": copy(3, new_ready), "member3": copy(3, new_ready)}
    b.removals = ["member2"]
    b.dag.add(plan.Vertex("member2", plan.Action.DELETE,
                          {"apiVersion": "apps/v1", "kind": "Deployment",
                           "metadata": {"name": "web", "namespace": "shop"}}))
    return b


async def test_graceful_eviction_keeps_the_old_copy_until_new_ones_are_ready() -> None:
    """The delete on the evicted cluster waits while the new copies are not ready."""
    r = FakeReconciler([member("member2", down_since=T0)])
    b = await evicted_build(r, new_ready=1)
    await failover.plan_graceful_eviction(r, b)  # type: ignore[arg-type]
    assert not [v for v in b.dag if v.action is plan.Action.DELETE]
    assert "member2" in b.failover.held
    assert r.failover.budget.in_use == 2


async def test_old_copy_goes_once_new_copies_are_ready() -> None:
    """New copies ready: the delete stays in the plan and the budget is given back."""
    r = FakeReconciler([member("member2", down_since=T0)])
    b = await evicted_build(r, new_ready=3)
    await failover.plan_graceful_eviction(r, b)  # type: ignore[arg-type]
    assert [v.cluster for v in b.dag if v.action is plan.Action.DELETE] == ["member2"]
    assert not b.failover.held
    assert r.failover.budget.in_use == 0


async def test_purge_mode_directly_from_the_policy_deletes_at_once() -> None:
    """spec.failover.cluster.purgeMode: Directly, read from the typed policy: no wait."""
    r = FakeReconciler([member("member2", down_since=T0)])
    b = await evicted_build(r, new_ready=0, failover_spec={"cluster": {"purgeMode": "Directly"}})
    assert b.failover.behaviour.purge_mode == "Directly"
    await failover.plan_graceful_eviction(r, b)  # type: ignore[arg-type]
    assert [v.cluster for v in b.dag if v.action is plan.Action.DELETE] == ["member2"]
    assert not b.failover.held


async def test_grace_period_from_the_policy_bounds_the_wait() -> None:
    """gracePeriodSeconds read from the policy: evicted 270 s ago, past its 60 s grace
    (the same template without the field still waits: the default grace is 600 s)."""
    r = FakeReconciler([member("member2", down_since=T0 - 300)])
    b = await evicted_build(r, new_ready=0,
                            failover_spec={"cluster": {"gracePeriodSeconds": 60}})
    assert b.failover.behaviour.grace_period_seconds == 60
    await failover.plan_graceful_eviction(r, b)  # type: ignore[arg-type]
    assert [v.cluster for v in b.dag if v.action is plan.Action.DELETE] == ["member2"]
    default = FakeReconciler([member("member2", down_since=T0 - 300)])
    held = await evicted_build(default, new_ready=0)
    await failover.plan_graceful_eviction(default, held)  # type: ignore[arg-type]
    assert "member2" in held.failover.held


async def test_grace_period_bounds_the_wait() -> None:
    """Past gracePeriodSeconds the old copy goes even if the new ones never got ready."""
    r = FakeReconciler([member("member2", down_since=T0 - 1000)])
    b = await evicted_build(r, new_ready=0)
    b.failover.behaviour = policy_.ClusterFailoverBehavior(grace_period_seconds=60)
    await failover.plan_graceful_eviction(r, b)  # type: ignore[arg-type]
    assert [v.cluster for v in b.dag if v.action is plan.Action.DELETE] == ["member2"]


async def test_replica_less_copy_on_a_held_cluster_is_kept() -> None:
    """A duplicated ConfigMap keeps its copy on a NotReady cluster (no policy opt-in)."""
    r = FakeReconciler([member("member2", down_since=T0)])
    b = build("settings", None)
    b.template = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "settings", "namespace": "shop", "annotations": {
                      "federation.io/replicas": '{"member1": 0, "member2": 0, "member3": 0}'}}}
    await failover.apply_failover(r, b)  # type: ignore[arg-type]
    member2 = next(c for c in b.clusters if c.name == "member2")
    assert member2.ready and not member2.taints
