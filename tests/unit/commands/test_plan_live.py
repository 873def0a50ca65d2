"""The live what-if and the clusters table, on hub objects given as data."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from federation.commands import get_clusters, plan_live
from federation.hub import failover
from federation.placement import loader

MEMBERS = ("member1", "member2", "member3")


def member(name: str, ready: str = "True") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"region": "lab"},
            "status": {"conditions": [{"type": "Ready", "status": ready},
                                      {"type": "Reachable", "status": ready}],
                       "resourceSummary": {"allocatable": {"cpu": "4000m", "memory": "1073741824",
                                                           "pods": "10"},
                                           "allocated": {"cpu": "1000m", "memory": "0",
                                                         "pods": "4"}}}}


def policy(name: str, tolerate: int | None) -> dict[str, Any]:
    tolerations = [] if tolerate is None else [
        {"key": failover.NOT_READY_TAINT, "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": tolerate}]
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": name}],
                     "placement": {"clusterTolerations": tolerations,
                                   "replicaScheduling": {"replicaSchedulingType": "Divided"}}}}


def deployment(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "shop"}, "spec": {"replicas": 6}}


def binding(name: str) -> dict[str, Any]:
    """The template's ResourceBinding: the record of its current decision (2 each)."""
    return {"apiVersion": "work.federation.io/v1alpha1", "kind": "ResourceBinding",
            "metadata": {"name": f"{name}-deployment", "namespace": "shop"},
            "spec": {"clusters": [{"name": m, "replicas": 2} for m in MEMBERS]}}


def state() -> plan_live.HubState:
    return plan_live.HubState(
        policies=[policy("movable", 30), policy("pinned", None)],
        members=[member(m) for m in MEMBERS],
        templates=[deployment("movable"), deployment("pinned")],
        bindings=[binding("movable"), binding("pinned")])


def test_failed_member_moves_only_opted_in_workloads() -> None:
    """--fail member2 --live: the policy with tolerationSeconds moves, the other stays."""
    planned = {p.resource.name: dict(p.decision.nonzero())
               for p in plan_live.what_if(state(), ["member2"])}
    assert planned == {"movable": {"member1": 3, "member3": 3},
                       "pinned": {"member1": 2, "member2": 2, "member3": 2}}


def test_a_member_marked_failed_is_not_said_to_be_down_since_1970() -> None:
    """The what-if's made-up taint time is not shown as a date."""
    planned = {p.resource.name: p.decision.explanation
               for p in plan_live.what_if(state(), ["member2"])}
    said = [line for line in planned["movable"] if line.startswith("what-if: member2")]
    assert said == ["what-if: member2 failed: marked failed (what-if), past "
                    "tolerationSeconds 30"]
    assert "1970" not in " ".join(line for lines in planned.values() for line in lines)


def test_without_failures_the_current_decision_stands() -> None:
    """Nothing failed: the what-if reproduces the current 2/2/2 placements."""
    for p in plan_live.what_if(state(), []):
        assert dict(p.decision.nonzero()) == {m: 2 for m in MEMBERS}


def test_unknown_failed_name_is_reported() -> None:
    """--fail must name a MemberCluster."""
    assert plan_live.unknown(state(), ["member2", "nope"]) == ["nope"]


def test_clusters_table_shows_health_room_and_workloads() -> None:
    """fedctl get clusters: readiness, taints, free/allocatable and what is placed there."""
    members = [member("member1"), member("member2", ready="False")]
    members[1]["spec"]["taints"] = [{"key": failover.NOT_READY_TAINT, "effect": "NoSchedule"}]
    bindings: list[dict[str, Any]] = [
                {"spec": {"clusters": [{"name": "member1", "replicas": 3},
                                       {"name": "member2", "replicas": 1}]}},
                {"spec": {"clusters": [{"name": "member1", "replicas": 2}]}},
                {"spec": {"templateDeleted": True, "clusters": [{"name": "member1"}]}}]
    buffer = io.StringIO()
    Console(file=buffer, width=200).print(get_clusters.table(members, bindings))
    lines = buffer.getvalue().splitlines()
    assert lines[1].split() == ["member1", "True", "True", "-", "3.0/4.0", "1Gi/1Gi", "6/10",
                                "2", "5", "lab"]
    assert lines[2].split()[:4] == ["member2", "False", "False",
                                    "cluster.federation.io/not-ready:NoSchedule"]


def test_hub_values_beyond_int32_are_one_line_errors() -> None:
    """A template with a count the engine refuses: LoadError naming it. A MemberCluster
    stating an impossible availableReplicas is read as no estimate, as the control plane
    reads it (the what-if must answer what the control plane would do)."""
    hostile = state()
    hostile.members[0]["status"]["availableReplicas"] = 2**40
    plan_live.what_if(hostile, [])
    hostile = state()
    hostile.templates[0]["spec"]["replicas"] = True
    with pytest.raises(loader.LoadError, match=r"Deployment shop/movable: spec.replicas: .*bool"):
        plan_live.what_if(hostile, [])
