"""Both policy groups, treated the same by the controllers: Karmada's PropagationPolicy and
OverridePolicy (policy.karmada.io) are read next to ours, compete by the same rules, and
workload-affinity peers come from the bindings the hub records."""

from __future__ import annotations

from typing import Any

from federation.contexts import client as kube
from federation.controllers import policy_validation, propagation
from federation.controllers.propagation.load_policy import load_policy
from federation.controllers.propagation.lookups import load_overrides
from federation.controllers.propagation.schedule import peers, schedule
from federation.hub import api, bindings
from federation.placement import clusters as clusters_
from federation.placement import loader
from federation.placement import policy as policy_
from federation.rbac import roles
from federation.runtime.reconcile import group_kind
from tests.unit.controllers.fakes import JSON, FakeContext, config_map, duplicated_policy

KARMADA = "policy.karmada.io/v1alpha1"


def karmada(doc: JSON) -> JSON:
    return {**doc, "apiVersion": KARMADA}


def template(name: str = "a", labels: dict[str, str] | None = None) -> JSON:
    found = config_map(name)
    found["metadata"] = {"name": name, "namespace": "shop", "uid": f"uid-{name}",
                         "labels": labels or {}}
    return found


def build(doc: JSON) -> propagation.Build:
    return propagation.Build(template=doc, resource=kube.CONFIGMAPS, hub="hub")


async def test_a_karmada_policy_places_and_ours_wins_a_same_name_tie() -> None:
    only_karmada = FakeContext({"PropagationPolicy": [karmada(duplicated_policy("a",
                                                                               ["member1"]))]})
    found = build(template())
    assert await load_policy(only_karmada, found) is None
    assert found.policy is not None and found.policy.api_version == KARMADA
    both = FakeContext({"PropagationPolicy": [karmada(duplicated_policy("a", ["member1"])),
                                              duplicated_policy("a", ["member2"])]})
    found = build(template())
    assert await load_policy(both, found) is None
    assert found.policy is not None and found.policy.api_version == policy_.GROUP_VERSION
    assert "same name in policy.karmada.io" in found.notes[-1]


async def test_a_higher_priority_karmada_policy_beats_ours() -> None:
    theirs = karmada(duplicated_policy("z", ["member1"]))
    theirs["spec"]["resourceSelectors"][0]["name"] = "a"
    theirs["spec"]["priority"] = 5
    ctx = FakeContext({"PropagationPolicy": [duplicated_policy("a", ["member2"]), theirs]})
    found = build(template())
    assert await load_policy(ctx, found) is None
    assert found.policy is not None and found.policy.metadata.name == "z"


async def test_karmada_override_policies_are_loaded_too() -> None:
    rule = {"overriders": {"plaintext": [{"path": "/data/k", "operator": "replace",
                                          "value": "x"}]}}
    doc = {"apiVersion": KARMADA, "kind": "OverridePolicy",
           "metadata": {"name": "o", "namespace": "shop"},
           "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                    "overrideRules": [rule]}}
    ours = {**doc, "apiVersion": policy_.GROUP_VERSION}
    found, _ = await load_overrides(FakeContext({"OverridePolicy": [doc, ours]}), "shop")
    assert sorted(p.api_version for p in found) == [policy_.GROUP_VERSION, KARMADA]


def test_validation_and_watches_cover_both_groups() -> None:
    kinds = set(policy_validation.BY_KIND)
    for resource in api.POLICY_RESOURCES:
        assert group_kind(resource) in kinds
    assert "PropagationPolicy.policy.karmada.io" in kinds


def test_the_hub_role_reads_and_patches_karmada_policies() -> None:
    role = roles.hub(roles.Settings())[0].body
    reads = [r for r in role["rules"] if "policy.karmada.io" in r.get("apiGroups", [])]
    verbs = {v for r in reads for v in r["verbs"]}
    resources = {x for r in reads for x in r["resources"]}
    assert {"get", "list", "watch", "patch"} <= verbs
    assert {"propagationpolicies", "overridepolicies", "clusteroverridepolicies/status"} \
        <= resources
    assert not any(v in verbs for v in ("create", "update", "delete", "*"))


def affinity_policy(anti: bool = False) -> JSON:
    doc = karmada(duplicated_policy("p", ["member1", "member2", "member3"]))
    doc["spec"]["resourceSelectors"] = [{"apiVersion": "v1", "kind": "ConfigMap"}]
    doc["spec"]["placement"]["spreadConstraints"] = [
        {"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]
    term = "antiAffinity" if anti else "affinity"
    doc["spec"]["placement"]["workloadAffinity"] = {term: {"groupByLabelKey": "group"}}
    return doc


def peer_binding(name: str, clusters: list[str], **groups: str) -> JSON:
    return bindings.binding_for(template(name), bindings.BindingRecord(
        bindings.TemplateRef.of(template(name)), policy="shop/p",
        clusters=tuple(bindings.Placed(c) for c in clusters),
        groups=(groups.get("affinity"), groups.get("anti"))))


def scheduled(ctx: FakeContext, doc: JSON, policy: JSON) -> propagation.Build:
    found = build(doc)
    found.policy = loader.parse_policy(policy, "test")
    found.policy_doc = policy
    found.clusters = [clusters_.Cluster(name=m) for m in ("member1", "member2", "member3")]
    return found


async def test_affinity_group_follows_its_placed_peer() -> None:
    ctx = FakeContext({"ResourceBinding": [peer_binding("b", ["member3"], affinity="group=x"),
                                           peer_binding("c", ["member1"], affinity="group=y")]})
    found = scheduled(ctx, template("a", {"group": "x"}), affinity_policy())
    assert await schedule(ctx, found) is None
    assert found.decision is not None and list(found.decision.clusters) == ["member3"]


async def test_anti_affinity_group_avoids_its_peers_clusters() -> None:
    ctx = FakeContext({"ResourceBinding": [peer_binding("b", ["member1"], anti="group=x"),
                                           peer_binding("c", ["member2"], anti="group=x")]})
    found = scheduled(ctx, template("a", {"group": "x"}), affinity_policy(anti=True))
    assert await schedule(ctx, found) is None
    assert found.decision is not None and list(found.decision.clusters) == ["member3"]


async def test_no_label_no_group_and_the_own_binding_is_not_a_peer() -> None:
    own = peer_binding("a", ["member1"], affinity="group=x")
    ctx = FakeContext({"ResourceBinding": [own]})
    found = scheduled(ctx, template("a", {"group": "x"}), affinity_policy())
    resource: Any = propagation.template_resource(found)
    assert await peers(ctx, found, resource) is not None
    assert (await peers(ctx, found, resource)).affinity == ()  # type: ignore[union-attr]
    unlabelled = scheduled(ctx, template("a"), affinity_policy())
    resource = propagation.template_resource(unlabelled)
    assert await peers(ctx, unlabelled, resource) is None


def test_the_binding_records_the_groups_with_karmadas_names() -> None:
    found = peer_binding("a", ["member1"], affinity="group=x", anti="ha=y")
    assert found["spec"]["workloadAffinityGroups"] == {"affinityGroup": "group=x",
                                                       "antiAffinityGroup": "ha=y"}
    assert "workloadAffinityGroups" not in peer_binding("b", ["member1"])["spec"]
