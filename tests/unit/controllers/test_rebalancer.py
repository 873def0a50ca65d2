"""WorkloadRebalancer: Karmada's controller on our bindings, and the fresh division
propagation then makes, on a fake clock against the in-memory fleet."""

from __future__ import annotations

from typing import Any

from federation.controllers import rebalancer
from federation.hub import failover, rebalancers
from federation.runtime.reconcile import Request
from tests.unit.controllers.fakes import (
    FakeMC,
    FakeRecorder,
    cluster_set,
    reconciler,
    request_for,
)

JSON = dict[str, Any]
MEMBERS = ("member1", "member2")
CREATED = "2026-11-26T10:00:00Z"


def deployment(name: str = "web", replicas: int = 10) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "a", "image": "x"}]}}}}


def dynamic_policy(name: str = "web") -> JSON:
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": name}],
                     "placement": {"clusterAffinity": {"clusterNames": list(MEMBERS)},
                                   "replicaScheduling": {
                                       "replicaSchedulingType": "Divided",
                                       "replicaDivisionPreference": "Weighted",
                                       "weightPreference": {
                                           "dynamicWeight": "AvailableReplicas"}}}}}


def room(mc: FakeMC, member: str, pods: int) -> None:
    """The member's summary: room for ``pods`` more replicas (nothing allocated)."""
    summary = {"allocatable": {"cpu": "100", "memory": "100Gi", "pods": str(pods)},
               "allocated": {"cpu": "0", "memory": "0", "pods": "0"}}
    mc.put("hub", {"apiVersion": "cluster.federation.io/v1alpha1", "kind": "MemberCluster",
                   "metadata": {"name": member}, "spec": {"context": member},
                   "status": {"resourceSummary": summary}})


def workload_rebalancer(*workloads: JSON, ttl: int | None = None, name: str = "r") -> JSON:
    spec: JSON = {"workloads": list(workloads)}
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer",
            "metadata": {"name": name, "creationTimestamp": CREATED, "generation": 1},
            "spec": spec}


WEB = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "shop"}


def controller(mc: FakeMC, now: float) -> rebalancer.Reconciler:
    return rebalancer.Reconciler(mc, "hub", FakeRecorder(), clock=lambda: now)


def division(mc: FakeMC) -> dict[str, int]:
    found = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert found is not None
    return {c["name"]: c["replicas"] for c in found["spec"]["clusters"]}


async def drifted(mc: FakeMC) -> Any:
    """web placed 7:3 (room 7 and 3), then the room turned: 0 and 10. Steady keeps 7:3."""
    room(mc, "member1", 7)
    room(mc, "member2", 3)
    mc.put("hub", dynamic_policy())
    template = mc.put("hub", deployment())
    propagation = reconciler(mc)
    await propagation.reconcile(request_for(template))
    assert division(mc) == {"member1": 7, "member2": 3}
    room(mc, "member1", 0)
    room(mc, "member2", 10)
    await propagation.reconcile(request_for(template))
    assert division(mc) == {"member1": 7, "member2": 3}  # Steady: nothing moves
    return propagation, template


async def test_a_rebalancer_divides_a_drifted_workload_afresh_and_reports_it() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    propagation, template = await drifted(mc)
    now = failover.parse_time(CREATED) or 0.0
    mc.put("hub", workload_rebalancer(WEB))
    request = Request("hub", "WorkloadRebalancer.apps.karmada.io", "", "r")
    assert await controller(mc, now + 1).reconcile(request) is None
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None and binding["spec"]["rescheduleTriggeredAt"] == CREATED
    found = mc.find("hub", "WorkloadRebalancer", "r")
    assert found is not None
    assert found["status"]["observedWorkloads"] == [{"workload": WEB, "result": "Successful"}]
    assert found["status"]["finishTime"] == failover.format_time(now + 1)
    await propagation.reconcile(request_for(template))
    # Fresh: room plus held, member1 7+0, member2 3+10: 10 by 7:13.
    assert division(mc) == {"member1": 4, "member2": 6}
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None and binding["spec"]["freshScheduledFor"] == CREATED
    await propagation.reconcile(request_for(template))
    assert division(mc) == {"member1": 4, "member2": 6}  # once: Steady again


async def test_a_workload_without_a_binding_fails_with_karmadas_reason() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    missing = {**WEB, "name": "nope"}
    mc.put("hub", workload_rebalancer(missing))
    await controller(mc, 0.0).reconcile(Request("hub", "x", "", "r"))
    found = mc.find("hub", "WorkloadRebalancer", "r")
    assert found is not None
    assert found["status"]["observedWorkloads"] == [
        {"workload": missing, "result": "Failed", "reason": "ReferencedBindingNotFound"}]
    assert "finishTime" in found["status"]


async def test_ttl_deletes_after_finishing_and_not_before() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    await drifted(mc)
    start = failover.parse_time(CREATED) or 0.0
    mc.put("hub", workload_rebalancer(WEB, ttl=30))
    result = await controller(mc, start).reconcile(Request("hub", "x", "", "r"))
    assert result is not None and result.requeue_after == 30
    assert mc.find("hub", "WorkloadRebalancer", "r") is not None
    assert await controller(mc, start + 30).reconcile(Request("hub", "x", "", "r")) is None
    assert mc.find("hub", "WorkloadRebalancer", "r") is None


async def test_a_later_trigger_already_there_is_kept() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    await drifted(mc)
    mc.put("hub", workload_rebalancer(WEB, name="new"))
    newer = workload_rebalancer(WEB, name="old")
    newer["metadata"]["creationTimestamp"] = "2026-11-26T09:00:00Z"
    await controller(mc, 0.0).reconcile(Request("hub", "x", "", "new"))
    mc.put("hub", newer)
    await controller(mc, 0.0).reconcile(Request("hub", "x", "", "old"))
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None and binding["spec"]["rescheduleTriggeredAt"] == CREATED
    old = mc.find("hub", "WorkloadRebalancer", "old")
    assert old is not None and old["status"]["observedWorkloads"][0]["result"] == "Successful"


def test_status_keeps_successes_of_workloads_no_longer_listed_sorted() -> None:
    """Karmada's syncWorkloadsFromSpecToStatus."""
    a = {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": "n"}
    b = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "b", "namespace": "n"}
    c = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "c", "namespace": "n"}
    doc = workload_rebalancer(a)
    doc["status"] = {"observedWorkloads": [{"workload": b, "result": "Successful"},
                                           {"workload": c, "result": "Failed",
                                            "reason": "ReferencedBindingNotFound"}]}
    synced = rebalancers.synced(rebalancers.parse(doc))
    assert [o.to_obj() for o in synced] == [{"workload": b, "result": "Successful"},
                                            {"workload": a}]


def test_a_malformed_rebalancer_is_refused_naming_the_field() -> None:
    for spec, field in (({"workloads": []}, "spec.workloads"),
                        ({"workloads": [{"kind": "x", "name": "y"}]}, "apiVersion"),
                        ({"workloads": [WEB], "ttlSecondsAfterFinished": "1"},
                         "ttlSecondsAfterFinished"),
                        ({"workloads": [WEB], "extra": 1}, "spec.extra")):
        doc = {**workload_rebalancer(), "spec": spec}
        try:
            rebalancers.parse(doc)
        except rebalancers.RebalancerError as exc:
            assert field in str(exc)
        else:
            raise AssertionError(f"accepted {spec}")
