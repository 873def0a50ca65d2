"""Transformer: the namespace of a namespaced template, and the CRD of a custom resource,
created first in each member that lacks them. Several templates may create the same one
at once: a 409 AlreadyExists on such a shared create is success (see the executor)."""

from __future__ import annotations

from federation.contexts.client import NAMESPACES, ClientError
from federation.controllers.kit import plan
from federation.controllers.kit.chain import Verdict
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.hub import api, manifests


async def plan_dependencies(ctx: TransformContext, build: Build) -> Verdict | None:
    for cluster in build.desired:
        if build.namespace:
            await _namespace_vertex(ctx, build, cluster)
        await _crd_vertex(ctx, build, cluster)
    return None


async def _namespace_vertex(ctx: TransformContext, build: Build, cluster: str) -> None:
    try:
        live = await ctx.get(NAMESPACES, str(build.namespace), None, cluster)
    except ClientError as exc:
        build.note_unreachable(cluster, exc)
        return
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": build.namespace,
                              "labels": {"federation.io/created-for": "propagation"}}}
    vertex = build.dag.add(plan.Vertex(cluster, plan.Action.NOOP if live else plan.Action.CREATE,
                                       namespace, reason="namespace of a propagated object"))
    build.shared.add(vertex.key)


async def _crd_vertex(ctx: TransformContext, build: Build, cluster: str) -> None:
    group = build.resource.group
    if not group or build.resource.kind == "CustomResourceDefinition":
        return
    crd_name = f"{build.resource.plural}.{group}"
    hub_crd = await ctx.get(api.CRDS, crd_name, None, ctx.hub)
    if hub_crd is None:
        return  # a built-in kind (or an aggregated API): nothing to propagate
    try:
        live = await ctx.get(api.CRDS, crd_name, None, cluster)
    except ClientError as exc:
        build.note_unreachable(cluster, exc)
        return
    if live is not None:
        return
    desired = manifests.mark(manifests.render(hub_crd, None, False),
                             str(hub_crd["metadata"].get("uid")))
    vertex = build.dag.add(plan.Vertex(cluster, plan.Action.CREATE, desired,
                                       reason=f"CRD of {build.resource.kind}"))
    build.shared.add(vertex.key)
