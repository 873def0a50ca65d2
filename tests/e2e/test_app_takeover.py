"""vela-core's take-over policy on the local fleet, with the control plane's real identity
(its RBAC as `fedctl rbac` makes it): a Deployment created directly in a member is refused
to an Application without the policy (the conflict named, the Deployment untouched), then
adopted by the same Application with the policy (its spec becomes the Application's, our
marks name the new owner, the same object), and deleted with the Application, as KubeVela's
e2e case ("Test application with take-over policy") expects.

`fedctl run` runs for the module with `--app-local-cluster member1`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane, app_namespace, running_plane
from tests.e2e.helpers import apply, get_or_none, wait_for


@pytest.fixture(scope="module")
def plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[ControlPlane]:
    yield from running_plane(fleet_session, tmp_path_factory, "--app-local-cluster", "member1")


@pytest.fixture
def ns(fleet: TestFleet, plane: ControlPlane) -> Iterator[str]:
    yield from app_namespace(fleet, plane, "takeover", "member1")


def busybox(image: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "busybox-ref", **meta},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "busybox-ref"}},
                     "template": {"metadata": {"labels": {"app": "busybox-ref"}}, "spec": {
                         "containers": [{"name": "main", "image": image}]}}}}


def take_over_app(ns: str, policy: bool) -> dict[str, Any]:
    """KubeVela's app-takeover.yaml, with a whole Deployment (our writes are full updates,
    where KubeVela's three-way merge keeps the member's spec under its bare metadata)."""
    policies = [{"name": "take-over", "type": "take-over", "properties": {
        "rules": [{"selector": {"resourceTypes": ["Deployment"]}}]}}] if policy else []
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": "take-over", "namespace": ns},
            "spec": {"components": [{"name": "busybox", "type": "k8s-objects", "properties": {
                "objects": [busybox("busybox:2")]}}], "policies": policies}}


def member_deployment(fleet: TestFleet, ns: str) -> dict[str, Any] | None:
    return get_or_none(fleet, "member1", "deployment", "busybox-ref", "-n", ns)


def applied_message(fleet: TestFleet, ns: str) -> str:
    app = get_or_none(fleet, "hub", "applications.core.oam.dev", "take-over", "-n", ns) or {}
    conditions = {c["type"]: c for c in (app.get("status") or {}).get("conditions") or []}
    applied = conditions.get("Applied") or {}
    return str(applied.get("message") or "") if applied.get("status") == "False" else ""


def test_an_unmanaged_deployment_is_refused_then_taken_over(fleet: TestFleet,
                                                            ns: str) -> None:
    apply(fleet, "member1", busybox("busybox:1", namespace=ns, labels={"owner": "by-hand"}))
    original = member_deployment(fleet, ns)
    assert original is not None

    apply(fleet, "hub", take_over_app(ns, policy=False))
    conflict = f"Deployment {ns}/busybox-ref in member1: exists and is not managed by " \
        "federation (a take-over policy selecting it would adopt it)"
    wait_for(lambda: conflict in applied_message(fleet, ns), timeout=60,
             what="the conflict named in the Applied condition")
    untouched = member_deployment(fleet, ns)
    assert untouched is not None
    # (its status is the fleet's simulator's to write: the generation counts spec changes)
    assert untouched["metadata"]["generation"] == original["metadata"]["generation"]
    assert untouched["metadata"]["labels"] == original["metadata"]["labels"]
    assert untouched["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1"

    apply(fleet, "hub", take_over_app(ns, policy=True))

    def adopted() -> dict[str, Any] | None:
        live = member_deployment(fleet, ns) or {}
        annotations = (live.get("metadata") or {}).get("annotations") or {}
        return live if annotations.get("federation.io/application") == \
            f"{ns}/take-over" else None

    live = wait_for(adopted, timeout=60, what="the Deployment taken over")
    assert live["metadata"]["uid"] == original["metadata"]["uid"]
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:2"
    labels = live["metadata"]["labels"]
    assert labels["federation.io/managed-by"] == "federation"
    assert labels["app.oam.dev/name"] == "take-over"
    assert "owner" not in labels  # the Application's content, whole
    wait_for(lambda: not applied_message(fleet, ns), timeout=60, what="Applied no longer False")

    fleet.kubectl("hub", "delete", "applications.core.oam.dev", "take-over", "-n", ns)
    wait_for(lambda: member_deployment(fleet, ns) is None, timeout=60,
             what="the taken-over Deployment deleted with its Application")
