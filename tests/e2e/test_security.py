"""Attacks on the control plane through hub policies, tried on the real fleet (issue 14, 1-2).

A namespace owner on the hub writes override and propagation policies meant to
escalate on members (a cluster-admin ClusterRoleBinding made from a ConfigMap,
copies in kube-system or under other names) or to copy what must stay on the
hub (credentials, our own API, Events). Each attack must fail with a condition
or event naming the reason, leave nothing on any member, and leave the control
plane healthy and still propagating. Every test removes its hub objects.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_json, get_or_none, grant_secrets, wait_for

# Waits poll for conditions, never lean on kubectl's own slowness: reads are in process.
pytestmark = pytest.mark.fast_reads

MEMBERS = ("member1", "member2", "member3")
POLICY_API = "policy.federation.io/v1alpha1"
OUR_NAMESPACE = "federation-system"


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane) -> Iterator[str]:
    name = f"sec-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    if control_plane.process is not None and control_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{control_plane.log_tail()}")
    for kinds in ("configmaps,secrets",
                  "propagationpolicies.policy.federation.io,overridepolicies.policy.federation.io"):
        fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false", check=False)


def config_map(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": {"k": "v"}}


def duplicated(kind: str, name: str, selectors: list[dict[str, Any]],
               namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": POLICY_API, "kind": kind, "metadata": meta,
            "spec": {"resourceSelectors": selectors,
                     "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}}


def override(name: str, namespace: str, overriders: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": POLICY_API, "kind": "OverridePolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                     "overrideRules": [{"overriders": overriders}]}}


def conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def events(fleet: TestFleet, namespace: str, name: str) -> list[dict[str, Any]]:
    listing = get_json(fleet, "hub", "events", "-n", namespace)
    return [e for e in listing["items"] if e["involvedObject"].get("name") == name]


def has_event(fleet: TestFleet, namespace: str, name: str, reason: str, text: str) -> bool:
    return any(e["reason"] == reason and text in e["message"]
               for e in events(fleet, namespace, name))


def absent(fleet: TestFleet, context: str, *args: str) -> bool:
    return get_or_none(fleet, context, *args) is None


def on_members(fleet: TestFleet, *args: str) -> dict[str, Any]:
    """Which members hold the object (``kubectl get ARGS``)."""
    return {m: found for m in MEMBERS if (found := get_or_none(fleet, m, *args)) is not None}


def admin_bindings(fleet: TestFleet, context: str) -> list[str]:
    """ClusterRoleBindings to cluster-admin other than the cluster's own."""
    listing = get_json(fleet, context, "clusterrolebindings")
    return [b["metadata"]["name"] for b in listing["items"]
            if b.get("roleRef", {}).get("name") == "cluster-admin"
            and not b["metadata"]["name"].startswith("system:")
            and b["metadata"]["name"] != "cluster-admin"]


ESCALATION = [
    {"path": "/apiVersion", "operator": "replace", "value": "rbac.authorization.k8s.io/v1"},
    {"path": "/kind", "operator": "replace", "value": "ClusterRoleBinding"},
    {"path": "/data", "operator": "remove"},
    {"path": "/metadata/namespace", "operator": "remove"},
    {"path": "/roleRef", "operator": "add", "value": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
        "name": "cluster-admin"}},
    {"path": "/subjects", "operator": "add", "value": [
        {"kind": "User", "name": "attacker", "apiGroup": "rbac.authorization.k8s.io"}]},
]

