"""The render transformer: per-cluster manifests with overrides; an override that cannot
be applied stops the template with a condition naming the cluster."""

from __future__ import annotations

from typing import Any

import pytest

from federation.contexts import client as kube
from federation.controllers import propagation
from federation.controllers.propagation.lookups import load_overrides
from federation.controllers.propagation.render import render
from federation.hub import manifests
from federation.placement import clusters as clusters_
from federation.placement import decision as decision_
from federation.placement import loader
from tests.unit.controllers.fakes import (
    JSON,
    FakeContext,
    FakeMC,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)

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


def command_override(group: str, container: str, target: list[str] | None = None) -> JSON:
    rule: dict[str, Any] = {"overriders": {"commandOverrider": [
        {"containerName": container, "operator": "add", "value": ["--verbose"]}]}}
    if target is not None:
        rule["targetCluster"] = {"clusterNames": target}
    return {"apiVersion": f"{group}/v1alpha1", "kind": "OverridePolicy",
            "metadata": {"name": "cmd", "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                     "overrideRules": [rule]}}


def deployment() -> JSON:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1"},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "app", "image": "nginx", "command": ["run"]}]}}}}


def deployment_build() -> propagation.Build:
    found = propagation.Build(template=deployment(), resource=kube.DEPLOYMENTS, hub="hub")
    found.policy = loader.parse_policy(duplicated_policy("a", MEMBERS), "test")
    found.clusters = [clusters_.Cluster(name=m) for m in MEMBERS]
    found.decision = decision_.Decision(replicas=2, clusters={m: 2 for m in MEMBERS},
                                        explanation=("mode: Duplicated",))
    return found


async def test_a_karmada_override_skipped_for_no_such_container_is_noted_once() -> None:
    """policy.karmada.io, a commandOverrider naming no container: skipped as in Karmada
    (every copy unchanged), and the binding's explanation says so in one line naming both
    clusters, after the placement's lines."""
    ctx = FakeContext({"OverridePolicy": [command_override("policy.karmada.io", "nosuch")]})
    b = deployment_build()
    assert await render(ctx, b) is None
    assert all(d["spec"]["template"]["spec"]["containers"][0]["command"] == ["run"]
               for d in b.desired.values())
    assert b.decision is not None
    assert b.decision.explanation == (
        "mode: Duplicated",
        "override in member1, member2: OverridePolicy shop/cmd overrideRules[0]: command of "
        "nosuch add (no such container, skipped as in Karmada)")


async def test_an_applied_override_is_noted_with_the_clusters_it_targets() -> None:
    """A rule targeting member2 alone: its note names member2 only; the copy shows it."""
    ctx = FakeContext({"OverridePolicy": [command_override("policy.karmada.io", "app",
                                                           target=["member2"])]})
    b = deployment_build()
    assert await render(ctx, b) is None
    assert b.desired["member2"]["spec"]["template"]["spec"]["containers"][0]["command"] == \
        ["run", "--verbose"]
    assert b.decision is not None
    assert b.decision.explanation[1:] == (
        "override in member2: OverridePolicy shop/cmd overrideRules[0]: command of app add",)


async def test_no_override_leaves_the_explanation_alone() -> None:
    """Without override policies the placement's explanation is unchanged."""
    b = deployment_build()
    assert await render(FakeContext({}), b) is None
    assert b.decision is not None and b.decision.explanation == ("mode: Duplicated",)


async def test_our_override_naming_no_container_is_still_an_error() -> None:
    """policy.federation.io: a container name that matches nothing is OverrideFailed naming
    it (a typo is not a no-op), not a note."""
    ctx = FakeContext({"OverridePolicy": [command_override("policy.federation.io", "nosuch")]})
    with pytest.raises(propagation.Problem) as caught:
        await render(ctx, deployment_build())
    assert (caught.value.condition, caught.value.reason) == ("Applied", "OverrideFailed")
    assert "nosuch" in str(caught.value)


async def test_the_skip_note_reaches_the_binding_and_a_quiet_resync_writes_nothing() -> None:
    """A whole reconcile (the auditor's case): the Karmada skip note is in the
    ResourceBinding's spec.explanation once, the copies exist; reconciling again with
    nothing changed writes nothing (the note is stable, so no extra binding write)."""
    mc = FakeMC(cluster_set(*MEMBERS))
    policy = duplicated_policy("web", MEMBERS)
    policy["spec"]["resourceSelectors"] = [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": "web"}]
    mc.put("hub", policy)
    mc.put("hub", command_override("policy.karmada.io", "nosuch"))
    template = mc.put("hub", deployment())
    r = reconciler(mc)
    assert await r.reconcile(request_for(template)) is None
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None
    noted = [line for line in binding["spec"]["explanation"] if "nosuch" in line]
    assert noted == ["override in member1, member2: OverridePolicy shop/cmd overrideRules[0]: "
                     "command of nosuch add (no such container, skipped as in Karmada)"]
    assert all(mc.find(m, "Deployment", "web", "shop") is not None for m in MEMBERS)
    before = len(mc.writes)
    assert await r.reconcile(request_for(template)) is None
    assert mc.writes[before:] == []
