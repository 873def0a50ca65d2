"""Retained fields on the local fleet: a controller in member1 scales our Deployment copy
through the scale subresource, under its own field manager, as an HPA would.

With ``resourcetemplate.karmada.io/retain-replicas: "true"`` on the template the member
owns the replicas: for 60 s not one write of ours reaches the copy (member1's own
``apiserver_request_total``), its replicas stay the member's, and the hub's status shows
them. Without the label the change is drift: reverted by a single write.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_or_none, wait_for
from tests.e2e.test_write_budget import breakdown, delta, mutating_requests

POLICY_API = "policy.federation.io/v1alpha1"
RETAIN_LABEL = "resourcetemplate.karmada.io/retain-replicas"
# Issue 25's done-when: with replicas retained, no write from us for 60 s. (A revert would
# follow the member's event at once or at a requeue the reconciler schedules, the longest
# being PropagationSettings.cleanup_wait, 30 s; the issue asks for the longer watch.)
WATCH_SECONDS = 60


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane) -> Iterator[str]:
    name = f"interp-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    if control_plane.process is not None and control_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{control_plane.log_tail()}")
    for kinds in ("deployments,configmaps", "propagationpolicies.policy.federation.io"):
        fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false", check=False)


def workload(ns: str, retain: bool) -> list[dict[str, Any]]:
    labels = {"app": "web", **({RETAIN_LABEL: "true"} if retain else {})}
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "web", "namespace": ns, "labels": labels},
         "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}},
                               "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}},
        {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
         "metadata": {"name": "web", "namespace": ns},
         "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                         "name": "web"}],
                  "placement": {"clusterAffinity": {"clusterNames": ["member1"]},
                                "replicaScheduling": {
                                    "replicaSchedulingType": "Duplicated"}}}},
    ]


def replicas(fleet: TestFleet, context: str, ns: str, where: str = "spec") -> Any:
    found = get_or_none(fleet, context, "deployment", "web", "-n", ns) or {}
    return (found.get(where) or {}).get("replicas")


def scale(fleet: TestFleet, ns: str, to: int) -> None:
    """An HPA's write: the scale subresource, under kubectl's field manager, not ours."""
    fleet.kubectl("member1", "scale", "deployment", "web", "-n", ns, f"--replicas={to}")


def settled_copy(fleet: TestFleet, ns: str, retain: bool) -> None:
    apply(fleet, "hub", *workload(ns, retain))
    wait_for(lambda: replicas(fleet, "member1", ns) == 4, timeout=60, what="copy with 4")
    wait_for(lambda: replicas(fleet, "hub", ns, "status") == 4, timeout=60,
             what="hub status 4")


def test_retained_replicas_are_the_members(fleet: TestFleet, ns: str) -> None:
    settled_copy(fleet, ns, retain=True)
    before = mutating_requests(fleet, "member1")
    scale(fleet, ns, 7)
    deadline = time.monotonic() + WATCH_SECONDS
    while time.monotonic() < deadline:
        assert replicas(fleet, "member1", ns) == 7, "the member's scaling was reverted"
        time.sleep(2)
    writes = delta(mutating_requests(fleet, "member1"), before)
    ours = {key: n for key, n in writes.items()
            if key[0] == "deployments" and key[1] == "" and key[2] in ("PUT", "POST")}
    assert ours == {}, f"writes to the copy in {WATCH_SECONDS}s: {breakdown(writes)}"
    wait_for(lambda: replicas(fleet, "hub", ns, "status") == 7, timeout=60,
             what="hub status shows the member's 7")


def test_without_retention_the_revert_is_one_write(fleet: TestFleet, ns: str) -> None:
    settled_copy(fleet, ns, retain=False)
    before = mutating_requests(fleet, "member1")
    scale(fleet, ns, 7)
    wait_for(lambda: replicas(fleet, "member1", ns) == 4, timeout=30, what="reverted to 4")
    time.sleep(5)  # room for a second revert, which must not come
    writes = delta(mutating_requests(fleet, "member1"), before)
    reverts = sum(n for key, n in writes.items()
                  if key[0] == "deployments" and key[1] == "" and key[2] == "PUT")
    assert reverts == 1, breakdown(writes)
    counted = wait_for(lambda: (get_or_none(fleet, "hub", "resourcebindings.work.federation.io",
                                            "web-deployment", "-n", ns) or {}).get(
        "status", {}).get("driftReverts"), timeout=30, what="the revert counted in the binding")
    assert counted == {"member1": 1}


def config_map(name: str, ns: str, value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": {"k": value}}


def config_policy(name: str, ns: str, **strategy: Any) -> dict[str, Any]:
    return {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap",
                                            "name": name}],
                     "placement": {"clusterAffinity": {"clusterNames": ["member1"]},
                                   "replicaScheduling": {
                                       "replicaSchedulingType": "Duplicated"}},
                     "applyStrategy": strategy}}


def managed(fleet: TestFleet, name: str, ns: str) -> bool:
    found = get_or_none(fleet, "member1", "configmap", name, "-n", ns) or {}
    labels = (found.get("metadata") or {}).get("labels") or {}
    return bool(labels.get("federation.io/managed-by") == "federation")


def binding_spec(fleet: TestFleet, name: str, ns: str) -> dict[str, Any]:
    found = get_or_none(fleet, "hub", "resourcebindings.work.federation.io",
                        f"{name}-configmap", "-n", ns) or {}
    return found.get("spec") or {}


def test_if_no_diff_takes_over_only_an_equal_object(fleet: TestFleet, ns: str) -> None:
    fleet.kubectl("member1", "create", "namespace", ns, check=False)
    apply(fleet, "member1", config_map("same", ns, "v"), config_map("other", ns, "theirs"))
    apply(fleet, "hub", config_map("same", ns, "v"), config_map("other", ns, "ours"),
          config_policy("same", ns, whenToTakeOver="IfNoDiff"),
          config_policy("other", ns, whenToTakeOver="IfNoDiff"))
    wait_for(lambda: managed(fleet, "same", ns), timeout=60, what="the equal one taken over")
    time.sleep(5)
    assert not managed(fleet, "other", ns)
    found = get_or_none(fleet, "member1", "configmap", "other", "-n", ns) or {}
    assert found.get("data") == {"k": "theirs"}


def test_report_only_writes_nothing_and_lists_the_differences(fleet: TestFleet,
                                                              ns: str) -> None:
    fleet.kubectl("member1", "create", "namespace", ns, check=False)
    apply(fleet, "member1", config_map("seen", ns, "theirs"))
    before = mutating_requests(fleet, "member1")
    apply(fleet, "hub", config_map("seen", ns, "ours"), config_map("absent", ns, "ours"),
          config_policy("seen", ns, type="ReportDiff"),
          config_policy("absent", ns, type="ReportDiff"))
    wait_for(lambda: binding_spec(fleet, "seen", ns).get("reportedDifferences"), timeout=60,
             what="differences recorded")
    wait_for(lambda: binding_spec(fleet, "absent", ns).get("reportedDifferences"),
             timeout=60, what="the missing one recorded")
    seen = binding_spec(fleet, "seen", ns)["reportedDifferences"]["member1"]
    assert seen[0].startswith("not managed by federation") and "/data/k" in seen
    assert binding_spec(fleet, "absent", ns)["reportedDifferences"] == {"member1": ["missing"]}
    writes = delta(mutating_requests(fleet, "member1"), before)
    assert not {k: n for k, n in writes.items() if k[0] == "configmaps"}, breakdown(writes)
