"""The copies transformer: create / update / nothing per cluster against the member's
copy; a foreign object is a conflict; unreadable members are noted, not guessed."""

from __future__ import annotations

from federation.contexts import client as kube
from federation.controllers import propagation
from federation.controllers.kit import plan
from federation.controllers.propagation.copies import plan_copies
from federation.hub import manifests
from federation.placement import loader
from tests.unit.controllers.fakes import (
    JSON,
    FakeContext,
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
    edit,
)


def desired(uid: str = "u1") -> JSON:
    return manifests.mark(manifests.render(config_map("a"), None, False), uid)


def build(*clusters: str, overwrite: bool = False) -> propagation.Build:
    template = {**config_map("a"), "metadata": {"name": "a", "namespace": "shop",
                                                "uid": "u1"}}
    found = propagation.Build(template=template, resource=kube.CONFIGMAPS, hub="hub")
    policy = duplicated_policy("a", clusters)
    if overwrite:
        policy["spec"]["conflictResolution"] = "Overwrite"
    found.policy = loader.parse_policy(policy, "test")
    found.desired = {c: desired() for c in clusters}
    return found


async def test_foreign_object_is_a_conflict_with_a_hint() -> None:
    """Someone else's ConfigMap: no vertex, a conflict message naming the object and the
    way to take it over."""
    ctx = FakeContext(copies={"member1": config_map("a", data="theirs")})
    b = build("member1")
    await plan_copies(ctx, b)
    assert len(b.dag) == 0
    assert b.conflicts == {"member1": "ConfigMap shop/a exists and is not managed by "
                           "federation (set conflictResolution: Overwrite in the policy "
                           "to take it over)"}


def placed_by_application() -> JSON:
    placed = manifests.mark(manifests.render(config_map("a", data="app's"), None, False), "a1")
    placed["metadata"]["annotations"][manifests.APPLICATION_ANNOTATION] = "shop/store"
    return placed


async def test_an_applications_object_is_a_conflict_naming_it() -> None:
    """Marked ours, but by an Application: not a copy of this template, so not updated
    (the two would rewrite it in turn for ever)."""
    ctx = FakeContext(copies={"member1": placed_by_application()})
    b = build("member1")
    await plan_copies(ctx, b)
    assert len(b.dag) == 0
    assert "exists and was placed by Application shop/store" in b.conflicts["member1"]


async def test_overwrite_takes_an_applications_object_over() -> None:
    ctx = FakeContext(copies={"member1": placed_by_application()})
    b = build("member1", overwrite=True)
    await plan_copies(ctx, b)
    (vertex,) = list(b.dag)
    assert vertex.action is plan.Action.UPDATE and vertex.reason == "taking over"
    assert manifests.APPLICATION_ANNOTATION not in vertex.obj["metadata"]["annotations"]


async def test_overwrite_policy_takes_a_foreign_object_over() -> None:
    """conflictResolution: Overwrite turns the conflict into an update with the template's
    identity for the executor to check."""
    ctx = FakeContext(copies={"member1": config_map("a", data="theirs")})
    b = build("member1", overwrite=True)
    await plan_copies(ctx, b)
    (vertex,) = list(b.dag)
    assert vertex.action is plan.Action.UPDATE and vertex.reason == "taking over"
    assert vertex.expect == plan.Identity.of(b.template)
    assert not b.conflicts


async def test_unreadable_member_is_noted_and_already_unreachable_is_skipped() -> None:
    """A member whose copy cannot be read is unreachable (with its cause); one noted
    unreachable earlier (by dependencies) is not read again; neither gets a vertex."""
    ctx = FakeContext()
    ctx.down.add("member2")
    b = build("member1", "member2", "member3")
    b.note_unreachable("member3", kube.ClusterUnavailable("member3", "gone"))
    await plan_copies(ctx, b)
    assert [v.cluster for v in b.dag] == ["member1"]
    assert set(b.unreachable) == {"member2", "member3"}
    assert "member2" not in b.live and "member3" not in b.live


async def test_copy_waits_for_its_namespace_and_crd_in_the_same_cluster() -> None:
    """The copy depends on the dependency vertices of its own cluster, not another's."""
    ctx = FakeContext()
    b = build("member1", "member2")
    namespaces = {c: b.dag.add(plan.Vertex(c, plan.Action.CREATE, {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}))
        for c in ("member1", "member2")}
    crd = b.dag.add(plan.Vertex("member1", plan.Action.CREATE, {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"}}))
    await plan_copies(ctx, b)
    copy1 = next(v for v in b.dag if v.cluster == "member1" and v.obj["kind"] == "ConfigMap")
    copy2 = next(v for v in b.dag if v.cluster == "member2" and v.obj["kind"] == "ConfigMap")
    assert copy1.depends_on == {namespaces["member1"].key, crd.key}
    assert copy2.depends_on == {namespaces["member2"].key}


def test_a_fenced_copy_ends_the_reconcile_as_not_leader() -> None:
    """A copy the fence refused (this process no longer leads) surfaces as the fence's own
    NotLeader, which the controller does not retry, even beside another cluster's outage."""
    b = build("member1", "member2")
    refused = kube.NotLeader("member1", "PUT refused, not sent")
    b.note_unreachable("member1", refused)
    b.note_unreachable("member2", kube.ClusterUnavailable("member2", "gone"))
    assert propagation.copies_failed(b, plan.Report({}), "hub") is refused
    b.causes.pop("member1")
    b.unreachable.pop("member1")
    assert isinstance(propagation.copies_failed(b, plan.Report({}), "hub"),
                      kube.ClusterUnavailable)


async def test_an_applications_object_is_never_deleted_when_the_template_leaves() -> None:
    """Called a conflict while placed, so not deleted when the template's policy narrows
    away from that cluster either (the removal checks who placed it, as the copy does)."""
    mc = FakeMC(cluster_set("member1", "member2"))
    placed = deployment()
    placed["metadata"]["annotations"] = {manifests.APPLICATION_ANNOTATION: "shop/myapp"}
    mc.put("member2", manifests.mark(placed, "app-uid"))
    mc.put("hub", deployment_policy())
    template = mc.put("hub", deployment())
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    edit(mc, "PropagationPolicy", "web", "shop", lambda p: p["spec"].update(
        placement={"clusterAffinity": {"clusterNames": ["member1"]}}))
    await r.reconcile(request_for(template))
    left = mc.find("member2", "Deployment", "web", "shop")
    assert left is not None and manifests.application_of(left) == "shop/myapp"
