"""The render transformer: per-cluster manifests with overrides; an override that cannot
be applied stops the template with a condition naming the cluster."""

from __future__ import annotations

from typing import Any

import pytest

from federation.contexts import client as kube
from federation.controllers import manifests, propagation
from federation.controllers.propagation.render import load_overrides, render
from federation.placement import clusters as clusters_
from federation.placement import decision as decision_
from federation.placement import loader
from tests.unit.controllers.fakes import JSON, FakeContext, config_map, duplicated_policy

MEMBERS = ("member1", "member2")


def override(kind: str, name: str, plaintext: list[JSON], namespace: str | None = "shop",
             target: list[str] | None = None) -> JSON:
    rule: dict[str, Any] = {"overriders": {"plaintext": plaintext}}
    if target is not None:
        rule["targetCluster"] = {"clusterNames": target}
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": kind, "metadata": meta,
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                     "overrideRules": [rule]}}


def build(template: JSON) -> propagation.Build:
    found = propagation.Build(template=template, resource=kube.CONFIGMAPS, hub="hub")
    found.policy = loader.parse_policy(duplicated_policy("a", MEMBERS), "test")
    found.clusters = [clusters_.Cluster(name=m) for m in MEMBERS]
    found.decision = decision_.Decision(replicas=0, clusters={m: 0 for m in MEMBERS})
    return found


async def test_override_applies_only_to_its_target_cluster_and_copies_are_marked() -> None:
    """A rule targeting member2 changes member2's copy alone; every copy is marked ours
    with the template's uid."""
    patch = [{"path": "/data/k", "operator": "replace", "value": "m2"}]
    ctx = FakeContext({"OverridePolicy": [override("OverridePolicy", "o", patch,
                                                   target=["member2"])]})
    template = {**config_map("a"), "metadata": {"name": "a", "namespace": "shop",
                                                "uid": "u1"}}
    b = build(template)
    assert await render(ctx, b) is None
    assert b.desired["member1"]["data"] == {"k": "v"}
    assert b.desired["member2"]["data"] == {"k": "m2"}
    assert all(manifests.is_ours(d) for d in b.desired.values())
    assert {d["metadata"]["annotations"][manifests.TEMPLATE_UID_ANNOTATION]
            for d in b.desired.values()} == {"u1"}


async def test_override_that_cannot_apply_stops_with_override_failed() -> None:
    """A patch of a path the manifest lacks: Applied=False, OverrideFailed, naming the
    cluster and the rule, and no copy is rendered for anyone."""
    patch = [{"path": "/spec/missing", "operator": "replace", "value": 1}]
    ctx = FakeContext({"OverridePolicy": [override("OverridePolicy", "o", patch)]})
    b = build(config_map("a"))
    with pytest.raises(propagation.Problem) as caught:
        await render(ctx, b)
    assert (caught.value.condition, caught.value.reason) == ("Applied", "OverrideFailed")
    assert str(caught.value).startswith("member1: OverridePolicy shop/o overrideRules[0]")
    assert b.desired == {}


async def test_statically_refused_override_stops_with_override_refused() -> None:
    """A rule changing a protected field refuses the template before any manifest."""
    patch = [{"path": "/metadata/name", "operator": "replace", "value": "other"}]
    ctx = FakeContext({"OverridePolicy": [override("OverridePolicy", "o", patch)]})
    with pytest.raises(propagation.Problem) as caught:
        await render(ctx, build(config_map("a")))
    assert caught.value.reason == "OverrideRefused"
    assert "OverridePolicy shop/o is refused" in str(caught.value)


def misspelt(name: str, selectors: Any) -> JSON:
    """An override policy that does not parse (``overridRules``), with ``selectors``."""
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"resourceSelectors": selectors, "overridRules": []}}


async def test_invalid_override_policy_loads_apart_from_the_valid_ones() -> None:
    """An override policy that does not parse is reported on itself by policy
    validation; it is handed back apart, the valid ones still load."""
    bad = override("OverridePolicy", "bad", [{"path": "no-slash", "operator": "add"}])
    good = override("OverridePolicy", "good", [])
    ctx = FakeContext({"OverridePolicy": [bad, good]})
    found, invalid = await load_overrides(ctx, "shop")
    assert [p.metadata.name for p in found] == ["good"]
    assert [d["metadata"]["name"] for d in invalid] == ["bad"]


@pytest.mark.parametrize("selectors", [
    [{"apiVersion": "v1", "kind": "ConfigMap", "name": "a"}],
    [{"apiVersion": "v1", "kind": "ConfigMap"}],
    [{"apiVersion": "v1", "kind": "ConfigMap", "nmae": "a"}],  # unreadable: may select
    None])
async def test_an_invalid_override_that_may_select_the_template_stops_it(
        selectors: Any) -> None:
    """Rendering without it could ship what it was written to prevent: the template stops
    (OverrideInvalid, naming it) and no copy is planned."""
    ctx = FakeContext({"OverridePolicy": [misspelt("typo", selectors)]})
    b = build(config_map("a"))
    with pytest.raises(propagation.Problem) as caught:
        await render(ctx, b)
    assert caught.value.reason == "OverrideInvalid"
    assert str(caught.value).startswith("OverridePolicy shop/typo is invalid")
    assert b.desired == {}


async def test_an_invalid_override_for_other_objects_stops_nothing() -> None:
    ctx = FakeContext({"OverridePolicy": [
        misspelt("other", [{"apiVersion": "v1", "kind": "ConfigMap", "name": "b"},
                           {"apiVersion": "apps/v1", "kind": "Deployment"}])]})
    b = build(config_map("a"))
    await render(ctx, b)
    assert set(b.desired) == set(MEMBERS)


async def test_cluster_scoped_template_loads_cluster_override_policies_only() -> None:
    """Without a namespace, namespaced OverridePolicies are not consulted at all."""
    ctx = FakeContext({"OverridePolicy": [override("OverridePolicy", "o", [])],
                       "ClusterOverridePolicy": [override("ClusterOverridePolicy", "c", [],
                                                          namespace=None)]})
    found, _ = await load_overrides(ctx, None)
    assert [(p.kind, p.metadata.name) for p in found] == [("ClusterOverridePolicy", "c")]
