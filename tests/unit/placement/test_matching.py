"""Policy matching and the priority and conflict rules."""

from __future__ import annotations

from typing import Any

import pytest

from federation.placement import matching, resources

from .builders import deployment, make_policy

WEB = deployment("web", namespace="shop", app="web", tier="front")


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"apiVersion": "apps/v1", "kind": "Deployment"}, True),
        ({"apiVersion": "apps/v1beta1", "kind": "Deployment"}, False),
        ({"apiVersion": "apps/v1", "kind": "StatefulSet"}, False),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, True),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"}, False),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "labelSelector": {"matchLabels": {"app": "web"}},
            },
            True,
        ),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "labelSelector": {"matchLabels": {"app": "x"}},
            },
            False,
        ),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "web",
                "labelSelector": {"matchLabels": {"app": "x"}},
            },
            True,
        ),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop"}, True),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "other"}, False),
    ],
)
def test_cluster_policy_selectors(selector: dict[str, Any], expected: bool) -> None:
    """apiVersion and kind must match; name wins over labelSelector; namespace restricts."""
    policy = make_policy(kind="ClusterPropagationPolicy", selectors=[selector])
    assert matching.matches(policy, WEB) is expected


def test_namespaced_policy_matches_only_its_namespace() -> None:
    """A PropagationPolicy ignores a selector's namespace and only sees its own namespace."""
    selector = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "other"}
    assert matching.matches(make_policy(namespace="shop", selectors=[selector]), WEB)
    assert not matching.matches(make_policy(namespace="other", selectors=[selector]), WEB)


def test_namespaced_policy_never_matches_cluster_scoped_resources() -> None:
    """A cluster-scoped resource can only be matched by a ClusterPropagationPolicy."""
    ns = resources.Resource(api_version="v1", kind="Namespace", name="shop")
    selector = [{"apiVersion": "v1", "kind": "Namespace"}]
    assert not matching.matches(make_policy(selectors=selector), ns)
    assert matching.matches(make_policy(kind="ClusterPropagationPolicy", selectors=selector), ns)


def test_any_selector_of_a_policy_may_match() -> None:
    """resourceSelectors are ORed."""
    selectors = [
        {"apiVersion": "v1", "kind": "ConfigMap"},
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
    ]
    assert matching.matches(make_policy(namespace="shop", selectors=selectors), WEB)


def test_namespaced_wins_over_a_higher_priority_cluster_policy() -> None:
    """Karmada's detector looks for a PropagationPolicy first: a namespaced policy wins
    over a ClusterPropagationPolicy whatever their priorities."""
    low = make_policy(name="ns", namespace="shop", priority=1)
    high = make_policy(name="cluster", kind="ClusterPropagationPolicy", priority=5)
    found = matching.candidates(WEB, [low, high])
    assert [p.ref for p in found] == ["shop/ns", "cluster"]
    assert matching.describe(found[0], found[1:]) == (
        "policy shop/ns (PropagationPolicy, priority 1) wins over cluster (cluster-scoped)"
    )


def test_explicit_priority_wins_within_a_scope() -> None:
    """Among policies of one scope the higher spec.priority wins."""
    low = make_policy(name="a", namespace="shop", priority=1)
    high = make_policy(name="b", namespace="shop", priority=5)
    found = matching.candidates(WEB, [low, high])
    assert [p.ref for p in found] == ["shop/b", "shop/a"]
    assert "shop/a (lower priority 1)" in matching.describe(found[0], found[1:])


def test_namespaced_wins_over_cluster_scoped_at_equal_priority() -> None:
    """At equal priority a PropagationPolicy wins over a ClusterPropagationPolicy."""
    cluster_policy = make_policy(name="aaa", kind="ClusterPropagationPolicy")
    namespaced = make_policy(name="zzz", namespace="shop")
    found = matching.candidates(WEB, [cluster_policy, namespaced])
    assert [p.ref for p in found] == ["shop/zzz", "aaa"]
    assert "aaa (cluster-scoped)" in matching.describe(found[0], found[1:])


def test_name_decides_last() -> None:
    """At equal priority and scope the name that sorts first wins."""
    found = matching.candidates(
        WEB, [make_policy(name="b", namespace="shop"), make_policy(name="a", namespace="shop")]
    )
    assert [p.ref for p in found] == ["shop/a", "shop/b"]
    assert "shop/b (name sorts later)" in matching.describe(found[0], found[1:])


def test_no_match_gives_no_candidates() -> None:
    """A resource no policy selects has no candidates."""
    assert matching.candidates(WEB, [make_policy(namespace="other")]) == []


@pytest.mark.parametrize(
    ("manifest", "replicas", "namespace"),
    [
        (
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "a"},
                "spec": {"replicas": 3},
            },
            3,
            "default",
        ),
        (
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}, "spec": {}},
            1,
            "default",
        ),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": "a", "namespace": "x"},
            },
            1,
            "x",
        ),
        (
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "a"},
                "spec": {"parallelism": 4},
            },
            4,
            "default",
        ),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}, 1, "default"),
        (
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {}},
            0,
            "default",
        ),
        (
            {
                "apiVersion": "x/v1",
                "kind": "Custom",
                "metadata": {"name": "a"},
                "spec": {"replicas": 5},
            },
            5,
            "default",
        ),
        (
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "namespace": "x"}},
            0,
            None,
        ),
    ],
)
def test_resource_from_manifest(
    manifest: dict[str, Any], replicas: int, namespace: str | None
) -> None:
    """Replicas follow Karmada's default interpreter; namespaces follow kubectl."""
    resource = resources.from_manifest(manifest)
    assert (resource.replicas, resource.namespace) == (replicas, namespace)
