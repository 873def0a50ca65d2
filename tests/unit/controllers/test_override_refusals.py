"""What no override may change: every refusal rule, at validation and again at apply time."""

from __future__ import annotations

from typing import Any

import pytest

from federation.controllers import policy_validation
from federation.hub import api, manifests, overrides
from federation.placement import clusters

MEMBER1 = clusters.Cluster(name="member1")


def document(overriders: dict[str, Any], kind: str = "ConfigMap") -> dict[str, Any]:
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": {"name": "o", "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": kind}],
                     "overrideRules": [{"overriders": overriders}]}}


def plaintext(*patches: dict[str, Any]) -> overrides.OverridePolicy:
    return overrides.parse(document({"plaintext": list(patches)}))


def config_map() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "shop", "labels": {"app": "a"},
                         "annotations": {"note": "n"}},
            "data": {"k": "v"}}


# The attack of issue 14: a ConfigMap becomes a cluster-admin binding.
ESCALATION: list[dict[str, Any]] = [
    {"path": "/apiVersion", "operator": "replace", "value": "rbac.authorization.k8s.io/v1"},
    {"path": "/kind", "operator": "replace", "value": "ClusterRoleBinding"},
    {"path": "/data", "operator": "remove"},
    {"path": "/metadata/namespace", "operator": "remove"},
    {"path": "/roleRef", "operator": "add", "value": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}},
    {"path": "/subjects", "operator": "add", "value": [
        {"kind": "User", "name": "attacker", "apiGroup": "rbac.authorization.k8s.io"}]},
]


def test_the_escalation_policy_is_refused_naming_each_rule_and_path() -> None:
    """apiVersion, kind and namespace changes are each named; the harmless patches are not."""
    found = overrides.refusals(plaintext(*ESCALATION))
    assert found == [
        "overrideRules[0].overriders.plaintext[0]: path /apiVersion may not be overridden",
        "overrideRules[0].overriders.plaintext[1]: path /kind may not be overridden",
        "overrideRules[0].overriders.plaintext[3]: path /metadata/namespace may not be "
        "overridden",
    ]
    with pytest.raises(overrides.OverrideRefused, match=r"plaintext\[1\]: path /kind"):
        overrides.validate(document({"plaintext": ESCALATION}))


@pytest.mark.parametrize("path", [
    "/apiVersion", "/kind", "/metadata/name", "/metadata/generateName", "/metadata/namespace",
    "/metadata/uid", "/metadata/ownerReferences", "/metadata/ownerReferences/0",
    "/metadata/ownerReferences/-", "/metadata/finalizers", "/metadata/finalizers/0",
    "/metadata/resourceVersion", "/metadata/deletionTimestamp", "/metadata/managedFields",
    "/metadata",                           # replaces name and namespace with it
    "/Kind", "/METADATA/Namespace",        # case variants of the same fields
    "/metadata/labels/federation.io~1managed-by",
    "/metadata/annotations/federation.io~1template-uid",
    "/metadata/annotations/federation.io~1applied-hash",
    "/metadata/labels/sub.federation.io~1x",
    "/metadata/labels/Federation.IO~1managed-by",
])
@pytest.mark.parametrize("operator", ["add", "replace", "remove"])
def test_protected_paths_are_refused_for_every_operator(path: str, operator: str) -> None:
    """A path equal to, above or inside a protected field, however spelled, is refused."""
    found = overrides.refusals(plaintext({"path": path, "operator": operator, "value": "x"}))
    assert found == [f"overrideRules[0].overriders.plaintext[0]: path {path} may not be "
                     f"overridden" + (f" ({manifests.DOMAIN}/ keys are the control plane's)"
                                      if "federation" in path.lower() else "")]


def test_the_root_path_is_refused_by_the_schema() -> None:
    """``""`` (the whole object) is not a path an override may use: the schema says so, and
    the refusal rule would too."""
    with pytest.raises(overrides.OverrideError, match=r"plaintext\[0\]\.path: String"):
        overrides.parse(document({"plaintext": [{"path": "", "operator": "replace",
                                                 "value": {}}]}))
    root = overrides.PlaintextOverrider.model_construct(path="", operator="replace", value={})
    assert overrides.plaintext_refusal(root) == "path (root) may not be overridden"


