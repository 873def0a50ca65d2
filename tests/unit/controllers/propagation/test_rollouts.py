"""Configuration rollouts, the propagation side (:mod:`...propagation.rollouts`): a
governed ConfigMap's update is held per cluster until released, a first copy is not;
governed workloads get the restart stamp per cluster; only a policy of the template's
own namespace counts (the attack: a policy in another namespace naming the same names);
an unparseable policy governs nothing; the oldest of two governs; the wiring requeues
what a policy names."""

from __future__ import annotations

import copy
import types
from typing import Any

from federation.contexts import client as kube
from federation.contexts.cache import Event
from federation.controllers import setup
from federation.controllers.kit import plan
from federation.controllers.propagation import Build, propagate_deps
from federation.controllers.propagation import rollouts as transformer
from federation.hub import manifests, rollouts
from federation.runtime.reconcile import Request
from tests.unit.controllers.fakes import (
    FakeContext,
    FakeKinds,
    FakeMC,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)
from tests.unit.controllers.frozen import freeze

JSON = dict[str, Any]
MEMBERS = ("member1", "member2")
ANNOTATION = rollouts.CONFIG_VERSION_ANNOTATION


def rc_policy(name: str = "app", namespace: str = "shop", config: str = "a",
              workloads: tuple[str, ...] = ("web",), created: str = "2026-01-01T00:00:00Z",
              **clusters: JSON) -> JSON:
    """A ReconfigurePolicy; ``clusters`` gives each cluster's status entry."""
    return {"apiVersion": "config.federation.io/v1alpha1", "kind": "ReconfigurePolicy",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
            "spec": {"configRef": {"kind": "ConfigMap", "name": config},
                     "files": [{"key": "k", "constraintRef": "ini"}],
                     "workloads": [{"kind": "Deployment", "name": w} for w in workloads]},
            "status": {"clusters": [{"name": c, **entry} for c, entry in clusters.items()]}}


def deployment(name: str = "web", namespace: str = "shop", **pod: Any) -> JSON:
    spec = {"containers": [{"name": "app", "image": "nginx"}], **pod}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def deployment_policy(name: str = "web", **fields: Any) -> JSON:
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": name}],
                     "placement": {"clusterAffinity": {"clusterNames": list(MEMBERS)},
                                   "replicaScheduling": {
                                       "replicaSchedulingType": "Duplicated"}},
                     **fields}}


def edit(mc: FakeMC, kind: str, name: str, namespace: str | None, change: Any) -> JSON:
    found = mc.find("hub", kind, name, namespace)
    assert found is not None
    change(found)
    return mc.put("hub", found)


def set_clusters(mc: FakeMC, name: str, namespace: str = "shop", **clusters: JSON) -> None:
    """The rollout controller's status write, by hand."""
    edit(mc, "ReconfigurePolicy", name, namespace, lambda p: p.update(
        status={"clusters": [{"name": c, **e} for c, e in clusters.items()]}))


def data(mc: FakeMC, cluster: str, name: str = "a") -> Any:
    found = mc.find(cluster, "ConfigMap", name, "shop")
    return found["data"] if found is not None else None


def member_writes(mc: FakeMC, since: int) -> list[tuple[str, str, str]]:
    return [w for w in mc.writes[since:] if w[1] != "hub"]


def binding_spec(mc: FakeMC, name: str = "a-configmap") -> JSON:
    found = mc.find("hub", "ResourceBinding", name, "shop")
    assert found is not None
    return dict(found["spec"])


def applied(mc: FakeMC, name: str = "a-configmap") -> JSON:
    found = mc.find("hub", "ResourceBinding", name, "shop")
    assert found is not None
    return next(c for c in found["status"]["conditions"] if c["type"] == "Applied")


