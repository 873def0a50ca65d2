"""vela-core's ``deploy-cloud-resource`` on the local fleet, with the control plane's real
identity: the env's Terraform Configuration goes to the local cluster (member1) renamed
``<component>-<env>``; the test plays the member's terraform controller (the fleet runs
none): it reports the apply Available and writes the connection Secret with its owner
labels; the step then copies that Secret into the Application's namespace of the env's
cluster (member2) and succeeds. Without the Secret grant on the hub namespace nothing is
copied and the Application says why. The password is in the member copy only, never in
the Application.

`fedctl run` runs for the module with `--app-local-cluster member1`; `fedctl install
--propagate-kinds configurations.terraform.core.oam.dev` grants the control plane the
Configuration kind in members (the fleet's default kinds do not include it).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane, app_namespace, running_plane
from tests.e2e.helpers import apply, get_or_none, grant_secrets, wait_for

PASSWORD = "e2e-rds-password-7"
GROUP = "terraform.core.oam.dev"


@pytest.fixture(scope="module")
def plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[ControlPlane]:
    apply(fleet_session, "member1", configuration_crd())
    yield from running_plane(fleet_session, tmp_path_factory, "--app-local-cluster", "member1")


@pytest.fixture
def ns(fleet: TestFleet, plane: ControlPlane) -> Iterator[str]:
    plane.install("--propagate-kinds", f"configurations.{GROUP}")
    yield from app_namespace(fleet, plane, "cloud")


def configuration_crd() -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"configurations.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": "configurations", "singular": "configuration",
                               "kind": "Configuration"},
                     "versions": [{"name": "v1beta2", "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


def application(ns: str) -> dict[str, Any]:
    configuration = {"apiVersion": f"{GROUP}/v1beta2", "kind": "Configuration",
                     "metadata": {"name": "db"},
                     "spec": {"remote": "https://github.com/kubevela-contrib/"
                                        "terraform-modules.git", "path": "alibaba/rds",
                              "writeConnectionSecretToRef": {"name": "db-conn",
                                                             "namespace": ns}}}
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": "rds", "namespace": ns},
            "spec": {"components": [{"name": "db", "type": "k8s-objects",
                                     "properties": {"objects": [configuration]}}],
                     "policies": [{"name": "envs", "type": "env-binding", "properties": {
                         "envs": [{"name": "prod", "placement": {
                             "clusterSelector": {"name": "member2"}}}]}}],
                     "workflow": {"steps": [{"name": "rds", "type": "deploy-cloud-resource",
                                             "properties": {"env": "prod"}}]}}}


def app_of(fleet: TestFleet, ns: str) -> dict[str, Any]:
    return get_or_none(fleet, "hub", "applications.core.oam.dev", "rds", "-n", ns) or {}


def play_the_terraform_controller(fleet: TestFleet, ns: str) -> None:
    """What the member's terraform controller does once the module ran."""
    made = wait_for(lambda: get_or_none(fleet, "member1", f"configurations.{GROUP}",
                                        "db-prod", "-n", ns),
                    timeout=60, what="Configuration db-prod in member1")
    status = {"status": {"observedGeneration": made["metadata"]["generation"],
                         "apply": {"state": "Available"}}}
    fleet.kubectl("member1", "patch", f"configurations.{GROUP}", "db-prod", "-n", ns,
                  "--subresource=status", "--type=merge", "-p", json.dumps(status))
    apply(fleet, "member1", {
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db-conn-prod", "namespace": ns, "labels": {
            f"{GROUP}/created-by": "terraform-controller", f"{GROUP}/owned-by": "db-prod",
            f"{GROUP}/owned-namespace": ns}},
        "stringData": {"DB_PASSWORD": PASSWORD, "DB_HOST": "rm-1.example"}})


def test_the_connection_secret_is_copied_once_granted(fleet: TestFleet, ns: str) -> None:
    for member in ("member1", "member2"):
        fleet.kubectl(member, "create", "namespace", ns, check=False)
    apply(fleet, "hub", application(ns))
    play_the_terraform_controller(fleet, ns)

    def applied_message() -> str:
        conditions = {c["type"]: c for c in (app_of(fleet, ns).get("status") or {})
                      .get("conditions") or []}
        return str((conditions.get("Applied") or {}).get("message") or "")

    wait_for(lambda: "are not granted" in applied_message(), timeout=60,
             what="the copy waiting for the grant, named in Applied")
    assert get_or_none(fleet, "member2", "secret", "db-conn", "-n", ns) is None

    grant_secrets(fleet, ns)
    copied = wait_for(lambda: get_or_none(fleet, "member2", "secret", "db-conn", "-n", ns),
                      timeout=60, what="the copy in member2")
    assert base64.b64decode(copied["data"]["DB_PASSWORD"]).decode() == PASSWORD
    assert copied["type"] == "Opaque"
    wait_for(lambda: (app_of(fleet, ns).get("status") or {}).get("workflow", {})
             .get("phase") == "succeeded", timeout=60, what="the workflow succeeded")
    said = json.dumps(app_of(fleet, ns))
    assert PASSWORD not in said
    assert base64.b64encode(PASSWORD.encode()).decode() not in said

    fleet.kubectl("hub", "delete", "applications.core.oam.dev", "rds", "-n", ns)
    wait_for(lambda: get_or_none(fleet, "member2", "secret", "db-conn", "-n", ns) is None,
             timeout=60, what="the copy deleted with its Application")
