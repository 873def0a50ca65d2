"""Application failover and state preservation on the local fleet (Karmada's semantics).

A Deployment of 2 replicas Aggregated over two members runs in one of them (``old``); its
copy there is made unhealthy alone: the simulator is told so by the
``federation.io/simulate-unhealthy`` annotation on that copy, and the member itself stays
Ready. Then, per ``purgeMode``:

- ``Gracefully``: after ``tolerationSeconds`` the binding records a graceful-eviction task
  and the workload moves to the other member (``new``); the old copy stays until the new
  one is healthy;
- ``Never``: the workload is placed on the other member, and the old copy is never
  deleted (the task's ``suppressDeletion``), until a user clears it.

And cluster failover with ``statePreservation``: the member running it frozen past its
toleration, the copy created in the other member carries the label whose value was read
from the frozen copy's last observed status; the label goes when the task ends (the new
copy healthy). Aggregated is sticky, so the workload stays where it moved once the task
ends (Karmada does not re-schedule then either).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_json, get_or_none, wait_for, watched

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


def policy(namespace: str, members: tuple[str, str],
           tolerations: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": "web"}],
                     "propagateDeps": True,
                     "placement": {"clusterAffinity": {"clusterNames": list(members)},
                                   "clusterTolerations": tolerations or [],
                                   "replicaScheduling": {
                                       "replicaSchedulingType": "Divided",
                                       "replicaDivisionPreference": "Aggregated"}},
                     **spec}}


def application(purge_mode: str) -> dict[str, Any]:
    block: dict[str, Any] = {"decisionConditions": {"tolerationSeconds": TOLERATION},
                             "purgeMode": purge_mode}
    return {"application": block}


def binding(fleet: TestFleet, namespace: str) -> dict[str, Any]:
    return get_json(fleet, "hub", "resourcebindings.work.federation.io", "web-deployment",
                    "-n", namespace)


def binding_or_none(fleet: TestFleet, namespace: str) -> dict[str, Any] | None:
    return get_or_none(fleet, "hub", "resourcebindings.work.federation.io", "web-deployment",
                       "-n", namespace)


def decision(fleet: TestFleet, namespace: str) -> dict[str, int]:
    """The binding's clusters and replicas ({} until the binding exists)."""
    found = binding_or_none(fleet, namespace) or {"spec": {}}
    return {e["name"]: e["replicas"] for e in found["spec"].get("clusters") or []}


def tasks(fleet: TestFleet, namespace: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = binding(fleet, namespace)["spec"].get(
        "gracefulEvictionTasks") or []
    return found


def ready(fleet: TestFleet, member: str, namespace: str) -> int | None:
    """Ready replicas of the copy in ``member`` (None: no copy)."""
    copy = get_or_none(fleet, member, "deployment", "web", "-n", namespace)
    return None if copy is None else int((copy.get("status") or {}).get("readyReplicas") or 0)


def placed(fleet: TestFleet, ns: str, members: tuple[str, str],
           tolerations: list[dict[str, Any]] | None = None, **spec: Any) -> tuple[str, str]:
    """Apply the workload and its policy; (the member it runs in, the other one)."""
    apply(fleet, "hub", deployment(ns), policy(ns, members, tolerations, **spec))
    chosen = wait_for(lambda: (d := {c for c, r in decision(fleet, ns).items() if r})
                      and len(d) == 1 and d, timeout=60, what="placed on one member")
    [old] = chosen
    wait_for(lambda: ready(fleet, old, ns) == 2, timeout=60, what=f"2 ready in {old}")
    # The control plane has seen it healthy too: a copy turned unhealthy before that look
    # would be one that never stopped being unhealthy (it was, while it started).
    wait_for(lambda: recorded_health(fleet, ns).get(old) == "Healthy", timeout=30,
             what=f"the copy in {old} recorded healthy")
    return old, next(m for m in members if m != old)


def recorded_health(fleet: TestFleet, namespace: str) -> dict[str, str]:
    """Each copy's health as the binding's aggregated status records it."""
    found = binding_or_none(fleet, namespace) or {}
    return {e["cluster"]: e.get("health", "") for e in
            (found.get("status") or {}).get("aggregatedStatus") or []}


def make_unhealthy(fleet: TestFleet, member: str, ns: str) -> float:
    fleet.kubectl(member, "annotate", "deployment", "web", "-n", ns, f"{UNHEALTHY}=true")
    wait_for(lambda: ready(fleet, member, ns) == 0, timeout=30,
             what=f"the copy in {member} unhealthy")
    return time.monotonic()


def moved_at(versions: list[tuple[float, dict[str, Any]]], member: str) -> float | None:
    """When the watched binding first placed the workload on ``member`` alone."""
    return next((at for at, obj in versions
                 if {e["name"] for e in obj["spec"].get("clusters") or []} == {member}), None)


def seen_unhealthy(copy: list[tuple[float, dict[str, Any]]], polled_at: float) -> float:
    """When the copy's watch first showed it with no ready replica.

    A CI run once saw the watch end without that version (its kubectl gone, on a busy
    machine). Then the poll's moment stands in: it is no earlier than the real one, so a
    move measured from it is no longer than the real move and the toleration check stays
    sound (it can only fail, never pass, wrongly)."""
    def first_seen() -> float | None:
        return next((at for at, obj in copy
                     if not (obj.get("status") or {}).get("readyReplicas")), None)

    try:
        found: float = wait_for(first_seen, timeout=10, what="the unhealthy copy watched")
    except AssertionError:
        print("\nthe copy's watch missed the unhealthy version: measured from the poll")
        return polled_at
    return found


def member_ready(fleet: TestFleet, name: str) -> bool:
    doc = get_json(fleet, "hub", "memberclusters.cluster.federation.io", name)
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in (doc.get("status") or {}).get("conditions") or [])