async def propagated_config(mc: FakeMC) -> tuple[Any, JSON]:
    """ConfigMap shop/a (k=v1) on both members, before any ReconfigurePolicy."""
    mc.put("hub", duplicated_policy("a", MEMBERS))
    template = mc.put("hub", config_map("a", k="v1"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert data(mc, "member1") == data(mc, "member2") == {"k": "v1"}
    return r, template


def version_of(mc: FakeMC, name: str = "a") -> str:
    found = mc.find("hub", "ConfigMap", name, "shop")
    assert found is not None
    return rollouts.config_version(found)


# -- held config -----------------------------------------------------------------------------


async def test_update_is_held_until_released_per_cluster() -> None:
    """A changed governed ConfigMap reaches no cluster while nothing is released; the
    binding names the held clusters and the policy, Applied does not claim them; releasing
    member1 writes member1 only; releasing member2 too writes it and clears the record."""
    mc = FakeMC(cluster_set(*MEMBERS))
    r, template = await propagated_config(mc)
    mc.put("hub", rc_policy())
    edit(mc, "ConfigMap", "a", "shop", lambda t: t.update(data={"k": "v2"}))
    before = len(mc.writes)
    await r.reconcile(request_for(template))
    assert member_writes(mc, before) == []
    assert data(mc, "member1") == data(mc, "member2") == {"k": "v1"}
    assert binding_spec(mc)["configHeld"] == [
        {"cluster": c, "kind": "ConfigMap", "name": "a", "policy": "app"} for c in MEMBERS]
    message = applied(mc)["message"]
    assert message == "applied to no cluster; held by ReconfigurePolicy: member1 (app), " \
                      "member2 (app)"
    v2 = version_of(mc)
    set_clusters(mc, "app", member1={"releasedVersion": v2})
    before = len(mc.writes)
    await r.reconcile(request_for(template))
    assert [w[1] for w in member_writes(mc, before)] == ["member1"]
    assert data(mc, "member1") == {"k": "v2"} and data(mc, "member2") == {"k": "v1"}
    assert [e["cluster"] for e in binding_spec(mc)["configHeld"]] == ["member2"]
    assert applied(mc)["message"] == "applied to member1; held by ReconfigurePolicy: " \
                                     "member2 (app)"
    set_clusters(mc, "app", member1={"releasedVersion": v2}, member2={"releasedVersion": v2})
    await r.reconcile(request_for(template))
    assert data(mc, "member2") == {"k": "v2"}
    assert "configHeld" not in binding_spec(mc)
    assert applied(mc)["message"] == "applied to member1, member2"


async def test_an_old_release_does_not_release_a_newer_version() -> None:
    """releasedVersion names one version: a cluster released for v2 holds v3."""
    mc = FakeMC(cluster_set(*MEMBERS))
    r, template = await propagated_config(mc)
    mc.put("hub", rc_policy())
    edit(mc, "ConfigMap", "a", "shop", lambda t: t.update(data={"k": "v2"}))
    v2 = version_of(mc)
    set_clusters(mc, "app", member1={"releasedVersion": v2}, member2={"releasedVersion": v2})
    await r.reconcile(request_for(template))
    edit(mc, "ConfigMap", "a", "shop", lambda t: t.update(data={"k": "v3"}))
    before = len(mc.writes)
    await r.reconcile(request_for(template))
    assert member_writes(mc, before) == []
    assert data(mc, "member1") == {"k": "v2"}


async def test_a_first_copy_is_created_without_release() -> None:
    """No copy in a cluster: creating it is no reconfiguration, it goes ahead at once."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", rc_policy())
    mc.put("hub", duplicated_policy("a", MEMBERS))
    template = mc.put("hub", config_map("a", k="v1"))
    await reconciler(mc).reconcile(request_for(template))
    assert data(mc, "member1") == data(mc, "member2") == {"k": "v1"}
    assert "configHeld" not in binding_spec(mc)


async def test_a_deleted_template_still_deletes_held_copies() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    r, template = await propagated_config(mc)
    mc.put("hub", rc_policy())
    edit(mc, "ConfigMap", "a", "shop", lambda t: t.update(data={"k": "v2"}))
    await r.reconcile(request_for(template))
    del mc.objects[("hub", "configmaps", "shop", "a")]
    await r.reconcile(request_for(template))
    assert data(mc, "member1") is None and data(mc, "member2") is None


async def test_a_policy_of_another_namespace_holds_and_stamps_nothing() -> None:
    """The attack: a policy in ``bank`` naming shop's ConfigMap and Deployment names (no
    release, a restart stamp) neither holds shop's ConfigMap nor stamps shop's workload."""
    mc = FakeMC(cluster_set(*MEMBERS))
    r, template = await propagated_config(mc)
    mc.put("hub", rc_policy("evil", "bank", created="2020-01-01T00:00:00Z",
                            member1={"restartVersion": "evil"}))
    edit(mc, "ConfigMap", "a", "shop", lambda t: t.update(data={"k": "v2"}))
    await r.reconcile(request_for(template))
    assert data(mc, "member1") == data(mc, "member2") == {"k": "v2"}
    mc.put("hub", deployment_policy())
    web = mc.put("hub", deployment())
    await r.reconcile(request_for(web))
    copy = mc.find("member1", "Deployment", "web", "shop")
    assert copy is not None
    assert ANNOTATION not in (copy["spec"]["template"]["metadata"].get("annotations") or {})


async def test_an_unparseable_policy_governs_nothing() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    r, template = await propagated_config(mc)
    broken = rc_policy()
    del broken["spec"]["files"]
    mc.put("hub", broken)
    edit(mc, "ConfigMap", "a", "shop", lambda t: t.update(data={"k": "v2"}))
    await r.reconcile(request_for(template))
    assert data(mc, "member1") == data(mc, "member2") == {"k": "v2"}


async def test_of_two_policies_the_oldest_governs() -> None:
    """The older policy's release counts, the newer (a conflict for the rollout
    controller) is ignored: released by the old one is written; the reverse is held."""
    mc = FakeMC(cluster_set(*MEMBERS))
    r, template = await propagated_config(mc)
    edit(mc, "ConfigMap", "a", "shop", lambda t: t.update(data={"k": "v2"}))
    v2 = version_of(mc)
    released = {"releasedVersion": v2}
    mc.put("hub", rc_policy("zz-old", created="2026-01-01T00:00:00Z",
                            member1=released, member2=released))
    mc.put("hub", rc_policy("aa-new", created="2026-02-01T00:00:00Z"))
    await r.reconcile(request_for(template))
    assert data(mc, "member1") == data(mc, "member2") == {"k": "v2"}
    set_clusters(mc, "zz-old")
    set_clusters(mc, "aa-new", member1=released, member2=released)
    edit(mc, "ConfigMap", "a", "shop", lambda t: t.update(data={"k": "v3"}))
    await r.reconcile(request_for(template))
    assert data(mc, "member1") == {"k": "v2"}
    assert {e["policy"] for e in binding_spec(mc)["configHeld"]} == {"zz-old"}


async def test_a_config_carried_by_propagate_deps_is_held_too() -> None:
    """The carrier is no way around the rollout: the workload's reconcile holds the
    governed ConfigMap it carries where it is not released."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy(propagateDeps=True))
    mc.put("hub", config_map("cfg", k="v1"))
    web = mc.put("hub", deployment(volumes=[{"name": "c", "configMap": {"name": "cfg"}}]))
    r = reconciler(mc)
    await r.reconcile(request_for(web))
    assert data(mc, "member1", "cfg") == data(mc, "member2", "cfg") == {"k": "v1"}
    edit(mc, "ConfigMap", "cfg", "shop", lambda t: t.update(data={"k": "v2"}))
    mc.put("hub", rc_policy(config="cfg", member1={"releasedVersion": version_of(mc, "cfg")}))
    await r.reconcile(request_for(web))
    assert data(mc, "member1", "cfg") == {"k": "v2"}
    assert data(mc, "member2", "cfg") == {"k": "v1"}
    assert binding_spec(mc, "web-deployment")["configHeld"] == [
        {"cluster": "member2", "kind": "ConfigMap", "name": "cfg", "policy": "app"}]


