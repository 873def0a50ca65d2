"""The fast path (:mod:`federation.controllers.propagation.fastpath`): a settled template's
next reconcile stops when nothing it reads changed; each input changed in turn runs the
full reconcile (and that one does what it must: repair, update); a round that is not
settled leaves no fingerprint; a fingerprint a tenant wrote is not taken."""

from __future__ import annotations

import base64
import contextlib
import json
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from federation.contexts.client import ClientError
from federation.controllers import propagation
from federation.controllers.propagation import fastpath
from federation.placement import engine
from federation.placement import policy as policy_
from federation.placement import resources as resources_
from federation.placement.clusters import Cluster
from tests.unit.controllers.fakes import (
    KINDS,
    MEMBERS,
    FakeMC,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)
from tests.unit.controllers.propagation.test_render import override

JSON = dict[str, Any]
SUMMARY = {"allocatable": {"cpu": "8", "memory": "0", "pods": "110"},
           "allocated": {"cpu": "1", "memory": "0", "pods": "0"}}


def member_cluster(name: str, **labels: str) -> JSON:
    return {"apiVersion": "cluster.federation.io/v1alpha1", "kind": "MemberCluster",
            "metadata": {"name": name, "labels": labels}, "spec": {"region": "eu"},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                                       "message": "probe answered"}],
                       "resourceSummary": SUMMARY}}


async def settled_fleet() -> tuple[FakeMC, propagation.Reconciler]:
    """ConfigMap ``a`` propagated to every member by a Duplicated policy."""
    mc = FakeMC(cluster_set(*MEMBERS))
    for name in MEMBERS:
        mc.put("hub", member_cluster(name))
    mc.put("hub", duplicated_policy("a", MEMBERS))
    r = reconciler(mc)
    assert await r.reconcile(request_for(mc.put("hub", config_map("a")))) is None
    assert r.unchanged == 0
    return mc, r


async def again(mc: FakeMC, r: propagation.Reconciler) -> bool:
    """Reconcile ``a`` once more: True when it took the fast path."""
    before = r.unchanged
    template = mc.find("hub", "ConfigMap", "a", "shop")
    assert template is not None
    with contextlib.suppress(ClientError):  # a member away: the queue retries it
        await r.reconcile(request_for(template))
    return r.unchanged == before + 1


def binding(mc: FakeMC) -> JSON:
    found = mc.find("hub", "ResourceBinding", "a-configmap", "shop")
    assert found is not None
    return found


def edit(mc: FakeMC, cluster: str, kind: str, name: str, namespace: str | None,
         change: Callable[[JSON], None]) -> JSON:
    found = mc.find(cluster, kind, name, namespace)
    assert found is not None
    change(found)
    return mc.put(cluster, found)


async def test_unchanged_template_stops_before_the_chain_and_writes_nothing() -> None:
    mc, r = await settled_fleet()
    assert fastpath.ANNOTATION in binding(mc)["metadata"]["annotations"]
    writes = len(mc.writes)
    assert await again(mc, r)
    assert await again(mc, r)
    assert len(mc.writes) == writes


async def test_a_new_reconciler_with_the_same_code_and_settings_takes_it_too() -> None:
    """A cold restart: the fingerprint is on the binding, not in the process."""
    mc, _ = await settled_fleet()
    assert await again(mc, reconciler(mc))


async def test_drift_on_a_member_is_repaired() -> None:
    mc, r = await settled_fleet()
    edit(mc, "member2", "ConfigMap", "a", "shop", lambda c: c.update(data={"k": "drift"}))
    assert not await again(mc, r)
    copy = mc.find("member2", "ConfigMap", "a", "shop")
    assert copy is not None and copy["data"] == {"k": "v"}
    assert await again(mc, r)  # the repair left a fingerprint of the repaired copy


async def test_a_deleted_copy_is_created_again() -> None:
    mc, r = await settled_fleet()
    del mc.objects[("member3", "configmaps", "shop", "a")]
    assert not await again(mc, r)
    assert mc.find("member3", "ConfigMap", "a", "shop") is not None


async def test_a_changed_template_is_propagated() -> None:
    mc, r = await settled_fleet()
    edit(mc, "hub", "ConfigMap", "a", "shop", lambda c: c.update(data={"k": "new"}))
    assert not await again(mc, r)
    assert all((mc.find(m, "ConfigMap", "a", "shop") or {}).get("data") == {"k": "new"}
               for m in MEMBERS)


@pytest.mark.parametrize("change", [
    "policy", "new override", "cluster override", "member labels", "member condition",
    "member gone", "customization", "binding", "member down", "settings", "code",
])
async def test_each_input_changed_runs_the_full_reconcile(change: str) -> None:
    mc, r = await settled_fleet()
    full_again = change_input(mc, r, change)
    assert not await again(mc, full_again or r)


