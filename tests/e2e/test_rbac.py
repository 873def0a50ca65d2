"""The control plane's identity on the local fleet is least-privilege, not `system:masters`.

The control plane fixture runs `fedctl run` with the fleet's control-plane kubeconfig
after `fedctl install` applied the shipped RBAC; every other e2e module passing that way
shows the RBAC grants enough. These tests show it grants no more than it should.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID

from federation.rbac import roles
from tests.conftest import TestFleet, kubectl_binary, run_kubectl
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import get_json, get_or_none

CLUSTERS = ("hub", "member1", "member2", "member3")


def can_i(control_plane: ControlPlane, context: str, *args: str) -> str:
    result = run_kubectl(control_plane.kubeconfig, context, "auth", "can-i", *args, check=False)
    return result.stdout.strip()


def test_the_control_plane_runs_with_its_own_certificate_in_no_group(
        control_plane: ControlPlane) -> None:
    """`fedctl run` is given the control-plane kubeconfig; its certificates name the user
    federation:control-plane and no organisation (no group, so no system:masters)."""
    assert str(control_plane.kubeconfig) in control_plane.argv
    document = yaml.safe_load(control_plane.kubeconfig.read_text())
    assert {c["name"] for c in document["contexts"]} == set(CLUSTERS)
    for user in document["users"]:
        cert = x509.load_pem_x509_certificate(
            base64.b64decode(user["user"]["client-certificate-data"]))
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == roles.USER
        assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME) == []


@pytest.mark.parametrize("context", CLUSTERS)
def test_the_control_plane_cannot_grant_itself_cluster_admin(
        control_plane: ControlPlane, fleet: TestFleet, context: str) -> None:
    """With the control plane's credentials a ClusterRoleBinding to cluster-admin is refused
    (403) on the hub and every member, and nothing is created; `can-i * *` says no."""
    attempt = run_kubectl(control_plane.kubeconfig, context, "create", "clusterrolebinding",
                          "rbac-escalate", "--clusterrole", "cluster-admin", "--user", "attacker",
                          check=False)
    assert attempt.returncode != 0
    assert "forbidden" in attempt.stderr.lower() and roles.USER in attempt.stderr
    assert get_or_none(fleet, context, "clusterrolebinding", "rbac-escalate") is None
    assert can_i(control_plane, context, "*", "*") == "no"
    assert can_i(control_plane, context, "escalate", "clusterroles") == "no"
    assert can_i(control_plane, context, "bind", "clusterroles") == "no"


def test_rights_follow_the_roles_hub_reads_templates_members_get_copies(
        control_plane: ControlPlane) -> None:
    """Hub: templates are read and updated, never created or deleted; Secrets only in our
    namespace. Members: copies are managed, nodes only read."""
    assert can_i(control_plane, "hub", "list", "deployments", "-A") == "yes"
    assert can_i(control_plane, "hub", "update", "deployments", "-n", "x") == "yes"
    assert can_i(control_plane, "hub", "create", "deployments", "-n", "x") == "no"
    assert can_i(control_plane, "hub", "delete", "configmaps", "-n", "x") == "no"
    assert can_i(control_plane, "hub", "create", "secrets", "-n", "kube-system") == "no"
    assert can_i(control_plane, "hub", "update", "leases/other", "-n", "kube-system") == "no"
    assert can_i(control_plane, "hub", "update", "leases/federation-controller-manager",
                 "-n", "kube-system") == "yes"
    for member in CLUSTERS[1:]:
        assert can_i(control_plane, member, "create", "deployments", "-n", "x") == "yes"
        assert can_i(control_plane, member, "delete", "nodes") == "no"
        assert can_i(control_plane, member, "create", "pods", "-n", "x") == "no"
        assert can_i(control_plane, member, "delete", "customresourcedefinitions") == "no"


def test_printed_manifests_apply_with_kubectl_as_they_are(
        control_plane: ControlPlane, fleet: TestFleet) -> None:
    """`fedctl rbac` output is what operators apply with their own tools: kubectl takes it
    unchanged, and the role it leaves is the one `fedctl install` applies."""
    printed = subprocess.run([sys.executable, "-m", "federation", "rbac", "--only", "member"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    applied = subprocess.run(
        [kubectl_binary(), "--kubeconfig", str(fleet.kubeconfig), "--context", "member1",
         "apply", "-f", "-"], input=printed, capture_output=True, text=True, timeout=60)
    assert applied.returncode == 0, applied.stderr
    role = get_json(fleet, "member1", "clusterrole", roles.MEMBER_ROLE)
    expected = roles.member(roles.Settings())[0].body["rules"]
    assert json.loads(json.dumps(role["rules"])) == expected
