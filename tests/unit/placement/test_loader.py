"""Loading files: every error names the file, the document, the field path and the problem."""

from __future__ import annotations

import json

import pytest

from federation.placement import loader

POLICY = """\
apiVersion: policy.federation.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web, namespace: shop}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec: {replicas: 3}
"""


def error(sources: list[tuple[str, str]]) -> str:
    with pytest.raises(loader.LoadError) as caught:
        loader.parse_manifests(sources)
    return str(caught.value)


def test_policies_and_resources_from_several_documents() -> None:
    """A file may mix policies and resources; documents are told apart by group."""
    found = loader.parse_manifests([("all.yaml", POLICY + "---\n" + DEPLOYMENT)])
    assert [p.ref for p in found.policies] == ["shop/web"]
    assert [r.ref for r in found.resources] == ["Deployment shop/web"]


def test_kind_list_is_expanded() -> None:
    """A kind: List contributes its items."""
    text = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}},
            ],
        }
    )
    assert len(loader.parse_manifests([("list.yaml", text)]).resources) == 2


def test_malformed_yaml_names_file_line_and_column() -> None:
    """A YAML syntax error is one line with the file and position."""
    message = error([("bad.yaml", "a: [1, 2\nb: 3\n")])
    assert message.startswith("bad.yaml: malformed YAML: line ")
    assert "\n" not in message


def test_invalid_field_names_document_and_path() -> None:
    """A bad value is reported with the document number and the full field path."""
    bad = POLICY + "  placement:\n    spreadConstraints: [{spreadByField: rack}]\n"
    message = error([("p.yaml", DEPLOYMENT + "---\n" + bad)])
    assert message.startswith(
        "p.yaml (document 2): spec.placement.spreadConstraints[0].spreadByField: "
    )
    assert "'cluster', 'region', 'zone' or 'provider'" in message


def test_unknown_field_is_reported() -> None:
    """A misspelt key is an unknown field at its path."""
    message = error([("p.yaml", POLICY + "  placement: {clusterAfinity: {}}\n")])
    assert message == "p.yaml: spec.placement.clusterAfinity: unknown field"


def test_missing_field_is_reported() -> None:
    """A missing required field is named."""
    text = POLICY.replace(
        "resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]", "priority: 1"
    )
    assert error([("p.yaml", text)]) == "p.yaml: spec.resourceSelectors: required field is missing"


def test_wrong_type_is_reported() -> None:
    """A scalar where a mapping belongs says so, without internal class names."""
    text = POLICY.replace("  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]\n", "")
    assert error([("p.yaml", text)]) == "p.yaml: spec: expected a mapping"


def test_cross_field_rule_is_reported_with_path() -> None:
    """policy.problems() violations carry their path too."""
    bad = (
        POLICY
        + "  placement:\n    spreadConstraints:\n"
        + "    - {spreadByField: zone, minGroups: 3, maxGroups: 1}\n"
    )
    message = error([("p.yaml", bad)])
    assert (
        message
        == "p.yaml: spec.placement.spreadConstraints[0].maxGroups: must not be lower than minGroups"
    )


def test_bad_failover_is_reported_with_path() -> None:
    """An unknown purgeMode is named, not read as the default."""
    bad = POLICY + "  failover: {cluster: {purgeMode: Later}}\n"
    message = error([("p.yaml", bad)])
    assert message.startswith("p.yaml: spec.failover.cluster.purgeMode: ")
    assert "'Gracefully' or 'Directly'" in message
    bad = POLICY + "  failover: {application: {decisionConditions: {}, purgeMode: Never, " \
                   "gracePeriodSeconds: 5}}\n"
    assert error([("p.yaml", bad)]) == ("p.yaml: spec.failover.application.gracePeriodSeconds: "
                                        "only takes effect when purgeMode is gracefully")


def test_several_problems_are_counted_on_one_line() -> None:
    """More than one problem: the first is shown and the rest counted."""
    bad = POLICY + "  placement: {clusterAfinity: {}, spreadConstrains: []}\n"
    assert error([("p.yaml", bad)]).endswith("unknown field (and 1 more problems)")


def test_unsupported_policy_kind_is_rejected() -> None:
    """Other policy-group kinds (FederatedResourceQuota ...) are errors, not workloads;
    override policies are kept for the caller (fedctl plan validates and applies them)."""
    text = POLICY.replace("kind: PropagationPolicy", "kind: FederatedResourceQuota")
    assert error([("o.yaml", text)]).startswith(
        "o.yaml: kind: kind 'FederatedResourceQuota' is not supported"
    )
    override = POLICY.replace("kind: PropagationPolicy", "kind: OverridePolicy")
    found = loader.parse_manifests([("o.yaml", override)])
    assert [o.document["kind"] for o in found.overrides] == ["OverridePolicy"]