def test_gracefully_moves_and_keeps_the_old_copy_until_the_new_is_healthy(
        fleet: TestFleet, ns: str) -> None:
    old, new = placed(fleet, ns, ("member1", "member2"), failover=application("Gracefully"))
    # Both moments come from watches (the copy's status going unhealthy in its member, the
    # binding's decision moving on the hub): polls would add their own lag to one side.
    with watched(fleet, old, "deployment", "web", "-n", ns) as copy, \
            watched(fleet, "hub", "resourcebindings.work.federation.io", "web-deployment",
                    "-n", ns) as decisions:
        started = make_unhealthy(fleet, old, ns)
        wait_for(lambda: set(decision(fleet, ns)) == {new}, timeout=TOLERATION + 30,
                 interval=0.3, what=f"moved to {new}")
        wait_for(lambda: moved_at(decisions, new) is not None, timeout=10,
                 what="the move seen by the watch")
        unhealthy_at = seen_unhealthy(copy, started)
    moved = (moved_at(decisions, new) or 0.0) - unhealthy_at
    assert moved >= TOLERATION - 0.5, f"moved {moved:.1f}s after turning unhealthy"
    found = tasks(fleet, ns)
    assert [(t["fromCluster"], t["purgeMode"], t["reason"], t["gracePeriodSeconds"])
            for t in found] in ([], [(old, "Gracefully", "ApplicationFailure", 600)])
    assert member_ready(fleet, old), f"{old} itself must stay Ready"
    # The old copy is deleted only once the new one is healthy: the first look that
    # finds it gone finds the new copy ready.
    while True:
        before, after = ready(fleet, old, ns), ready(fleet, new, ns)
        if before is None:
            assert after == 2, f"{old}'s copy went before {new}'s was healthy"
            break
        assert time.monotonic() - started < 90, f"{old}'s copy was never deleted"
        time.sleep(0.2)
    wait_for(lambda: not tasks(fleet, ns), timeout=30, what="the task ended")
    time.sleep(2)  # sticky: nothing moves back once the task has ended
    assert set(decision(fleet, ns)) == {new}
    print(f"\nmeasured: unhealthy in {old} -> moved to {new} in {moved:.1f}s "
          f"(tolerationSeconds {TOLERATION})")


def test_never_keeps_the_old_copy(fleet: TestFleet, ns: str) -> None:
    old, new = placed(fleet, ns, ("member1", "member2"), failover=application("Never"))
    make_unhealthy(fleet, old, ns)
    wait_for(lambda: ready(fleet, new, ns) == 2, timeout=TOLERATION + 30,
             what=f"placed on {new}")
    [task] = tasks(fleet, ns)
    assert (task["fromCluster"], task["purgeMode"], task["suppressDeletion"]) == \
        (old, "Never", True)
    time.sleep(3)  # the new copy is healthy: a task that could end would have ended
    assert ready(fleet, old, ns) == 0, f"{old}'s copy was evicted under Never"
    assert tasks(fleet, ns) == [task]
    # Karmada's way out: a user confirms by clearing suppressDeletion.
    fleet.kubectl("hub", "patch", "resourcebindings.work.federation.io", "web-deployment",
                  "-n", ns, "--type=json", "-p", json.dumps([
                      {"op": "replace", "path": "/spec/gracefulEvictionTasks/0/suppressDeletion",
                       "value": False}]))
    fleet.kubectl("hub", "annotate", "deployment", "web", "-n", ns, "touch=1")
    wait_for(lambda: ready(fleet, old, ns) is None, timeout=30,
             what=f"{old}'s copy deleted once confirmed")


def test_cluster_failover_carries_preserved_state(fleet: TestFleet, ns: str) -> None:
    """The member running it frozen past the toleration: the copy created in the other
    carries the label read from the frozen copy's last observed status; it goes when the
    task ends."""
    preserve = {"cluster": {"purgeMode": "Directly", "statePreservation": {"rules": [
        {"aliasLabelName": JOB_LABEL, "jsonPath": "{ .readyReplicas }"}]}}}
    tolerate = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": TOLERATION}]
    old, new = placed(fleet, ns, ("member2", "member3"), tolerate, failover=preserve)
    wait_for(lambda: any(e.get("cluster") == old and
                         (e.get("status") or {}).get("readyReplicas") == 2
                         for e in binding(fleet, ns)["status"].get("aggregatedStatus") or []),
             timeout=30, what=f"{old}'s status recorded on the binding")
    with watched(fleet, new, "deployments", "-n", ns) as seen:
        fleet.freeze(old)
        try:
            wait_for(lambda: ready(fleet, new, ns) == 2, timeout=TOLERATION + 60,
                     interval=0.5, what=f"moved to {new}")
            wait_for(lambda: not tasks(fleet, ns), timeout=60, what="the task ended")
            wait_for(lambda: JOB_LABEL not in (get_json(
                fleet, new, "deployment", "web", "-n", ns)["metadata"].get("labels")
                or {}), timeout=30, what="the preserved label removed")
        finally:
            fleet.thaw(old)
    labelled = [obj["metadata"].get("labels", {}).get(JOB_LABEL) for _, obj in seen
                if obj.get("metadata", {}).get("name") == "web"]
    assert labelled and labelled[0] == "2", \
        f"{new}'s copy was not created with {JOB_LABEL}=2: {labelled}"
    wait_for(lambda: member_ready(fleet, old), timeout=60, what=f"{old} Ready again")
