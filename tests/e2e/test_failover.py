"""Failover on the local fleet: member2 is stopped, frozen or flapped under a running control plane.

Two Deployments of 6 replicas each, in a fresh hub namespace per test:

- ``tolerant``: Divided by dynamic weights (sticky), its policy tolerating
  ``cluster.federation.io/not-ready:NoExecute`` for 5 s: it must leave a
  failed member2 and not come back to it (stale copies there are deleted);
- ``intolerant``: Divided 1:1:1 with no toleration: it must stay where it is.

Measured times are printed (``pytest -s`` shows them) as ``measured: ...``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_json, get_or_none, wait_for

MEMBERS = ("member1", "member2", "member3")
SURVIVORS = ("member1", "member3")
POLICY_API = "policy.federation.io/v1alpha1"
NOT_READY = "cluster.federation.io/not-ready"
TOLERATION = 5
"""Seconds the tolerant policy tolerates NotReady: counted from the taint, so the move comes
after detection plus this (the flap test's toleration is its own)."""
DETECTION_BOUND = 15.0
"""Documented: NotReady 6-8 s after the last answer (docs/failover.md); 15 s on a loaded box."""
RECOVERY_BOUND = DETECTION_BOUND + TOLERATION + 20.0
"""From the outage to every replica ready on the survivors."""
RETURN_BOUND = 30.0
"""From the API server answering again to Ready, no taint, and no stale copy left."""


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane) -> Iterator[str]:
    wait_for(lambda: all(ready(fleet, m) for m in MEMBERS), timeout=60,
             what="every MemberCluster Ready with a resource summary")
    name = f"fo-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    if control_plane.process is not None and control_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{control_plane.log_tail()}")


def member_cluster(fleet: TestFleet, name: str) -> dict[str, Any]:
    return get_json(fleet, "hub", "memberclusters.cluster.federation.io", name)


def conditions(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (doc.get("status") or {}).get("conditions") or []}


def our_taints(doc: dict[str, Any]) -> set[str]:
    return {t["effect"] for t in (doc.get("spec") or {}).get("taints") or []
            if t["key"] == NOT_READY}


def ready(fleet: TestFleet, name: str) -> bool:
    doc = member_cluster(fleet, name)
    return conditions(doc).get("Ready", {}).get("status") == "True" and not our_taints(doc) \
        and bool((doc.get("status") or {}).get("resourceSummary"))


def not_ready(fleet: TestFleet, name: str) -> bool:
    doc = member_cluster(fleet, name)
    return conditions(doc).get("Ready", {}).get("status") == "False" \
        and our_taints(doc) == {"NoSchedule", "NoExecute"}


def deployment(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 6, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app",
                                                           "image": "registry.local/app:1"}]}}}}


def policy(name: str, namespace: str, scheduling: dict[str, Any],
           tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": name}],
                     "placement": {"clusterAffinity": {"clusterNames": list(MEMBERS)},
                                   "clusterTolerations": tolerations,
                                   "replicaScheduling": scheduling}}}


def tolerating(seconds: int) -> list[dict[str, Any]]:
    return [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": seconds}]


DYNAMIC = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
           "weightPreference": {"dynamicWeight": "AvailableReplicas"}}
EQUAL = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}


def decision(fleet: TestFleet, name: str, namespace: str) -> dict[str, int]:
    """The decision on the template's record, its ResourceBinding."""
    binding = get_json(fleet, "hub", "resourcebindings.work.federation.io",
                       f"{name}-deployment", "-n", namespace)
    return {e["name"]: e["replicas"] for e in binding["spec"].get("clusters") or []
            if e.get("replicas")}


def placed_as(fleet: TestFleet, name: str, namespace: str) -> dict[str, int]:
    """:func:`decision`, or {} while the binding is not made yet (a wait right after the
    apply may look before the control plane made it)."""
    if get_or_none(fleet, "hub", "resourcebindings.work.federation.io", f"{name}-deployment",
                   "-n", namespace) is None:
        return {}
    return decision(fleet, name, namespace)


def ready_on(fleet: TestFleet, name: str, namespace: str,
             members: tuple[str, ...]) -> dict[str, int]:
    """Ready replicas of our copy per member (kubectl on each member)."""
    found = {}
    for member in members:
        copy = get_or_none(fleet, member, "deployment", name, "-n", namespace)
        if copy is not None:
            found[member] = int((copy.get("status") or {}).get("readyReplicas") or 0)
    return found


def hub_snapshot(fleet: TestFleet, namespace: str) -> dict[str, Any]:
    """What users asked for on the hub: templates' uid and spec, policies' spec."""
    found: dict[str, Any] = {}
    for kind in ("deployments", "propagationpolicies.policy.federation.io"):
        for item in get_json(fleet, "hub", kind, "-n", namespace)["items"]:
            found[f"{kind}/{item['metadata']['name']}"] = (item["metadata"]["uid"],
                                                           item["spec"])
    return found


