"""A custom kind the federation knows only from a ResourceInterpreterCustomization.

A CloneSet-like CRD (``spec.replicas``, a status subresource) is installed on the hub and
reaches the members with its first object (the CRD goes first). Its customization's
scripts do everything the built-in interpreter does for a Deployment: InterpretReplica
gives the count placement divides 5:3:2 by static weights, ReviseReplica writes each
cluster's share, InterpretHealth judges each member's copy, InterpretStatus reflects its
status and AggregateStatus makes the hub template's status. The members' own controller
is the test: it writes each copy's status through the status subresource, as a member's
CloneSet controller would.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from tests.conftest import TestFleet, kubectl_binary
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_or_none, wait_for

POLICY_API = "policy.federation.io/v1alpha1"
WEIGHTS = {"member1": 5, "member2": 3, "member3": 2}

GET_REPLICAS = """function GetReplicas(obj)
  return obj.spec.replicas, nil
end"""
REVISE = """function ReviseReplica(obj, replicas)
  obj.spec.replicas = replicas
  return obj
end"""
HEALTH = """function InterpretHealth(obj)
  if obj.status == nil or obj.status.observedGeneration ~= obj.metadata.generation then
    return false
  end
  return obj.status.readyReplicas == obj.spec.replicas
end"""
REFLECT = """function ReflectStatus(obj)
  if obj.status == nil then return {} end
  return {replicas = obj.status.replicas, readyReplicas = obj.status.readyReplicas,
          observedGeneration = obj.status.observedGeneration}
end"""
AGGREGATE = """function AggregateStatus(desired, items)
  local status = {replicas = 0, readyReplicas = 0, readyClusters = 0}
  for i = 1, #items do
    local item = items[i]
    if item.status ~= nil then
      status.replicas = status.replicas + (item.status.replicas or 0)
      status.readyReplicas = status.readyReplicas + (item.status.readyReplicas or 0)
    end
    if item.health == "Healthy" then status.readyClusters = status.readyClusters + 1 end
  end
  desired.status = status
  return desired
end"""


@pytest.fixture
def group() -> str:
    return f"g{uuid.uuid4().hex[:6]}.example.com"


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane, group: str) -> Iterator[str]:
    name = f"icrd-{uuid.uuid4().hex[:6]}"
    control_plane.install("--propagate-kinds", f"clonesets.{group}")
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    if control_plane.process is not None and control_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{control_plane.log_tail()}")
    fleet.kubectl("hub", "delete", f"clonesets.{group}", "--all", "-n", name, "--wait=false",
                  check=False)
    fleet.kubectl("hub", "delete", "propagationpolicies.policy.federation.io", "--all", "-n",
                  name, "--wait=false", check=False)
    fleet.kubectl("hub", "delete", "resourceinterpretercustomizations.config.karmada.io",
                  group, "--wait=false", check=False)


def crd(group: str) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"clonesets.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "clonesets", "singular": "cloneset",
                               "kind": "CloneSet"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


def customization(group: str) -> dict[str, Any]:
    scripts = {"replicaResource": GET_REPLICAS, "replicaRevision": REVISE,
               "healthInterpretation": HEALTH, "statusReflection": REFLECT,
               "statusAggregation": AGGREGATE}
    return {"apiVersion": "config.karmada.io/v1alpha1",
            "kind": "ResourceInterpreterCustomization", "metadata": {"name": group},
            "spec": {"target": {"apiVersion": f"{group}/v1", "kind": "CloneSet"},
                     "customizations": {f: {"luaScript": s} for f, s in scripts.items()}}}


def workload(group: str, ns: str) -> list[dict[str, Any]]:
    return [
        {"apiVersion": f"{group}/v1", "kind": "CloneSet",
         "metadata": {"name": "web", "namespace": ns},
         "spec": {"replicas": 10, "template": {"spec": {"containers": [
             {"name": "web", "image": "nginx"}]}}}},
        {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
         "metadata": {"name": "web", "namespace": ns},
         "spec": {"resourceSelectors": [{"apiVersion": f"{group}/v1", "kind": "CloneSet",
                                         "name": "web"}],
                  "placement": {
                      "clusterAffinity": {"clusterNames": sorted(WEIGHTS)},
                      "replicaScheduling": {
                          "replicaSchedulingType": "Divided",
                          "replicaDivisionPreference": "Weighted",
                          "weightPreference": {"staticWeightList": [
                              {"targetCluster": {"clusterNames": [c]}, "weight": w}
                              for c, w in WEIGHTS.items()]}}}}},
    ]


def copy_of(fleet: TestFleet, member: str, group: str, ns: str) -> dict[str, Any] | None:
    return get_or_none(fleet, member, f"clonesets.{group}", "web", "-n", ns)


def has_replicas(fleet: TestFleet, member: str, group: str, ns: str, replicas: int) -> bool:
    return bool((copy_of(fleet, member, group, ns) or {}).get("spec", {}).get("replicas")
                == replicas)


def report_ready(fleet: TestFleet, member: str, group: str, ns: str, ready: int) -> bool:
    """The member's CloneSet controller: the copy's status through the status subresource
    (False when the write met a newer copy: the caller polls again)."""
    copy = copy_of(fleet, member, group, ns)
    assert copy is not None
    copy["status"] = {"replicas": copy["spec"]["replicas"], "readyReplicas": ready,
                      "observedGeneration": copy["metadata"]["generation"]}
    result = subprocess.run(
        [kubectl_binary(), "--kubeconfig", str(fleet.kubeconfig), "--context", member,
         "replace", "--subresource=status", "-f", "-"], input=json.dumps(copy), text=True,
        capture_output=True, timeout=30)
    assert result.returncode == 0 or "modified" in result.stderr, result.stderr
    return result.returncode == 0


def binding(fleet: TestFleet, ns: str) -> dict[str, Any]:
    return get_or_none(fleet, "hub", "resourcebindings.work.federation.io", "web-cloneset",
                       "-n", ns) or {}


def healthy(fleet: TestFleet, ns: str) -> dict[str, Any] | None:
    conditions = (binding(fleet, ns).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Healthy"), None)


def cluster_health(fleet: TestFleet, ns: str) -> dict[str, str]:
    entries = (binding(fleet, ns).get("status") or {}).get("aggregatedStatus") or []
    return {e["cluster"]: e["health"] for e in entries}


def hub_status(fleet: TestFleet, group: str, ns: str) -> dict[str, Any]:
    found = get_or_none(fleet, "hub", f"clonesets.{group}", "web", "-n", ns) or {}
    status = dict(found.get("status") or {})
    status.pop("conditions", None)
    return status


def explained(fleet: TestFleet, control_plane: ControlPlane, group: str, ns: str,
              condition: Any, timeout: float, what: str) -> None:
    """wait_for, whose failure shows what the hub and the members held and the control
    plane's log (a timeout here is a state to explain, not a slow poll)."""
    try:
        wait_for(condition, timeout=timeout, what=what)
    except AssertionError as exc:
        copies = {m: {k: (copy_of(fleet, m, group, ns) or {}).get(k)
                      for k in ("metadata", "status")} for m in WEIGHTS}
        raise AssertionError(
            f"{exc}\nbinding status: {json.dumps(binding(fleet, ns).get('status'))}\n"
            f"copies: {json.dumps(copies)}\n{control_plane.log_tail(80)}") from None


