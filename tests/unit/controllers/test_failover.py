"""Failover rules: tolerations, judgements, the engine's view, the budget, graceful eviction."""

from typing import Any

from federation.controllers.propagation import disruption
from federation.hub import capacity, failover
from federation.placement import clusters as clusters_
from federation.placement import engine
from federation.placement import policy as policy_

T0 = 1_700_000_000.0
NOT_READY = failover.NOT_READY_TAINT


def toleration(**fields: Any) -> policy_.Toleration:
    return policy_.Toleration.model_validate(fields)


def tainted(since: float) -> list[dict[str, Any]]:
    return [{"key": NOT_READY, "effect": "NoSchedule", "timeAdded": failover.format_time(since)},
            {"key": NOT_READY, "effect": "NoExecute", "timeAdded": failover.format_time(since)}]


def divided_policy(*tolerations: dict[str, Any]) -> policy_.Policy:
    return policy_.Policy.model_validate({
        "apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                 "placement": {"clusterTolerations": list(tolerations),
                               "replicaScheduling": {"replicaSchedulingType": "Divided"}}}})


# -- tolerations ---------------------------------------------------------------------------


def test_no_matching_toleration_means_not_opted_in() -> None:
    """Without a toleration of the not-ready NoExecute taint, failover is off."""
    assert failover.toleration_time([]) is None
    assert failover.toleration_time([toleration(key="other", operator="Exists")]) is None
    assert failover.toleration_time([toleration(key=NOT_READY, operator="Exists",
                                                effect="NoSchedule")]) is None


def test_smallest_toleration_seconds_wins_and_none_means_forever() -> None:
    """Kubernetes' rule: the minimum tolerationSeconds; matching without seconds is forever."""
    ten = toleration(key=NOT_READY, operator="Exists", effect="NoExecute", toleration_seconds=10)
    thirty = toleration(operator="Exists", toleration_seconds=30)
    forever = toleration(key=NOT_READY, operator="Exists")
    assert failover.toleration_time([thirty, ten]) == 10
    assert failover.toleration_time([forever]) == failover.FOREVER
    assert failover.toleration_time([forever, thirty]) == 30
    negative = toleration(key=NOT_READY, operator="Exists", toleration_seconds=-5)
    assert failover.toleration_time([negative]) == 0


# -- judgements ----------------------------------------------------------------------------


def test_ready_cluster_is_ready() -> None:
    """A ready cluster without the not-ready taint is left alone."""
    assert failover.judge(True, [], 10, T0).state is failover.State.READY


def test_unready_cluster_without_taint_is_held() -> None:
    """Unreachable but not tainted yet (health threshold not crossed): replicas stay."""
    assert failover.judge(False, [], 10, T0).state is failover.State.HELD


def test_policy_without_toleration_holds_forever() -> None:
    """A policy that did not opt in never moves replicas, however long the outage."""
    judgement = failover.judge(False, tainted(T0 - 3600), None, T0)
    assert judgement.state is failover.State.HELD
    assert judgement.deadline is None
    assert "does not opt into failover" in judgement.reason


def test_toleration_runs_from_time_added() -> None:
    """Held until timeAdded + tolerationSeconds, evicted from then on."""
    held = failover.judge(False, tainted(T0), 10, T0 + 9)
    assert held.state is failover.State.HELD and held.deadline == T0 + 10
    evicted = failover.judge(False, tainted(T0), 10, T0 + 10)
    assert evicted.state is failover.State.EVICTED and evicted.evicted_at == T0 + 10


def test_taint_left_on_a_ready_cluster_still_counts() -> None:
    """A NoExecute taint not yet removed keeps counting: readiness alone does not undo it."""
    assert failover.judge(True, tainted(T0), 10, T0 + 20).state is failover.State.EVICTED


def test_bad_time_added_is_treated_as_untainted() -> None:
    """A malformed timeAdded never evicts (it cannot say since when)."""
    taints = [{"key": NOT_READY, "effect": "NoExecute", "timeAdded": "yesterday"}]
    assert failover.judge(False, taints, 0, T0).state is failover.State.HELD


