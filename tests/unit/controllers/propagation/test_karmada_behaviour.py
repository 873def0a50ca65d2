"""Karmada's behaviour fields, whole reconciles against the in-memory fleet: suspension,
preserveResourcesOnDeletion, propagateDeps (and its attacks), schedulerName, Lazy
activation, claims and preemption, dependentOverrides."""

from __future__ import annotations

from typing import Any

import pytest

from federation.contexts import client as kube
from federation.controllers.kit.chain import Problem
from federation.controllers.propagation import dependent_overrides, propagate_deps
from federation.controllers.propagation.build import Build
from federation.hub import manifests
from federation.placement import loader
from tests.unit.controllers.fakes import (
    FakeContext,
    FakeMC,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)

JSON = dict[str, Any]
MEMBERS = ("member1", "member2")


def with_spec(policy: JSON, **fields: Any) -> JSON:
    policy["spec"].update(fields)
    return policy


def conditions(mc: FakeMC, binding: str, namespace: str = "shop") -> dict[str, JSON]:
    found = mc.find("hub", "ResourceBinding", binding, namespace)
    assert found is not None
    return {c["type"]: c for c in found["status"]["conditions"]}


def member_writes(mc: FakeMC, since: int = 0) -> list[tuple[str, str, str]]:
    return [w for w in mc.writes[since:] if w[1] != "hub"]


def deployment(name: str = "web", namespace: str = "shop", **pod: Any) -> JSON:
    spec = {"containers": [{"name": "app", "image": "nginx"}], **pod}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def deployment_policy(name: str = "web", namespace: str = "shop", **fields: Any) -> JSON:
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": name}],
                     "placement": {"clusterAffinity": {"clusterNames": list(MEMBERS)}},
                     **fields}}


def edit(mc: FakeMC, kind: str, name: str, namespace: str | None, change: Any) -> JSON:
    found = mc.find("hub", kind, name, namespace)
    assert found is not None
    change(found)
    return mc.put("hub", found)


# -- suspension ------------------------------------------------------------------------------