ATTACKS: dict[str, tuple[dict[str, Any], str]] = {
    "cluster-admin": ({"plaintext": ESCALATION},
                      "overrideRules[0].overriders.plaintext[0]: path /apiVersion may not be "
                      "overridden"),
    "kube-system": ({"plaintext": [{"path": "/metadata/namespace", "operator": "replace",
                                    "value": "kube-system"}]},
                    "plaintext[0]: path /metadata/namespace may not be overridden"),
    "other-name": ({"plaintext": [{"path": "/metadata/name", "operator": "replace",
                                   "value": "shared"}]},
                   "plaintext[0]: path /metadata/name may not be overridden"),
    "whole-metadata": ({"plaintext": [{"path": "/metadata", "operator": "replace",
                                       "value": {"name": "shared", "namespace": "kube-system"}}]},
                       "plaintext[0]: path /metadata may not be overridden"),
    "our-label": ({"labelsOverrider": [{"operator": "add", "value": {
                       "federation.io/managed-by": "federation"}}]},
                  "labelsOverrider[0]: key federation.io/managed-by may not be overridden"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_override_attacks_are_refused_and_write_nothing(fleet: TestFleet, ns: str,
                                                        attack: str) -> None:
    """The override policy is Valid=False with a Warning naming the rule and path; the
    template it selects is not propagated (Applied=False, OverrideRefused, with an event);
    no member gets a cluster-admin binding, a copy in kube-system or under another name;
    deleting the template leaves nothing behind either."""
    overriders, message = ATTACKS[attack]
    before = {m: admin_bindings(fleet, m) for m in MEMBERS}
    apply(fleet, "hub", override("evil", ns, overriders))
    refused = wait_for(lambda: conditions(get_or_none(
        fleet, "hub", "overridepolicies.policy.federation.io", "evil", "-n", ns)).get("Valid"),
        timeout=30, what="Valid condition on the override policy")
    assert refused["status"] == "False" and message in refused["message"]
    wait_for(lambda: has_event(fleet, ns, "evil", "InvalidPolicy", message), timeout=30,
             what="InvalidPolicy event")

    apply(fleet, "hub", config_map("cfg", ns), duplicated(
        "PropagationPolicy", "cfg", [{"apiVersion": "v1", "kind": "ConfigMap", "name": "cfg"}],
        ns))
    applied = wait_for(lambda: conditions(get_or_none(
        fleet, "hub", "resourcebindings.work.federation.io", "cfg-configmap", "-n", ns))
        .get("Applied"), timeout=60, what="Applied condition on the binding")
    assert applied["status"] == "False" and applied["reason"] == "OverrideRefused"
    assert f"OverridePolicy {ns}/evil is refused" in applied["message"]
    # An Event is recorded on its own, after the write it tells of: wait for it.
    wait_for(lambda: any(e["reason"] == "OverrideRefused" for e in events(fleet, ns, "cfg")),
             timeout=30, what="OverrideRefused event")

    assert on_members(fleet, "configmap", "cfg", "-n", ns) == {}
    for namespace in ("kube-system", ns):
        assert on_members(fleet, "configmap", "shared", "-n", namespace) == {}
    assert on_members(fleet, "configmap", "cfg", "-n", "kube-system") == {}
    assert on_members(fleet, "clusterrolebinding", "cfg") == {}
    assert {m: admin_bindings(fleet, m) for m in MEMBERS} == before

    fleet.kubectl("hub", "delete", "configmap", "cfg", "-n", ns, "--wait=false")
    wait_for(lambda: get_or_none(fleet, "hub", "configmap", "cfg", "-n", ns) is None,
             timeout=30, what="template gone")
    assert on_members(fleet, "clusterrolebinding", "cfg") == {}


def ensure_namespace(fleet: TestFleet, name: str) -> None:
    if get_or_none(fleet, "hub", "namespace", name) is None:
        fleet.kubectl("hub", "create", "namespace", name)


def labelled_secret(name: str, namespace: str, label: str, **extra: Any) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace, "labels": {"sec-test": label}}
    meta.update(extra.pop("metadata", {}))
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta,
            "stringData": {"token": "do-not-copy"}, **extra}


def test_credentials_matched_by_a_secret_selector_are_never_copied(fleet: TestFleet,
                                                                   ns: str) -> None:
    """A ClusterPropagationPolicy selecting Secrets copies an ordinary one, but never one
    of kube-system, of our namespace (joined clusters' kubeconfigs) or a service-account
    token: the policy shows Denied with the rules and a Warning event per rule."""
    label = ns
    name = f"{ns}-creds"
    ensure_namespace(fleet, OUR_NAMESPACE)
    token = labelled_secret("tok", ns, label, type="kubernetes.io/service-account-token",
                            metadata={"annotations": {
                                "kubernetes.io/service-account.name": "default"}})
    grant_secrets(fleet, ns)  # the control plane reads Secrets only where granted
    apply(fleet, "hub", labelled_secret(name, "kube-system", label),
          labelled_secret(name, OUR_NAMESPACE, label), token,
          labelled_secret("plain", ns, label))
    policy = duplicated("ClusterPropagationPolicy", name, [
        {"apiVersion": "v1", "kind": "Secret", "labelSelector": {"matchLabels": {
            "sec-test": label}}}])
    try:
        apply(fleet, "hub", policy)
        for member in MEMBERS:  # the policy works for what it may copy
            wait_for(partial(get_or_none, fleet, member, "secret", "plain", "-n", ns),
                     timeout=60, what=f"ordinary secret in {member}")
        denied = wait_for(lambda: conditions(get_or_none(
            fleet, "hub", "clusterpropagationpolicies.policy.federation.io", name))
            .get("Denied"), timeout=30, what="Denied condition")
        for rule in ("core/Secret:namespace=kube-system",
                     f"core/Secret:namespace={OUR_NAMESPACE}",
                     "core/Secret:type=kubernetes.io/service-account-token"):
            assert rule in denied["message"]
            wait_for(partial(has_event, fleet, "default", name, "Denied", rule),
                     timeout=30, what=f"Denied event for {rule}")
        assert on_members(fleet, "secret", name, "-n", "kube-system") == {}
        assert on_members(fleet, "secret", name, "-n", OUR_NAMESPACE) == {}
        assert on_members(fleet, "secret", "tok", "-n", ns) == {}
        for namespace in ("kube-system", OUR_NAMESPACE):  # never even marked as ours
            hub_copy = get_json(fleet, "hub", "secret", name, "-n", namespace)
            assert not hub_copy["metadata"].get("finalizers")
            assert not any(k.startswith("federation.io/")
                           for k in hub_copy["metadata"].get("annotations") or {})
    finally:
        fleet.kubectl("hub", "delete", "secret", "plain", "tok", "-n", ns, "--wait=false",
                      check=False)
        for member in MEMBERS:
            wait_for(partial(absent, fleet, member, "secret", "plain", "-n", ns),
                     timeout=60, what=f"ordinary secret removed from {member}")
        fleet.kubectl("hub", "delete", "clusterpropagationpolicy", name, check=False)
        for namespace in ("kube-system", OUR_NAMESPACE):
            fleet.kubectl("hub", "delete", "secret", name, "-n", namespace, check=False)


