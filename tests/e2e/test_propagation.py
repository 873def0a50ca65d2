"""Propagation on the local fleet: placement, overrides, status, clean-up, conflicts.

Each test works in its own hub namespace; `fedctl run` runs for the whole module.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_json, get_or_none, wait_for

# Waits poll for conditions, never lean on kubectl's own slowness: reads are in process.
pytestmark = pytest.mark.fast_reads

MEMBERS = ("member1", "member2", "member3")
POLICY_API = "policy.federation.io/v1alpha1"


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane) -> Iterator[str]:
    name = f"prop-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    if control_plane.process is not None and control_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{control_plane.log_tail()}")
    # The hub has no namespace controller: delete what the test made (policies last, so
    # the control plane still knows where the copies are), leaving other modules a clean hub.
    for kinds in ("deployments,configmaps,services",
                  "propagationpolicies.policy.federation.io,overridepolicies.policy.federation.io"):
        fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false", check=False)


def deployment(name: str, namespace: str, replicas: int,
               image: str = "registry.local/app:1.0") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": image}]}}},
    }


def weighted_policy(name: str, namespace: str, weights: dict[str, int],
                    **placement: Any) -> dict[str, Any]:
    return {
        "apiVersion": POLICY_API, "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
            "placement": {
                "clusterAffinity": {"clusterNames": sorted(weights)},
                "replicaScheduling": {
                    "replicaSchedulingType": "Divided",
                    "replicaDivisionPreference": "Weighted",
                    "weightPreference": {"staticWeightList": [
                        {"targetCluster": {"clusterNames": [c]}, "weight": w}
                        for c, w in weights.items()]},
                },
                **placement,
            },
        },
    }


def duplicated_policy(name: str, namespace: str, selectors: list[dict[str, Any]],
                      **spec: Any) -> dict[str, Any]:
    return {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"resourceSelectors": selectors,
                     "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}},
                     **spec}}


def config_map(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": data}


def duplicate_config_map(fleet: TestFleet, ns: str, name: str, data: dict[str, str],
                         wait_in: tuple[str, ...] = MEMBERS) -> None:
    """A ConfigMap and a Duplicated policy for it on the hub; wait for copies in ``wait_in``."""
    apply(fleet, "hub", config_map(name, ns, data), duplicated_policy(
        name, ns, [{"apiVersion": "v1", "kind": "ConfigMap", "name": name}]))
    for member in wait_in:
        wait_for(partial(get_or_none, fleet, member, "configmap", name, "-n", ns),
                 timeout=60, what=f"configmap {name} in {member}")


def absent(fleet: TestFleet, context: str, kind: str, name: str, namespace: str) -> bool:
    return get_or_none(fleet, context, kind, name, "-n", namespace) is None


def member_replicas(fleet: TestFleet, name: str, namespace: str) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for member in MEMBERS:
        obj = get_or_none(fleet, member, "deployment", name, "-n", namespace)
        found[member] = obj["spec"]["replicas"] if obj else None
    return found


def binding_conditions(fleet: TestFleet, name: str, namespace: str) -> dict[str, dict[str, Any]]:
    binding = get_or_none(fleet, "hub", "resourcebindings.work.federation.io", name, "-n",
                          namespace)
    conditions = ((binding or {}).get("status") or {}).get("conditions") or []
    return {c["type"]: c for c in conditions}


def events_for(fleet: TestFleet, namespace: str, name: str) -> list[dict[str, Any]]:
    listing = get_json(fleet, "hub", "events", "-n", namespace)
    return [e for e in listing["items"] if e["involvedObject"].get("name") == name]


def wait_for_event(fleet: TestFleet, namespace: str, name: str, reason: str,
                   kind: str | None = None) -> None:
    """An Event is recorded on its own, after the write it tells of: wait for it."""
    wait_for(lambda: any(e["reason"] == reason and kind in (None, e["type"])
                         for e in events_for(fleet, namespace, name)),
             timeout=30, what=f"{reason} event on {name}")


def test_weighted_deployment_is_divided_and_reports_ready(fleet: TestFleet, ns: str) -> None:
    """12 replicas at 3:2:1 land as 6/4/2 (checked with kubectl); the hub shows 12 ready;
    scaling to 14 gives 7/5/2; excluding member3 moves its replicas and deletes its copy."""
    apply(fleet, "hub", deployment("web", ns, 12),
          weighted_policy("web", ns, {"member1": 3, "member2": 2, "member3": 1}))
    wait_for(lambda: member_replicas(fleet, "web", ns) ==
             {"member1": 6, "member2": 4, "member3": 2}, timeout=60, what="6/4/2")
    wait_for(lambda: get_json(fleet, "hub", "deployment", "web", "-n", ns)
             .get("status", {}).get("readyReplicas") == 12, timeout=60, what="hub 12 ready")
    copy = get_json(fleet, "member1", "deployment", "web", "-n", ns)
    assert copy["metadata"]["labels"]["federation.io/managed-by"] == "federation"

    fleet.kubectl("hub", "scale", "deployment", "web", "-n", ns, "--replicas=14")
    wait_for(lambda: member_replicas(fleet, "web", ns) ==
             {"member1": 7, "member2": 5, "member3": 2}, timeout=60, what="7/5/2")

    apply(fleet, "hub", weighted_policy("web", ns, {"member1": 3, "member2": 2, "member3": 1},
                                        clusterAffinity={"clusterNames": ["member1", "member2"]}))
    wait_for(lambda: member_replicas(fleet, "web", ns) ==
             {"member1": 8, "member2": 6, "member3": None}, timeout=60, what="8/6/-")
    wait_for(lambda: get_json(fleet, "hub", "deployment", "web", "-n", ns)
             .get("status", {}).get("readyReplicas") == 14, timeout=60, what="hub 14 ready")
    wait_for_event(fleet, ns, "web", "Scheduled")
    wait_for_event(fleet, ns, "web", "Applied")


def test_image_override_reaches_only_member2(fleet: TestFleet, ns: str) -> None:
    """An OverridePolicy for member2 changes the image there and nowhere else."""
    override = {
        "apiVersion": POLICY_API, "kind": "OverridePolicy",
        "metadata": {"name": "mirror", "namespace": ns},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                 "overrideRules": [{"targetCluster": {"clusterNames": ["member2"]},
                                    "overriders": {"imageOverrider": [
                                        {"component": "Registry", "operator": "replace",
                                         "value": "eu.mirror.local"}]}}]},
    }
    apply(fleet, "hub", override, deployment("api", ns, 3),
          weighted_policy("api", ns, {"member1": 1, "member2": 1, "member3": 1}))

    def images() -> dict[str, str]:
        found = {}
        for member in MEMBERS:
            obj = get_or_none(fleet, member, "deployment", "api", "-n", ns)
            if obj:
                found[member] = obj["spec"]["template"]["spec"]["containers"][0]["image"]
        return found

    wait_for(lambda: len(images()) == 3, timeout=60, what="three copies")
    assert images() == {"member1": "registry.local/app:1.0",
                        "member2": "eu.mirror.local/app:1.0",
                        "member3": "registry.local/app:1.0"}


def test_configmap_is_duplicated_and_deletion_removes_every_copy(fleet: TestFleet,
                                                                  ns: str) -> None:
    """A ConfigMap reaches every member; deleting the template removes every copy."""
    duplicate_config_map(fleet, ns, "settings", {"mode": "fast"})
    assert get_json(fleet, "member3", "configmap", "settings", "-n", ns)["data"] == \
        {"mode": "fast"}
    fleet.kubectl("hub", "delete", "configmap", "settings", "-n", ns, "--wait=false")
    for member in MEMBERS:
        wait_for(partial(absent, fleet, member, "configmap", "settings", ns),
                 timeout=60, what=f"configmap gone from {member}")
    wait_for(lambda: get_or_none(fleet, "hub", "configmap", "settings", "-n", ns) is None,
             timeout=30, what="hub template released")


def test_drift_in_a_member_is_reverted(fleet: TestFleet, ns: str) -> None:
    """Someone edits our copy in a member: the next reconcile puts it back."""
    duplicate_config_map(fleet, ns, "drifty", {"k": "hub"}, wait_in=("member2",))
    fleet.kubectl("member2", "patch", "configmap", "drifty", "-n", ns, "--type=merge",
                  "-p", '{"data":{"k":"edited"}}')
    wait_for(lambda: get_json(fleet, "member2", "configmap", "drifty", "-n", ns)["data"]
             == {"k": "hub"}, timeout=30, what="drift reverted")


def test_crd_and_custom_resource_are_propagated_in_order(
        fleet: TestFleet, ns: str, control_plane: ControlPlane) -> None:
    """A custom resource reaches members together with its CRD, the CRD first (the operator
    grants the control plane the new kind first: `fedctl install --propagate-kinds`)."""
    group = f"g{uuid.uuid4().hex[:6]}.example.com"
    control_plane.install("--propagate-kinds", f"widgets.{group}")
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object",
                                         "x-kubernetes-preserve-unknown-fields": True}}}]},
    }
    apply(fleet, "hub", crd)
    wait_for(lambda: fleet.kubectl("hub", "get", f"widgets.{group}", "-n", ns,
                                   check=False).returncode == 0, timeout=30, what="CRD served")
    widget = {"apiVersion": f"{group}/v1", "kind": "Widget",
              "metadata": {"name": "w1", "namespace": ns}, "spec": {"size": 3}}
    apply(fleet, "hub", widget, duplicated_policy(
        "widgets", ns, [{"apiVersion": f"{group}/v1", "kind": "Widget"}]))
    for member in MEMBERS:
        found = wait_for(partial(get_or_none, fleet, member, f"widgets.{group}", "w1", "-n", ns),
                         timeout=90, what=f"widget in {member}")
        assert found["spec"] == {"size": 3}
        crd_copy = get_json(fleet, member, "crd", f"widgets.{group}")
        assert crd_copy["metadata"]["creationTimestamp"] <= found["metadata"][
            "creationTimestamp"]


def test_existing_unowned_object_is_a_conflict_and_untouched(fleet: TestFleet, ns: str) -> None:
    """A member object we did not create is not overwritten; a Conflict condition names it."""
    fleet.kubectl("member1", "create", "namespace", ns)
    fleet.kubectl("member1", "create", "configmap", "mine", "-n", ns, "--from-literal=owner=ops")
    duplicate_config_map(fleet, ns, "mine", {"owner": "hub"}, wait_in=())
    conflict = wait_for(lambda: binding_conditions(fleet, "mine-configmap", ns).get("Conflict"),
                        timeout=60, what="Conflict condition")
    assert conflict["status"] == "True" and "member1" in conflict["message"]
    assert "ConfigMap" in conflict["message"] and "mine" in conflict["message"]
    wait_for(lambda: get_or_none(fleet, "member2", "configmap", "mine", "-n", ns),
             timeout=60, what="copy in member2")
    assert get_json(fleet, "member1", "configmap", "mine", "-n", ns)["data"] == {"owner": "ops"}
    wait_for_event(fleet, ns, "mine", "ObjectNotManaged")


def test_unknown_cluster_name_is_reported_and_nothing_is_written(fleet: TestFleet,
                                                                 ns: str) -> None:
    """A policy naming a cluster that does not exist: condition + event, no member copy."""
    apply(fleet, "hub", deployment("lost", ns, 2),
          weighted_policy("lost", ns, {"member1": 1, "member9": 1}))
    scheduled = wait_for(lambda: binding_conditions(fleet, "lost-deployment", ns)
                         .get("Scheduled"), timeout=60, what="Scheduled condition")
    assert scheduled["status"] == "False" and "member9" in scheduled["message"]
    # The template's status is written after the binding, on its own.
    wait_for_event(fleet, ns, "lost", "UnknownCluster")
    template_scheduled = wait_for(lambda: {c["type"]: c for c in (
        get_json(fleet, "hub", "deployment", "lost", "-n", ns).get("status") or {}
    ).get("conditions") or []}.get("Scheduled"), timeout=30, what="template's Scheduled")
    assert template_scheduled["status"] == "False"
    assert all(get_or_none(fleet, m, "deployment", "lost", "-n", ns) is None for m in MEMBERS)


def test_invalid_override_path_is_reported_and_nothing_is_written(fleet: TestFleet,
                                                                  ns: str) -> None:
    """A plaintext override with a bad path: condition + event, no partial copies anywhere."""
    override = {
        "apiVersion": POLICY_API, "kind": "OverridePolicy",
        "metadata": {"name": "broken", "namespace": ns},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                 "overrideRules": [{"targetCluster": {"clusterNames": ["member3"]},
                                    "overriders": {"plaintext": [
                                        {"path": "/spec/template/nothing/here",
                                         "operator": "replace", "value": 1}]}}]},
    }
    apply(fleet, "hub", override, deployment("bad", ns, 3),
          weighted_policy("bad", ns, {"member1": 1, "member2": 1, "member3": 1}))
    applied = wait_for(lambda: binding_conditions(fleet, "bad-deployment", ns).get("Applied"),
                       timeout=60, what="Applied condition")
    assert applied["status"] == "False" and applied["reason"] == "OverrideFailed"
    assert "member3" in applied["message"] and "/spec/template/nothing" in applied["message"]
    wait_for_event(fleet, ns, "bad", "OverrideFailed")
    assert all(get_or_none(fleet, m, "deployment", "bad", "-n", ns) is None for m in MEMBERS)


def test_deletion_with_a_member_down_completes_and_cleans_it_later(fleet: TestFleet,
                                                                   ns: str) -> None:
    """member2 stopped: deletion finishes for the others, the binding says what is pending,
    and member2's copy is removed after it starts again."""
    duplicate_config_map(fleet, ns, "later", {"a": "b"})
    fleet.stop("member2")
    try:
        fleet.kubectl("hub", "delete", "configmap", "later", "-n", ns, "--wait=false")
        for member in ("member1", "member3"):
            wait_for(partial(absent, fleet, member, "configmap", "later", ns),
                     timeout=60, what=f"copy gone from {member}")
        wait_for(lambda: get_or_none(fleet, "hub", "configmap", "later", "-n", ns) is None,
                 timeout=60, what="template gone")
        # The binding is written after the copies are deleted (the record follows the
        # writes): a read right after the copies went may come before it.
        pending = wait_for(lambda: binding_conditions(fleet, "later-configmap", ns).get(
            "CleanupPending"), timeout=30, what="CleanupPending on the binding")
        assert pending["status"] == "True"
        assert "member2" in pending["message"]
    finally:
        fleet.start("member2")
    def gone(context: str, *what: str) -> bool:
        return get_or_none(fleet, context, *what, "-n", ns) is None

    wait_for(lambda: gone("member2", "configmap", "later"), timeout=90,
             what="member2 copy removed after start")
    wait_for(lambda: gone("hub", "resourcebindings.work.federation.io", "later-configmap"),
             timeout=30, what="binding removed")