def change_input(mc: FakeMC, r: propagation.Reconciler, change: str
                 ) -> propagation.Reconciler | None:
    """Change one input of ``a``'s reconcile; a reconciler to use instead, if any."""
    if change == "policy":
        edit(mc, "hub", "PropagationPolicy", "a", "shop",
             lambda p: p["spec"]["placement"]["clusterAffinity"].update(
                 clusterNames=["member1"]))
    elif change == "new override":
        mc.put("hub", override("OverridePolicy", "o", [
            {"path": "/data/extra", "operator": "add", "value": "1"}]))
    elif change == "cluster override":
        mc.put("hub", override("ClusterOverridePolicy", "co", [
            {"path": "/data/extra", "operator": "add", "value": "1"}], namespace=None))
    elif change == "member labels":
        edit(mc, "hub", "MemberCluster", "member1", None,
             lambda m: m["metadata"].update(labels={"tier": "gold"}))
    elif change == "member condition":
        edit(mc, "hub", "MemberCluster", "member1", None,
             lambda m: m["status"].update(conditions=[{"type": "Ready", "status": "False"}]))
    elif change == "member gone":
        del mc.objects[("hub", "memberclusters", "", "member3")]
    elif change == "customization":
        mc.put("hub", {"apiVersion": "config.karmada.io/v1alpha1",
                       "kind": "ResourceInterpreterCustomization",
                       "metadata": {"name": "c"}, "spec": {
                           "target": {"apiVersion": "v1", "kind": "Secret"},
                           "customizations": {}}})
    elif change == "binding":
        edit(mc, "hub", "ResourceBinding", "a-configmap", "shop",
             lambda b: b["spec"].update(rescheduleTriggeredAt="2026-11-27T00:00:00Z"))
    elif change == "member down":
        mc.set_down("member2", True)
    elif change == "settings":
        return reconciler(mc, propagation.PropagationSettings(retry_pending=7.0))
    elif change == "code":
        fresh = reconciler(mc)
        fresh.static = fastpath.static_value(fresh.settings, "another build")
        return fresh
    return None


async def test_a_capacity_refresh_keeps_a_duplicated_template_on_the_fast_path() -> None:
    """The health controller rewrites summaries and condition messages every few seconds:
    neither can change a Duplicated placement."""
    mc, r = await settled_fleet()
    edit(mc, "hub", "MemberCluster", "member1", None, lambda m: m["status"].update(
        resourceSummary={**SUMMARY, "allocated": {"cpu": "3", "memory": "0", "pods": "4"}},
        conditions=[{"type": "Ready", "status": "True", "message": "probe answered again"}]))
    assert await again(mc, r)


