"""Cluster selection: label and field selectors, affinity, taints, readiness, spread."""

from __future__ import annotations

from typing import Any

import pytest

from federation.placement import clusters, policy, selection

from .builders import cluster


def selector(**spec: Any) -> policy.LabelSelector:
    return policy.LabelSelector.model_validate(spec)


def affinity(**spec: Any) -> policy.ClusterAffinity:
    return policy.ClusterAffinity.model_validate(spec)


def toleration(**spec: Any) -> policy.Toleration:
    return policy.Toleration.model_validate(spec)


def taint(key: str, effect: str, value: str = "") -> clusters.Taint:
    return clusters.Taint.model_validate({"key": key, "value": value, "effect": effect})


# -- label selectors ---------------------------------------------------------------------------

LABELS = {"tier": "gold", "env": "prod"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, True),
        ({"matchLabels": {"tier": "gold"}}, True),
        ({"matchLabels": {"tier": "silver"}}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold", "x"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["x"]}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gold"]}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["x"]}]}, True),
        ({"matchExpressions": [{"key": "env", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}, False),
        (
            {
                "matchLabels": {"tier": "gold"},
                "matchExpressions": [{"key": "env", "operator": "In", "values": ["dev"]}],
            },
            False,
        ),
    ],
)
def test_label_selector_semantics(spec: dict[str, Any], expected: bool) -> None:
    """matchLabels and each operator follow Kubernetes semantics, all ANDed."""
    assert selection.labels_match(selector(**spec), LABELS) is expected


# -- cluster affinity --------------------------------------------------------------------------

EU = cluster("eu-1", labels={"tier": "gold"}, region="eu", zone="eu-1a", provider="aws")


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({}, None),
        ({"clusterNames": ["eu-1", "x"]}, None),
        ({"clusterNames": ["x"]}, "not in clusterNames"),
        ({"exclude": ["eu-1"]}, "in exclude"),
        ({"clusterNames": ["eu-1"], "exclude": ["eu-1"]}, "in exclude"),
        ({"labelSelector": {"matchLabels": {"tier": "gold"}}}, None),
        ({"labelSelector": {"matchLabels": {"tier": "x"}}}, "labelSelector"),
        (
            {
                "fieldSelector": {
                    "matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}]
                }
            },
            None,
        ),
        (
            {
                "fieldSelector": {
                    "matchExpressions": [{"key": "zone", "operator": "In", "values": ["x"]}]
                }
            },
            "fieldSelector zone In x",
        ),
        (
            {
                "fieldSelector": {
                    "matchExpressions": [
                        {"key": "provider", "operator": "NotIn", "values": ["aws"]}
                    ]
                }
            },
            "fieldSelector provider NotIn aws",
        ),
        (
            {
                "fieldSelector": {
                    "matchExpressions": [
                        {"key": "provider", "operator": "NotIn", "values": ["gcp"]}
                    ]
                }
            },
            None,
        ),
    ],
)
def test_affinity_parts(spec: dict[str, Any], why: str | None) -> None:
    """clusterNames, exclude, labelSelector, fieldSelector all must match; first miss named."""
    assert selection.affinity_mismatch(EU, affinity(**spec)) == why


def test_field_selector_in_needs_the_field_and_not_in_accepts_its_absence() -> None:
    """A cluster without a region fails ``region In`` and passes ``region NotIn``."""
    bare = cluster("bare")
    expr = {"key": "region", "operator": "In", "values": ["eu"]}
    assert selection.affinity_mismatch(bare, affinity(fieldSelector={"matchExpressions": [expr]}))
    expr["operator"] = "NotIn"
    assert not selection.affinity_mismatch(
        bare, affinity(fieldSelector={"matchExpressions": [expr]})
    )


# -- tolerations and taints --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}, True),
        ({"key": "gpu", "value": "yes"}, True),
        ({"key": "gpu", "value": "no"}, False),
        ({"key": "gpu", "operator": "Exists"}, True),
        ({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"operator": "Exists"}, True),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_toleration_matching(spec: dict[str, Any], expected: bool) -> None:
    """Key, operator, value and effect follow Kubernetes toleration rules."""
    assert selection.tolerates(toleration(**spec), taint("gpu", "NoSchedule", "yes")) is expected