def test_policy_selecting_no_cluster_is_reported(fleet: TestFleet, ns: str) -> None:
    """A policy whose affinity matches no cluster: ScheduleFailed condition and event."""
    policy = duplicated_policy("nowhere", ns, [{"apiVersion": "v1", "kind": "ConfigMap",
                                                "name": "nowhere"}])
    policy["spec"]["placement"]["clusterAffinity"] = {
        "labelSelector": {"matchLabels": {"topology.kubernetes.io/region": "moon-1"}}}
    apply(fleet, "hub", config_map("nowhere", ns, {"x": "y"}), policy)
    scheduled = wait_for(lambda: binding_conditions(fleet, "nowhere-configmap", ns)
                         .get("Scheduled"), timeout=60, what="Scheduled condition")
    assert scheduled["status"] == "False" and scheduled["reason"] == "ScheduleFailed"
    wait_for_event(fleet, ns, "nowhere", "ScheduleFailed", "Warning")
    assert all(absent(fleet, m, "configmap", "nowhere", ns) for m in MEMBERS)


def test_orphan_annotation_keeps_member_copies(fleet: TestFleet, ns: str) -> None:
    """A template annotated federation.io/orphan=true leaves its copies when deleted."""
    duplicate_config_map(fleet, ns, "keep", {"x": "y"})
    fleet.kubectl("hub", "annotate", "configmap", "keep", "-n", ns, "federation.io/orphan=true")
    fleet.kubectl("hub", "delete", "configmap", "keep", "-n", ns, "--wait=false")
    wait_for(partial(absent, fleet, "hub", "configmap", "keep", ns), timeout=60,
             what="template gone")
    assert all(get_or_none(fleet, m, "configmap", "keep", "-n", ns) for m in MEMBERS)


