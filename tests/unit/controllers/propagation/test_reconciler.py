"""The reconciler's paths beyond a plain create: no policy any more, a denied object,
templates an earlier version marked, kinds it does not track."""

from __future__ import annotations

from federation.controllers import propagation
from federation.controllers.propagation.reconciler import LEGACY_FINALIZER
from federation.hub import deny
from federation.runtime.reconcile import Request, Result
from tests.unit.controllers.fakes import (
    MEMBERS,
    FakeMC,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)
from tests.unit.controllers.propagation.test_karmada_behaviour import (
    deployment,
    deployment_policy,
)


async def placed(name: str) -> tuple[FakeMC, propagation.Reconciler]:
    """A fleet where template ``name`` has been propagated to every member."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy(name, MEMBERS))
    template = mc.put("hub", config_map(name))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    return mc, r


async def test_policy_removed_deletes_copies_then_the_binding() -> None:
    """No policy selects the template any more: every copy goes, then its binding."""
    mc, r = await placed("a")
    del mc.objects[("hub", "propagationpolicies", "shop", "a")]
    template = mc.find("hub", "ConfigMap", "a", "shop")
    assert template is not None
    assert await r.reconcile(request_for(template)) is None
    assert all(mc.find(m, "ConfigMap", "a", "shop") is None for m in MEMBERS)
    assert mc.find("hub", "ResourceBinding", "a-configmap", "shop") is None


async def test_policy_removed_with_a_member_down_records_pending_once_and_retries() -> None:
    """member2 away: its copy stays pending on the binding (template not deleted), the
    reconcile asks to look again; an unchanged retry writes nothing on the hub."""
    mc, r = await placed("b")
    del mc.objects[("hub", "propagationpolicies", "shop", "b")]
    mc.set_down("member2", True)
    template = mc.find("hub", "ConfigMap", "b", "shop")
    assert template is not None
    result = await r.reconcile(request_for(template))
    assert result == Result(requeue_after=r.settings.retry_pending)
    binding = mc.find("hub", "ResourceBinding", "b-configmap", "shop")
    assert binding is not None
    assert binding["spec"]["pendingCleanup"] == ["member2"]
    assert binding["spec"]["templateDeleted"] is False
    before = len(mc.hub_writes())
    assert await r.reconcile(request_for(template)) == result
    assert len(mc.hub_writes()) == before


async def test_template_never_placed_without_policy_writes_nothing() -> None:
    """No policy and no binding: nothing to remove, no write at all."""
    mc = FakeMC(cluster_set(*MEMBERS))
    template = mc.put("hub", config_map("c"))
    assert await reconciler(mc).reconcile(request_for(template)) is None
    assert mc.writes == []


async def test_denied_template_is_not_propagated_and_reported_once_per_policy() -> None:
    """A ConfigMap matched by an operator's deny rule gets no copy and no binding; the
    policy gets one Warning event naming the rule, not one per reconcile."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("d", MEMBERS))
    template = mc.put("hub", config_map("d"))
    settings = propagation.PropagationSettings(
        deny_list=deny.DenyList.configured(["core/ConfigMap:namespace=shop"]))
    r = reconciler(mc, settings)
    await r.reconcile(request_for(template))
    await r.reconcile(request_for(template))
    assert mc.writes == []
    events = r.recorder.events  # type: ignore[attr-defined]
    assert [(kind, reason) for kind, reason, _ in events] == [("Warning", "Denied")]
    assert "core/ConfigMap:namespace=shop" in events[0][2]