INTERNAL = [
    {"apiVersion": "work.federation.io/v1alpha1", "kind": "ResourceBinding"},
    {"apiVersion": "work.federation.io/v1alpha1", "kind": "ClusterResourceBinding"},
    {"apiVersion": POLICY_API, "kind": "PropagationPolicy"},
    {"apiVersion": POLICY_API, "kind": "OverridePolicy"},
    {"apiVersion": "v1", "kind": "Event"},
    {"apiVersion": "events.k8s.io/v1", "kind": "Event"},
    {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"},
    {"apiVersion": "v1", "kind": "Endpoints"},
]


def test_our_own_api_and_events_are_never_followed(fleet: TestFleet, ns: str,
                                                   control_plane: ControlPlane) -> None:
    """A policy selecting bindings, policies, Events, Leases and Endpoints (and a ConfigMap)
    propagates the ConfigMap only: the policy shows Denied naming each kind, no binding of
    a binding appears, members get none of those kinds, and no traceback is logged."""
    name = f"{ns}-internal"
    selectors = [{**s, "namespace": ns} for s in INTERNAL]
    selectors.append({"apiVersion": "v1", "kind": "ConfigMap", "namespace": ns})
    apply(fleet, "hub", config_map("cfg", ns), duplicated("PropagationPolicy", "local",
                                                          selectors, ns))
    apply(fleet, "hub", duplicated("ClusterPropagationPolicy", name, selectors))
    try:
        for member in MEMBERS:
            wait_for(partial(get_or_none, fleet, member, "configmap", "cfg", "-n", ns),
                     timeout=60, what=f"configmap in {member}")
        denied = wait_for(lambda: conditions(get_or_none(
            fleet, "hub", "clusterpropagationpolicies.policy.federation.io", name))
            .get("Denied"), timeout=30, what="Denied condition")
        for rule in ("work.federation.io/*", "policy.federation.io/*", "core/Event",
                     "events.k8s.io/Event", "coordination.k8s.io/Lease", "core/Endpoints"):
            assert f"[{rule}]" in denied["message"]
        wait_for(lambda: any(e["reason"] == "Denied" for e in events(fleet, "default", name)),
                 timeout=30, what="Denied event")
        local = get_json(fleet, "hub", "propagationpolicies.policy.federation.io", "local",
                         "-n", ns)
        assert conditions(local)["Denied"]["status"] == "True"

        bindings = get_json(fleet, "hub", "resourcebindings.work.federation.io", "-n", ns)
        kinds = {b["metadata"].get("labels", {}).get("federation.io/template-kind")
                 for b in bindings["items"]}
        names = [b["metadata"]["name"] for b in bindings["items"]]
        assert names == ["cfg-configmap"], names  # no binding of a binding, policy or event
        assert kinds == {"configmap"}
        for member in MEMBERS:
            served = fleet.kubectl(member, "api-resources", "--api-group=work.federation.io",
                                   "-o", "name").stdout.split()
            assert served == []  # not even the CRD went along
            for kind in ("events", "leases.coordination.k8s.io", "endpoints"):
                listing = get_json(fleet, member, kind, "-n", ns)
                assert [i for i in listing["items"] if (i["metadata"].get("labels") or {})
                        .get("federation.io/managed-by")] == []
        assert "Traceback" not in control_plane.log_path.read_text(errors="replace")
    finally:
        fleet.kubectl("hub", "delete", "clusterpropagationpolicy", name, check=False)
        fleet.kubectl("hub", "delete", "configmap", "cfg", "-n", ns, "--wait=false",
                      check=False)


def http_status(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return int(answer.status)


def test_control_plane_stays_healthy_and_still_propagates(fleet: TestFleet, ns: str,
                                                          control_plane: ControlPlane) -> None:
    """After every attack above: /healthz and /readyz answer 200, and a plain ConfigMap
    still reaches every member with its content."""
    base = f"http://127.0.0.1:{control_plane.health_port}"
    assert http_status(f"{base}/healthz") == 200
    assert http_status(f"{base}/readyz") == 200
    apply(fleet, "hub", config_map("after", ns), duplicated(
        "PropagationPolicy", "after", [{"apiVersion": "v1", "kind": "ConfigMap",
                                        "name": "after"}], ns))
    for member in MEMBERS:
        copy = wait_for(partial(get_or_none, fleet, member, "configmap", "after", "-n", ns),
                        timeout=60, what=f"configmap in {member}")
        assert copy["data"] == {"k": "v"}
    assert json.dumps(copy["metadata"]["labels"]) == \
        json.dumps({"federation.io/managed-by": "federation"})