def test_unsupported_policy_version_is_rejected() -> None:
    """A policy group with an unknown version is an error on apiVersion."""
    text = POLICY.replace("v1alpha1", "v9")
    assert error([("o.yaml", text)]).startswith("o.yaml: apiVersion: unsupported apiVersion")


def test_resource_without_name_is_reported_at_metadata_name() -> None:
    """Resource errors use manifest paths."""
    assert error([("d.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n")]) == (
        "d.yaml: metadata.name: input should be a valid string"
    )


def test_non_mapping_document_is_rejected() -> None:
    """A document that is not an object is an error."""
    assert error([("d.yaml", "- a\n- b\n")]) == "d.yaml: expected a mapping (a Kubernetes object)"


def test_duplicate_policies_and_resources_are_rejected() -> None:
    """The same policy or resource twice (even across files) is an error naming both places."""
    assert "duplicate PropagationPolicy shop/web (first in a.yaml)" in error(
        [("a.yaml", POLICY), ("b.yaml", POLICY)]
    )
    assert "duplicate Deployment shop/web" in error(
        [("a.yaml", DEPLOYMENT), ("b.yaml", DEPLOYMENT)]
    )


def test_clusters_file() -> None:
    """Clusters load with camelCase fields and defaults."""
    text = (
        "clusters:\n- {name: a, availableReplicas: 3, taints: [{key: k, effect: NoSchedule}]}\n"
        "- {name: b}\n"
    )
    found = loader.parse_clusters(("c.yaml", text))
    assert [(c.name, c.available_replicas, c.ready) for c in found] == [
        ("a", 3, True),
        ("b", None, True),
    ]
    assert str(found[0].taints[0]) == "k:NoSchedule"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "clusters:\n- {name: a, availableReplicas: -1}\n",
            "c.yaml: clusters[0].availableReplicas: input should be greater than or equal to 0",
        ),
        (
            "clusters:\n- {name: a, taints: [{key: k, effect: Never}]}\n",
            "c.yaml: clusters[0].taints[0].effect: ",
        ),
        ("clusters:\n- {name: a, zones: x}\n", "c.yaml: clusters[0].zones: unknown field"),
        (
            "clusters:\n- {name: a}\n- {name: a}\n",
            "c.yaml: clusters[1].name: duplicate cluster name 'a'",
        ),
        ("members: []\n", "c.yaml: clusters: required field is missing (and 1 more problems)"),
        ("- a\n", "c.yaml: expected one YAML mapping with a 'clusters' list"),
    ],
)
def test_clusters_file_errors(text: str, message: str) -> None:
    """Bad cluster files name the field path."""
    with pytest.raises(loader.LoadError) as caught:
        loader.parse_clusters(("c.yaml", text))
    assert str(caught.value).startswith(message)


def test_previous_decision_round_trip() -> None:
    """A previous -o json document becomes resource key -> cluster -> replicas."""
    text = json.dumps(
        {
            "placements": [
                {
                    "resource": {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "namespace": "shop",
                        "name": "web",
                    },
                    "policy": "shop/web",
                    "replicas": 3,
                    "clusters": [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 1}],
                    "explanation": [],
                    "error": None,
                }
            ]
        }
    )
    assert loader.parse_previous(("prev.json", text)) == {
        ("apps/v1", "Deployment", "shop", "web"): {"a": 2, "b": 1}
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "prev.json: malformed JSON: line 1, column 2: "),
        (
            '{"placements": [{"resource": {}}]}',
            "prev.json: placements[0].resource.apiVersion: required field is missing",
        ),
        (
            '{"placements": [{"resource": {"apiVersion": "v1", "kind": "K", "name": "n"}, '
            '"clusters": [{"name": "a", "replicas": -2}]}]}',
            "prev.json: placements[0].clusters[0].replicas: input should be greater than",
        ),
    ],
)
def test_previous_decision_errors(text: str, message: str) -> None:
    """A bad previous file names the field path."""
    with pytest.raises(loader.LoadError) as caught:
        loader.parse_previous(("prev.json", text))
    assert str(caught.value).startswith(message)


def test_error_path_formatting() -> None:
    """Locations render as dotted paths with list indexes."""
    assert loader.error_path(["spec", "placement", "x", 0, "y"]) == "spec.placement.x[0].y"
