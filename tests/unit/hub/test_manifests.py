"""Member copies: what is dropped, what is kept, when a write is needed."""

import copy
import hashlib
import json
from typing import Any

from federation.hub import manifests


def hub_service() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1",
                         "resourceVersion": "9", "creationTimestamp": "t",
                         "managedFields": [{}], "finalizers": ["federation.io/cleanup"],
                         "annotations": {"federation.io/placement": "[]", "keep": "me"},
                         "labels": {"app": "web"}},
            "spec": {"clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"], "type": "NodePort",
                     "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30001}]},
            "status": {"loadBalancer": {}}}


def test_render_drops_hub_identity_and_allocations() -> None:
    """uid, versions, finalizers, status, our annotations and allocated IPs/ports go."""
    copy_ = manifests.render(hub_service(), None, divided=False)
    assert copy_["metadata"] == {"name": "web", "namespace": "shop",
                                 "annotations": {"keep": "me"}, "labels": {"app": "web"}}
    assert "status" not in copy_
    assert copy_["spec"] == {"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP"}]}


def test_replicas_are_set_only_when_divided() -> None:
    """Divided placements set spec.replicas per cluster; duplicated ones keep the template's."""
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"replicas": 12}}
    assert manifests.render(deployment, 6, divided=True)["spec"]["replicas"] == 6
    assert manifests.render(deployment, 6, divided=False)["spec"]["replicas"] == 12


def test_marks_make_the_copy_ours_with_a_stable_digest() -> None:
    """Ownership label, template uid and a digest that ignores itself."""
    marked = manifests.mark(manifests.render(hub_service(), None, False), "u1")
    assert manifests.is_ours(marked)
    again = manifests.mark(copy.deepcopy(marked), "u1")
    assert again == marked


def test_unchanged_live_object_with_server_defaults_needs_no_write() -> None:
    """Fields the member added (defaults, allocations) are not drift."""
    desired = manifests.mark(manifests.render(hub_service(), None, False), "u1")
    live = copy.deepcopy(desired)
    live["spec"]["clusterIP"] = "10.1.0.3"
    live["spec"]["sessionAffinity"] = "None"
    live["metadata"]["resourceVersion"] = "55"
    assert manifests.needs_write(desired, live) is None


def test_drift_and_content_changes_are_detected() -> None:
    """An edited field in the member is drift; a new template is a content change."""
    desired = manifests.mark(manifests.render(hub_service(), None, False), "u1")
    drifted = copy.deepcopy(desired)
    drifted["metadata"]["labels"]["app"] = "hacked"
    assert manifests.needs_write(desired, drifted) == "drift at /metadata/labels/app"
    changed = copy.deepcopy(hub_service())
    changed["metadata"]["labels"]["app"] = "web2"
    new = manifests.mark(manifests.render(changed, None, False), "u1")
    assert manifests.needs_write(new, desired) == "content changed"


def test_retain_keeps_member_allocations_and_version() -> None:
    """A PUT carries the member's resourceVersion, clusterIP and nodePorts."""
    desired = manifests.render(hub_service(), None, False)
    live = {"metadata": {"resourceVersion": "77", "finalizers": ["x"]},
            "spec": {"clusterIP": "10.1.0.3", "clusterIPs": ["10.1.0.3"],
                     "ports": [{"port": 80, "protocol": "TCP", "nodePort": 31000}]}}
    put = manifests.retain(desired, live)
    assert put["metadata"]["resourceVersion"] == "77"
    assert put["metadata"]["finalizers"] == ["x"]
    assert put["spec"]["clusterIP"] == "10.1.0.3"
    assert put["spec"]["ports"][0]["nodePort"] == 31000


def test_someone_elses_object_is_not_ours() -> None:
    """Objects without our label are foreign (conflicts)."""
    assert not manifests.is_ours({"metadata": {"labels": {"app": "x"}}})
    assert not manifests.is_ours({"metadata": {}})


def _digest_before_copy_on_write(manifest: dict[str, Any]) -> str:
    """The digest as first written (deep copy, then pop): copies in members carry it."""
    content = copy.deepcopy(manifest)
    (content.get("metadata", {}).get("annotations") or {}).pop(
        manifests.APPLIED_HASH_ANNOTATION, None)
    encoded = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def test_digest_is_unchanged_by_copy_on_write() -> None:
    """Same hash as before for every shape of annotations: a changed digest would make
    an upgraded control plane rewrite every copy in every member once."""
    hashed = {manifests.APPLIED_HASH_ANNOTATION: "old"}
    for annotations in (None, {}, {"a": "1"}, hashed, {**hashed, "a": "1"}, "absent"):
        meta: dict[str, Any] = {"name": "x", "namespace": "shop"}
        if annotations != "absent":
            meta["annotations"] = copy.deepcopy(annotations)
        manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}
        before = copy.deepcopy(manifest)
        assert manifests.digest(manifest) == _digest_before_copy_on_write(manifest)
        assert manifest == before


def test_render_shares_nothing_it_changes_with_the_template() -> None:
    """Copy-on-write render: the template (a cached object) is unchanged by rendering,
    dividing, marking and allocation dropping, for every kind render edits."""
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "s", "namespace": "shop", "uid": "u", "labels": {"a": "b"}},
               "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 80, "nodePort": 30080}]},
               "status": {"loadBalancer": {}}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "d", "namespace": "shop", "annotations": {"x": "y"}},
                  "spec": {"replicas": 6, "template": {"spec": {"containers": []}}}}
    for template in (service, deployment):
        before = copy.deepcopy(template)
        rendered = manifests.mark(manifests.render(template, 2, True), "uid-1")
        assert template == before
        assert "status" not in rendered and "uid" not in rendered["metadata"]
    assert manifests.render(deployment, 2, True)["spec"]["replicas"] == 2
    assert "nodePort" not in manifests.render(service, None, False)["spec"]["ports"][0]
