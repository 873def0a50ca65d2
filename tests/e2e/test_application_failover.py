"""Application failover and state preservation on the local fleet (Karmada's semantics).

A Deployment placed on member1 (``clusterAffinities``: member1 first, member2 as the
fallback) is made unhealthy in member1 alone: the simulator is told so by the
``federation.io/simulate-unhealthy`` annotation on member1's copy, and member1 itself stays
Ready. Then, per ``purgeMode``:

- ``Gracefully``: after ``tolerationSeconds`` the binding records a graceful-eviction task
  and the workload moves to member2; member1's copy stays until member2's is healthy;
- ``Never``: the workload is placed on member2 too, and member1's copy is never deleted
  (the task's ``suppressDeletion``), until a user clears it.

And cluster failover with ``statePreservation``: member2 frozen past its toleration, the
new copy in member3 is created with the label whose value was read from member2's copy's
last observed status; the label goes when the task ends (the new copy healthy).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet, kubectl_binary
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_json, get_or_none, wait_for

POLICY_API = "policy.karmada.io/v1alpha1"
UNHEALTHY = "federation.io/simulate-unhealthy"
TOLERATION = 5
NOT_READY = "cluster.federation.io/not-ready"
JOB_LABEL = "failover.example.com/ready-replicas"


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane) -> Iterator[str]:
    name = f"af-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    if control_plane.process is not None and control_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{control_plane.log_tail()}")
    fleet.kubectl("hub", "delete", "deployments,propagationpolicies.policy.karmada.io",
                  "--all", "-n", name, "--wait=false", check=False)


def deployment(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "app",
                                                           "image": "registry.local/app:1"}]}}}}


def policy(namespace: str, first: str, then: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": "web"}],
                     "propagateDeps": True,
                     "placement": {"clusterAffinities": [
                         {"affinityName": "primary", "clusterNames": [first]},
                         {"affinityName": "backup", "clusterNames": [then]}],
                         "replicaScheduling": {"replicaSchedulingType": "Duplicated"}},
                     **spec}}


def application(purge_mode: str) -> dict[str, Any]:
    block: dict[str, Any] = {"decisionConditions": {"tolerationSeconds": TOLERATION},
                             "purgeMode": purge_mode}
    return {"application": block}


def binding(fleet: TestFleet, namespace: str) -> dict[str, Any]:
    return get_json(fleet, "hub", "resourcebindings.work.federation.io", "web-deployment",
                    "-n", namespace)


def decision(fleet: TestFleet, namespace: str) -> dict[str, int]:
    return {e["name"]: e["replicas"] for e in binding(fleet, namespace)["spec"].get("clusters")
            or []}


def tasks(fleet: TestFleet, namespace: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = binding(fleet, namespace)["spec"].get(
        "gracefulEvictionTasks") or []
    return found


def ready(fleet: TestFleet, member: str, namespace: str) -> int | None:
    """Ready replicas of the copy in ``member`` (None: no copy)."""
    copy = get_or_none(fleet, member, "deployment", "web", "-n", namespace)
    return None if copy is None else int((copy.get("status") or {}).get("readyReplicas") or 0)


def place_on_member1(fleet: TestFleet, ns: str, purge_mode: str) -> None:
    apply(fleet, "hub", deployment(ns),
          policy(ns, "member1", "member2", failover=application(purge_mode)))
    wait_for(lambda: ready(fleet, "member1", ns) == 2, timeout=60, what="2 ready in member1")
    assert set(decision(fleet, ns)) == {"member1"}


def make_unhealthy(fleet: TestFleet, member: str, ns: str) -> float:
    fleet.kubectl(member, "annotate", "deployment", "web", "-n", ns, f"{UNHEALTHY}=true")
    wait_for(lambda: ready(fleet, member, ns) == 0, timeout=30,
             what=f"the copy in {member} unhealthy")
    return time.monotonic()


def member_ready(fleet: TestFleet, name: str) -> bool:
    doc = get_json(fleet, "hub", "memberclusters.cluster.federation.io", name)
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in (doc.get("status") or {}).get("conditions") or [])


def test_gracefully_moves_and_keeps_the_old_copy_until_the_new_is_healthy(
        fleet: TestFleet, ns: str) -> None:
    place_on_member1(fleet, ns, "Gracefully")
    started = make_unhealthy(fleet, "member1", ns)
    wait_for(lambda: set(decision(fleet, ns)) == {"member2"}, timeout=TOLERATION + 30,
             interval=0.3, what="moved to member2")
    moved = time.monotonic() - started
    assert moved >= TOLERATION - 1, f"moved {moved:.1f}s after turning unhealthy"
    [task] = tasks(fleet, ns)
    assert (task["fromCluster"], task["purgeMode"], task["reason"],
            task["gracePeriodSeconds"]) == ("member1", "Gracefully", "ApplicationFailure", 600)
    assert member_ready(fleet, "member1"), "member1 itself must stay Ready"
    # member1's copy is deleted only once member2's is healthy: the first look that finds
    # it gone finds member2's copy ready.
    while True:
        old, new = ready(fleet, "member1", ns), ready(fleet, "member2", ns)
        if old is None:
            assert new == 2, "member1's copy went before member2's was healthy"
            break
        assert time.monotonic() - started < 90, "member1's copy was never deleted"
        time.sleep(0.2)
    wait_for(lambda: not tasks(fleet, ns), timeout=30, what="the task ended")
    print(f"\nmeasured: unhealthy in member1 -> moved to member2 in {moved:.1f}s "
          f"(tolerationSeconds {TOLERATION})")


def test_never_keeps_the_old_copy(fleet: TestFleet, ns: str) -> None:
    place_on_member1(fleet, ns, "Never")
    make_unhealthy(fleet, "member1", ns)
    wait_for(lambda: ready(fleet, "member2", ns) == 2, timeout=TOLERATION + 30,
             what="placed on member2 as well")
    [task] = tasks(fleet, ns)
    assert (task["fromCluster"], task["purgeMode"], task["suppressDeletion"]) == \
        ("member1", "Never", True)
    time.sleep(3)  # the new copy is healthy: a task that could end would have ended
    assert ready(fleet, "member1", ns) == 0, "member1's copy was evicted under Never"
    assert tasks(fleet, ns) == [task]
    # Karmada's way out: a user confirms by clearing suppressDeletion.
    fleet.kubectl("hub", "patch", "resourcebindings.work.federation.io", "web-deployment",
                  "-n", ns, "--type=json", "-p", json.dumps([
                      {"op": "replace", "path": "/spec/gracefulEvictionTasks/0/suppressDeletion",
                       "value": False}]))
    fleet.kubectl("hub", "annotate", "deployment", "web", "-n", ns, "touch=1")
    wait_for(lambda: ready(fleet, "member1", ns) is None, timeout=30,
             what="member1's copy deleted once confirmed")


@contextlib.contextmanager
def watching(fleet: TestFleet, member: str, ns: str) -> Iterator[list[dict[str, Any]]]:
    """Every version of the copy in ``member`` while the block runs (a kubectl watch: a
    label that lives a second is still seen)."""
    process = subprocess.Popen(
        [kubectl_binary(), "--kubeconfig", str(fleet.kubeconfig), "--context", member,
         "get", "deployments", "-n", ns, "-w", "-o", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen: list[dict[str, Any]] = []
    try:
        yield seen
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=30)
        decoder, at = json.JSONDecoder(), 0
        while at < len(output):
            while at < len(output) and output[at].isspace():
                at += 1
            if at >= len(output):
                break
            obj, at = decoder.raw_decode(output, at)
            seen.append(obj)


def test_cluster_failover_carries_preserved_state(fleet: TestFleet, ns: str) -> None:
    """member2 frozen past the toleration: the copy created in member3 carries the label
    read from member2's copy's last observed status; it goes when the task ends."""
    preserve = {"cluster": {"purgeMode": "Directly", "statePreservation": {"rules": [
        {"aliasLabelName": JOB_LABEL, "jsonPath": "{ .readyReplicas }"}]}}}
    spec = policy(ns, "member2", "member3", failover=preserve)
    spec["spec"]["placement"]["clusterTolerations"] = [
        {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": TOLERATION}]
    apply(fleet, "hub", deployment(ns), spec)
    wait_for(lambda: ready(fleet, "member2", ns) == 2, timeout=60, what="2 ready in member2")
    wait_for(lambda: any(e.get("cluster") == "member2" and
                         (e.get("status") or {}).get("readyReplicas") == 2
                         for e in binding(fleet, ns)["status"].get("aggregatedStatus") or []),
             timeout=30, what="member2's status recorded on the binding")
    with watching(fleet, "member3", ns) as seen:
        fleet.freeze("member2")
        try:
            wait_for(lambda: ready(fleet, "member3", ns) == 2, timeout=TOLERATION + 60,
                     interval=0.5, what="moved to member3")
            wait_for(lambda: not tasks(fleet, ns), timeout=60, what="the task ended")
            wait_for(lambda: JOB_LABEL not in (get_json(
                fleet, "member3", "deployment", "web", "-n", ns)["metadata"].get("labels")
                or {}), timeout=30, what="the preserved label removed")
        finally:
            fleet.thaw("member2")
    labelled = [obj["metadata"].get("labels", {}).get(JOB_LABEL) for obj in seen
                if obj.get("metadata", {}).get("name") == "web"]
    assert "2" in labelled, f"no version of member3's copy carried {JOB_LABEL}: {labelled}"
    assert labelled[0] == "2", "the new copy was created without the preserved label"
    wait_for(lambda: member_ready(fleet, "member2"), timeout=60, what="member2 Ready again")