async def test_legacy_finalizer_and_annotations_are_removed_once() -> None:
    """A template an earlier version marked loses its finalizer and decision annotations
    in one update (other annotations kept); the next reconcile does not touch it."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("e", MEMBERS))
    marked = config_map("e")
    marked["metadata"].update(finalizers=[LEGACY_FINALIZER, "someone/else"],
                              annotations={"federation.io/replicas": "{}", "keep": "me"})
    template = mc.put("hub", marked)
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert ("update", "hub", "ConfigMap/e") in mc.hub_writes()
    stored = mc.find("hub", "ConfigMap", "e", "shop")
    assert stored is not None
    assert stored["metadata"]["finalizers"] == ["someone/else"]
    assert stored["metadata"]["annotations"] == {"keep": "me"}
    before = len(mc.writes)
    await r.reconcile(request_for(stored))
    assert mc.writes[before:] == []


async def test_deleting_template_with_the_legacy_finalizer_is_released() -> None:
    """kubectl delete of a template an earlier version finalised is not left hanging: the
    finalizer is dropped, and nothing else happens until the delete is seen."""
    mc, r = await placed("f")
    template = mc.find("hub", "ConfigMap", "f", "shop")
    assert template is not None
    template["metadata"].update(finalizers=[LEGACY_FINALIZER],
                                deletionTimestamp="2026-01-01T00:00:00Z")
    mc.put("hub", template)
    before = len(mc.writes)
    assert await r.reconcile(request_for(template)) is None
    assert mc.writes[before:] == [("update", "hub", "ConfigMap/f")]
    stored = mc.find("hub", "ConfigMap", "f", "shop")
    assert stored is not None and stored["metadata"]["finalizers"] == []
    assert all(mc.find(m, "ConfigMap", "f", "shop") is not None for m in MEMBERS)


async def test_untracked_kind_is_ignored() -> None:
    """A request for a kind the kind tracker does not know does nothing."""
    mc = FakeMC(cluster_set(*MEMBERS))
    request = Request("hub", "example.com/Widget", "shop", "w")
    assert await reconciler(mc).reconcile(request) is None
    assert mc.writes == []


async def test_a_typo_in_the_claiming_policy_keeps_the_copies_until_it_is_fixed() -> None:
    """An edit makes the policy invalid (a misspelt field): that is bad input, not "no
    policy": no copy is deleted or changed, the binding keeps its claim and says
    PolicyInvalid; the fixed policy takes over again."""
    mc, r = await placed("t")
    policy = mc.find("hub", "PropagationPolicy", "t", "shop")
    assert policy is not None
    good = dict(policy["spec"]["placement"])
    policy["spec"]["placement"] = {**good, "clusterAfinity": {}}
    mc.put("hub", policy)
    template = mc.find("hub", "ConfigMap", "t", "shop")
    assert template is not None
    since = len(mc.writes)
    assert await r.reconcile(request_for(template)) is None
    assert [w for w in mc.writes[since:] if w[1] != "hub"] == []
    assert all(mc.find(m, "ConfigMap", "t", "shop") is not None for m in MEMBERS)
    binding = mc.find("hub", "ResourceBinding", "t-configmap", "shop")
    assert binding is not None and binding["spec"]["policy"] == "PropagationPolicy shop/t"
    scheduled = {c["type"]: c for c in binding["status"]["conditions"]}["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "PolicyInvalid")
    assert await r.reconcile(request_for(template)) is None  # the same: nothing new
    assert all(mc.find(m, "ConfigMap", "t", "shop") is not None for m in MEMBERS)
    policy["spec"]["placement"] = {**good, "clusterAffinity": {"clusterNames": ["member1"]}}
    mc.put("hub", policy)
    assert await r.reconcile(request_for(template)) is None
    assert mc.find("member1", "ConfigMap", "t", "shop") is not None
    assert all(mc.find(m, "ConfigMap", "t", "shop") is None for m in MEMBERS[1:])


async def test_a_cleared_conflict_leaves_the_templates_status_too() -> None:
    """A foreign Deployment in member1 (Conflict=True on the binding and the template),
    then removed by its owner: once the copies are ready the template's status holds no
    Conflict any more, as the binding's does not."""
    mc = FakeMC(cluster_set("member1", "member2"))
    mc.put("hub", deployment_policy())
    mc.put("member1", {**deployment(), "spec": {**deployment()["spec"], "replicas": 1}})
    template = mc.put("hub", deployment())
    r = reconciler(mc)
    await r.reconcile(request_for(template))

    def template_conditions() -> dict[str, str]:
        found = mc.find("hub", "Deployment", "web", "shop")
        assert found is not None
        return {c["type"]: c["status"] for c in found["status"]["conditions"]}

    assert template_conditions()["Conflict"] == "True"
    del mc.objects[("member1", "deployments", "shop", "web")]
    await r.reconcile(request_for(template))
    for member in ("member1", "member2"):
        copy = mc.find(member, "Deployment", "web", "shop")
        assert copy is not None
        copy["metadata"]["generation"] = 1
        ready = copy["spec"]["replicas"]
        copy["status"] = {"observedGeneration": 1, "replicas": ready, "readyReplicas": ready,
                          "updatedReplicas": ready, "availableReplicas": ready}
        mc.put(member, copy)
    await r.reconcile(request_for(template))
    assert "Conflict" not in template_conditions()
    assert template_conditions()["Healthy"] == "True"
