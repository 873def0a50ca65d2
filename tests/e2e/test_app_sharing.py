"""Two of vela-core's definitions on the local fleet, with the control plane's real
identity (its RBAC as `fedctl rbac` makes it): a depends-on-app step creating the
Application it waits for from the ConfigMap of its namespace, and two Applications of one
namespace sharing a ConfigMap (the owner's content stays, it outlives its owner, and goes
with the last of them).

`fedctl run` runs for the module with `--app-local-cluster member1`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane, app_namespace, running_plane
from tests.e2e.helpers import apply, get_or_none, wait_for


@pytest.fixture(scope="module")
def plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[ControlPlane]:
    yield from running_plane(fleet_session, tmp_path_factory, "--app-local-cluster", "member1")


@pytest.fixture
def ns(fleet: TestFleet, plane: ControlPlane) -> Iterator[str]:
    yield from app_namespace(fleet, plane, "share")


def config_app(name: str, ns: str, data: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"components": [{"name": "shared", "type": "k8s-objects", "properties": {
                "objects": [{"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "shared"}, "data": data}]}}], **extra}}


def phase(fleet: TestFleet, ns: str, name: str) -> str | None:
    found = get_or_none(fleet, "hub", "applications.core.oam.dev", name, "-n", ns)
    return ((found or {}).get("status") or {}).get("status")


def test_depends_on_app_creates_the_missing_application_from_its_configmap(
        fleet: TestFleet, ns: str) -> None:
    fluxcd = config_app("fluxcd", ns, {"from": "configmap"})
    apply(fleet, "hub", {"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "fluxcd", "namespace": ns},
                         "data": {"application": yaml.safe_dump(fluxcd)}})
    apply(fleet, "hub", {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "kruise", "namespace": ns},
        "spec": {"components": [], "workflow": {"steps": [
            {"name": "check-flux", "type": "depends-on-app", "properties": {"name": "fluxcd"}},
            {"name": "done", "type": "print-message-in-status",
             "properties": {"message": "fluxcd is running"}}]}}})
    wait_for(lambda: phase(fleet, ns, "kruise") == "running", timeout=60,
             what="kruise running after fluxcd")
    created = get_or_none(fleet, "hub", "applications.core.oam.dev", "fluxcd", "-n", ns)
    assert created is not None
    assert created["metadata"]["annotations"]["apps.federation.io/created-by"] == \
        f"{ns}/kruise"
    delivered = get_or_none(fleet, "member1", "configmap", "shared", "-n", ns)
    assert delivered is not None and delivered["data"] == {"from": "configmap"}


def test_two_applications_of_a_namespace_share_a_configmap(fleet: TestFleet,
                                                          ns: str) -> None:
    def sharing(name: str, value: str) -> dict[str, Any]:
        return config_app(name, ns, {"key": value}, policies=[{
            "name": "share", "type": "shared-resource",
            "properties": {"rules": [{"selector": {"resourceTypes": ["ConfigMap"]}}]}}])

    apply(fleet, "hub", sharing("first", "one"))
    wait_for(lambda: phase(fleet, ns, "first") == "running", timeout=60, what="first running")
    apply(fleet, "hub", sharing("second", "two"))
    wait_for(lambda: phase(fleet, ns, "second") == "running", timeout=60,
             what="second running, sharing")
    shared = get_or_none(fleet, "member1", "configmap", "shared", "-n", ns)
    assert shared is not None and shared["data"] == {"key": "one"}
    fleet.kubectl("hub", "delete", "applications.core.oam.dev", "first", "-n", ns)

    def handed_over() -> bool:  # the content is the heir's to rewrite at its next look
        live = get_or_none(fleet, "member1", "configmap", "shared", "-n", ns) or {}
        return (live.get("data") == {"key": "one"} and
                live["metadata"]["annotations"]["federation.io/application"] ==
                f"{ns}/second")

    wait_for(handed_over, timeout=60, what="the ConfigMap handed to second")
    fleet.kubectl("hub", "delete", "applications.core.oam.dev", "second", "-n", ns)
    wait_for(lambda: get_or_none(fleet, "member1", "configmap", "shared", "-n", ns) is None,
             timeout=60, what="the ConfigMap deleted with its last sharer")
