"""Dependencies carried with ``propagateDeps`` on a member that was away when their
workload was deleted: the clean-up controller finishes them with the workload's copy
(in its own removal plan, after the copy), unless another workload still carries
them there. Whole reconciles against the in-memory fleet."""

from __future__ import annotations

from federation.controllers import cleanup
from federation.controllers.kit import plan
from federation.hub import api, bindings
from tests.unit.controllers.fakes import (
    FakeMC,
    FakeRecorder,
    cluster_set,
    config_map,
    reconciler,
    request_for,
)
from tests.unit.controllers.propagation.test_karmada_behaviour import (
    MEMBERS,
    deployment_policy,
    mounting,
)

WEB_KEY = ("hub", "deployments", "shop", "web")


async def deleted_while_member2_away(mc: FakeMC) -> cleanup.Reconciler:
    """web (carrying app-config) placed on both members, then deleted with member2 away;
    the clean-up controller, wired as ``fedctl run`` wires it."""
    mc.put("hub", deployment_policy(propagateDeps=True))
    mc.put("hub", config_map("app-config"))
    template = mc.put("hub", mounting("app-config"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert all(mc.find(m, "ConfigMap", "app-config", "shop") is not None for m in MEMBERS)
    mc.set_down("member2", True)
    del mc.objects[WEB_KEY]
    await r.reconcile(request_for(template))
    assert mc.find("member1", "ConfigMap", "app-config", "shop") is None
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None and binding["spec"]["pendingCleanup"] == ["member2"]
    return cleanup.Reconciler(mc, "hub", FakeRecorder())


async def test_a_returning_member_loses_the_workload_and_its_dependency() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    leftovers = await deleted_while_member2_away(mc)
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None
    assert (await leftovers.reconcile(request_for(binding))) is not None  # still away
    assert mc.find("member2", "ConfigMap", "app-config", "shop") is not None
    mc.set_down("member2", False)
    assert await leftovers.reconcile(request_for(binding)) is None
    assert mc.find("member2", "Deployment", "web", "shop") is None
    assert mc.find("member2", "ConfigMap", "app-config", "shop") is None
    assert mc.find("hub", "ResourceBinding", "web-deployment", "shop") is None


async def test_a_dependency_another_workload_carries_there_stays() -> None:
    """api, placed on member2 only, carries app-config too: it stays on member2."""
    mc = FakeMC(cluster_set(*MEMBERS))
    api_policy = deployment_policy("api", propagateDeps=True)
    api_policy["spec"]["placement"] = {"clusterAffinity": {"clusterNames": ["member2"]}}
    mc.put("hub", api_policy)
    api = mounting("app-config")
    api["metadata"]["name"] = "api"
    api["spec"]["selector"]["matchLabels"] = api["spec"]["template"]["metadata"]["labels"] = \
        {"app": "api"}
    mc.put("hub", config_map("app-config"))
    await reconciler(mc).reconcile(request_for(mc.put("hub", api)))
    assert mc.find("member2", "ConfigMap", "app-config", "shop") is not None
    leftovers = await deleted_while_member2_away(mc)
    mc.set_down("member2", False)
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None
    assert await leftovers.reconcile(request_for(binding)) is None
    assert mc.find("member2", "Deployment", "web", "shop") is None
    assert mc.find("member2", "ConfigMap", "app-config", "shop") is not None
    assert mc.find("hub", "ResourceBinding", "web-deployment", "shop") is None


async def test_a_dependency_that_cannot_be_read_is_not_reported_done() -> None:
    """member2 cannot be read: the removal plan has nothing for it and keeps it pending;
    once back, the plan deletes the copy and then the dependency (only that version)."""
    mc = FakeMC(cluster_set(*MEMBERS))
    leftovers = await deleted_while_member2_away(mc)
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None
    record = bindings.BindingRecord.of(binding)
    away = await leftovers.removal_plan(binding, record)
    assert len(away.dag) == 0 and set(away.unread) == {"member2"}
    mc.set_down("member2", False)
    back = await leftovers.removal_plan(binding, record)
    assert back.unread == {}
    by_kind = {v.obj["kind"]: v for v in back.dag}
    assert set(by_kind) == {"Deployment", "ConfigMap"}
    assert all(v.action is plan.Action.DELETE for v in back.dag)
    assert by_kind["ConfigMap"].depends_on == {by_kind["Deployment"].key}
    assert by_kind["ConfigMap"].obj["preconditions"]["resourceVersion"]


async def test_a_recreated_templates_dependency_is_not_deleted_by_a_stale_clean_up() -> None:
    """The clean-up controller read the deleted template's record; meanwhile the template
    was created again and placed on member2 with its ConfigMap. Finishing the stale
    record deletes neither (the new template owns them now)."""
    mc = FakeMC(cluster_set(*MEMBERS))
    leftovers = await deleted_while_member2_away(mc)
    mc.set_down("member2", False)
    stale = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert stale is not None
    again = mc.put("hub", mounting("app-config"))
    await reconciler(mc).reconcile(request_for(again))
    removal = await leftovers.removal_plan(stale, bindings.BindingRecord.of(stale))
    assert len(removal.dag) == 0 and removal.unread == {}
    assert mc.find("member2", "ConfigMap", "app-config", "shop") is not None
    assert mc.find("member2", "Deployment", "web", "shop") is not None


async def test_an_unreadable_binding_of_the_namespace_keeps_the_dependency() -> None:
    """The attack: someone writes a binding in `shop` whose record nobody can read (its
    ``spec.dependencies`` a string naming app-config, not a list). Clean-up does not take
    its word that nothing carries app-config to member2: the workload's copy goes, the
    dependency stays (read as a list of characters it would have been dropped)."""
    mc = FakeMC(cluster_set(*MEMBERS))
    leftovers = await deleted_while_member2_away(mc)
    mc.put("hub", {"apiVersion": api.RESOURCE_BINDINGS.api_version,
                   "kind": "ResourceBinding",
                   "metadata": {"name": "other-deployment", "namespace": "shop"},
                   "spec": {"dependencies": "ConfigMap/app-config",
                            "clusters": [{"name": "member2", "replicas": 1}]}})
    mc.set_down("member2", False)
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None
    assert bindings.read(mc.find("hub", "ResourceBinding", "other-deployment", "shop")
                         or {}) is None
    assert await leftovers.reconcile(request_for(binding)) is None
    assert mc.find("member2", "Deployment", "web", "shop") is None
    assert mc.find("member2", "ConfigMap", "app-config", "shop") is not None


async def test_an_unreadable_own_binding_of_the_dependency_keeps_it() -> None:
    """app-config's own binding (by its name) cannot be read (``templateDeleted`` the string
    "no": read as truthy, it would have said the binding places nothing): it may place
    app-config on member2, so clean-up leaves that copy alone."""
    mc = FakeMC(cluster_set(*MEMBERS))
    leftovers = await deleted_while_member2_away(mc)
    mc.put("hub", {"apiVersion": api.RESOURCE_BINDINGS.api_version,
                   "kind": "ResourceBinding",
                   "metadata": {"name": "app-config-configmap", "namespace": "shop"},
                   "spec": {"resource": {"apiVersion": "v1", "kind": "ConfigMap",
                                         "namespace": "shop", "name": "app-config"},
                            "templateDeleted": "no",
                            "clusters": [{"name": "member2", "replicas": 1}]}})
    mc.set_down("member2", False)
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None
    removal = await leftovers.removal_plan(binding, bindings.BindingRecord.of(binding))
    assert [(v.cluster, v.obj["kind"]) for v in removal.dag] == [("member2", "Deployment")]
    assert await leftovers.reconcile(request_for(binding)) is None
    assert mc.find("member2", "ConfigMap", "app-config", "shop") is not None