def test_room_matters_only_where_the_engine_reads_it() -> None:
    """Duplicated ignores availableReplicas (as the fast path assumes); Divided does not."""
    resource = resources_.Resource(api_version="apps/v1", kind="Deployment", name="w",
                                   namespace="shop", uid="u", replicas=6)

    def placed(placement: JSON, rooms: list[int]) -> dict[str, int]:
        policy = policy_.Policy.model_validate({
            "apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "p", "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                     "placement": placement}})
        clusters = [Cluster(name=m, available_replicas=room)
                    for m, room in zip(MEMBERS, rooms, strict=True)]
        return dict(engine.place(resource, policy, clusters).clusters)

    duplicated: JSON = {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    divided: JSON = {"replicaScheduling": {
        "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
        "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}
    assert placed(duplicated, [1, 2, 3]) == placed(duplicated, [9, 0, 4])
    assert placed(divided, [1, 2, 3]) != placed(divided, [9, 0, 4])
    parse = policy_.Placement.model_validate
    assert not engine.room_matters(parse(duplicated))
    assert engine.room_matters(parse(divided))


async def test_a_round_that_is_not_settled_leaves_no_fingerprint() -> None:
    """member2 away: the copy there failed, so the binding says so without a fingerprint,
    and the next reconcile (member2 back) is a full one that writes the copy."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("a", MEMBERS))
    mc.set_down("member2", True)
    r = reconciler(mc)
    template = mc.put("hub", config_map("a"))
    with contextlib.suppress(ClientError):  # the copy failed: the queue retries it
        await r.reconcile(request_for(template))
    assert fastpath.ANNOTATION not in (binding(mc)["metadata"].get("annotations") or {})
    mc.set_down("member2", False)
    assert not await again(mc, r)
    assert mc.find("member2", "ConfigMap", "a", "shop") is not None
    assert await again(mc, r)


def forged(keys: list[list[str]], value: str = "0" * 32, checks: list[str] | None = None
           ) -> str:
    body = json.dumps({"k": keys, "r": False, "d": value,
                       "c": ["0" * 8] * len(keys) if checks is None else checks}).encode()
    return f"{fastpath.FORMAT}.{base64.b64encode(zlib.compress(body)).decode()}"


@pytest.mark.parametrize("annotation", [
    "f1.not base64!", "f0.eJwDAAAAAAE=", forged([["get", "hub", "x/v1/secrets/Secret/1",
                                                  "shop", "s"]]),
    forged([["list", "policy.federation.io/v1alpha1/propagationpolicies/PropagationPolicy/1",
             "other"]]),
    forged([["get", "member1", "scheduling.k8s.io/v1/priorityclasses/PriorityClass/0", "",
             "high"]]),
    forged([["copy", "hub", "/v1/configmaps/ConfigMap/1", "shop", "a"]]),
    forged([["get", "nowhere", "/v1/configmaps/ConfigMap/1", "shop", "a"]]),
    "f1." + base64.b64encode(zlib.compress(b"[" * 70000)).decode()[:9000],
    forged([["members"], ["clusters"]], checks=["0" * 8]),  # a check short
])
async def test_a_fingerprint_we_would_not_write_is_not_taken(annotation: str) -> None:
    mc, r = await settled_fleet()
    edit(mc, "hub", "ResourceBinding", "a-configmap", "shop",
         lambda b: b["metadata"]["annotations"].update({fastpath.ANNOTATION: annotation}))
    assert not await again(mc, r)


async def test_a_forged_fingerprint_leaving_out_the_policies_is_not_taken() -> None:
    """A tenant who may write bindings computes a digest of what it can read (the template
    and the binding) and lists only those: what administrators control (cluster-scoped
    policies, member copies) is required, so the fast path does not take it."""
    mc, r = await settled_fleet()
    template = mc.find("hub", "ConfigMap", "a", "shop")
    assert template is not None
    resource = r.kinds.resource("ConfigMap")
    assert resource is not None
    key = fastpath.template_key("hub", resource, "shop", "a")
    value = fastpath.digest([r.static, fastpath.record_value(binding(mc)),
                             [[list(key), fastpath.version(template)]]])
    edit(mc, "hub", "ResourceBinding", "a-configmap", "shop",
         lambda b: b["metadata"]["annotations"].update(
             {fastpath.ANNOTATION: forged([list(key)], value,
                                          [fastpath.check(fastpath.version(template))])}))
    assert not await again(mc, r)


class ListsRefused:
    """A context whose lists fail the test: :func:`fastpath.unchanged` must not get there."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def list(self, *args: Any) -> Any:
        raise AssertionError("listed after a changed copy")


async def test_a_changed_copy_stops_the_comparison_before_any_list() -> None:
    """The copies are compared first, each by its short check: a burst's status round
    (every copy's status moved) reads no policy, override or customization list."""
    mc, r = await settled_fleet()
    resource = r.kinds.resource("ConfigMap")
    assert resource is not None
    edit(mc, "member2", "ConfigMap", "a", "shop", lambda c: c.update(data={"k": "drift"}))
    assert not await fastpath.unchanged(ListsRefused(r.context), binding(mc), resource,
                                        "shop", "a", r.static)


def divided_deployment_policy(clusters: list[str]) -> JSON:
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                     "placement": {"clusterAffinity": {"clusterNames": clusters},
                                   "replicaScheduling": {"replicaSchedulingType": "Divided"}}}}


async def test_unjoin_taint_then_delete_keeps_the_replicas_moved() -> None:
    """``fedctl unjoin``: the joined member is tainted NoExecute (its replica moves to
    member1, its copy goes), then its MemberCluster is deleted while the ClusterSet still
    has it (membership has not seen the delete). The round that delete wakes must not
    divide a replica back to it (found by tests/e2e/test_join.py with the fast path)."""
    mc = FakeMC(cluster_set("member1", "member2"))
    mc.clusters.get("member2").joined = True
    for name in ("member1", "member2"):
        mc.put("hub", member_cluster(name))
    mc.put("hub", divided_deployment_policy(["member2", "member1"]))
    web = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "w"}},
                    "template": {"metadata": {"labels": {"app": "w"}},
                                 "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    r = reconciler(mc)

    def replicas(member: str) -> int | None:
        found = mc.find(member, "Deployment", "web", "shop")
        return None if found is None else int(found["spec"]["replicas"])

    async def reconcile() -> None:
        template = mc.find("hub", "Deployment", "web", "shop")
        assert template is not None
        await r.reconcile(request_for(template))

    mc.put("hub", web)
    await reconcile()
    assert (replicas("member1"), replicas("member2")) == (1, 1)
    edit(mc, "hub", "MemberCluster", "member2", None, lambda d: d["spec"].update(
        taints=[{"key": "cluster.federation.io/unjoining", "effect": "NoExecute"}]))
    await reconcile()
    assert (replicas("member1"), replicas("member2")) == (2, None)
    del mc.objects[mc._key("hub", KINDS["MemberCluster"], None, "member2")]
    await reconcile()
    await reconcile()
    assert replicas("member1") == 2
