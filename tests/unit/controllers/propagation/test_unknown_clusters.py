"""Every cluster name a policy gives is checked against the fleet before placing: the
affinity terms, their overflow tiers, static weights and replica bounds alike. A name the
fleet lacks stops the template with Scheduled=False (UnknownCluster) naming it, and
nothing is written to a member (docs/propagation.md, the schedule step)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.controllers.fakes import JSON, FakeMC, cluster_set, reconciler, request_for

MEMBERS = ("member1", "member2")


def deployment() -> JSON:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1"},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "app", "image": "nginx"}]}}}}


def policy(group: str, placement: JSON) -> JSON:
    return {"apiVersion": f"{group}/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": "web"}],
                     "placement": placement}}


def divided(**strategy: Any) -> JSON:
    return {"replicaSchedulingType": "Divided", **strategy}


def overflow(name: str) -> JSON:
    """An Aggregated policy whose overflow tier names ``name``."""
    return {"clusterAffinities": [{"affinityName": "first", "clusterNames": ["member1"],
                                   "overflowAffinities": [{"affinityName": "spill",
                                                           "clusterNames": [name]}]}],
            "replicaScheduling": divided(replicaDivisionPreference="Aggregated")}


def bound(name: str) -> JSON:
    """Weighted over both members, with a replica bound targeting ``name``."""
    return {"clusterAffinity": {"clusterNames": list(MEMBERS)},
            "replicaScheduling": divided(replicaBounds=[
                {"targetCluster": {"clusterNames": [name]}, "minReplicas": 1}])}


def static_weight(name: str) -> JSON:
    rules = [{"targetCluster": {"clusterNames": [n]}, "weight": 1} for n in ("member1", name)]
    return {"clusterAffinity": {"clusterNames": list(MEMBERS)},
            "replicaScheduling": divided(replicaDivisionPreference="Weighted",
                                         weightPreference={"staticWeightList": rules})}


def affinity(name: str) -> JSON:
    return {"clusterAffinity": {"clusterNames": ["member1", name]}}


PLACES = {"overflowAffinities": overflow, "replicaBounds.targetCluster": bound,
          "staticWeightList": static_weight, "clusterAffinity": affinity}


@pytest.mark.parametrize("group", ["policy.federation.io", "policy.karmada.io"])
@pytest.mark.parametrize("where", sorted(PLACES))
async def test_an_unknown_cluster_anywhere_in_the_policy_is_an_error(where: str,
                                                                     group: str) -> None:
    """``member9`` is named in one place only: Scheduled=False, UnknownCluster, the message
    names it and the known clusters, and no copy reaches a member."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", policy(group, PLACES[where]("member9")))
    template = mc.put("hub", deployment())
    assert await reconciler(mc).reconcile(request_for(template)) is None
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None
    scheduled = {c["type"]: c for c in binding["status"]["conditions"]}["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "UnknownCluster")
    assert scheduled["message"] == ("PropagationPolicy shop/web names unknown cluster(s) "
                                    "member9 (known: member1, member2)")
    assert all(mc.find(m, "Deployment", "web", "shop") is None for m in MEMBERS)


@pytest.mark.parametrize("where", sorted(PLACES))
async def test_the_same_policy_naming_known_clusters_places(where: str) -> None:
    """The control: with ``member2`` in the same place the template is placed, so the
    refusal above is the unknown name's doing and not the shape of the policy."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", policy("policy.federation.io", PLACES[where]("member2")))
    template = mc.put("hub", deployment())
    assert await reconciler(mc).reconcile(request_for(template)) is None
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None
    scheduled = {c["type"]: c for c in binding["status"]["conditions"]}["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("True", "Scheduled")
    assert mc.find("member1", "Deployment", "web", "shop") is not None
