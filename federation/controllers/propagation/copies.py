"""Transformer: create / update / nothing per chosen cluster, against the member cache.

A foreign object, or one an Application placed, is a conflict, never overwritten unless
the policy says ``conflictResolution: Overwrite``. A copy vertex carries the template's
identity, which the executor checks before writing.
"""

from __future__ import annotations

from federation.contexts.client import ClientError
from federation.controllers.kit import plan
from federation.controllers.kit.chain import Verdict
from federation.controllers.kit.copies import copy_vertex
from federation.controllers.propagation import customized
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.hub import manifests


async def plan_copies(ctx: TransformContext, build: Build) -> Verdict | None:
    overwrite = build.policy is not None and \
        build.policy.spec.conflict_resolution == "Overwrite"
    for cluster, desired in build.desired.items():
        if cluster in build.unreachable:
            continue
        try:
            live = await ctx.copy(build.resource, cluster, build.name, build.namespace)
        except ClientError as exc:
            build.note_unreachable(cluster, exc)
            continue
        build.live[cluster] = live
        if live is not None and manifests.same_placer(desired, live):
            desired = await customized.retain(ctx, desired, live)
        vertex = copy_vertex(cluster, desired, live, overwrite,
                             expect=plan.Identity.of(build.template))
        if vertex is None:
            assert live is not None
            build.conflicts[cluster] = (
                f"{build.resource.kind} {build.namespace + '/' if build.namespace else ''}"
                f"{build.name} exists and {manifests.placer(live)} "
                "(set conflictResolution: Overwrite in the policy to take it over)")
            continue
        added = build.dag.add(vertex)
        for other in list(build.dag):
            if other.cluster == cluster and other is not added and \
                    other.obj.get("kind") in ("Namespace", "CustomResourceDefinition"):
                build.dag.depend(added, on=other)
    return None