def test_a_custom_kind_is_divided_judged_and_summed_by_its_scripts(
        fleet: TestFleet, control_plane: ControlPlane, group: str, ns: str) -> None:
    apply(fleet, "hub", crd(group))
    wait_for(lambda: fleet.kubectl("hub", "get", f"clonesets.{group}", "-n", ns,
                                   check=False).returncode == 0, timeout=30, what="CRD served")
    apply(fleet, "hub", customization(group), *workload(group, ns))
    for member, share in WEIGHTS.items():  # 10 replicas, 5:3:2 by InterpretReplica/Revise
        wait_for(partial(has_replicas, fleet, member, group, ns, share), timeout=90,
                 what=f"{share} replicas in {member}")
    # No status yet: each copy is Unhealthy by the script (the built-in rule calls a
    # custom kind healthy once it exists, and never says Unhealthy).
    wait_for(lambda: cluster_health(fleet, ns) == dict.fromkeys(WEIGHTS, "Unhealthy"),
             timeout=60, what="every copy Unhealthy by InterpretHealth")
    for member, share in WEIGHTS.items():
        wait_for(partial(report_ready, fleet, member, group, ns, share), timeout=30,
                 what=f"{member}'s status written")
    explained(fleet, control_plane, group, ns,
              lambda: (healthy(fleet, ns) or {}).get("status") == "True", timeout=60,
              what="Healthy once every script says so")
    assert cluster_health(fleet, ns) == dict.fromkeys(WEIGHTS, "Healthy")
    wait_for(lambda: hub_status(fleet, group, ns) == {
        "replicas": 10, "readyReplicas": 10, "readyClusters": 3}, timeout=60,
        what="the hub's status from AggregateStatus")
    # member3 loses a replica: its copy is unhealthy by the script, the hub says so.
    wait_for(lambda: report_ready(fleet, "member3", group, ns, 1), timeout=30,
             what="member3's status written")
    wait_for(lambda: "member3: Unhealthy" in str((healthy(fleet, ns) or {}).get("message")),
             timeout=60, what="member3 Unhealthy by InterpretHealth")
    wait_for(lambda: hub_status(fleet, group, ns) == {
        "replicas": 10, "readyReplicas": 9, "readyClusters": 2}, timeout=60,
        what="the hub's status with member3 not ready")
