"""Configuration rollouts, the propagation side, on the local fleet: a governed
ConfigMap's update is held in a cluster until the ReconfigurePolicy's status releases its
version there, and a governed Deployment carries the restart stamp only where the status
gives one. The status is patched by hand (merge patch of ``/status``, as the rollout
controller writes it), so this module tests propagation alone. The rollout controller runs
too, and leaves that status's cluster versions alone on purpose: the policy names a
ConfigConstraint that does not exist, so it is refused (``ConstraintNotFound``), and a
refused rollout releases and stamps nothing (docs/rollouts.md).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from federation.hub import rollouts
from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_json, get_or_none, wait_for

PLACED = ("member1", "member2")
POLICY_API = "policy.federation.io/v1alpha1"
RCP = "reconfigurepolicies.config.federation.io"
ANNOTATION = rollouts.CONFIG_VERSION_ANNOTATION


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane) -> Iterator[str]:
    name = f"rch-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    if control_plane.process is not None and control_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{control_plane.log_tail()}")
    for kinds in (f"deployments,configmaps,{RCP}", "propagationpolicies.policy.federation.io"):
        fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false", check=False)


def manifests(ns: str, value: str) -> list[dict[str, Any]]:
    config = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "app-config", "namespace": ns},
              "data": {"my.ini": f"[mysqld]\nmax_connections={value}\n"}}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "app", "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "app"}},
                 "template": {"metadata": {"labels": {"app": "app"}},
                              "spec": {"containers": [{"name": "app",
                                                       "image": "registry.local/app:1.0"}]}}}}
    policy = {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
              "metadata": {"name": "app", "namespace": ns},
              "spec": {"resourceSelectors": [
                  {"apiVersion": "v1", "kind": "ConfigMap", "name": "app-config"},
                  {"apiVersion": "apps/v1", "kind": "Deployment", "name": "app"}],
                  "placement": {"clusterAffinity": {"clusterNames": list(PLACED)},
                                "replicaScheduling": {
                                    "replicaSchedulingType": "Duplicated"}}}}
    return [config, deployment, policy]


def reconfigure_policy(ns: str) -> dict[str, Any]:
    return {"apiVersion": f"{rollouts.GROUP}/{rollouts.VERSION}",
            "kind": "ReconfigurePolicy", "metadata": {"name": "app", "namespace": ns},
            "spec": {"configRef": {"kind": "ConfigMap", "name": "app-config"},
                     "files": [{"key": "my.ini", "constraintRef": "e2e-mysql"}],
                     "workloads": [{"kind": "Deployment", "name": "app"}],
                     "reloadPolicy": "restart"}}


def set_status(fleet: TestFleet, ns: str, clusters: list[dict[str, Any]]) -> None:
    """What the rollout controller writes: a merge patch of the status subresource."""
    fleet.kubectl("hub", "patch", RCP, "app", "-n", ns, "--subresource=status",
                  "--type=merge", "-p", json.dumps({"status": {"clusters": clusters}}))


def member_config(fleet: TestFleet, member: str, ns: str) -> str | None:
    found = get_or_none(fleet, member, "configmap", "app-config", "-n", ns)
    value = ((found or {}).get("data") or {}).get("my.ini")
    return str(value) if value is not None else None


def stamp(fleet: TestFleet, member: str, ns: str) -> str | None:
    found = get_or_none(fleet, member, "deployment", "app", "-n", ns) or {}
    template = (found.get("spec") or {}).get("template") or {}
    value = ((template.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    return str(value) if value is not None else None


def copies_of(fleet: TestFleet, member: str, ns: str, config: str) -> bool:
    return member_config(fleet, member, ns) == config and \
        get_or_none(fleet, member, "deployment", "app", "-n", ns) is not None


def held(fleet: TestFleet, ns: str) -> list[str]:
    binding = get_or_none(fleet, "hub", "resourcebindings.work.federation.io",
                          "app-config-configmap", "-n", ns) or {}
    return sorted(e["cluster"] for e in (binding.get("spec") or {}).get("configHeld") or [])


def test_config_held_until_released_and_restart_stamped_per_cluster(
        fleet: TestFleet, ns: str) -> None:
    """v1 reaches both members; with the policy, v2 is held in both until released;
    member1's release writes member1 only (and stamps its Deployment only); member2's
    release then writes member2, whose Deployment stays unstamped."""
    apply(fleet, "hub", *manifests(ns, "100"))
    old, new = "[mysqld]\nmax_connections=100\n", "[mysqld]\nmax_connections=200\n"
    for member in PLACED:
        wait_for(partial(copies_of, fleet, member, ns, old), timeout=60,
                 what=f"copies in {member}")
    apply(fleet, "hub", reconfigure_policy(ns))
    # A first stamp shows the control plane has seen the policy (and its status) before the
    # config changes: the hold below is then not a race with the policy's informer.
    set_status(fleet, ns, [{"name": "member1", "restartVersion": "r0"}])
    wait_for(lambda: stamp(fleet, "member1", ns) == "r0", timeout=60, what="stamp r0")
    assert stamp(fleet, "member2", ns) is None

    apply(fleet, "hub", manifests(ns, "200")[0])
    wait_for(lambda: held(fleet, ns) == list(PLACED), timeout=60, what="v2 held in both")
    assert [member_config(fleet, m, ns) for m in PLACED] == [old, old]

    version = rollouts.config_version(get_json(fleet, "hub", "configmap", "app-config",
                                               "-n", ns))
    set_status(fleet, ns, [{"name": "member1", "releasedVersion": version,
                            "restartVersion": version}])
    wait_for(lambda: member_config(fleet, "member1", ns) == new, timeout=60,
             what="v2 in member1")
    wait_for(lambda: stamp(fleet, "member1", ns) == version, timeout=60, what="member1 stamp")
    wait_for(lambda: held(fleet, ns) == ["member2"], timeout=60, what="member2 still held")
    assert member_config(fleet, "member2", ns) == old
    assert stamp(fleet, "member2", ns) is None

    set_status(fleet, ns, [{"name": "member1", "releasedVersion": version,
                            "restartVersion": version},
                           {"name": "member2", "releasedVersion": version}])
    wait_for(lambda: member_config(fleet, "member2", ns) == new, timeout=60,
             what="v2 in member2")
    wait_for(lambda: held(fleet, ns) == [], timeout=60, what="nothing held")
    assert stamp(fleet, "member2", ns) is None
    assert stamp(fleet, "member1", ns) == version