async def test_suspended_dispatching_writes_nothing_and_resuming_continues() -> None:
    """dispatching: true: a changed template reaches no member, the binding says
    Dispatching=False (SuspendDispatching); removing the suspension writes the change."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("a", MEMBERS))
    template = mc.put("hub", config_map("a", k="v1"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    edit(mc, "PropagationPolicy", "a", "shop",
         lambda p: p["spec"].update(suspension={"dispatching": True}))
    edit(mc, "ConfigMap", "a", "shop", lambda t: t.update(data={"k": "v2"}))
    before = len(mc.writes)
    await r.reconcile(request_for(template))
    assert member_writes(mc, before) == []
    dispatching = conditions(mc, "a-configmap")["Dispatching"]
    assert (dispatching["status"], dispatching["reason"]) == ("False", "SuspendDispatching")
    assert "member1, member2" in dispatching["message"]
    assert all(mc.find(m, "ConfigMap", "a", "shop")["data"] == {"k": "v1"}  # type: ignore[index]
               for m in MEMBERS)
    edit(mc, "PropagationPolicy", "a", "shop", lambda p: p["spec"].pop("suspension"))
    await r.reconcile(request_for(template))
    assert all(mc.find(m, "ConfigMap", "a", "shop")["data"] == {"k": "v2"}  # type: ignore[index]
               for m in MEMBERS)
    assert "Dispatching" not in conditions(mc, "a-configmap")


async def test_suspension_on_named_clusters_holds_only_those() -> None:
    """dispatchingOnClusters.clusterNames: member2 keeps the old copy, member1 is updated;
    a new template is not created in member2 at all."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", with_spec(duplicated_policy("a", MEMBERS),
                            suspension={"dispatchingOnClusters": {"clusterNames": ["member2"]}}))
    template = mc.put("hub", config_map("a"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert mc.find("member1", "ConfigMap", "a", "shop") is not None
    assert mc.find("member2", "ConfigMap", "a", "shop") is None
    assert mc.find("member2", "Namespace", "shop") is None  # no write at all there
    applied = conditions(mc, "a-configmap")["Applied"]
    assert applied["message"] == "applied to member1"  # never claims member2
    binding = mc.find("hub", "ResourceBinding", "a-configmap", "shop")
    assert binding is not None and binding["spec"]["suspension"] == {
        "dispatchingOnClusters": {"clusterNames": ["member2"]}}  # carried, as Karmada's
    edit(mc, "PropagationPolicy", "a", "shop",
         lambda p: p["spec"].update(suspension={"dispatching": True}))
    await r.reconcile(request_for(template))
    assert "to member1, member2:" in conditions(mc, "a-configmap")["Dispatching"]["message"]


async def test_deleting_the_template_while_suspended_still_deletes_copies() -> None:
    """Karmada deletes a Work's resources before it looks at the suspension: so do we."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("a", MEMBERS))
    template = mc.put("hub", config_map("a"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    edit(mc, "PropagationPolicy", "a", "shop",
         lambda p: p["spec"].update(suspension={"dispatching": True}))
    await r.reconcile(request_for(template))
    del mc.objects[("hub", "configmaps", "shop", "a")]
    await r.reconcile(request_for(template))
    assert all(mc.find(m, "ConfigMap", "a", "shop") is None for m in MEMBERS)
    assert mc.find("hub", "ResourceBinding", "a-configmap", "shop") is None


# -- preserveResourcesOnDeletion ---------------------------------------------------------------


async def test_preserved_copies_stay_released_from_our_ownership() -> None:
    """Deleting the template keeps the copies, without our label and annotations (as
    Karmada strips its claim metadata), and drops the binding; a re-created template
    meets them as someone else's objects."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", with_spec(duplicated_policy("a", MEMBERS), preserveResourcesOnDeletion=True))
    template = mc.put("hub", config_map("a"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    binding = mc.find("hub", "ResourceBinding", "a-configmap", "shop")
    assert binding is not None and binding["spec"]["preserveResourcesOnDeletion"] is True
    del mc.objects[("hub", "configmaps", "shop", "a")]
    await r.reconcile(request_for(template))
    for member in MEMBERS:
        copy = mc.find(member, "ConfigMap", "a", "shop")
        assert copy is not None and copy["data"] == {"k": "v"}
        assert not manifests.is_ours(copy)
        assert not any(k.startswith("federation.io/")
                       for k in (copy["metadata"].get("annotations") or {}))
    assert mc.find("hub", "ResourceBinding", "a-configmap", "shop") is None
    again = mc.put("hub", config_map("a"))
    await r.reconcile(request_for(again))
    assert "Conflict" in conditions(mc, "a-configmap")


async def test_without_preservation_the_copies_are_deleted() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("a", MEMBERS))
    template = mc.put("hub", config_map("a"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    del mc.objects[("hub", "configmaps", "shop", "a")]
    await r.reconcile(request_for(template))
    assert all(mc.find(m, "ConfigMap", "a", "shop") is None for m in MEMBERS)


# -- propagateDeps -----------------------------------------------------------------------------


def mounting(*names: str, **pod: Any) -> JSON:
    volumes = [{"name": f"v{i}", "configMap": {"name": n}} for i, n in enumerate(names)]
    return deployment(volumes=volumes, **pod)


async def test_referenced_config_map_follows_the_workload_and_goes_when_unreferenced() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy(propagateDeps=True))
    mc.put("hub", config_map("app-config", k="v1"))
    template = mc.put("hub", mounting("app-config"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    for member in MEMBERS:
        copy = mc.find(member, "ConfigMap", "app-config", "shop")
        assert copy is not None and copy["data"] == {"k": "v1"} and manifests.is_ours(copy)
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None and binding["spec"]["dependencies"] == ["ConfigMap/app-config"]
    edit(mc, "ConfigMap", "app-config", "shop", lambda c: c.update(data={"k": "v2"}))
    await r.reconcile(request_for(template))
    assert mc.find("member1", "ConfigMap", "app-config", "shop")["data"] == {"k": "v2"}  # type: ignore[index]
    edit(mc, "Deployment", "web", "shop",
         lambda d: d["spec"]["template"]["spec"].pop("volumes"))
    await r.reconcile(request_for(template))
    assert all(mc.find(m, "ConfigMap", "app-config", "shop") is None for m in MEMBERS)
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None and "dependencies" not in binding["spec"]


async def test_every_reference_kind_is_read_as_karmada_reads_it() -> None:
    pod: dict[str, Any] = {"serviceAccountName": "runner", "imagePullSecrets": [{"name": "pull"}],
           "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "env-s"}}]}],
           "containers": [{"name": "c", "env": [
               {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "env-c", "key": "x"}}}]}],
           "volumes": [{"name": "p", "persistentVolumeClaim": {"claimName": "data"}},
                       {"name": "q", "projected": {"sources": [{"secret": {"name": "proj"}}]}},
                       {"name": "r", "csi": {"driver": "d",
                                             "nodePublishSecretRef": {"name": "csi"}}}]}
    template = deployment(**pod)
    found = {str(r) for r in propagate_deps.references(template)}
    assert found == {"ServiceAccount/runner", "Secret/pull", "Secret/env-s", "ConfigMap/env-c",
                     "PersistentVolumeClaim/data", "Secret/proj", "Secret/csi"}
    template = deployment(serviceAccountName="default")
    assert propagate_deps.references(template) == set()  # the default account never


async def test_a_statefulset_does_not_carry_its_own_claims() -> None:
    template = deployment(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "d-0"}},
                                   {"name": "e", "persistentVolumeClaim": {"claimName": "x"}}])
    template.update(apiVersion="apps/v1", kind="StatefulSet")
    template["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "d-0"}}]
    assert {str(r) for r in propagate_deps.references(template)} == {
        "PersistentVolumeClaim/x"}


async def test_a_config_map_shared_by_two_workloads_stays_while_one_carries_it() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy("web", propagateDeps=True))
    mc.put("hub", deployment_policy("api", propagateDeps=True))
    mc.put("hub", config_map("shared"))
    web = mc.put("hub", mounting("shared"))
    api = mc.put("hub", {**mounting("shared"), "metadata": {"name": "api", "namespace": "shop"}})
    r = reconciler(mc)
    await r.reconcile(request_for(web))
    before = len(mc.writes)
    await r.reconcile(request_for(api))
    assert not [w for w in mc.writes[before:] if w[2] == "ConfigMap/shared"]  # one copy
    del mc.objects[("hub", "deployments", "shop", "web")]
    await r.reconcile(request_for(web))
    assert all(mc.find(m, "ConfigMap", "shared", "shop") is not None for m in MEMBERS)
    del mc.objects[("hub", "deployments", "shop", "api")]
    await r.reconcile(request_for(api))
    assert all(mc.find(m, "ConfigMap", "shared", "shop") is None for m in MEMBERS)


async def test_a_reference_never_reaches_another_namespace() -> None:
    """The attack: a policy author in shop names bank's Secret. A pod template cannot name
    a namespace, so ``db`` means shop's db (absent here): bank's is never read or copied;
    a name smuggling a path is refused before anything is written."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy(propagateDeps=True))
    mc.put("hub", {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                   "metadata": {"name": "db", "namespace": "bank"}, "data": {"p": "c2VjcmV0"}})
    template = mc.put("hub", deployment(volumes=[{"name": "s", "secret": {"secretName": "db"}}]))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert all(mc.find(m, "Secret", "db", ns) is None for m in MEMBERS for ns in ("shop", "bank"))
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None and "dependencies" not in binding["spec"]
    assert any("Secret/db not found in shop" in line for line in binding["spec"]["explanation"])
    sneaky = deployment(volumes=[{"name": "s", "secret": {"secretName": "../../bank/secrets/db"}}])
    edit(mc, "Deployment", "web", "shop", lambda d: d.update(spec=sneaky["spec"]))
    before = len(mc.writes)
    await r.reconcile(request_for(template))
    assert member_writes(mc, before) == []
    applied = conditions(mc, "web-deployment")["Applied"]
    assert (applied["status"], applied["reason"]) == ("False", "InvalidDependency")


async def test_a_denied_dependency_is_never_written_and_stops_the_workload() -> None:
    """A service account token Secret is on the deny list: mounting it does not carry it."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy(propagateDeps=True))
    mc.put("hub", {"apiVersion": "v1", "kind": "Secret",
                   "type": "kubernetes.io/service-account-token",
                   "metadata": {"name": "token", "namespace": "shop"}, "data": {}})
    template = mc.put("hub", deployment(volumes=[{"name": "t",
                                                  "secret": {"secretName": "token"}}]))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert member_writes(mc) == []
    applied = conditions(mc, "web-deployment")["Applied"]
    assert (applied["status"], applied["reason"]) == ("False", "DependencyDenied")


async def test_without_propagate_deps_nothing_follows() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy())
    mc.put("hub", config_map("app-config"))
    template = mc.put("hub", mounting("app-config"))
    await reconciler(mc).reconcile(request_for(template))
    assert all(mc.find(m, "ConfigMap", "app-config", "shop") is None for m in MEMBERS)


