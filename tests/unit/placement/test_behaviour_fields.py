"""Karmada's behaviour fields in the schema: typed (a typo inside one is an error naming
its path), Karmada's webhook rules, the refused ones named, and the claim rules."""

from __future__ import annotations

from typing import Any

import pytest

from federation.placement import loader, matching, policy

from .builders import make_policy


def load(**spec: Any) -> policy.Policy:
    doc = make_policy(selectors=[{"apiVersion": "apps/v1", "kind": "Deployment",
                                  "name": "web"}]).model_dump(by_alias=True, exclude_none=True)
    doc["spec"].update(spec)
    return loader.parse_policy(doc, "p.yaml")


def refusal(**spec: Any) -> str:
    with pytest.raises(loader.LoadError) as info:
        load(**spec)
    return str(info.value)


def test_typed_values_load() -> None:
    loaded = load(suspension={"dispatchingOnClusters": {"clusterNames": ["m1"]}},
                  preserveResourcesOnDeletion=True, propagateDeps=True,
                  schedulerName="default-scheduler", activationPreference="Lazy",
                  preemption="Always", dependentOverrides=["op"])
    spec = loaded.spec
    assert spec.suspension is not None and spec.suspension.suspends("m1")
    assert not spec.suspension.suspends("m2")
    assert spec.preserve_resources_on_deletion and spec.propagate_deps
    assert spec.activation_preference == "Lazy" and spec.dependent_overrides == ["op"]


@pytest.mark.parametrize(("spec", "path"), [
    ({"suspension": {"dispatchng": True}}, "spec.suspension.dispatchng"),
    ({"suspension": {"dispatchingOnClusters": {"names": ["a"]}}},
     "spec.suspension.dispatchingOnClusters.names"),
    ({"propagateDeps": "yes"}, "spec.propagateDeps"),
    ({"preserveResourcesOnDeletion": 1}, "spec.preserveResourcesOnDeletion"),
    ({"activationPreference": "Eager"}, "spec.activationPreference"),
    ({"preemption": "Sometimes"}, "spec.preemption"),
    ({"dependentOverrides": "op"}, "spec.dependentOverrides"),
    ({"schedulerName": 3}, "spec.schedulerName"),
    ({"schedulePriority": {"priorityClassSource": "PodPriorityClass",
                           "priorityClassName": "x"}},
     "spec.schedulePriority.priorityClassSource"),
])
def test_a_typo_or_bad_value_inside_a_behaviour_field_is_an_error(
        spec: dict[str, Any], path: str) -> None:
    assert path in refusal(**spec)


def test_karmada_webhook_rules() -> None:
    both = refusal(suspension={"dispatching": True,
                               "dispatchingOnClusters": {"clusterNames": ["m1"]}})
    assert "spec.suspension" in both and "dispatchingOnClusters" in both
    doc = make_policy().model_dump(by_alias=True, exclude_none=True)
    doc["spec"]["preemption"] = "Always"  # its selector names no object
    with pytest.raises(loader.LoadError, match=r"resourceSelectors\[0\]\.name"):
        loader.parse_policy(doc, "p.yaml")


def test_refused_fields_are_named_with_the_reason() -> None:
    assert "spec.association" in refusal(association=True)
    assert "propagateDeps" in refusal(association=True)
    assert load(association=False).spec.association is False



def test_schedule_priority_loads_as_karmadas_crd_allows() -> None:
    """KubePriorityClass is the one source (the CRD's enum); both fields are required; an
    empty name is accepted as Karmada's webhook accepts it (no webhook rule exists)."""
    loaded = load(schedulePriority={"priorityClassSource": "KubePriorityClass",
                                    "priorityClassName": "high"})
    assert loaded.spec.schedule_priority is not None
    assert loaded.spec.schedule_priority.priority_class_name == "high"
    assert load(schedulePriority={"priorityClassSource": "KubePriorityClass",
                                  "priorityClassName": ""}).spec.schedule_priority is not None
    assert "priorityClassName" in refusal(
        schedulePriority={"priorityClassSource": "KubePriorityClass"})
    assert "spec.schedulePriority.priorityClassSource" in refusal(
        schedulePriority={"priorityClassSource": "FederatedPriorityClass",
                          "priorityClassName": "x"})  # not yet implemented in Karmada


def test_preemption_with_an_unnamed_selector_is_refused_as_karmadas_webhook() -> None:
    """Karmada's validateResourceSelectorsIfPreemptionEnabled: with preemption Always each
    selector must name its resource (an empty name could preempt unexpected ones)."""
    doc = make_policy(selectors=[{"apiVersion": "apps/v1", "kind": "Deployment",
                                  "name": "web"},
                                 {"apiVersion": "apps/v1", "kind": "Deployment",
                                  "labelSelector": {"matchLabels": {"app": "x"}}}]
                      ).model_dump(by_alias=True, exclude_none=True)
    doc["spec"]["preemption"] = "Always"
    with pytest.raises(loader.LoadError, match=r"resourceSelectors\[1\]\.name"):
        loader.parse_policy(doc, "p.yaml")


def policy_named(name: str, *, kind: str = "PropagationPolicy", priority: int = 0,
                 preemption: str = "Never") -> policy.Policy:
    base = make_policy(name=name, kind=kind, priority=priority, namespace="shop",
                       selectors=[{"apiVersion": "apps/v1", "kind": "Deployment",
                                   "name": "web"}])
    return base.model_copy(update={"spec": base.spec.model_copy(
        update={"preemption": preemption})})


def test_claims_and_preemption_follow_karmada() -> None:
    low = policy_named("low", priority=1)
    high = policy_named("high", priority=5)
    always = policy_named("always", priority=5, preemption="Always")
    cluster = policy_named("c", kind="ClusterPropagationPolicy", priority=50)
    cluster_always = policy_named("ca", kind="ClusterPropagationPolicy", priority=60,
                                  preemption="Always")
    assert matching.claimant([high, low], "PropagationPolicy shop/low")[0] is low
    assert matching.claimant([always, low], "PropagationPolicy shop/low")[0] is always
    assert matching.claimant([low, cluster], "ClusterPropagationPolicy c")[0] is cluster
    preempting = policy_named("p", preemption="Always")
    assert matching.claimant([preempting, cluster], "ClusterPropagationPolicy c")[0] \
        is preempting  # a namespaced policy preempts a cluster one whatever the priority
    assert matching.claimant([low, cluster_always], "PropagationPolicy shop/low")[0] \
        is low  # a cluster policy never preempts a namespaced one
    assert matching.claimant([cluster_always, cluster], "ClusterPropagationPolicy c")[0] \
        is cluster_always
    assert matching.claimant([high, low], None)[0] is high


def test_precision_breaks_a_priority_tie() -> None:
    by_name = make_policy(name="z", namespace="shop", selectors=[
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}])
    by_kind = make_policy(name="a", namespace="shop")
    assert matching.precision(by_name, None) < matching.precision(by_kind, None)
