"""The dependencies transformer: a member lacking the template's Namespace or CRD gets it
created first, as a shared create; an unreadable member is noted, never assumed empty."""

from __future__ import annotations

from typing import Any

from federation.contexts import client as kube
from federation.contexts.cache import ReadOnly
from federation.contexts.client import Resource
from federation.controllers import propagation
from federation.controllers.kit import plan
from federation.controllers.propagation.dependencies import plan_dependencies
from federation.hub import api, manifests
from tests.unit.controllers.fakes import JSON, FakeContext, config_map

WIDGETS = Resource("example.com", "v1", "widgets", "Widget")
CLUSTER_WIDGETS = Resource("example.com", "v1", "clusterwidgets", "ClusterWidget",
                           namespaced=False)


class MemberContext(FakeContext):
    """:class:`FakeContext` whose gets answer per cluster: the hub from ``lists``, each
    member from its own objects by kind."""

    def __init__(self, hub: dict[str, list[JSON]], members: dict[str, dict[str, list[JSON]]]
                 ) -> None:
        super().__init__(lists=hub, members=tuple(members))
        self.member_objects = members

    async def get(self, resource: Resource, name: str, namespace: str | None,
                  cluster: str) -> ReadOnly | None:
        if cluster == self.hub or cluster in self.down:
            return await super().get(resource, name, namespace, cluster)
        return next((o for o in self.member_objects[cluster].get(resource.kind, [])
                     if o["metadata"]["name"] == name
                     and o["metadata"].get("namespace") == namespace), None)


def namespace(name: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def crd(plural: str = "widgets") -> JSON:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.example.com", "uid": "crd-uid",
                         "resourceVersion": "9"},
            "spec": {"group": "example.com"}, "status": {"acceptedNames": {}}}


def widget(kind: str = "Widget", ns: str | None = "shop") -> JSON:
    meta: dict[str, Any] = {"name": "w", "uid": "u1"}
    if ns:
        meta["namespace"] = ns
    return {"apiVersion": "example.com/v1", "kind": kind, "metadata": meta}


def build(template: JSON, resource: Resource, *clusters: str) -> propagation.Build:
    found = propagation.Build(template=template, resource=resource, hub="hub")
    found.desired = {c: {} for c in clusters}
    return found


def actions(b: propagation.Build) -> dict[tuple[str, str], plan.Action]:
    return {(v.cluster, str(v.obj["kind"])): v.action for v in b.dag}


async def test_missing_namespace_is_created_and_present_one_is_a_noop() -> None:
    """member1 lacks the namespace: a labelled create; member2 has it: nothing to write.
    Both are shared keys, so another template's concurrent create is not a failure."""
    ctx = MemberContext({}, {"member1": {}, "member2": {"Namespace": [namespace("shop")]}})
    b = build(config_map("a"), kube.CONFIGMAPS, "member1", "member2")
    assert await plan_dependencies(ctx, b) is None
    assert actions(b) == {("member1", "Namespace"): plan.Action.CREATE,
                          ("member2", "Namespace"): plan.Action.NOOP}
    created = next(v for v in b.dag if v.cluster == "member1")
    assert created.obj["metadata"] == {"name": "shop", "labels": {
        "federation.io/created-for": "propagation"}}
    assert b.shared == {v.key for v in b.dag}


async def test_cluster_scoped_built_in_template_needs_nothing() -> None:
    """A cluster-scoped object of a core group: no namespace, no CRD, no vertex."""
    ctx = MemberContext({}, {"member1": {}})
    b = build(namespace("shop"), kube.NAMESPACES, "member1")
    await plan_dependencies(ctx, b)
    assert len(b.dag) == 0 and not b.unreachable


async def test_unreadable_member_is_noted_and_gets_no_namespace_vertex() -> None:
    """member2 cannot be read: it is recorded as unreachable with its cause, and no
    create is planned on a guess; member1 proceeds."""
    ctx = MemberContext({}, {"member1": {}, "member2": {}})
    ctx.down.add("member2")
    b = build(config_map("a"), kube.CONFIGMAPS, "member1", "member2")
    await plan_dependencies(ctx, b)
    assert set(actions(b)) == {("member1", "Namespace")}
    assert "member2" in b.unreachable
    assert isinstance(b.causes["member2"], kube.ClusterUnavailable)


async def test_custom_resource_brings_its_crd_before_it() -> None:
    """The hub's CRD, rendered without server fields and marked ours, is created in a
    member that lacks it, as a shared create."""
    ctx = MemberContext({"CustomResourceDefinition": [crd()]},
                        {"member1": {"Namespace": [namespace("shop")]}})
    b = build(widget(), WIDGETS, "member1")
    await plan_dependencies(ctx, b)
    vertex = next(v for v in b.dag if v.obj["kind"] == "CustomResourceDefinition")
    assert vertex.action is plan.Action.CREATE and vertex.key in b.shared
    meta = vertex.obj["metadata"]
    assert meta["name"] == "widgets.example.com"
    assert "uid" not in meta and "resourceVersion" not in meta and "status" not in vertex.obj
    assert manifests.is_ours(vertex.obj)
    assert meta["annotations"][manifests.TEMPLATE_UID_ANNOTATION] == "crd-uid"


async def test_crd_already_in_the_member_is_not_planned() -> None:
    """A member that serves the CRD already gets no CRD vertex at all (not even a noop)."""
    ctx = MemberContext({"CustomResourceDefinition": [crd("clusterwidgets")]},
                        {"member1": {"CustomResourceDefinition": [crd("clusterwidgets")]}})
    b = build(widget("ClusterWidget", None), CLUSTER_WIDGETS, "member1")
    await plan_dependencies(ctx, b)
    assert len(b.dag) == 0


async def test_group_without_a_hub_crd_is_treated_as_built_in() -> None:
    """A grouped kind with no CRD on the hub (apps, an aggregated API): nothing to copy."""
    ctx = MemberContext({}, {"member1": {"Namespace": [namespace("shop")]}})
    b = build(widget(), WIDGETS, "member1")
    await plan_dependencies(ctx, b)
    assert actions(b) == {("member1", "Namespace"): plan.Action.NOOP}


async def test_a_crd_template_does_not_depend_on_itself() -> None:
    """Propagating a CustomResourceDefinition plans no CRD of its own kind first."""
    ctx = MemberContext({"CustomResourceDefinition": [crd()]}, {"member1": {}})
    b = build(crd(), api.CRDS, "member1")
    await plan_dependencies(ctx, b)
    assert len(b.dag) == 0


async def test_member_unreadable_for_the_crd_is_noted() -> None:
    """The hub has the CRD but the member cannot be read: unreachable, no create."""
    ctx = MemberContext({"CustomResourceDefinition": [crd("clusterwidgets")]}, {"member1": {}})
    ctx.down.add("member1")
    b = build(widget("ClusterWidget", None), CLUSTER_WIDGETS, "member1")
    await plan_dependencies(ctx, b)
    assert len(b.dag) == 0 and "member1" in b.unreachable
