"""Transformer: copies on clusters that held the template before (its recorded decision and
pending clean-up, inherited ones included) and are not chosen now are deleted; an
unreachable one stays pending and is retried."""

from __future__ import annotations

from federation.contexts.client import ClientError
from federation.controllers.kit import plan
from federation.controllers.kit.chain import Verdict
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.hub import manifests


async def plan_removals(ctx: TransformContext, build: Build) -> Verdict | None:
    holders = set(build.previous) | set(build.pending_before)
    known = {m.name for m in ctx.members()}
    for cluster in sorted(holders - set(build.targets)):
        if cluster not in known:
            continue
        build.removals.append(cluster)
        vertex = await delete_vertex(ctx, build, cluster)
        if vertex is not None:
            build.dag.add(vertex)
    return None


async def delete_vertex(ctx: TransformContext, build: Build, cluster: str
                        ) -> plan.Vertex | None:
    """A delete of our copy in ``cluster``; None when there is none (or it is not ours)."""
    try:
        live = await ctx.copy(build.resource, cluster, build.name, build.namespace)
    except ClientError as exc:
        build.note_unreachable(cluster, exc)
        return None
    if live is None or not manifests.is_propagated(live):
        return None
    return plan.Vertex(cluster, plan.Action.DELETE, plan.reference(live),
                       reason="copy no longer wanted")