def deploy_both(fleet: TestFleet, ns: str) -> dict[str, int]:
    settings = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": ns}, "data": {"mode": "a"}}
    duplicated = {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
                  "metadata": {"name": "settings", "namespace": ns},
                  "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap",
                                                  "name": "settings"}],
                           "placement": {"clusterAffinity": {"clusterNames": list(MEMBERS)}}}}
    apply(fleet, "hub", deployment("tolerant", ns), deployment("intolerant", ns),
          policy("tolerant", ns, DYNAMIC, tolerating(TOLERATION)),
          policy("intolerant", ns, EQUAL, []), settings, duplicated)
    wait_for(lambda: config_uid(fleet, ns), timeout=60, what="settings in member2")
    wait_for(lambda: placed_as(fleet, "intolerant", ns) == {m: 2 for m in MEMBERS},
             timeout=60, what="intolerant placed 2/2/2")
    placed = wait_for(lambda: (d := placed_as(fleet, "tolerant", ns)) and sum(d.values()) == 6
                      and d, timeout=60, what="tolerant placed")
    assert placed.get("member2"), f"tolerant has nothing on member2 to fail over: {placed}"
    for name in ("tolerant", "intolerant"):
        wait_for(all_ready(fleet, name, ns), timeout=60, what=f"{name}: 6 ready in the members")
    return dict(placed)


def config_uid(fleet: TestFleet, ns: str) -> str | None:
    found = get_or_none(fleet, "member2", "configmap", "settings", "-n", ns)
    return str(found["metadata"]["uid"]) if found else None


def all_ready(fleet: TestFleet, name: str, ns: str) -> Callable[[], bool]:
    return lambda: sum(ready_on(fleet, name, ns, MEMBERS).values()) == 6