def test_an_invalid_pointer_escape_is_refused() -> None:
    """``~2`` is not a JSON-pointer escape: refused instead of guessed."""
    found = overrides.refusals(plaintext({"path": "/metadata/labels/a~2b",
                                          "operator": "add", "value": "x"}))
    assert found == ["overrideRules[0].overriders.plaintext[0]: path /metadata/labels/a~2b "
                     "is not a valid JSON pointer"]


@pytest.mark.parametrize(("patch", "why"), [
    ({"path": "/metadata/labels", "operator": "remove"}, "may not be removed as a whole"),
    ({"path": "/metadata/annotations", "operator": "remove"}, "may not be removed as a whole"),
    ({"path": "/metadata/labels", "operator": "replace",
      "value": {"app": "b", "federation.io/managed-by": "someone"}},
     "key federation.io/managed-by may not be overridden"),
    ({"path": "/metadata/labels", "operator": "replace", "value": "x"},
     "value must be a map of strings"),
    ({"path": "/metadata/annotations", "operator": "add", "value": {"a": 1}},
     "value must be a map of strings"),
])
def test_labels_and_annotations_replaced_wholesale(patch: dict[str, Any], why: str) -> None:
    """The whole map may be replaced by plain keys only; removing it or smuggling our keys
    in is refused."""
    found = overrides.refusals(plaintext(patch))
    assert len(found) == 1 and why in found[0]


@pytest.mark.parametrize("patch", [
    {"path": "/data/k", "operator": "replace", "value": "w"},
    {"path": "/metadata/labels/app", "operator": "replace", "value": "b"},
    {"path": "/metadata/labels/team~1name", "operator": "add", "value": "b"},
    {"path": "/metadata/labels", "operator": "replace", "value": {"app": "b"}},
    {"path": "/metadata/annotations/note", "operator": "remove"},
    {"path": "/spec/replicas", "operator": "replace", "value": 2},
    {"path": "/spec/template/metadata/namespace", "operator": "add", "value": "x"},
])
def test_ordinary_patches_are_allowed(patch: dict[str, Any]) -> None:
    """Data, spec, plain labels and annotations (also the whole map, if plain) stay open."""
    assert overrides.refusals(plaintext(patch)) == []


@pytest.mark.parametrize("field", ["labelsOverrider", "annotationsOverrider"])
@pytest.mark.parametrize("operator", ["add", "remove", "replace"])
def test_map_overriders_may_not_name_our_keys(field: str, operator: str) -> None:
    """labelsOverrider / annotationsOverrider with a federation.io/ key, any operator."""
    policy = overrides.parse(document({field: [
        {"operator": operator, "value": {"app": "x", "federation.io/managed-by": "x"}}]}))
    assert overrides.refusals(policy) == [
        f"overrideRules[0].overriders.{field}[0]: key federation.io/managed-by may not be "
        "overridden (federation.io/ keys are the control plane's)"]
    plain = overrides.parse(document({field: [{"operator": operator, "value": {"app": "x"}}]}))
    assert overrides.refusals(plain) == []


@pytest.mark.parametrize(("path", "ok"), [
    ("/spec/template/spec/containers/0/image", True),
    ("/spec/template/spec/initContainers/1/image", True),
    ("/spec/containers/0/image", True),
    ("/spec/jobTemplate/spec/template/spec/containers/0/image", True),
    ("/metadata/name", False),
    ("/kind", False),
    ("/spec/template/spec/containers/0/command/0", False),
    ("/spec/template/spec/containers/-/image", False),
    ("/spec/template/spec/containers/0/image/x", False),
    ("/spec/template/metadata/labels/app", False),
])
def test_image_predicate_must_point_at_a_container_image(path: str, ok: bool) -> None:
    """predicate.path may only name a container's image string."""
    policy = overrides.parse(document({"imageOverrider": [
        {"component": "Tag", "operator": "replace", "value": "v2",
         "predicate": {"path": path}}]}, kind="Deployment"))
    expected = [] if ok else [f"overrideRules[0].overriders.imageOverrider[0].predicate.path: "
                              f"{path} is not a container image field"]
    assert overrides.refusals(policy) == expected


