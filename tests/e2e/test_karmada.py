"""Karmada drop-in on the local fleet: Karmada policy files applied to the hub with kubectl.

The hub serves ``policy.karmada.io/v1alpha1`` next to our group (fedctl run installs the
CRDs); the control plane, with its least-privilege RBAC, reads and validates both groups
the same. The samples are the fixtures of tests/unit/placement/karmada_samples.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_json, get_or_none, wait_for

SAMPLES = Path(__file__).parents[1] / "unit" / "placement" / "karmada_samples"
KARMADA_KINDS = ("propagationpolicies.policy.karmada.io,overridepolicies.policy.karmada.io")


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane) -> Iterator[str]:
    name = f"karmada-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    if control_plane.process is not None and control_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{control_plane.log_tail()}")
    fleet.kubectl("hub", "delete", "deployments", "--all", "-n", name, "--wait=false",
                  check=False)
    fleet.kubectl("hub", "delete", KARMADA_KINDS, "--all", "-n", name, "--wait=false",
                  check=False)


def nginx(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": namespace, "labels": {"app": "nginx"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "nginx"}},
                     "template": {"metadata": {"labels": {"app": "nginx"}},
                                  "spec": {"containers": [{"name": "nginx",
                                                           "image": "nginx:1.25"}]}}}}


def test_every_sample_applies_unchanged(fleet: TestFleet, control_plane: ControlPlane) -> None:
    """kubectl apply (server-side dry run: validated and defaulted by the hub, not stored)."""
    for path in sorted(SAMPLES.glob("*.yaml")):
        if path.name == "clusters.yaml":
            continue
        result = fleet.kubectl("hub", "apply", "--dry-run=server", "-n", "default",
                               "-f", str(path), check=False)
        assert result.returncode == 0, f"{path.name}: {result.stderr}"


def container(fleet: TestFleet, member: str, namespace: str) -> dict[str, Any] | None:
    found = get_or_none(fleet, member, "deployment", "nginx", "-n", namespace)
    if found is None:
        return None
    first: dict[str, Any] = found["spec"]["template"]["spec"]["containers"][0]
    return first


def test_bundle_propagates_with_the_override(fleet: TestFleet, ns: str) -> None:
    """samples/nginx-style PropagationPolicy + OverridePolicy, both policy.karmada.io.

    kubectl creates the file's documents one after the other, the PropagationPolicy
    first, so a copy may be written before the OverridePolicy exists and be updated a
    moment later, as in Karmada; the test waits for the copies to converge.
    """
    apply(fleet, "hub", nginx(ns))
    fleet.kubectl("hub", "apply", "-n", ns, "-f", str(SAMPLES / "bundle-propagation-override.yaml"))
    def overridden(member: str, field: str) -> dict[str, Any] | None:
        found = container(fleet, member, ns)
        return found if found is not None and field in found else None

    wait_for(lambda: (container(fleet, "member2", ns) or {}).get("image")
             == "registry.eu.example.com/nginx:1.25", 60, what="member2's image override")
    member1 = wait_for(lambda: overridden("member1", "command"), 60,
                       what="member1's command override")
    assert member1["image"] == "nginx:1.25"
    assert member1["command"] == ["-c", "/etc/nginx/member1.conf"]
    copy = get_json(fleet, "member2", "deployment", "nginx", "-n", ns)
    assert copy["metadata"]["labels"]["env"] == "eu-stage"
    assert get_or_none(fleet, "member3", "deployment", "nginx", "-n", ns) is None
    policy = get_json(fleet, "hub", "propagationpolicies.policy.karmada.io",
                      "nginx-propagation", "-n", ns)
    valid = {c["type"]: c["status"] for c in policy["status"]["conditions"]}
    assert valid.get("Valid") == "True"


def test_a_typo_in_a_karmada_policy_is_named_not_pruned(fleet: TestFleet, ns: str) -> None:
    typo = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "typo", "namespace": ns},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": "nginx"}],
                     "placement": {"clusterAfinity": {"clusterNames": ["member1"]}}}}
    apply(fleet, "hub", typo)

    def invalid() -> str | None:
        found = get_json(fleet, "hub", "propagationpolicies.policy.karmada.io", "typo",
                         "-n", ns)
        for condition in (found.get("status") or {}).get("conditions") or []:
            if condition["type"] == "Valid" and condition["status"] == "False":
                return str(condition["message"])
        return None

    message = wait_for(invalid, 30, what="Valid=False on the misspelt policy")
    assert "spec.placement.clusterAfinity" in message


def test_a_typo_in_the_policy_that_placed_a_workload_keeps_its_copies(fleet: TestFleet,
                                                                       ns: str) -> None:
    """An edit that misspells a field of the claiming policy is bad input, not "no
    policy": the copies stay in member1 and member2, the binding says PolicyInvalid."""
    def policy(placement: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
                "metadata": {"name": "nginx", "namespace": ns},
                "spec": {"resourceSelectors": [{"apiVersion": "apps/v1",
                                                "kind": "Deployment", "name": "nginx"}],
                         "placement": placement}}

    apply(fleet, "hub", nginx(ns),
          policy({"clusterAffinity": {"clusterNames": ["member1", "member2"]}}))
    for member in ("member1", "member2"):
        wait_for(partial(container, fleet, member, ns), 60, what=f"nginx in {member}")
    apply(fleet, "hub", policy({"clusterAfinity": {"clusterNames": ["member1"]}}))

    def scheduled_reason() -> str | None:
        found = get_or_none(fleet, "hub", "resourcebindings.work.federation.io",
                            "nginx-deployment", "-n", ns) or {}
        return next((str(c.get("reason")) for c in (found.get("status") or {}).get(
            "conditions") or [] if c.get("type") == "Scheduled"), None)

    wait_for(lambda: scheduled_reason() == "PolicyInvalid", 60,
             what="the binding says PolicyInvalid")
    for member in ("member1", "member2"):
        assert container(fleet, member, ns) is not None, member
