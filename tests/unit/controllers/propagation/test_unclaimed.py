"""Unclaimed templates (:mod:`federation.controllers.propagation.unclaimed`): a template a
``policy.karmada.io`` policy placed keeps its copies when no policy selects it any more,
as in Karmada; one of our own policies' templates loses them (tests/unit/controllers/
propagation/test_reconciler.py). Whole reconciles against the in-memory fleet."""

from __future__ import annotations

from typing import Any

import pytest

from federation.contexts.client import ClusterUnavailable
from federation.controllers.propagation import unclaimed
from federation.controllers.propagation.reconciler import Reconciler
from federation.hub import manifests
from federation.runtime.reconcile import Result
from tests.unit.controllers.fakes import (
    FakeMC,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)
from tests.unit.controllers.propagation.test_karmada_behaviour import (
    MEMBERS,
    conditions,
    deployment,
    deployment_policy,
    edit,
    member_writes,
    mounting,
)

JSON = dict[str, Any]
POLICY_KEY = ("hub", "propagationpolicies", "shop", "web")


def binding(mc: FakeMC) -> JSON:
    found = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert found is not None
    return found


def replicas(mc: FakeMC, member: str) -> int | None:
    copy = mc.find(member, "Deployment", "web", "shop")
    return None if copy is None else int(copy["spec"]["replicas"])


async def unclaimed_web(carrying: bool = False, **policy: Any
                        ) -> tuple[FakeMC, Reconciler, JSON]:
    """web placed on both members by a policy.karmada.io policy (``policy``: its extra
    spec fields; ``carrying``: web mounts the ConfigMap app-config, propagateDeps on),
    then the policy deleted and the template reconciled: unclaimed."""
    mc = FakeMC(cluster_set(*MEMBERS))
    if carrying:
        policy["propagateDeps"] = True
        mc.put("hub", config_map("app-config"))
    mc.put("hub", deployment_policy(**policy))
    template = mc.put("hub", mounting("app-config") if carrying else deployment())
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    del mc.objects[POLICY_KEY]
    await r.reconcile(request_for(template))
    return mc, r, template


async def test_a_karmada_policy_deleted_leaves_the_copies_and_unclaims_the_binding() -> None:
    """The workload and the ConfigMap it carries stay in both members, still ours; the
    binding keeps its decision without a claim, says Unclaimed, and one event says so."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy(propagateDeps=True))
    mc.put("hub", config_map("app-config"))
    template = mc.put("hub", mounting("app-config"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert binding(mc)["spec"][unclaimed.FIELD] == unclaimed.KEEP
    del mc.objects[POLICY_KEY]
    since = len(mc.writes)
    assert await r.reconcile(request_for(template)) is None
    assert member_writes(mc, since) == []
    for member in MEMBERS:
        for kind, name in (("Deployment", "web"), ("ConfigMap", "app-config")):
            copy = mc.find(member, kind, name, "shop")
            assert copy is not None and manifests.is_ours(copy), (member, kind)
    spec = binding(mc)["spec"]
    assert "policy" not in spec
    assert [c["name"] for c in spec["clusters"]] == list(MEMBERS)
    scheduled = conditions(mc, "web-deployment")["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", unclaimed.REASON)
    hub_template = mc.find("hub", "Deployment", "web", "shop")
    assert hub_template is not None
    assert {c["type"]: c["reason"] for c in hub_template["status"]["conditions"]}[
        "Scheduled"] == unclaimed.REASON
    said = [e for e in r.recorder.events if e[1] == unclaimed.REASON]  # type: ignore[attr-defined]
    assert len(said) == 1 and "member1, member2" in said[0][2]


async def test_an_unclaimed_template_changes_no_copy_and_writes_nothing_again() -> None:
    """A scale of the template on the hub while unclaimed: no member write, no hub write,
    no second event."""
    mc, r, _ = await unclaimed_web()
    since = len(mc.writes)
    scaled = edit(mc, "Deployment", "web", "shop", lambda d: d["spec"].update(replicas=7))
    assert await r.reconcile(request_for(scaled)) is None
    assert mc.writes[since:] == []
    assert replicas(mc, "member1") == 2
    assert len([e for e in r.recorder.events  # type: ignore[attr-defined]
                if e[1] == unclaimed.REASON]) == 1


async def test_a_new_policy_claims_an_unclaimed_template_and_places_it_anew() -> None:
    """A policy for member1 only takes the template over: member1's copy follows the
    template again, member2's goes, and the binding names its new claim."""
    mc, r, template = await unclaimed_web()
    edit(mc, "Deployment", "web", "shop", lambda d: d["spec"].update(replicas=3))
    successor = deployment_policy("successor")
    successor["spec"]["resourceSelectors"][0]["name"] = "web"
    successor["spec"]["placement"] = {"clusterAffinity": {"clusterNames": ["member1"]}}
    mc.put("hub", successor)
    await r.reconcile(request_for(template))
    assert replicas(mc, "member1") == 3
    assert replicas(mc, "member2") is None
    spec = binding(mc)["spec"]
    assert spec["policy"] == "PropagationPolicy shop/successor"
    assert conditions(mc, "web-deployment")["Scheduled"]["status"] == "True"


async def test_deleting_an_unclaimed_template_still_deletes_its_copies() -> None:
    mc, r, template = await unclaimed_web(carrying=True)
    del mc.objects[("hub", "deployments", "shop", "web")]
    await r.reconcile(request_for(template))
    for member in MEMBERS:
        assert mc.find(member, "Deployment", "web", "shop") is None
        assert mc.find(member, "ConfigMap", "app-config", "shop") is None
    assert mc.find("hub", "ResourceBinding", "web-deployment", "shop") is None