def test_image_predicate_keys_other_than_path_are_refused() -> None:
    """A field we load is honoured or refused: a predicate key we do not know is an error."""
    with pytest.raises(overrides.OverrideError, match=r"predicate\.selector"):
        overrides.parse(document({"imageOverrider": [
            {"component": "Tag", "operator": "replace", "value": "v2",
             "predicate": {"path": "/spec/containers/0/image", "selector": "x"}}]}))


def test_every_mark_the_control_plane_writes_is_protected() -> None:
    """Whatever manifests.mark and the propagation controller write is one of our keys."""
    marked = manifests.mark(config_map(), "uid-1")
    keys = [*marked["metadata"]["labels"], *marked["metadata"]["annotations"]]
    ours = [k for k in keys if k not in ("app", "note")]
    ours += [api.PLACEMENT_ANNOTATION, api.REPLICAS_ANNOTATION, api.POLICY_ANNOTATION,
             api.PENDING_CLEANUP_ANNOTATION, api.ORPHAN_ANNOTATION, api.BINDING_LABEL]
    assert len(ours) >= 8 and all(overrides.is_our_key(k) for k in ours)
    assert not overrides.is_our_key("notfederation.io/x")
    assert not overrides.is_our_key("federation.io")


def test_apply_refuses_a_rule_that_changes_a_protected_field() -> None:
    """Defence in depth: even a policy that skipped validation cannot change identity or
    add our marks; the error names the policy, rule and path."""
    for patch, path in ((ESCALATION[1], "/kind"),
                        ({"path": "/metadata/namespace", "operator": "replace",
                          "value": "kube-system"}, "/metadata/namespace"),
                        ({"path": "/metadata/name", "operator": "replace", "value": "x"},
                         "/metadata/name"),
                        ({"path": "/metadata/ownerReferences", "operator": "add",
                          "value": []}, "/metadata/ownerReferences")):
        with pytest.raises(overrides.OverrideRefused,
                           match=f"OverridePolicy shop/o overrideRules\\[0\\]: changes {path},"):
            overrides.apply_all(config_map(), MEMBER1, [plaintext(patch)])
    labels = overrides.parse(document({"labelsOverrider": [
        {"operator": "add", "value": {"federation.io/managed-by": "federation"}}]}))
    with pytest.raises(overrides.OverrideRefused,
                       match=r"changes /metadata/labels/federation\.io/managed-by"):
        overrides.apply_all(config_map(), MEMBER1, [labels])


def test_apply_still_applies_ordinary_rules() -> None:
    """The after-apply check lets allowed changes through unchanged."""
    policy = plaintext({"path": "/data/k", "operator": "replace", "value": "w"},
                       {"path": "/metadata/labels", "operator": "replace",
                        "value": {"tier": "web"}})
    result = overrides.apply_all(config_map(), MEMBER1, [policy]).manifest
    assert result["data"] == {"k": "w"} and result["metadata"]["labels"] == {"tier": "web"}
    assert result["metadata"]["name"] == "cfg" and result["metadata"]["namespace"] == "shop"


def test_the_policy_controller_reports_the_refusal() -> None:
    """policies.problem (the Valid=False message) names every refused rule and path."""
    found = policy_validation.problem(document({"plaintext": ESCALATION}))
    assert found is not None
    assert "overrideRules[0].overriders.plaintext[1]: path /kind may not be overridden" in found
    assert "plaintext[3]: path /metadata/namespace" in found
    assert policy_validation.problem(document({"plaintext": [ESCALATION[4]]})) is None