# -- what the engine sees ------------------------------------------------------------------


def fleet(member2_ready: bool, taints: tuple[clusters_.Taint, ...] = ()) -> list[
        clusters_.Cluster]:
    return [clusters_.Cluster(name="member1"),
            clusters_.Cluster(name="member2", ready=member2_ready, taints=taints),
            clusters_.Cluster(name="member3")]


def place(clusters: list[clusters_.Cluster], policy: policy_.Policy,
          previous: dict[str, int]) -> dict[str, int]:
    from federation.placement import resources

    resource = resources.from_manifest({"apiVersion": "apps/v1", "kind": "Deployment",
                                        "metadata": {"name": "web", "namespace": "default"},
                                        "spec": {"replicas": 6}})
    return dict(engine.place(resource, policy, clusters, previous).nonzero())


def judged(policy: policy_.Policy, now: float) -> list[clusters_.Cluster]:
    no_execute = clusters_.Taint(key=NOT_READY, effect="NoExecute")
    raw = {"member2": tainted(T0)}
    tolerate = failover.toleration_time(policy.spec.placement.cluster_tolerations)
    return [failover.engine_view(c, failover.judge(c.ready, raw.get(c.name, []), tolerate, now))
            for c in fleet(False, (no_execute,))]


def test_held_cluster_keeps_its_replicas_and_gets_no_new_ones() -> None:
    """Held: the engine keeps member2's replicas (NoSchedule holds it back for others)."""
    policy = divided_policy()
    previous = {"member1": 2, "member2": 2, "member3": 2}
    assert place(judged(policy, T0 + 100), policy, previous) == previous
    new = place(judged(policy, T0 + 100), policy, {})
    assert "member2" not in new and sum(new.values()) == 6


def test_evicted_cluster_replicas_go_elsewhere() -> None:
    """Evicted: member2's replicas are placed on member1 and member3."""
    policy = divided_policy({"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 10})
    previous = {"member1": 2, "member2": 2, "member3": 2}
    assert place(judged(policy, T0 + 5), policy, previous) == previous
    assert place(judged(policy, T0 + 11), policy, previous) == {"member1": 3, "member3": 3}


# -- behaviour, readiness of new copies ------------------------------------------------------


def policy_with(failover_spec: dict[str, Any] | None) -> policy_.Policy:
    spec: dict[str, Any] = {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}]}
    if failover_spec is not None:
        spec["failover"] = failover_spec
    return policy_.Policy.model_validate({
        "apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": "shop"}, "spec": spec})


def test_behaviour_defaults_to_graceful() -> None:
    """purgeMode defaults to Gracefully; Directly and gracePeriodSeconds are read, typed."""
    defaults: list[dict[str, Any] | None] = [None, {}, {"cluster": {}}]
    for default in defaults:
        found = failover.behaviour(policy_with(default))
        assert (found.purge_mode, found.grace_period_seconds) == ("Gracefully", None)
    found = failover.behaviour(policy_with({"cluster": {"purgeMode": "Directly",
                                                        "gracePeriodSeconds": 30}}))
    assert (found.purge_mode, found.grace_period_seconds) == ("Directly", 30)


def deployment(replicas: int, ready: int) -> dict[str, Any]:
    return {"kind": "Deployment", "metadata": {"generation": 2}, "spec": {"replicas": replicas},
            "status": {"observedGeneration": 2, "readyReplicas": ready}}


def test_copies_ready_needs_every_target_at_its_new_count() -> None:
    """Old copies may go only when every new copy runs its new replica count, ready."""
    desired = {"member1": deployment(3, 0), "member3": deployment(3, 0)}
    assert failover.copies_ready(desired, {"member1": deployment(3, 3),
                                           "member3": deployment(3, 3)})
    assert not failover.copies_ready(desired, {"member1": deployment(3, 3),
                                               "member3": deployment(2, 2)})
    assert not failover.copies_ready(desired, {"member1": deployment(3, 2),
                                               "member3": deployment(3, 3)})
    assert not failover.copies_ready(desired, {"member1": deployment(3, 3)})
    assert failover.copies_ready({"member1": {"kind": "ConfigMap"}},
                                 {"member1": {"kind": "ConfigMap"}})


