"""Transformer: create / update / nothing per chosen cluster, against the member cache.

A foreign object, or one an Application placed, is a conflict, never overwritten unless
the policy says ``conflictResolution: Overwrite`` or ``applyStrategy.whenToTakeOver:
Always`` (``IfNoDiff``: only when it already equals the copy). Fields the member owns
(Retain) and the policy's ``applyStrategy.ignoredFields`` are not drift. Under
``applyStrategy.type: ServerSideApply`` a copy of ours is applied (:mod:`.server_side`),
and fields other field managers own are not drift either. A copy vertex
carries the template's identity, which the executor checks before writing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.contexts.client import ClientError
from federation.controllers.kit import plan
from federation.controllers.kit.chain import Verdict
from federation.controllers.kit.copies import copy_vertex
from federation.controllers.propagation import customized, server_side
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.hub import manifests


async def plan_copies(ctx: TransformContext, build: Build) -> Verdict | None:
    assert build.policy is not None
    spec = build.policy.spec
    take_over, ignored = spec.take_over(), spec.ignored_fields()
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
            build.desired[cluster] = desired
        overwrite = take_over == "Always"
        differs: list[str] = []
        if take_over == "IfNoDiff" and live is not None and not manifests.same_placer(
                desired, live):
            differs = manifests.differences(manifests.without_marks(desired), live, ignored)
            overwrite = not differs
        expect = plan.Identity.of(build.template)
        if live is not None and spec.server_side_apply() and \
                manifests.same_placer(desired, live):
            try:
                vertex: plan.Vertex | None = await server_side.vertex(
                    ctx, build, cluster, desired, live, ignored, expect)
            except ClientError as exc:
                build.note_unreachable(cluster, exc)
                continue
        else:
            vertex = copy_vertex(cluster, desired, live, overwrite, expect=expect,
                                 ignored=ignored)
        if vertex is None:
            assert live is not None
            build.conflicts[cluster] = _conflict(build, live, differs)
            continue
        added = build.dag.add(vertex)
        for other in list(build.dag):
            if other.cluster == cluster and other is not added and \
                    other.obj.get("kind") in ("Namespace", "CustomResourceDefinition"):
                build.dag.depend(added, on=other)
    return None


def _conflict(build: Build, live: Mapping[str, Any], differs: list[str]) -> str:
    what = f"{build.resource.kind} {build.namespace + '/' if build.namespace else ''}" \
        f"{build.name} exists and {manifests.placer(live)}"
    if differs:
        return f"{what}, and differs at {', '.join(differs)} (whenToTakeOver: IfNoDiff " \
            "takes it over only when equal)"
    return f"{what} (set conflictResolution: Overwrite in the policy to take it over)"
