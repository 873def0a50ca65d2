"""The template's metadata.uid reaches the placement engine: Karmada breaks Webster's ties by
the FNV-32a hash of the object's UID, so the control plane divides as Karmada would."""

from __future__ import annotations

import pytest

from federation.placement import division
from tests.unit.controllers.fakes import JSON, FakeMC, cluster_set, reconciler, request_for

MEMBERS = ("member1", "member2")
ODD = next(f"uid-{i}" for i in range(20) if division.names_descending(f"uid-{i}"))
EVEN = next(f"uid-{i}" for i in range(20) if not division.names_descending(f"uid-{i}"))


def deployment(uid: str) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "uid": uid},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [
                {"name": "c", "image": "nginx"}]}}}}


def static_policy(group: str) -> JSON:
    rules = [{"targetCluster": {"clusterNames": [m]}, "weight": 1} for m in MEMBERS]
    return {"apiVersion": f"{group}/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": "web"}],
                     "placement": {"clusterAffinity": {"clusterNames": list(MEMBERS)},
                                   "replicaScheduling": {
                                       "replicaSchedulingType": "Divided",
                                       "replicaDivisionPreference": "Weighted",
                                       "weightPreference": {"staticWeightList": rules}}}}}


@pytest.mark.parametrize(("uid", "expected"), [(EVEN, {"member1": 2, "member2": 1}),
                                               (ODD, {"member1": 1, "member2": 2})])
async def test_the_template_uid_breaks_the_tie(uid: str, expected: dict[str, int]) -> None:
    """3 replicas at 1:1: the third is a tie, which goes to the first name for an even hash
    and to the last for an odd one (Karmada's tieBreakerByUID)."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", static_policy("policy.federation.io"))
    template = mc.put("hub", deployment(uid))
    assert await reconciler(mc).reconcile(request_for(template)) is None
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None
    assert {c["name"]: c["replicas"] for c in binding["spec"]["clusters"]} == expected
    for member, replicas in expected.items():
        copy = mc.find(member, "Deployment", "web", "shop")
        assert copy is not None and copy["spec"]["replicas"] == replicas
