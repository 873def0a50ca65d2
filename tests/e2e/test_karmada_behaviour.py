"""Karmada's behaviour fields on the local fleet: suspension stops dispatching and resuming
continues; preserveResourcesOnDeletion keeps the copies; propagateDeps carries a ConfigMap
(and its later change) with a Deployment and removes it with the Deployment; a deleted
policy.karmada.io policy leaves its copies (unclaimed), one of ours takes them away.

Each test works in its own hub namespace; `fedctl run` runs for the whole module.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_or_none, wait_for

MEMBERS = ("member1", "member2")
POLICY_API = "policy.federation.io/v1alpha1"


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane) -> Iterator[str]:
    name = f"kb-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    if control_plane.process is not None and control_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{control_plane.log_tail()}")
    for kinds in ("deployments,configmaps", "propagationpolicies.policy.federation.io",
                  "propagationpolicies.policy.karmada.io"):
        fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false", check=False)


def policy(name: str, namespace: str, selectors: list[dict[str, Any]],
           **spec: Any) -> dict[str, Any]:
    return {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"resourceSelectors": selectors,
                     "placement": {"clusterAffinity": {"clusterNames": list(MEMBERS)},
                                   "replicaScheduling": {"replicaSchedulingType": "Duplicated"}},
                     **spec}}


def config_map(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": data}


def data_in(fleet: TestFleet, member: str, name: str, namespace: str) -> dict[str, str] | None:
    found = get_or_none(fleet, member, "configmap", name, "-n", namespace)
    return found.get("data") if found else None


def has_data(fleet: TestFleet, member: str, name: str, namespace: str,
             data: dict[str, str] | None) -> bool:
    """The member's copy holds ``data`` (None: there is no copy)."""
    return data_in(fleet, member, name, namespace) == data


def binding(fleet: TestFleet, name: str, namespace: str) -> dict[str, Any] | None:
    return get_or_none(fleet, "hub", "resourcebindings.work.federation.io", name, "-n",
                       namespace)


def condition(fleet: TestFleet, name: str, namespace: str, kind: str) -> dict[str, Any] | None:
    found = binding(fleet, name, namespace) or {}
    return next((c for c in (found.get("status") or {}).get("conditions") or []
                 if c["type"] == kind), None)


def test_suspension_stops_dispatching_and_resuming_continues(fleet: TestFleet,
                                                             ns: str) -> None:
    """member2 suspended: a change reaches member1 and not member2 (one reconcile decides
    both, so once member1 has it member2 has been passed over); dispatching: true is shown
    on the binding for both; removing the suspension brings member2 up to date."""
    selector = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "settings"}]
    apply(fleet, "hub", config_map("settings", ns, {"v": "1"}), policy("settings", ns, selector))
    for member in MEMBERS:
        wait_for(partial(has_data, fleet, member, "settings", ns, {"v": "1"}),
                 timeout=60, what=f"first copy in {member}")
    apply(fleet, "hub", policy("settings", ns, selector,
                               suspension={"dispatchingOnClusters": {"clusterNames": ["member2"]}}))
    wait_for(partial(suspended_to, fleet, "settings-configmap", ns, "member2"),
             timeout=60, what="Dispatching=False for member2")
    apply(fleet, "hub", config_map("settings", ns, {"v": "2"}))
    wait_for(partial(has_data, fleet, "member1", "settings", ns, {"v": "2"}),
             timeout=60, what="member1 updated")
    assert data_in(fleet, "member2", "settings", ns) == {"v": "1"}

    apply(fleet, "hub", policy("settings", ns, selector, suspension={"dispatching": True}))
    wait_for(partial(suspended_to, fleet, "settings-configmap", ns, "member1, member2"),
             timeout=60, what="Dispatching=False for every member")
    assert data_in(fleet, "member2", "settings", ns) == {"v": "1"}

    fleet.kubectl("hub", "patch", "propagationpolicies.policy.federation.io", "settings",
                  "-n", ns, "--type=json", "-p", '[{"op":"remove","path":"/spec/suspension"}]')
    for member in MEMBERS:
        wait_for(partial(has_data, fleet, member, "settings", ns, {"v": "2"}),
                 timeout=60, what=f"resumed copy in {member}")
    wait_for(lambda: condition(fleet, "settings-configmap", ns, "Dispatching") is None,
             timeout=30, what="Dispatching condition gone")


def suspended_to(fleet: TestFleet, name: str, namespace: str, clusters: str) -> bool:
    found = condition(fleet, name, namespace, "Dispatching") or {}
    return found.get("reason") == "SuspendDispatching" and \
        f"to {clusters}:" in str(found.get("message"))


