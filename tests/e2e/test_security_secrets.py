"""Secrets and credentials on the real fleet (issue 20, finding 4).

The control plane runs as ``federation:control-plane`` with the shipped RBAC. Before this,
the hub ClusterRole let it get, list, watch and update every Secret of the hub (Secrets
are a default propagated kind), its informer held kube-system's Secrets and both CA keys,
and a MemberCluster naming team B's kubeconfig Secret joined with team B's credentials.
Now: a kubeconfig Secret outside ``federation-system`` is refused by the membership
controller's own rule (even where RBAC would allow the read); the hub identity cannot
read kube-system's Secrets nor list those of its own namespace (the CA keys are readable
by name only, and cached by no informer); a tenant's Secret still reaches every member
once an admin grants its namespace, and a namespace without a grant is said on the policy.
Every test removes what it made.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from federation.commands import join
from federation.contexts import kubeconfig, minify
from federation.controllers import membership
from federation.controllers.kit import secrets
from federation.rbac import roles
from tests.conftest import TestFleet, run_kubectl
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_json, get_or_none, grant_secrets, wait_for

MEMBERS = ("member1", "member2", "member3")
MC = "memberclusters.cluster.federation.io"
POLICY_API = "policy.federation.io/v1alpha1"
OURS = roles.NAMESPACE


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane) -> Iterator[str]:
    name = f"sec-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    if control_plane.process is not None and control_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{control_plane.log_tail()}")
    fleet.kubectl("hub", "delete", "namespace", name, "--wait=false", check=False)


def as_control_plane(control_plane: ControlPlane, *args: str) -> Any:
    return run_kubectl(control_plane.kubeconfig, "hub", *args, check=False)


def can_i(control_plane: ControlPlane, *args: str) -> str:
    return str(as_control_plane(control_plane, "auth", "can-i", *args).stdout.strip())


def ready_condition(fleet: TestFleet, name: str) -> dict[str, Any]:
    member = get_or_none(fleet, "hub", MC, name) or {}
    return next((c for c in (member.get("status") or {}).get("conditions") or []
                 if c["type"] == "Ready"), {})


def join_failed(fleet: TestFleet, name: str, text: str) -> bool:
    if text not in ready_condition(fleet, name).get("message", ""):
        return False
    events = get_json(fleet, "hub", "events", "-n", "default", "--field-selector",
                      f"involvedObject.name={name}")["items"]
    return any(e["reason"] == "JoinFailed" and text in e["message"] for e in events)


def test_a_kubeconfig_secret_of_another_namespace_is_refused_by_rule(
        fleet: TestFleet, control_plane: ControlPlane, ns: str) -> None:
    """(a) Team B keeps a working kubeconfig (member3's admin) in its own namespace, which
    it even granted to the control plane; a MemberCluster pointing at it gets JoinFailed
    naming the rule, Ready=Unknown with the rule, is never joined, and places nothing."""
    name = f"stolen-{ns[-6:]}"
    document = minify.minify(kubeconfig.load(fleet.kubeconfig), "member3", name)
    secret, member = join.objects(name, document, {}, {}, namespace=ns)
    grant_secrets(fleet, ns)  # RBAC would allow the read: the refusal is the controller's
    try:
        apply(fleet, "hub", secret, member)
        wait_for(partial(join_failed, fleet, name, membership.RULE), timeout=60,
                 what=f"{name}: JoinFailed naming {membership.RULE!r}")
        assert f"namespace '{ns}'" in ready_condition(fleet, name)["message"]
        assert ready_condition(fleet, name)["status"] == "Unknown"
        assert f"cluster {name} joined" not in control_plane.log_path.read_text()
    finally:
        fleet.kubectl("hub", "delete", MC, name, "--ignore-not-found")


def test_the_hub_identity_cannot_read_kube_system_secrets_nor_list_ca_keys(
        fleet: TestFleet, control_plane: ControlPlane, ns: str) -> None:
    """(b) As federation:control-plane: no get/list/watch of kube-system Secrets (a real
    GET is 403), no list or watch anywhere cluster-wide or in federation-system; the CA
    keys there can be read by name (the one GET signing needs), never listed. The running
    control plane's hub cache of Secrets holds exactly the granted namespaces' Secrets:
    decoys in kube-system and federation-system are not cached."""
    decoy = {"apiVersion": "v1", "kind": "Secret", "stringData": {"k": "decoy"}}
    apply(fleet, "hub", {**decoy, "metadata": {"name": f"decoy-{ns}", "namespace": "kube-system"}},
          {**decoy, "metadata": {"name": f"decoy-{ns}", "namespace": OURS}},
          {**decoy, "metadata": {"name": "tenant", "namespace": ns}})
    grant_secrets(fleet, ns)
    policy = {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
              "metadata": {"name": "secrets", "namespace": ns},
              "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Secret",
                                              "name": "tenant"}],
                       "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}}
    try:
        for verb in ("get", "list", "watch", "update"):
            assert can_i(control_plane, verb, "secrets", "-n", "kube-system") == "no", verb
        for verb in ("list", "watch"):
            assert can_i(control_plane, verb, "secrets", "-A") == "no", verb
            assert can_i(control_plane, verb, "secrets", "-n", OURS) == "no", verb
        for ca in membership.CA_SECRETS:
            assert can_i(control_plane, "get", f"secrets/{ca}", "-n", OURS) == "yes"
            assert can_i(control_plane, "update", f"secrets/{ca}", "-n", OURS) == "no"
        real = as_control_plane(control_plane, "get", "secret", f"decoy-{ns}", "-n",
                                "kube-system")
        assert real.returncode != 0 and "forbidden" in real.stderr.lower()
        assert can_i(control_plane, "list", "secrets", "-n", ns) == "yes"  # granted
        apply(fleet, "hub", policy)  # makes the control plane cache hub Secrets
        wait_for(partial(get_or_none, fleet, "member1", "secret", "tenant", "-n", ns),
                 timeout=60, what="the tenant's Secret in member1")
        wait_for(partial(cached_secrets_are_granted_only, fleet, control_plane), timeout=30,
                 what="the hub's Secret cache holding the granted namespaces only")
    finally:
        for namespace in ("kube-system", OURS):
            fleet.kubectl("hub", "delete", "secret", f"decoy-{ns}", "-n", namespace,
                          check=False)


def cached_secrets_are_granted_only(fleet: TestFleet, control_plane: ControlPlane) -> bool:
    """The control plane's report: the hub's secrets informer holds as many objects as
    the granted namespaces have Secrets (as the admin counts them), so none of elsewhere."""
    address = control_plane.argv[control_plane.argv.index("--metrics-bind-address") + 1]
    with urllib.request.urlopen(f"http://{address}/debug/clusters", timeout=5) as page:
        report = json.load(page)
    informer = report["clusters"]["hub"]["informers"].get("secrets")
    if informer is None or not informer["synced"]:
        return False
    bindings = get_json(fleet, "hub", "rolebindings", "-A", "--field-selector",
                        f"metadata.name={roles.SECRETS_ROLE}")["items"]
    granted = {b["metadata"]["namespace"] for b in bindings
               if secrets.granted_namespace(b) is not None}
    expected = sum(len(get_json(fleet, "hub", "secrets", "-n", n)["items"]) for n in granted)
    return bool(informer["objects"] == expected)


def test_a_tenant_secret_is_propagated_once_its_namespace_is_granted(
        fleet: TestFleet, control_plane: ControlPlane, ns: str) -> None:
    """(c) Under the new RBAC a tenant's Secret still reaches every member. Before the
    grant the policy says SecretsReadable=False naming the namespace and nothing is
    copied (not a silent skip); the admin's RoleBinding makes it propagate at once."""
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": ns},
              "stringData": {"password": "tenant-value"}}
    policy = {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
              "metadata": {"name": "db", "namespace": ns},
              "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Secret",
                                              "name": "db"}],
                       "placement": {"replicaScheduling": {
                           "replicaSchedulingType": "Duplicated"}}}}
    apply(fleet, "hub", secret, policy)

    def readable() -> dict[str, Any] | None:
        found = get_or_none(fleet, "hub", "propagationpolicies.policy.federation.io", "db",
                            "-n", ns) or {}
        return next((c for c in (found.get("status") or {}).get("conditions") or []
                     if c["type"] == secrets.CONDITION), None)

    refused = wait_for(lambda: (c := readable()) and c["status"] == "False" and c,
                       timeout=60, what="SecretsReadable=False before the grant")
    assert refused["reason"] == "NotGranted" and f"namespace {ns}" in refused["message"]
    assert all(get_or_none(fleet, m, "secret", "db", "-n", ns) is None for m in MEMBERS)
    grant_secrets(fleet, ns)
    for member in MEMBERS:
        copy = wait_for(partial(get_or_none, fleet, member, "secret", "db", "-n", ns),
                        timeout=60, what=f"the Secret in {member}")
        assert copy["data"] == get_json(fleet, "hub", "secret", "db", "-n", ns)["data"]
    wait_for(lambda: (c := readable()) and c["status"] == "True", timeout=30,
             what="SecretsReadable=True after the grant")
    fleet.kubectl("hub", "delete", "secret", "db", "-n", ns)
    for member in MEMBERS:
        wait_for(partial(absent, fleet, member, "secret", "db", "-n", ns), timeout=60,
                 what=f"the copy removed from {member}")


def absent(fleet: TestFleet, context: str, *args: str) -> bool:
    return get_or_none(fleet, context, *args) is None