def test_screening_sorts_clusters_into_passed_held_back_and_rejected() -> None:
    """Not ready, affinity and NoExecute reject; NoSchedule holds back; PreferNoSchedule passes."""
    fleet = [
        cluster("a"),
        cluster("b", ready=False),
        cluster("c", taints=(taint("x", "NoSchedule"),)),
        cluster("d", taints=(taint("x", "NoExecute"),)),
        cluster("e", taints=(taint("x", "PreferNoSchedule"),)),
        cluster("f"),
    ]
    result = selection.screen(fleet, affinity(exclude=["f"]), [])
    assert [c.name for c in result.passed] == ["a", "e"]
    assert [(c.name, t) for c, t in result.held_back] == [("c", "x:NoSchedule")]
    assert [(c.name, r, d) for c, r, d in result.rejected] == [
        ("b", "not ready", ""),
        ("d", "taint", "x:NoExecute"),
        ("f", "affinity", "in exclude"),
    ]


def test_tolerated_taints_do_not_filter() -> None:
    """A toleration for both effects lets tainted clusters pass."""
    fleet = [cluster("c", taints=(taint("x", "NoSchedule"), taint("x", "NoExecute")))]
    result = selection.screen(fleet, None, [toleration(key="x", operator="Exists")])
    assert [c.name for c in result.passed] == ["c"]


# -- spread constraints ------------------------------------------------------------------------

FLEET = [
    cluster("eu-1", region="eu", zone="eu-a", provider="aws", labels={"rack": "r1"}),
    cluster("eu-2", region="eu", zone="eu-b", provider="gcp", labels={"rack": "r2"}),
    cluster("us-1", region="us", zone="us-a", provider="aws", labels={"rack": "r1"}),
    cluster("ap-1", region="ap", zone="ap-a", provider="azure"),
]
ROOM: dict[str, int | None] = {"eu-1": 10, "eu-2": 8, "us-1": None, "ap-1": 1}


def spread(
    constraints: list[dict[str, Any]], held: dict[str, int] | None = None
) -> selection.Spread:
    parsed = [policy.SpreadConstraint.model_validate(c) for c in constraints]
    return selection.spread(FLEET, parsed, held or {}, ROOM)


def kept(result: selection.Spread) -> list[str]:
    return sorted(c.name for c in result.kept)


@pytest.mark.parametrize(
    ("field", "groups", "expected"),
    [
        ("cluster", 2, ["eu-1", "us-1"]),
        ("region", 1, ["us-1"]),
        ("region", 2, ["eu-1", "eu-2", "us-1"]),
        ("zone", 2, ["eu-1", "us-1"]),
        ("provider", 1, ["eu-1", "us-1"]),
    ],
)
def test_spread_by_each_field_keeps_the_best_groups(
    field: str, groups: int, expected: list[str]
) -> None:
    """maxGroups keeps the best-ranked groups: most room first (unlimited above all)."""
    result = spread([{"spreadByField": field, "maxGroups": groups}])
    assert result.error is None
    assert kept(result) == expected


def test_spread_by_label_rejects_clusters_without_the_label() -> None:
    """spreadByLabel groups by the label's value; clusters lacking it are dropped."""
    result = spread([{"spreadByLabel": "rack", "maxGroups": 1}])
    assert kept(result) == ["eu-1", "us-1"]
    assert ("ap-1", "spread", "no label:rack") in [(c.name, r, d) for c, r, d in result.rejected]


def test_spread_min_groups_not_met_is_an_error() -> None:
    """Fewer groups than minGroups is an error naming what exists."""
    result = spread([{"spreadByField": "region", "minGroups": 4}])
    assert result.error == "spread: minGroups 4 by region but only 3 available (us, eu, ap)"


def test_spread_prefers_groups_holding_current_replicas() -> None:
    """Groups that already hold replicas rank first, so a re-plan moves nothing needlessly."""
    result = spread([{"spreadByField": "region", "maxGroups": 1}], held={"ap-1": 2})
    assert kept(result) == ["ap-1"]


def test_cluster_spread_after_region_spread_takes_clusters_round_robin() -> None:
    """A cluster constraint after a region constraint picks one cluster per chosen region first."""
    result = spread(
        [
            {"spreadByField": "cluster", "maxGroups": 2},
            {"spreadByField": "region", "minGroups": 2, "maxGroups": 2},
        ]
    )
    assert result.error is None
    assert kept(result) == ["eu-1", "us-1"]
    assert len(result.notes) == 2


def test_spread_without_max_groups_keeps_everything() -> None:
    """maxGroups 0 (unset) keeps every group."""
    assert kept(spread([{"spreadByField": "zone", "minGroups": 2}])) == sorted(ROOM)


def test_spread_constraint_defaults() -> None:
    """A constraint without field or label spreads by cluster; minGroups defaults to 1."""
    constraint = policy.SpreadConstraint()
    assert (constraint.key, constraint.floor) == ("cluster", 1)