def test_preserve_resources_on_deletion_keeps_the_copies(fleet: TestFleet, ns: str) -> None:
    selector = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "kept"}]
    apply(fleet, "hub", config_map("kept", ns, {"k": "v"}),
          policy("kept", ns, selector, preserveResourcesOnDeletion=True))
    for member in MEMBERS:
        wait_for(partial(has_data, fleet, member, "kept", ns, {"k": "v"}),
                 timeout=60, what=f"copy in {member}")
    fleet.kubectl("hub", "delete", "configmap", "kept", "-n", ns)
    wait_for(lambda: binding(fleet, "kept-configmap", ns) is None, timeout=60,
             what="binding gone")
    for member in MEMBERS:
        copy = get_or_none(fleet, member, "configmap", "kept", "-n", ns)
        assert copy is not None and copy["data"] == {"k": "v"}
        labels = copy["metadata"].get("labels") or {}
        assert "federation.io/managed-by" not in labels  # released, as Karmada does


def test_propagate_deps_carries_a_config_map(fleet: TestFleet, ns: str) -> None:
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                     "containers": [{"name": "app", "image": "registry.local/app:1.0",
                                     "envFrom": [{"configMapRef": {"name": "app-config"}}]}]}}}}
    selector = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]
    apply(fleet, "hub", config_map("app-config", ns, {"mode": "fast"}), deployment,
          policy("web", ns, selector, propagateDeps=True))
    for member in MEMBERS:
        wait_for(partial(has_data, fleet, member, "app-config", ns, {"mode": "fast"}),
                 timeout=60, what=f"app-config carried to {member}")
        assert get_or_none(fleet, member, "deployment", "web", "-n", ns) is not None
    apply(fleet, "hub", config_map("app-config", ns, {"mode": "safe"}))
    wait_for(lambda: data_in(fleet, "member1", "app-config", ns) == {"mode": "safe"},
             timeout=60, what="the dependency's change carried")
    fleet.kubectl("member2", "delete", "configmap", "app-config", "-n", ns)
    wait_for(partial(has_data, fleet, "member2", "app-config", ns, {"mode": "safe"}),
             timeout=60, what="the dependency deleted in member2 put back")
    fleet.kubectl("hub", "delete", "deployment", "web", "-n", ns, "--wait=false")
    for member in MEMBERS:
        wait_for(partial(has_data, fleet, member, "app-config", ns, None),
                 timeout=60, what=f"app-config removed from {member}")


def test_a_deleted_karmada_policy_leaves_its_copies_and_ours_removes_them(fleet: TestFleet,
                                                                         ns: str) -> None:
    """Two ConfigMaps, one placed by a policy.karmada.io policy and one by ours; both
    policies deleted: the first's copies stay (its binding says Unclaimed), the second's go.
    Deleting the first template then removes its copies too."""
    karmada = policy("kept", ns, [{"apiVersion": "v1", "kind": "ConfigMap", "name": "kept"}])
    karmada["apiVersion"] = "policy.karmada.io/v1alpha1"
    apply(fleet, "hub", config_map("kept", ns, {"v": "1"}), karmada,
          config_map("removed", ns, {"v": "1"}),
          policy("removed", ns, [{"apiVersion": "v1", "kind": "ConfigMap", "name": "removed"}]))
    for member in MEMBERS:
        for name in ("kept", "removed"):
            wait_for(partial(has_data, fleet, member, name, ns, {"v": "1"}), 60,
                     what=f"{name} in {member}")
    fleet.kubectl("hub", "delete", "propagationpolicies.policy.karmada.io", "kept", "-n", ns)
    fleet.kubectl("hub", "delete", "propagationpolicies.policy.federation.io", "removed",
                  "-n", ns)
    wait_for(lambda: (condition(fleet, "kept-configmap", ns, "Scheduled") or {}).get("reason")
             == "Unclaimed", 60, what="kept's binding Unclaimed")
    for member in MEMBERS:
        wait_for(partial(has_data, fleet, member, "removed", ns, None), 60,
                 what=f"removed gone from {member}")
    assert binding(fleet, "removed-configmap", ns) is None
    for member in MEMBERS:
        assert data_in(fleet, member, "kept", ns) == {"v": "1"}, member
    fleet.kubectl("hub", "delete", "configmap", "kept", "-n", ns)
    for member in MEMBERS:
        wait_for(partial(has_data, fleet, member, "kept", ns, None), 60,
                 what=f"kept gone from {member}")