# -- restart stamps --------------------------------------------------------------------------


async def test_restart_version_is_stamped_per_cluster() -> None:
    """Only the cluster with a restartVersion gets the pod-template annotation; changing
    it rewrites that cluster's copy only; the hub template is untouched."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy())
    mc.put("hub", rc_policy(member1={"restartVersion": "r1"}))
    web = mc.put("hub", deployment())
    r = reconciler(mc)
    await r.reconcile(request_for(web))

    def stamp(cluster: str) -> str | None:
        found = mc.find(cluster, "Deployment", "web", "shop")
        assert found is not None
        return (found["spec"]["template"]["metadata"].get("annotations") or {}).get(ANNOTATION)

    assert (stamp("member1"), stamp("member2")) == ("r1", None)
    set_clusters(mc, "app", member1={"restartVersion": "r2"})
    before = len(mc.writes)
    await r.reconcile(request_for(web))
    assert [w[1] for w in member_writes(mc, before)] == ["member1"]
    assert (stamp("member1"), stamp("member2")) == ("r2", None)
    hub = mc.find("hub", "Deployment", "web", "shop")
    assert hub is not None and "annotations" not in hub["spec"]["template"]["metadata"]


def test_stamped_copies_only_the_path_and_marks_again() -> None:
    """The shared pod spec is not copied or changed, nor is the input; the applied hash
    covers the stamp."""
    shared = freeze(deployment())
    desired = manifests.mark(manifests.render(shared, None, False), "u1")
    before = copy.deepcopy(desired)
    result = transformer.stamped(desired, "v9", "u1")
    assert desired == before  # a new manifest: the input is not changed
    assert result["spec"]["template"]["spec"] is shared["spec"]["template"]["spec"]
    assert result["spec"]["template"]["metadata"]["annotations"] == {ANNOTATION: "v9"}
    assert manifests.needs_write(result, desired) == "content changed"


async def test_cluster_scoped_and_other_kinds_are_never_governed() -> None:
    """A template without a namespace lists no policy, nor does a kind no policy can name
    (a policy of any namespace naming the same name changes nothing)."""
    policy = rc_policy(config="a", workloads=("a",), member1={"restartVersion": "x"})
    ctx = FakeContext(lists={"ReconfigurePolicy": [policy]})
    template = {**deployment("a"), "metadata": {"name": "a", "uid": "u1"}}
    b = Build(template=freeze(template), resource=kube.DEPLOYMENTS, hub="hub")
    b.desired = {"member1": manifests.mark(manifests.render(template, None, False), "u1")}
    before = dict(b.desired)
    assert await transformer.stamp_restarts(ctx, b) is None
    assert b.desired == before
    vertex = plan.Vertex("member1", plan.Action.UPDATE,
                         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
    b.dag.add(vertex)
    assert await transformer.hold_config(ctx, b) is None
    assert next(iter(b.dag)).action is plan.Action.UPDATE and b.record["configHeld"] is None
    other = Build(template=freeze(config_map("a")), resource=kube.NAMESPACES, hub="hub")
    assert await transformer.stamp_restarts(ctx, other) is None


# -- the wiring ------------------------------------------------------------------------------


def wiring() -> setup.Wiring:
    found = setup.Wiring.__new__(setup.Wiring)
    found.kinds = FakeKinds()  # type: ignore[assignment]
    found.mgr = types.SimpleNamespace(
        clusters=types.SimpleNamespace(hub=types.SimpleNamespace(name="hub")))
    found.dependents = propagate_deps.Dependents()
    return found


def test_a_policy_event_requeues_what_it_names_before_and_after() -> None:
    """Config and workloads of the new and the old version, and the workloads carrying
    the config; a kind nobody follows (StatefulSet here) is not requeued; a status change
    counts like any change; the first list requeues nothing (everything reconciles)."""
    w = wiring()
    w.dependents.binding_changed({
        "metadata": {"name": "api-deployment", "namespace": "shop"},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
                 "dependencies": ["ConfigMap/a"]}}, deleted=False)
    new = rc_policy(member1={"releasedVersion": "v2"})
    new["spec"]["workloads"].append({"kind": "StatefulSet", "name": "db"})
    old = rc_policy(config="b")
    event = Event("MODIFIED", "hub", rollouts.RECONFIGURE_POLICIES, obj=new, old=old)
    assert set(w.on_reconfigure(event)) == {
        Request("hub", "ConfigMap", "shop", "a"), Request("hub", "ConfigMap", "shop", "b"),
        Request("hub", "Deployment.apps", "shop", "web"),
        Request("hub", "Deployment.apps", "shop", "api")}
    broken = rc_policy(config="b")
    del broken["spec"]["files"]
    deleted = Event("DELETED", "hub", rollouts.RECONFIGURE_POLICIES, obj=broken)
    assert list(w.on_reconfigure(deleted)) == []
    initial = Event("ADDED", "hub", rollouts.RECONFIGURE_POLICIES, obj=new, initial=True)
    assert list(w.on_reconfigure(initial)) == []