def binding_of(fleet: TestFleet, name: str, namespace: str) -> dict[str, Any] | None:
    return get_or_none(fleet, "hub", "resourcebindings.work.federation.io", name, "-n",
                       namespace)


def test_recreated_template_finishes_its_predecessors_cleanup(fleet: TestFleet,
                                                              ns: str) -> None:
    """member2 stopped; `again` and `back` are deleted (their copies there pending) and made
    again: `again` now only for member1+member3, `back` everywhere. The new templates take
    the pending clean-up over (never lost); once member2 is back, `again`'s old copy is gone
    there and `back` has exactly one copy, the new template's, which stays."""
    for name in ("again", "back"):
        duplicate_config_map(fleet, ns, name, {"v": "1"})
    fleet.stop("member2")
    try:
        fleet.kubectl("hub", "delete", "configmap", "again", "back", "-n", ns, "--wait=false")
        def pending_in_member2(name: str) -> bool:
            left = binding_of(fleet, f"{name}-configmap", ns)
            return left is not None and left["spec"].get("templateDeleted") is True and \
                left["spec"].get("pendingCleanup") == ["member2"]

        for name in ("again", "back"):
            # Templates carry no finalizer: the delete returns at once and the binding
            # records what is left after the control plane sees it (a poll can come first).
            wait_for(partial(absent, fleet, "hub", "configmap", name, ns), timeout=60,
                     what=f"{name} deleted on the hub")
            wait_for(partial(pending_in_member2, name), timeout=60,
                     what=f"{name}'s binding records member2's copy as pending")
        narrowed = duplicated_policy("again", ns, [{"apiVersion": "v1", "kind": "ConfigMap",
                                                    "name": "again"}])
        narrowed["spec"]["placement"]["clusterAffinity"] = {"clusterNames": ["member1",
                                                                             "member3"]}
        apply(fleet, "hub", narrowed, config_map("again", ns, {"v": "2"}),
              config_map("back", ns, {"v": "2"}))
        uids = {name: get_json(fleet, "hub", "configmap", name, "-n", ns)["metadata"]["uid"]
                for name in ("again", "back")}

        def taken_over(name: str) -> bool:
            found = binding_of(fleet, f"{name}-configmap", ns) or {}
            spec = found.get("spec") or {}
            return (spec.get("resource") or {}).get("uid") == uids[name] and \
                spec.get("templateDeleted") is False and \
                spec.get("pendingCleanup") == ["member2"]

        for name in ("again", "back"):
            wait_for(partial(taken_over, name), timeout=60,
                     what=f"{name}'s binding carries member2 as pending, for the new template")
    finally:
        fleet.start("member2")

    wait_for(partial(absent, fleet, "member2", "configmap", "again", ns), timeout=90,
             what="the old copy of again removed from member2")

    def new_copy_in_member2() -> bool:
        copy = get_or_none(fleet, "member2", "configmap", "back", "-n", ns)
        return copy is not None and copy["data"] == {"v": "2"} and \
            copy["metadata"]["annotations"]["federation.io/template-uid"] == uids["back"]

    wait_for(new_copy_in_member2, timeout=90, what="member2 holds the new back, and only it")
    def nothing_pending(name: str) -> bool:
        found = binding_of(fleet, f"{name}-configmap", ns) or {}
        return (found.get("spec") or {}).get("pendingCleanup") == []

    for name in ("again", "back"):
        wait_for(partial(nothing_pending, name), timeout=60,
                 what=f"{name}: nothing pending any more")
        assert "CleanupPending" not in binding_conditions(fleet, f"{name}-configmap", ns)
    assert get_json(fleet, "member1", "configmap", "again", "-n", ns)["data"] == {"v": "2"}
    time.sleep(3)  # a clean-up that fought the new template would delete its copy now
    assert new_copy_in_member2(), "the new copy in member2 was removed"


def test_failed_placement_leaves_no_binding_behind(fleet: TestFleet, ns: str) -> None:
    """A template whose placement fails still gets its ResourceBinding (its record; templates
    carry no finalizer); deleting it deletes the binding too."""
    apply(fleet, "hub", deployment("nowhere-else", ns, 2),
          weighted_policy("nowhere-else", ns, {"member1": 1, "member9": 1}))
    wait_for(lambda: binding_conditions(fleet, "nowhere-else-deployment", ns).get("Scheduled"),
             timeout=60, what="Scheduled condition")
    template = get_json(fleet, "hub", "deployment", "nowhere-else", "-n", ns)
    assert "federation.io/propagation" not in template["metadata"].get("finalizers", [])
    fleet.kubectl("hub", "delete", "deployment", "nowhere-else", "-n", ns, "--wait=false")
    wait_for(partial(absent, fleet, "hub", "deployment", "nowhere-else", ns), timeout=60,
             what="template deleted")
    wait_for(lambda: binding_of(fleet, "nowhere-else-deployment", ns) is None, timeout=30,
             what="its binding deleted with it")