def in_background(action: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


def fedctl(fleet: TestFleet, *args: str, codes: tuple[int, ...] = (0,)) -> str:
    result = subprocess.run([sys.executable, "-m", "federation", *args, "--kubeconfig",
                             str(fleet.kubeconfig), "--hub-context", "hub"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode in codes, result.stderr
    return result.stdout


def what_if_and_table(fleet: TestFleet, ns: str) -> None:
    """While member2 is down: `get clusters` shows it, `plan --live --fail` tells the moves."""
    rows = {line.split()[0]: line.split() for line in
            fedctl(fleet, "get", "clusters").splitlines()[1:] if line.strip()}
    assert rows["member2"][1:3] == ["False", "False"]
    assert f"{NOT_READY}:NoSchedule" in rows["member2"][3]
    # Exit 2 means some placement failed: other tests' templates may be unplaceable on
    # purpose; ours must not be.
    document = json.loads(fedctl(fleet, "plan", "--live", "--fail", "member2", "-o", "json",
                                 codes=(0, 2)))
    ours = [p for p in document["placements"] if p["resource"]["namespace"] == ns]
    assert [p["error"] for p in ours] == [None] * len(ours)
    plans = {p["resource"]["name"]: {c["name"]: c["replicas"] for c in p["clusters"]}
             for p in ours}
    assert "member2" not in plans["tolerant"] and sum(plans["tolerant"].values()) == 6
    assert plans["intolerant"] == {m: 2 for m in MEMBERS}


def outage_and_return(fleet: TestFleet, ns: str, how: str, go_down: Callable[[], None],
                      come_back: Callable[[], None]) -> None:
    placed = deploy_both(fleet, ns)
    before = hub_snapshot(fleet, ns)
    settings_uid = config_uid(fleet, ns)

    started = time.monotonic()
    stopping = in_background(go_down)
    wait_for(lambda: not_ready(fleet, "member2"), timeout=DETECTION_BOUND + 5,
             interval=0.3, what="member2 NotReady and tainted")
    detection = time.monotonic() - started
    assert detection <= DETECTION_BOUND, f"NotReady after {detection:.1f}s"
    what_if_and_table(fleet, ns)

    wait_for(lambda: "member2" not in decision(fleet, "tolerant", ns)
             and sum(ready_on(fleet, "tolerant", ns, SURVIVORS).values()) == 6,
             timeout=RECOVERY_BOUND, interval=0.3, what="tolerant: 6 ready on member1+member3")
    recovery = time.monotonic() - started
    assert recovery >= TOLERATION, f"moved after {recovery:.1f}s, before the toleration"
    assert recovery <= RECOVERY_BOUND
    stopping.join(timeout=60)

    time.sleep(3)  # the intolerant workload must still not have moved
    assert decision(fleet, "intolerant", ns) == {m: 2 for m in MEMBERS}
    assert ready_on(fleet, "intolerant", ns, SURVIVORS) == {"member1": 2, "member3": 2}
    assert hub_snapshot(fleet, ns) == before, "hub objects changed during the outage"
    print(f"\nmeasured ({how}): member2 NotReady+tainted {detection:.1f}s after the outage "
          f"began (bound {DETECTION_BOUND:.0f}s); tolerant workload back to 6/6 ready on "
          f"member1+member3 {recovery:.1f}s after (toleration {TOLERATION}s, bound "
          f"{RECOVERY_BOUND:.0f}s); moved {placed.get('member2')} replicas")

    came_back_at = time.monotonic()
    come_back()
    answering = time.monotonic() - came_back_at
    answered_at = time.monotonic()
    over_spec: list[float] = []

    def settled() -> bool:
        copies = ready_on(fleet, "tolerant", ns, MEMBERS)
        if sum(copies.values()) > 6:
            over_spec.append(time.monotonic() - answered_at)
        return ready(fleet, "member2") and "member2" not in copies \
            and sum(copies.values()) == 6

    wait_for(settled, timeout=RETURN_BOUND, interval=0.3,
             what="member2 Ready, untainted, stale tolerant copy deleted")
    returned = time.monotonic() - answered_at
    assert decision(fleet, "intolerant", ns) == {m: 2 for m in MEMBERS}
    assert ready_on(fleet, "intolerant", ns, MEMBERS) == {m: 2 for m in MEMBERS}
    assert "member2" not in decision(fleet, "tolerant", ns)
    assert hub_snapshot(fleet, ns) == before
    assert config_uid(fleet, ns) == settings_uid, "the duplicated ConfigMap was re-created"
    window = max(over_spec, default=0.0)
    print(f"measured ({how}): member2 answering again {answering:.1f}s after the restart "
          f"began; Ready, untainted and its stale copy deleted {returned:.1f}s after it "
          f"answered (bound {RETURN_BOUND:.0f}s); more than 6 replicas seen ready for "
          f"{window:.1f}s of that")


@pytest.mark.timeout(300)
def test_stopped_member_fails_over_tolerant_workloads_and_returns_clean(
        fleet: TestFleet, ns: str) -> None:
    """member2 stopped: NotReady + tainted in bounds, the 10 s-tolerant workload moves to
    member1/member3, the intolerant one stays, the hub loses nothing; started again: Ready,
    untainted, stale copies deleted, nothing left running twice."""
    outage_and_return(fleet, ns, "stop", lambda: fleet.stop("member2"),
                      lambda: fleet.start("member2"))


@pytest.mark.timeout(300)
def test_frozen_member_fails_over_like_a_stopped_one(fleet: TestFleet, ns: str) -> None:
    """member2's API server frozen (SIGSTOP, calls time out): the same outcome as a stop."""

    def thaw() -> None:
        fleet.thaw("member2")
        wait_for(lambda: fleet.probe(fleet.spec("member2")), timeout=30, what="thawed")

    outage_and_return(fleet, ns, "freeze", lambda: fleet.freeze("member2"), thaw)


@pytest.mark.timeout(200)
def test_flapping_member_moves_nothing(fleet: TestFleet, ns: str) -> None:
    """member2 frozen 3 s at a time, three times (below the failure threshold): it never
    turns NotReady and nothing moves, even for a policy that tolerates 0 s."""
    apply(fleet, "hub", deployment("eager", ns), policy("eager", ns, EQUAL, tolerating(0)))
    wait_for(lambda: placed_as(fleet, "eager", ns) == {m: 2 for m in MEMBERS}, timeout=60,
             what="eager placed 2/2/2")
    wait_for(lambda: sum(ready_on(fleet, "eager", ns, MEMBERS).values()) == 6, timeout=60,
             what="eager ready")
    uids = {m: get_json(fleet, m, "deployment", "eager", "-n", ns)["metadata"]["uid"]
            for m in MEMBERS}
    since = conditions(member_cluster(fleet, "member2"))["Ready"]["lastTransitionTime"]
    for _ in range(3):
        fleet.freeze("member2")
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert not not_ready(fleet, "member2")
            assert decision(fleet, "eager", ns) == {m: 2 for m in MEMBERS}
            time.sleep(0.3)
        fleet.thaw("member2")
        time.sleep(4)
    doc = member_cluster(fleet, "member2")
    assert conditions(doc)["Ready"]["status"] == "True"
    assert conditions(doc)["Ready"]["lastTransitionTime"] == since
    assert not our_taints(doc)
    assert decision(fleet, "eager", ns) == {m: 2 for m in MEMBERS}
    assert {m: get_json(fleet, m, "deployment", "eager", "-n", ns)["metadata"]["uid"]
            for m in MEMBERS} == uids
