"""Scheduling priority and the WorkloadRebalancer on the local fleet.

- member3 is filled (a Deployment of the member's own, 12 x 1 cpu on its 12 cpu); a
  low-priority template, then a high-priority one, both for member3 only, wait for room.
  Room for one appears (the filler scaled to 8): the high one is placed first; the low one
  still waits once the high one's replicas run.
- a workload divided 2:6 by dynamic weights over member1 (room 4) and member2 (room 12)
  stays 2:6 when member1's room comes back (Steady); a WorkloadRebalancer divides it
  afresh (4:4), reports it Successful, and is deleted after its TTL.

`fedctl run` runs for the whole module; each test works in its own hub namespace.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_or_none, wait_for

KARMADA = "policy.karmada.io/v1alpha1"
SUMMARY = 40
"""Seconds for a member's resource summary to follow its workloads (refreshed every 10 s
when it changed, after the simulator's ready delay)."""


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane) -> Iterator[str]:
    name = f"sp-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    if control_plane.process is not None and control_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{control_plane.log_tail()}")
    for kinds in ("deployments", "propagationpolicies.policy.karmada.io"):
        fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false", check=False)


def deployment(name: str, namespace: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{
                                      "name": "app", "image": "registry.local/app:1",
                                      "resources": {"requests": {"cpu": "1"}}}]}}}}


def policy(name: str, namespace: str, clusters: list[str], scheduling: dict[str, Any],
           **spec: Any) -> dict[str, Any]:
    return {"apiVersion": KARMADA, "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": name}],
                     "placement": {"clusterAffinity": {"clusterNames": clusters},
                                   "replicaScheduling": scheduling}, **spec}}


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value}


def binding(fleet: TestFleet, name: str, namespace: str) -> dict[str, Any]:
    return get_or_none(fleet, "hub", "resourcebindings.work.federation.io",
                       f"{name}-deployment", "-n", namespace) or {}


def scheduled(fleet: TestFleet, name: str, namespace: str) -> dict[str, Any] | None:
    return next((c for c in (binding(fleet, name, namespace).get("status") or {})
                 .get("conditions") or [] if c["type"] == "Scheduled"), None)


def placed(fleet: TestFleet, name: str, namespace: str) -> dict[str, int]:
    return {c["name"]: c["replicas"]
            for c in (binding(fleet, name, namespace).get("spec") or {}).get("clusters") or []}


def waiting(fleet: TestFleet, name: str, namespace: str) -> bool:
    found = scheduled(fleet, name, namespace)
    return found is not None and found["status"] == "False" and \
        found["reason"] == "ScheduleFailed" and "unschedulable" in found["message"]


def waits(fleet: TestFleet, name: str, namespace: str) -> Callable[[], bool]:
    return lambda: waiting(fleet, name, namespace)


def allocated_cpu(fleet: TestFleet, member: str) -> str:
    doc = get_or_none(fleet, "hub", "memberclusters.cluster.federation.io", member) or {}
    summary = (doc.get("status") or {}).get("resourceSummary") or {}
    return str((summary.get("allocated") or {}).get("cpu"))


def ready(fleet: TestFleet, member: str, name: str, namespace: str, replicas: int) -> bool:
    found = get_or_none(fleet, member, "deployment", name, "-n", namespace) or {}
    return (found.get("status") or {}).get("readyReplicas") == replicas


AGGREGATED = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}
DYNAMIC = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
           "weightPreference": {"dynamicWeight": "AvailableReplicas"}}


