"""The policy schema: Karmada field names, defaults, our extensions and cross-field rules."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from federation.placement import policy

from .builders import make_policy


def test_karmada_api_version_is_accepted() -> None:
    """A policy.karmada.io/v1alpha1 file loads like ours."""
    loaded = make_policy(api_version=policy.KARMADA_GROUP_VERSION)
    assert loaded.api_version == "policy.karmada.io/v1alpha1"


def test_unknown_api_version_is_rejected() -> None:
    """Other groups are not policies of ours."""
    with pytest.raises(pydantic.ValidationError):
        make_policy(api_version="policy.example.com/v1")


def test_karmada_behaviour_fields_are_typed() -> None:
    """propagateDeps, schedulerName, suspension ... load as typed fields (honoured by
    propagation; see test_behaviour_fields.py for the refusals)."""
    doc = make_policy().model_dump(by_alias=True)
    doc["spec"].update(
        {
            "propagateDeps": True,
            "schedulerName": "default-scheduler",
            "preemption": "Never",
            "suspension": {"dispatching": False},
            "activationPreference": "Lazy",
            "dependentOverrides": [],
            "preserveResourcesOnDeletion": False,
        }
    )
    assert policy.Policy.model_validate(doc).spec.propagate_deps is True


def with_spec(**spec: Any) -> dict[str, Any]:
    doc = make_policy().model_dump(by_alias=True, exclude_none=True)
    doc["spec"].update(spec)
    return doc


def test_failover_and_conflict_resolution_are_typed_with_karmada_defaults() -> None:
    """No failover: None (the controller's defaults); conflictResolution defaults to Abort."""
    spec = policy.Policy.model_validate(with_spec()).spec
    assert spec.failover is None
    assert spec.conflict_resolution == "Abort"
    doc = with_spec(conflictResolution="Overwrite",
                    failover={"cluster": {"purgeMode": "Directly", "gracePeriodSeconds": 30}})
    spec = policy.Policy.model_validate(doc).spec
    assert spec.conflict_resolution == "Overwrite"
    assert spec.failover is not None and spec.failover.cluster is not None
    assert spec.failover.cluster.purge_mode == "Directly"
    assert spec.failover.cluster.grace_period_seconds == 30
    empty = policy.Policy.model_validate(with_spec(failover={"cluster": {}})).spec.failover
    assert empty is not None and empty.cluster == policy.ClusterFailoverBehavior()
    assert empty.cluster.purge_mode == "Gracefully"


@pytest.mark.parametrize(
    ("spec", "loc"),
    [
        ({"conflictResolution": "Replace"}, ("spec", "conflictResolution")),
        ({"conflictResolution": None}, ("spec", "conflictResolution")),
        ({"failover": {"cluster": {"purgeMode": "Graciously"}}},
         ("spec", "failover", "cluster", "purgeMode")),
        ({"failover": {"cluster": {"gracePeriodSeconds": 0}}},
         ("spec", "failover", "cluster", "gracePeriodSeconds")),
        ({"failover": {"cluster": {"gracePeriodSeconds": "60"}}},
         ("spec", "failover", "cluster", "gracePeriodSeconds")),
        ({"failover": {"cluster": {"gracePeriodSecond": 60}}},
         ("spec", "failover", "cluster", "gracePeriodSecond")),
        ({"failover": {"cluster": {"statePreservation": {"rule": []}}}},
         ("spec", "failover", "cluster", "statePreservation", "rules")),
        ({"failover": {"clusters": {}}}, ("spec", "failover", "clusters")),
        ({"failover": "yes"}, ("spec", "failover")),
        ({"failover": {"application": {"decisionConditions": {"tolerationSecond": 1}}}},
         ("spec", "failover", "application", "decisionConditions", "tolerationSecond")),
    ],
)
def test_bad_failover_or_conflict_resolution_is_refused_at_its_path(
    spec: dict[str, Any], loc: tuple[str, ...]
) -> None:
    """A typo, a wrong value or an unsupported field fails at its path, not a silent default."""
    with pytest.raises(pydantic.ValidationError) as caught:
        policy.Policy.model_validate(with_spec(**spec))
    assert caught.value.errors()[0]["loc"] == loc


def test_application_failover_has_karmadas_defaults() -> None:
    """decisionConditions alone: tolerationSeconds 300, purgeMode Gracefully, and the
    webhook's gracePeriodSeconds 600 for Gracefully."""
    loaded = policy.Policy.model_validate(with_spec(failover={"application": {
        "decisionConditions": {}}}))
    assert loaded.spec.failover is not None
    application = loaded.spec.failover.application
    assert application is not None
    assert application.decision_conditions.toleration_seconds == 300
    assert application.purge_mode == "Gracefully"
    assert application.grace_period == 600
    assert policy.problems(loaded) == []


def problems_of(failover: dict[str, Any]) -> list[tuple[str, str]]:
    return policy.problems(policy.Policy.model_validate(with_spec(failover=failover)))


@pytest.mark.parametrize(("application", "path", "message"), [
    ({"decisionConditions": {"tolerationSeconds": -1}},
     "decisionConditions.tolerationSeconds", "must be greater than or equal to 0"),
    ({"decisionConditions": {}, "purgeMode": "Directly", "gracePeriodSeconds": 30},
     "gracePeriodSeconds", "only takes effect when purgeMode is gracefully"),
    ({"decisionConditions": {}, "purgeMode": "Never", "gracePeriodSeconds": 30},
     "gracePeriodSeconds", "only takes effect when purgeMode is gracefully"),
    ({"decisionConditions": {}, "gracePeriodSeconds": 0},
     "gracePeriodSeconds", "must be greater than 0"),
])
def test_application_failover_is_validated_as_karmadas_webhook(
        application: dict[str, Any], path: str, message: str) -> None:
    """ValidateApplicationFailover's rules, with its messages."""
    assert problems_of({"application": application}) == [
        (f"spec.failover.application.{path}", message)]


@pytest.mark.parametrize("purge_mode", ["Immediately", "Graciously", "Later"])
def test_purge_modes_karmada_removed_are_refused(purge_mode: str) -> None:
    """Karmada's CRD enum is Directly, Gracefully, Never (Immediately and Graciously were
    removed): the API server refuses the others before any webhook, and so do we."""
    with pytest.raises(pydantic.ValidationError) as caught:
        policy.Policy.model_validate(with_spec(failover={"application": {
            "decisionConditions": {}, "purgeMode": purge_mode}}))
    assert caught.value.errors()[0]["loc"][-1] == "purgeMode"


@pytest.mark.parametrize("where", ["application", "cluster"])
@pytest.mark.parametrize(("alias", "json_path", "field", "message"), [
    ("bad key!", "{.x}", "aliasLabelName", "is not a valid label key"),
    ("", "{.x}", "aliasLabelName", "is not a valid label key"),
    ("federation.io/managed-by", "{.x}", "aliasLabelName", "the control plane's own"),
    ("x.federation.io/owner", "{.x}", "aliasLabelName", "the control plane's own"),
    ("failover.example.com/job", "{.items[?(@.a)]}", "jsonPath", "one JSONPath field path"),
    ("failover.example.com/job", ".jobID", "jsonPath", "one JSONPath field path"),
])
def test_state_preservation_rules_are_validated(where: str, alias: str, json_path: str,
                                                 field: str, message: str) -> None:
    """aliasLabelName is a label name (Karmada's ValidateLabelName) and never one of our
    own labels (the attack: a tenant's rule overwriting federation.io/managed-by on the
    new copy); jsonPath is a field path we can evaluate."""
    block: dict[str, Any] = {"statePreservation": {"rules": [
        {"aliasLabelName": alias, "jsonPath": json_path}]}}
    if where == "application":
        block["decisionConditions"] = {}
    found = problems_of({where: block})
    assert [path for path, _ in found] == [
        f"spec.failover.{where}.statePreservation.rules[0].{field}"]
    assert message in found[0][1]


def test_karmadas_documented_state_preservation_loads() -> None:
    """The stateful failover proposal's rules."""
    assert problems_of({"cluster": {"purgeMode": "Directly", "statePreservation": {"rules": [
        {"aliasLabelName": "failover.karmada.io/failover-jobid",
         "jsonPath": "{ .jobStatus.jobID }"},
        {"aliasLabelName": "failover.karmada.io/replicas", "jsonPath": "{ .replicas }"}]}}}) \
        == []


def test_unknown_fields_are_rejected_with_their_path() -> None:
    """A misspelt field is an error at its path, not silently ignored."""
    with pytest.raises(pydantic.ValidationError) as caught:
        make_policy({"clusterAfinity": {}})
    assert caught.value.errors()[0]["loc"] == ("spec", "placement", "clusterAfinity")


def test_every_karmada_placement_field_parses() -> None:
    """clusterAffinity, tolerations, spread and replicaScheduling with their sub-fields load."""
    loaded = make_policy(
        {
            "clusterAffinity": {
                "clusterNames": ["a"],
                "exclude": ["b"],
                "labelSelector": {"matchLabels": {"x": "y"}},
                "fieldSelector": {
                    "matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]
                },
            },
            "clusterTolerations": [
                {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
            ],
            "spreadConstraints": [{"spreadByField": "region", "minGroups": 1, "maxGroups": 2}],
            "replicaScheduling": {
                "replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "Weighted",
                "weightPreference": {
                    "staticWeightList": [{"targetCluster": {"clusterNames": ["a"]}, "weight": 2}]
                },
                "replicaBounds": [
                    {"targetCluster": {"clusterNames": ["a"]}, "minReplicas": 1, "maxReplicas": 3}
                ],
                "allowPartial": True,
            },
        }
    )
    placement = loaded.spec.placement
    assert placement.cluster_affinity is not None
    assert placement.cluster_affinity.field_selector is not None
    assert placement.cluster_tolerations[0].toleration_seconds == 30
    assert placement.spread_constraints[0].max_groups == 2
    assert placement.replica_scheduling is not None
    assert placement.replica_scheduling.replica_bounds[0].max_replicas == 3
    assert placement.replica_scheduling.allow_partial is True


@pytest.mark.parametrize(
    ("scheduling", "mode"),
    [
        (None, policy.Mode.DUPLICATED),
        ({"replicaSchedulingType": "Duplicated"}, policy.Mode.DUPLICATED),
        ({}, policy.Mode.STATIC),
        ({"replicaSchedulingType": "Divided"}, policy.Mode.STATIC),
        ({"replicaDivisionPreference": "Weighted"}, policy.Mode.STATIC),
        ({"replicaDivisionPreference": "Aggregated"}, policy.Mode.AGGREGATED),
        ({"weightPreference": {"dynamicWeight": "AvailableReplicas"}}, policy.Mode.DYNAMIC),
        (
            {
                "weightPreference": {
                    "dynamicWeight": "AvailableReplicas",
                    "staticWeightList": [{"targetCluster": {}, "weight": 1}],
                }
            },
            policy.Mode.DYNAMIC,
        ),
    ],
)
def test_mode_defaults_follow_karmada(scheduling: dict[str, Any] | None, mode: policy.Mode) -> None:
    """No replicaScheduling is Duplicated; Divided defaults to Weighted; dynamicWeight wins."""
    placement = {} if scheduling is None else {"replicaScheduling": scheduling}
    assert policy.mode(make_policy(placement).spec.placement) is mode


def test_affinity_terms_single_and_fallback() -> None:
    """Without clusterAffinities there is one unnamed term; with them, one per entry in order."""
    single = make_policy({"clusterAffinity": {"clusterNames": ["a"]}}).spec.placement
    assert [name for name, _ in policy.affinity_terms(single)] == [None]
    terms = make_policy(
        {"clusterAffinities": [{"affinityName": "first"}, {"affinityName": "second"}]}
    ).spec.placement
    assert [name for name, _ in policy.affinity_terms(terms)] == ["first", "second"]


def test_policy_reference_and_namespace() -> None:
    """Namespaced policies are NAMESPACE/NAME (namespace default if omitted); cluster ones NAME."""
    assert make_policy(name="a", namespace="shop").ref == "shop/a"
    assert make_policy(name="a", namespace=None).ref == "default/a"
    assert make_policy(name="c", kind="ClusterPropagationPolicy").ref == "c"


@pytest.mark.parametrize(
    ("placement", "path", "message"),
    [
        (
            {"clusterAffinity": {}, "clusterAffinities": [{"affinityName": "a"}]},
            "spec.placement.clusterAffinities",
            "cannot be set together with clusterAffinity",
        ),
        (
            {"clusterAffinities": [{"affinityName": "a"}, {"affinityName": "a"}]},
            "spec.placement.clusterAffinities[1].affinityName",
            "duplicate name 'a'",
        ),
        (
            {
                "clusterAffinity": {
                    "labelSelector": {"matchExpressions": [{"key": "k", "operator": "In"}]}
                }
            },
            "spec.placement.clusterAffinity.labelSelector.matchExpressions[0].values",
            "required for In",
        ),
        (
            {
                "clusterAffinity": {
                    "labelSelector": {
                        "matchExpressions": [{"key": "k", "operator": "Exists", "values": ["v"]}]
                    }
                }
            },
            "spec.placement.clusterAffinity.labelSelector.matchExpressions[0].values",
            "must be empty for Exists",
        ),
        (
            {
                "clusterAffinity": {
                    "fieldSelector": {"matchExpressions": [{"key": "zone", "operator": "NotIn"}]}
                }
            },
            "spec.placement.clusterAffinity.fieldSelector.matchExpressions[0].values",
            "required for NotIn",
        ),
        (
            {"clusterTolerations": [{"key": "k", "operator": "Lt", "value": "3"}]},
            "spec.placement.clusterTolerations[0].operator",
            "Lt is not supported for cluster tolerations; use Equal, Exists or leave it empty",
        ),
        (
            {"clusterTolerations": [{"key": "k", "operator": "Gt", "value": "3"}]},
            "spec.placement.clusterTolerations[0].operator",
            "Gt is not supported for cluster tolerations; use Equal, Exists or leave it empty",
        ),
        (
            {"spreadConstraints": [{"spreadByField": "zone", "spreadByLabel": "x"}]},
            "spec.placement.spreadConstraints[0].spreadByLabel",
            "cannot be set together with spreadByField",
        ),
        (
            {"spreadConstraints": [{"spreadByField": "zone", "minGroups": 3, "maxGroups": 2}]},
            "spec.placement.spreadConstraints[0].maxGroups",
            "must not be lower than minGroups",
        ),
        (
            {"spreadConstraints": [{"spreadByField": "zone"}, {"spreadByField": "zone"}]},
            "spec.placement.spreadConstraints[1]",
            "a second constraint spreading by zone",
        ),
        (
            {"replicaScheduling": {"replicaBounds": [{"minReplicas": 3, "maxReplicas": 1}]}},
            "spec.placement.replicaScheduling.replicaBounds[0].maxReplicas",
            "must not be lower than minReplicas",
        ),
        (
            {
                "replicaScheduling": {
                    "weightPreference": {
                        "staticWeightList": [
                            {
                                "targetCluster": {
                                    "labelSelector": {
                                        "matchExpressions": [{"key": "k", "operator": "NotIn"}]
                                    }
                                },
                                "weight": 1,
                            }
                        ]
                    }
                }
            },
            "spec.placement.replicaScheduling.weightPreference.staticWeightList[0].targetCluster"
            ".labelSelector.matchExpressions[0].values",
            "required for NotIn",
        ),
    ],
)
def test_cross_field_rules_name_their_path(
    placement: dict[str, Any], path: str, message: str
) -> None:
    """Each rule pydantic cannot see is reported with its field path."""
    assert (path, message) in policy.problems(make_policy(placement))


def test_cluster_policy_with_namespace_is_a_problem() -> None:
    """A ClusterPropagationPolicy cannot have a namespace."""
    doc = make_policy(kind="ClusterPropagationPolicy").model_dump(by_alias=True)
    doc["metadata"]["namespace"] = "x"
    found = policy.problems(policy.Policy.model_validate(doc))
    assert ("metadata.namespace", "a ClusterPropagationPolicy is cluster-scoped") in found


def test_empty_resource_selectors_is_a_problem() -> None:
    """At least one resource selector is required."""
    doc = make_policy().model_dump(by_alias=True)
    doc["spec"]["resourceSelectors"] = []
    found = policy.problems(policy.Policy.model_validate(doc))
    assert found == [("spec.resourceSelectors", "at least one resource selector is required")]


@pytest.mark.parametrize(
    "placement",
    [
        {
            "replicaScheduling": {
                "weightPreference": {"staticWeightList": [{"targetCluster": {}, "weight": 0}]}
            }
        },
        {"replicaScheduling": {"replicaBounds": [{"minReplicas": -1}]}},
        {"spreadConstraints": [{"spreadByField": "rack"}]},
        {"spreadConstraints": [{"maxGroups": -1}]},
        {
            "clusterAffinity": {
                "fieldSelector": {
                    "matchExpressions": [{"key": "name", "operator": "In", "values": ["a"]}]
                }
            }
        },
        {"clusterTolerations": [{"key": "k", "effect": "Sometimes"}]},
        {"replicaScheduling": {"replicaSchedulingType": "Split"}},
        {"replicaScheduling": {"weightPreference": {"dynamicWeight": "Cpu"}}},
    ],
)
def test_out_of_range_values_are_rejected(placement: dict[str, Any]) -> None:
    """Weights below 1, negative bounds and unknown enum values fail validation."""
    with pytest.raises(pydantic.ValidationError):
        make_policy(placement)