async def test_pending_clean_up_is_finished_while_unclaimed() -> None:
    """member2 was left (policy narrowed to member1) while away, then the policy went:
    member1's copy stays, member2's is deleted once member2 is back."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy())
    template = mc.put("hub", deployment())
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    mc.set_down("member2", True)
    edit(mc, "PropagationPolicy", "web", "shop", lambda p: p["spec"].update(
        placement={"clusterAffinity": {"clusterNames": ["member1"]}}))
    with pytest.raises(ClusterUnavailable):  # retried: member2's copy is still to delete
        await r.reconcile(request_for(template))
    assert binding(mc)["spec"]["pendingCleanup"] == ["member2"]
    del mc.objects[POLICY_KEY]
    result = await r.reconcile(request_for(template))
    assert result == Result(requeue_after=r.settings.retry_pending)
    assert binding(mc)["spec"]["pendingCleanup"] == ["member2"]
    assert conditions(mc, "web-deployment")["CleanupPending"]["status"] == "True"
    mc.set_down("member2", False)
    assert await r.reconcile(request_for(template)) is None
    assert mc.find("member2", "Deployment", "web", "shop") is None
    assert replicas(mc, "member1") == 2
    assert binding(mc)["spec"]["pendingCleanup"] == []
    assert "CleanupPending" not in conditions(mc, "web-deployment")


async def test_our_own_policy_deleted_still_removes_the_copies() -> None:
    """policy.federation.io records no rule: the copies go, then the binding."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("a", MEMBERS))
    template = mc.put("hub", config_map("a"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    found = mc.find("hub", "ResourceBinding", "a-configmap", "shop")
    assert found is not None and unclaimed.FIELD not in found["spec"]
    del mc.objects[("hub", "propagationpolicies", "shop", "a")]
    await r.reconcile(request_for(template))
    assert all(mc.find(m, "ConfigMap", "a", "shop") is None for m in MEMBERS)
    assert mc.find("hub", "ResourceBinding", "a-configmap", "shop") is None


async def test_our_policy_deleted_keeps_the_copies_of_a_template_marked_orphan() -> None:
    """``federation.io/orphan: "true"`` on the template keeps its copies when its policy
    goes too (docs/placement.md, *A deleted policy*), also when both come at once; the
    binding goes."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("a", MEMBERS))
    r = reconciler(mc)
    await r.reconcile(request_for(mc.put("hub", config_map("a"))))
    # Marked with the policy's deletion: the binding never knew.
    template = edit(mc, "ConfigMap", "a", "shop", lambda c: c["metadata"].update(
        annotations={"federation.io/orphan": "true"}))
    del mc.objects[("hub", "propagationpolicies", "shop", "a")]
    await r.reconcile(request_for(template))
    assert all(mc.find(m, "ConfigMap", "a", "shop") is not None for m in MEMBERS)
    assert mc.find("hub", "ResourceBinding", "a-configmap", "shop") is None


async def test_a_lazy_policy_recreated_claims_anew_and_applies_at_once() -> None:
    """A Lazy policy deleted and created again (narrowed to member1): a new claim, so its
    placement applies now, not at the template's next change."""
    mc, r, template = await unclaimed_web(activationPreference="Lazy")
    assert "activation" not in binding(mc)["spec"]
    again = deployment_policy(activationPreference="Lazy")
    again["spec"]["placement"] = {"clusterAffinity": {"clusterNames": ["member1"]}}
    mc.put("hub", again)
    await r.reconcile(request_for(template))
    assert replicas(mc, "member1") == 2
    assert replicas(mc, "member2") is None


async def test_an_unclaimed_template_marked_orphan_keeps_its_copies_when_deleted() -> None:
    mc, r, _ = await unclaimed_web()
    marked = edit(mc, "Deployment", "web", "shop", lambda d: d["metadata"].update(
        annotations={"federation.io/orphan": "true"}))
    await r.reconcile(request_for(marked))
    assert binding(mc)["spec"]["orphan"] is True
    del mc.objects[("hub", "deployments", "shop", "web")]
    await r.reconcile(request_for(marked))
    assert all(replicas(mc, m) == 2 for m in MEMBERS)
    assert mc.find("hub", "ResourceBinding", "web-deployment", "shop") is None


async def test_pending_clean_up_while_unclaimed_takes_the_dependencies_too() -> None:
    """member2 left while away (policy narrowed), then the policy went: when member2 is
    back its copy of the workload and of the ConfigMap it carried both go."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", config_map("app-config"))
    mc.put("hub", deployment_policy(propagateDeps=True))
    template = mc.put("hub", mounting("app-config"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    mc.set_down("member2", True)
    edit(mc, "PropagationPolicy", "web", "shop", lambda p: p["spec"].update(
        placement={"clusterAffinity": {"clusterNames": ["member1"]}}))
    with pytest.raises(ClusterUnavailable):
        await r.reconcile(request_for(template))
    del mc.objects[POLICY_KEY]
    await r.reconcile(request_for(template))
    mc.set_down("member2", False)
    await r.reconcile(request_for(template))
    assert mc.find("member2", "Deployment", "web", "shop") is None
    assert mc.find("member2", "ConfigMap", "app-config", "shop") is None
    assert mc.find("member1", "ConfigMap", "app-config", "shop") is not None