def test_high_priority_created_later_gets_the_room_first(fleet: TestFleet, ns: str) -> None:
    suffix = ns.split("-")[1]
    low_class, high_class = f"low-{suffix}", f"high-{suffix}"
    apply(fleet, "hub", priority_class(low_class, 10), priority_class(high_class, 100000))
    fleet.kubectl("member3", "create", "namespace", ns)
    apply(fleet, "member3", deployment("filler", ns, 12))  # the member's own: not ours
    wait_for(lambda: allocated_cpu(fleet, "member3") == "12000m", SUMMARY + 20,
             what="member3 full (12 cpu allocated)")
    try:
        for name, klass in (("low", low_class), ("high", high_class)):
            apply(fleet, "hub", policy(name, ns, ["member3"], AGGREGATED, schedulePriority={
                "priorityClassSource": "KubePriorityClass", "priorityClassName": klass}),
                deployment(name, ns, 4))
            wait_for(waits(fleet, name, ns), 30, what=f"{name} waits for room")
        assert binding(fleet, "high", ns)["spec"]["schedulePriority"] == {"priority": 100000}
        fleet.kubectl("member3", "scale", "deployment", "filler", "-n", ns, "--replicas=8")
        wait_for(lambda: placed(fleet, "high", ns) == {"member3": 4}, SUMMARY + 20,
                 what="high placed once room for 4 appears")
        assert waiting(fleet, "low", ns), "the low-priority template took the room"
        wait_for(lambda: ready(fleet, "member3", "high", ns, 4), 30, what="high runs")
        wait_for(lambda: allocated_cpu(fleet, "member3") == "12000m", SUMMARY,
                 what="member3 full again")
        time.sleep(12)  # another summary period: the low one is retried and still waits
        assert waiting(fleet, "low", ns) and placed(fleet, "low", ns) == {}
    finally:
        fleet.kubectl("member3", "delete", "namespace", ns, "--wait=false", check=False)
        fleet.kubectl("hub", "delete", "priorityclass", low_class, high_class, check=False)


def test_a_rebalancer_redivides_a_drifted_workload_and_reports_it(fleet: TestFleet,
                                                                   ns: str) -> None:
    fleet.kubectl("member1", "create", "namespace", ns)
    apply(fleet, "member1", deployment("filler", ns, 8))  # member1: room for 4 of 12
    wait_for(lambda: allocated_cpu(fleet, "member1") == "8000m", SUMMARY + 20,
             what="member1 at 8 of 12 cpu")
    rebalancer = f"rebalance-{ns}"
    try:
        apply(fleet, "hub", policy("web", ns, ["member1", "member2"], DYNAMIC),
              deployment("web", ns, 8))
        wait_for(lambda: placed(fleet, "web", ns) == {"member1": 2, "member2": 6}, 60,
                 what="web divided 2:6 by room 4 and 12")
        fleet.kubectl("member1", "delete", "deployment", "filler", "-n", ns)
        wait_for(lambda: allocated_cpu(fleet, "member1") == "2000m" and
                 allocated_cpu(fleet, "member2") == "6000m", SUMMARY + 20,
                 what="member1's room back, web running")
        assert placed(fleet, "web", ns) == {"member1": 2, "member2": 6}  # Steady
        apply(fleet, "hub", {
            "apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer",
            "metadata": {"name": rebalancer},
            "spec": {"workloads": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": "web", "namespace": ns}],
                     "ttlSecondsAfterFinished": 8}})
        wait_for(lambda: placed(fleet, "web", ns) == {"member1": 4, "member2": 4}, 60,
                 what="web divided afresh 4:4 (room 10+2 and 6+6)")
        status = (get_or_none(fleet, "hub", "workloadrebalancers.apps.karmada.io",
                              rebalancer) or {}).get("status") or {}
        assert status.get("observedWorkloads") == [{
            "workload": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                         "namespace": ns}, "result": "Successful"}]
        assert status.get("finishTime")
        wait_for(lambda: get_or_none(fleet, "hub", "workloadrebalancers.apps.karmada.io",
                                     rebalancer) is None, 60, what="deleted after its TTL")
        time.sleep(5)
        assert placed(fleet, "web", ns) == {"member1": 4, "member2": 4}  # Steady again
    finally:
        fleet.kubectl("member1", "delete", "namespace", ns, "--wait=false", check=False)
        fleet.kubectl("hub", "delete", "workloadrebalancers.apps.karmada.io", rebalancer,
                      check=False)