# -- the disruption budget -----------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_budget_caps_replicas_moving_fleet_wide() -> None:
    """Moves are admitted while they fit; the next waits until one is released."""
    budget = disruption.DisruptionBudget(10, 300, Clock())
    assert budget.admit("a", 6)
    assert budget.admit("b", 4)
    assert not budget.admit("c", 1)
    assert budget.in_use == 10
    budget.release("a")
    assert budget.admit("c", 1)


def test_budget_lets_an_oversized_move_go_alone() -> None:
    """A template larger than the whole budget is not starved: it moves when nothing else does."""
    budget = disruption.DisruptionBudget(10, 300, Clock())
    assert budget.admit("big", 40)
    assert not budget.admit("small", 1)
    budget.release("big")
    assert budget.admit("small", 1)
    assert not budget.admit("big", 40)


def test_budget_admits_the_same_template_again() -> None:
    """Asking again for a move already admitted costs nothing more."""
    budget = disruption.DisruptionBudget(10, 300, Clock())
    assert budget.admit("a", 6)
    assert budget.admit("a", 6)
    assert budget.in_use == 6


def test_budget_leases_expire() -> None:
    """A move that never finishes gives its budget back after the lease timeout."""
    clock = Clock()
    budget = disruption.DisruptionBudget(5, 300, clock)
    assert budget.admit("stuck", 5)
    clock.now = 301
    assert budget.in_use == 0
    assert budget.admit("next", 5)


# -- capacity --------------------------------------------------------------------------------


def node(cpu: str, memory: str, pods: str = "110", ready: bool = True) -> dict[str, Any]:
    return {"kind": "Node", "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                       "conditions": [{"type": "Ready", "status": str(ready)}]}}


def workload(kind: str, ready: int, cpu: str = "0", memory: str = "0",
             owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "w"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "d"}]
    container = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    return {"kind": kind, "metadata": meta, "status": {"readyReplicas": ready},
            "spec": {"template": {"spec": {"containers": [container]}}}}


def test_summary_sums_ready_schedulable_nodes_and_ready_replicas() -> None:
    """Allocatable from Ready nodes; allocated = ready replicas x requests, owned RS skipped."""
    nodes = [node("4", "16Gi"), node("4", "16Gi"), node("4", "16Gi", ready=False)]
    workloads = [workload("Deployment", 3, "500m", "1Gi"),
                 workload("ReplicaSet", 3, "500m", "1Gi", owner="Deployment"),
                 workload("StatefulSet", 2, "1", "0")]
    found = capacity.summary(nodes, workloads)
    assert found["allocatable"] == {"cpu": "8000m", "memory": str(32 * 2**30), "pods": "220"}
    assert found["allocated"] == {"cpu": "3500m", "memory": str(3 * 2**30), "pods": "5"}


def test_estimate_is_the_tightest_resource() -> None:
    """More replicas that fit: the minimum over requested resources, pods included."""
    found = {"allocatable": {"cpu": "8000m", "memory": str(32 * 2**30), "pods": "220"},
             "allocated": {"cpu": "3500m", "memory": str(3 * 2**30), "pods": "5"}}
    requests = capacity.pod_requests(workload("Deployment", 0, "1", "1Gi"))
    assert capacity.estimate(found, requests) == 4
    requests = capacity.pod_requests(workload("Deployment", 0, "0", "0"))
    assert capacity.estimate(found, requests) == 215
    full = {"allocatable": {"cpu": "1", "memory": "1", "pods": "1"},
            "allocated": {"cpu": "2", "memory": "0", "pods": "0"}}
    assert capacity.estimate(full, {"cpu": 0.1, "pods": 1}) == 0


def test_quantities() -> None:
    """Kubernetes quantities: binary and decimal suffixes, millicores; junk is 0."""
    assert capacity.quantity("1500m") == 1.5
    assert capacity.quantity("2Gi") == 2 * 2**30
    assert capacity.quantity("1k") == 1000
    assert capacity.quantity("12") == 12
    assert capacity.quantity("lots") == 0