def test_dependents_index_maps_a_dependency_to_its_carriers() -> None:
    index = propagate_deps.Dependents()
    binding = {"metadata": {"name": "web-deployment", "namespace": "shop"},
               "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment",
                                     "name": "web"},
                        "dependencies": ["ConfigMap/app-config", "Secret/bad name"]}}
    index.binding_changed(binding, deleted=False)
    assert [t["name"] for t in index.carriers("shop", "ConfigMap", "app-config")] == ["web"]
    assert index.carriers("bank", "ConfigMap", "app-config") == []
    index.binding_changed(binding, deleted=True)
    assert index.carriers("shop", "ConfigMap", "app-config") == []


async def test_a_missing_dependency_is_awaited_then_carried_once_it_exists() -> None:
    """Named before it exists: the explanation says so, the binding records it as
    awaited (not as carried) and the index requeues the workload when it appears; the
    next reconcile carries it, in the one binding write the explanation needs anyway."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy(propagateDeps=True))
    template = mc.put("hub", mounting("later"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None
    assert binding["spec"]["awaitedDependencies"] == ["ConfigMap/later"]
    assert "dependencies" not in binding["spec"]
    assert any("ConfigMap/later not found" in line for line in binding["spec"]["explanation"])
    assert all(mc.find(m, "ConfigMap", "later", "shop") is None for m in MEMBERS)
    index = propagate_deps.Dependents()
    index.binding_changed(binding, deleted=False)
    assert index.carriers("shop", "ConfigMap", "later") == []
    assert [t["name"] for t in index.carriers("shop", "ConfigMap", "later", awaiting=True)] \
        == ["web"]
    mc.put("hub", config_map("later", k="v1"))
    before = len([w for w in mc.writes if w[1] == "hub"])
    await r.reconcile(request_for(template))
    assert len([w for w in mc.writes if w[1] == "hub"]) - before <= 1
    for member in MEMBERS:
        copy = mc.find(member, "ConfigMap", "later", "shop")
        assert copy is not None and copy["data"] == {"k": "v1"} and manifests.is_ours(copy)
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None and binding["spec"]["dependencies"] == ["ConfigMap/later"]
    assert "awaitedDependencies" not in binding["spec"]


async def test_an_awaited_dependency_is_never_deleted_as_carried() -> None:
    """web names ConfigMap/later, which the hub lacks; member1 holds a copy of that name
    marked ours that nothing carries (web never copied it). web's deletion leaves it."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy(propagateDeps=True))
    stray = manifests.mark(config_map("later"), "uid-elsewhere")
    mc.put("member1", stray)
    template = mc.put("hub", mounting("later"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    del mc.objects[("hub", "deployments", "shop", "web")]
    await r.reconcile(request_for(template))
    assert mc.find("member1", "Deployment", "web", "shop") is None
    assert mc.find("member1", "ConfigMap", "later", "shop") is not None
    assert mc.find("hub", "ResourceBinding", "web-deployment", "shop") is None


# -- schedulerName -----------------------------------------------------------------------------


async def test_a_policy_for_another_scheduler_places_nothing_and_says_so() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", with_spec(duplicated_policy("a", MEMBERS), schedulerName="gpu-scheduler"))
    template = mc.put("hub", config_map("a"))
    await reconciler(mc).reconcile(request_for(template))
    assert member_writes(mc) == []
    scheduled = conditions(mc, "a-configmap")["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "SchedulerNotOurs")
    assert "'gpu-scheduler'" in scheduled["message"]
    assert "'default-scheduler'" in scheduled["message"]


async def test_default_scheduler_by_name_is_us() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", with_spec(duplicated_policy("a", MEMBERS), schedulerName="default-scheduler"))
    template = mc.put("hub", config_map("a"))
    await reconciler(mc).reconcile(request_for(template))
    assert all(mc.find(m, "ConfigMap", "a", "shop") is not None for m in MEMBERS)


# -- activationPreference: Lazy ----------------------------------------------------------------


async def test_lazy_policy_change_waits_for_the_template_to_change() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", with_spec(duplicated_policy("a", ["member1"]), activationPreference="Lazy"))
    template = mc.put("hub", config_map("a", k="v1"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    edit(mc, "PropagationPolicy", "a", "shop",
         lambda p: p["spec"]["placement"]["clusterAffinity"].update(clusterNames=["member2"]))
    await r.reconcile(request_for(template))
    assert mc.find("member1", "ConfigMap", "a", "shop") is not None
    assert mc.find("member2", "ConfigMap", "a", "shop") is None
    binding = mc.find("hub", "ResourceBinding", "a-configmap", "shop")
    assert binding is not None
    assert any("Lazy" in line for line in binding["spec"]["explanation"])
    template = edit(mc, "ConfigMap", "a", "shop", lambda t: t.update(data={"k": "v2"}))
    await r.reconcile(request_for(template))
    assert mc.find("member1", "ConfigMap", "a", "shop") is None
    assert mc.find("member2", "ConfigMap", "a", "shop") is not None


async def test_without_lazy_a_policy_change_applies_at_once() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("a", ["member1"]))
    template = mc.put("hub", config_map("a"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    edit(mc, "PropagationPolicy", "a", "shop",
         lambda p: p["spec"]["placement"]["clusterAffinity"].update(clusterNames=["member2"]))
    await r.reconcile(request_for(template))
    assert mc.find("member2", "ConfigMap", "a", "shop") is not None


# -- priority and preemption -------------------------------------------------------------------


def named_policy(name: str, clusters: list[str], **fields: Any) -> JSON:
    policy = duplicated_policy("a", clusters)
    policy["metadata"]["name"] = name
    return with_spec(policy, **fields)


async def test_a_claimed_template_stays_with_its_policy_without_preemption() -> None:
    """Karmada: a later policy of higher priority does not take a claimed template."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", named_policy("first", ["member1"]))
    template = mc.put("hub", config_map("a"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    mc.put("hub", named_policy("second", ["member2"], priority=10))
    await r.reconcile(request_for(template))
    binding = mc.find("hub", "ResourceBinding", "a-configmap", "shop")
    assert binding is not None and binding["spec"]["policy"] == "PropagationPolicy shop/first"
    assert mc.find("member2", "ConfigMap", "a", "shop") is None


async def test_preemption_always_takes_over_from_a_lower_priority_policy() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", named_policy("first", ["member1"], priority=1))
    template = mc.put("hub", config_map("a"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    mc.put("hub", named_policy("second", ["member2"], priority=0, preemption="Always"))
    await r.reconcile(request_for(template))  # not higher: no preemption
    assert mc.find("member2", "ConfigMap", "a", "shop") is None
    edit(mc, "PropagationPolicy", "second", "shop", lambda p: p["spec"].update(priority=5))
    await r.reconcile(request_for(template))
    binding = mc.find("hub", "ResourceBinding", "a-configmap", "shop")
    assert binding is not None and binding["spec"]["policy"] == "PropagationPolicy shop/second"
    assert mc.find("member2", "ConfigMap", "a", "shop") is not None
    assert mc.find("member1", "ConfigMap", "a", "shop") is None


async def test_a_namespaced_policy_preempts_a_cluster_policy_whatever_the_priority() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    cluster_policy = named_policy("everywhere", ["member1"], priority=100)
    cluster_policy["kind"] = "ClusterPropagationPolicy"
    del cluster_policy["metadata"]["namespace"]
    mc.put("hub", cluster_policy)
    template = mc.put("hub", config_map("a"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    mc.put("hub", named_policy("mine", ["member2"], preemption="Always"))
    await r.reconcile(request_for(template))
    binding = mc.find("hub", "ResourceBinding", "a-configmap", "shop")
    assert binding is not None and binding["spec"]["policy"] == "PropagationPolicy shop/mine"


# -- dependentOverrides ------------------------------------------------------------------------


async def test_policy_waits_for_its_dependent_overrides() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", with_spec(duplicated_policy("a", MEMBERS), dependentOverrides=["labels"]))
    template = mc.put("hub", config_map("a"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert member_writes(mc) == []
    scheduled = conditions(mc, "a-configmap")["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "WaitingForOverrides")
    assert "OverridePolicy labels not found in shop" in scheduled["message"]
    mc.put("hub", {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
                   "metadata": {"name": "labels", "namespace": "shop"},
                   "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                            "overrideRules": [{"overriders": {"labelsOverrider": [
                                {"operator": "add", "value": {"env": "prod"}}]}}]}})
    await r.reconcile(request_for(template))
    copy = mc.find("member1", "ConfigMap", "a", "shop")
    assert copy is not None and copy["metadata"]["labels"]["env"] == "prod"


@pytest.mark.parametrize("override_group", ["policy.karmada.io/v1alpha1",
                                            "policy.federation.io/v1alpha1"])
async def test_dependent_overrides_are_found_in_either_group(override_group: str) -> None:
    """A Karmada PropagationPolicy names a Karmada OverridePolicy (the bundle as Karmada
    users write it), or one of ours: either is there, so nothing waits. Against the
    transformer's context, which lists each API group apart as the hub does."""
    policy = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
              "metadata": {"name": "a", "namespace": "shop"},
              "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap",
                                              "name": "a"}],
                       "dependentOverrides": ["labels"]}}
    override = {"apiVersion": override_group, "kind": "OverridePolicy",
                "metadata": {"name": "labels", "namespace": "shop"},
                "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}]}}
    build = Build(template={**config_map("a"), "metadata": {
        "name": "a", "namespace": "shop", "uid": "u1"}}, resource=kube.CONFIGMAPS, hub="hub")
    build.policy = loader.parse_policy(policy, "test")
    await dependent_overrides.wait_for_overrides(
        FakeContext(lists={"OverridePolicy": [override]}), build)
    with pytest.raises(Problem):
        await dependent_overrides.wait_for_overrides(FakeContext(), build)


async def test_a_dependency_placed_by_its_own_policy_is_left_to_it() -> None:
    """app-config has its own policy placing it on member1 only: the workload does not
    write it there (its own reconcile does) but carries it to member2; deleting the
    workload removes only member2's copy."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy(propagateDeps=True))
    mc.put("hub", duplicated_policy("app-config", ["member1"]))
    source = mc.put("hub", config_map("app-config"))
    r = reconciler(mc)
    await r.reconcile(request_for(source))
    template = mc.put("hub", mounting("app-config"))
    before = len(mc.writes)
    await r.reconcile(request_for(template))
    carried = [w[1] for w in mc.writes[before:] if w[2] == "ConfigMap/app-config"]
    assert carried == ["member2"]
    del mc.objects[("hub", "deployments", "shop", "web")]
    await r.reconcile(request_for(template))
    assert mc.find("member1", "ConfigMap", "app-config", "shop") is not None
    assert mc.find("member2", "ConfigMap", "app-config", "shop") is None


async def test_suspension_also_holds_back_dependencies() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy(propagateDeps=True, suspension={"dispatching": True}))
    mc.put("hub", config_map("app-config"))
    template = mc.put("hub", mounting("app-config"))
    await reconciler(mc).reconcile(request_for(template))
    assert member_writes(mc) == []
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None and binding["spec"]["clusters"]  # scheduled all the same


async def test_a_kind_denied_whole_is_never_read_as_a_dependency() -> None:
    """--propagation-deny core/Secret: a mounted Secret stops the workload before the hub's
    Secrets are even read."""
    from federation.controllers.propagation import PropagationSettings
    from federation.hub import deny

    class Watching(FakeMC):
        async def get(self, resource: Any, *args: Any, **kwargs: Any) -> Any:
            assert resource.kind != "Secret", "a denied kind was read"
            return await super().get(resource, *args, **kwargs)

    mc = Watching(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy(propagateDeps=True))
    template = mc.put("hub", deployment(volumes=[{"name": "s", "secret": {"secretName": "db"}}]))
    settings = PropagationSettings(deny_list=deny.DenyList.configured(["core/Secret"]))
    await reconciler(mc, settings).reconcile(request_for(template))
    assert member_writes(mc) == []
    assert conditions(mc, "web-deployment")["Applied"]["reason"] == "DependencyDenied"


async def test_a_suspended_member_that_is_away_is_no_failure() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", with_spec(duplicated_policy("a", MEMBERS),
                            suspension={"dispatchingOnClusters": {"clusterNames": ["member2"]}}))
    template = mc.put("hub", config_map("a"))
    mc.set_down("member2", True)
    assert await reconciler(mc).reconcile(request_for(template)) is None
    assert conditions(mc, "a-configmap")["Applied"]["status"] == "True"


async def test_the_policy_itself_says_another_scheduler_places_it() -> None:
    """policy-validation: Valid (nothing wrong with it) and Scheduled=False,
    SchedulerNotOurs, on the policy."""
    from federation.controllers import policy_validation
    from federation.runtime.reconcile import Request
    from tests.unit.controllers.fakes import FakeRecorder
    from tests.unit.controllers.test_deny import PolicyMC, cluster_policy

    doc = cluster_policy({"apiVersion": "v1", "kind": "ConfigMap"})
    doc["spec"]["schedulerName"] = "gpu-scheduler"
    mc = PolicyMC(doc)
    reconciler = policy_validation.Reconciler(mc, "hub", FakeRecorder())
    request = Request("hub", "ClusterPropagationPolicy.policy.federation.io", "", "all")
    await reconciler.reconcile(request)
    found = {c["type"]: c for c in mc.status.patches[0]["status"]["conditions"]}
    assert found["Valid"]["status"] == "True"
    assert (found["Scheduled"]["status"], found["Scheduled"]["reason"]) == \
        ("False", "SchedulerNotOurs")
    assert policy_validation.foreign_scheduler(
        {**doc, "spec": {"schedulerName": "default-scheduler"}}) is None


async def test_suspension_transformer_drops_writes_and_keeps_deletes() -> None:
    """Against the fake context: for a suspended cluster creates, updates and no-ops leave
    the plan (and edges to them), deletes stay; other clusters are untouched."""
    from federation.contexts.client import CONFIGMAPS
    from federation.controllers.kit import plan
    from federation.controllers.propagation import Build, suspension
    from federation.placement import decision as decision_
    from federation.placement import policy as policy_
    from tests.unit.controllers.fakes import FakeContext

    doc = with_spec(duplicated_policy("a", MEMBERS),
                    suspension={"dispatchingOnClusters": {"clusterNames": ["member2"]}})
    build = Build(template=config_map("a"), resource=CONFIGMAPS, hub="hub")
    build.policy = policy_.Policy.model_validate(doc)
    build.decision = decision_.Decision(replicas=0, clusters={"member1": 0, "member2": 0})
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
    ns2 = build.dag.add(plan.Vertex("member2", plan.Action.CREATE, namespace))
    copy2 = build.dag.add(plan.Vertex("member2", plan.Action.UPDATE, config_map("a")))
    build.dag.depend(copy2, on=ns2)
    build.dag.add(plan.Vertex("member1", plan.Action.CREATE, config_map("a")))
    build.dag.add(plan.Vertex("member2", plan.Action.DELETE, config_map("old")))
    assert await suspension.apply_suspension(FakeContext(), build) is None
    left = sorted((v.cluster, v.action.value, v.obj["metadata"]["name"]) for v in build.dag)
    assert left == [("member1", "create", "a"), ("member2", "delete", "old")]
    build.dag.order()  # no edge to a dropped vertex
    assert build.suspended == ["member2"]
    assert build.record["suspension"] == {"dispatchingOnClusters": {"clusterNames": ["member2"]}}
