"""Static members (`fedctl run --contexts`) and a joined cluster, side by side.

Its own module: it runs its own control plane (static member1 and member2, no
MemberClusters for them), which must not meet another module's.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_json, get_or_none, wait_for

MC = "memberclusters.cluster.federation.io"
POLICY_API = "policy.federation.io/v1alpha1"


def fedctl(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "federation", *args], capture_output=True,
                          text=True, timeout=timeout)


def duplicated(name: str, namespace: str, clusters: list[str]) -> list[dict[str, Any]]:
    """A ConfigMap and a policy duplicating it to ``clusters``."""
    return [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": name, "namespace": namespace}, "data": {"v": "1"}},
            {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
             "metadata": {"name": name, "namespace": namespace},
             "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap",
                                             "name": name}],
                      "placement": {"clusterAffinity": {"clusterNames": clusters},
                                    "replicaScheduling": {
                                        "replicaSchedulingType": "Duplicated"}}}}]


def data_in(fleet: TestFleet, member: str, name: str, namespace: str) -> dict[str, str] | None:
    found = get_or_none(fleet, member, "configmap", name, "-n", namespace)
    return found["data"] if found else None


def ready(fleet: TestFleet, name: str) -> bool:
    doc = get_or_none(fleet, "hub", MC, name) or {}
    conditions = {c["type"]: c["status"] for c in (doc.get("status") or {}).get(
        "conditions") or []}
    return conditions.get("Ready") == "True"


@pytest.mark.timeout(420)
def test_static_members_and_a_joined_cluster_place_side_by_side(fleet: TestFleet,
                                                                tmp_path: Path) -> None:
    """`fedctl run --contexts member1,member2` with no MemberClusters for them; member3
    joins from a Secret. A policy naming member1 keeps placing there (member1 is never
    `unknown`), and member3 is usable next to it; unjoin leaves no traceback."""
    plane = ControlPlane(fleet, tmp_path / "fedctl-run.log", "--contexts", "member1,member2",
                         "--cleanup-wait", "8")
    plane.start()
    ns = f"mix-{uuid.uuid4().hex[:6]}"
    try:
        fleet.kubectl("hub", "delete", MC, "member1", "member2", "member3", "--wait=true")
        fleet.kubectl("hub", "create", "namespace", ns)
        apply(fleet, "hub", *duplicated("static", ns, ["member1", "member2"]))
        for member in ("member1", "member2"):
            wait_for(partial(data_in, fleet, member, "static", ns), timeout=60,
                     what=f"static in {member} (no MemberClusters at all)")

        joined = fedctl("join", "member3", "--kubeconfig", str(fleet.kubeconfig), "--context",
                        "member3", "--hub-kubeconfig", str(fleet.kubeconfig),
                        "--hub-context", "hub")
        assert joined.returncode == 0, joined.stderr
        wait_for(partial(ready, fleet, "member3"), timeout=60, what="member3 joined and Ready")

        apply(fleet, "hub", *duplicated("mixed", ns, ["member1", "member3"]))
        for member in ("member1", "member3"):
            wait_for(partial(data_in, fleet, member, "mixed", ns), timeout=60,
                     what=f"mixed in {member} (a static and a joined member)")
        fleet.kubectl("hub", "patch", "configmap", "static", "-n", ns, "--type=merge",
                      "-p", '{"data":{"v":"2"}}')
        wait_for(lambda: data_in(fleet, "member1", "static", ns) == {"v": "2"}, timeout=60,
                 what="member1 still placed on after member3 joined")
        for name in ("static", "mixed"):
            binding = get_json(fleet, "hub", "resourcebindings.work.federation.io",
                               f"{name}-configmap", "-n", ns)
            scheduled = {c["type"]: c for c in binding["status"]["conditions"]}["Scheduled"]
            assert scheduled["status"] == "True", scheduled
        # Other modules' leftovers on the shared hub may name member3 before it joins; what
        # must never happen is a static member (or nothing at all) being unknown.
        log = plane.log_path.read_text()
        for static in ("member1", "member2"):
            assert f"unknown cluster(s) {static}" not in log
        assert "(known: )" not in log

        fleet.kubectl("hub", "delete", "configmap", "static", "mixed", "-n", ns,
                      "--wait=false")
        def gone(member: str, name: str) -> bool:
            return data_in(fleet, member, name, ns) is None

        for member, name in (("member1", "static"), ("member2", "static"),
                             ("member1", "mixed"), ("member3", "mixed")):
            wait_for(partial(gone, member, name), timeout=60,
                     what=f"{name} removed from {member}")
        result = fedctl("unjoin", "member3", "--kubeconfig", str(fleet.kubeconfig),
                        "--hub-context", "hub", "--timeout", "60")
        assert result.returncode == 0, result.stderr
        wait_for(lambda: "cluster member3 left" in plane.log_path.read_text(), timeout=30,
                 what="the control plane released member3")
        assert plane.process is not None and plane.process.poll() is None, plane.log_tail()
        assert "Traceback" not in plane.log_path.read_text(), plane.log_tail(80)
    finally:
        fedctl("unjoin", "member3", "--orphan", "--kubeconfig", str(fleet.kubeconfig),
               "--hub-context", "hub")
        fleet.kubectl("hub", "delete", "propagationpolicies.policy.federation.io,configmaps",
                      "--all", "-n", ns, "--wait=false", check=False)
        plane.stop()
        # Other modules expect the fleet's MemberClusters registered again.
        fedctl("install", "--kubeconfig", str(fleet.kubeconfig), "--hub-context", "hub",
               "--clusters", str(fleet.clusters_file))
