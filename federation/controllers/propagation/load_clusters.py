"""Transformer: the members of the ClusterSet as placement input.

MemberClusters are read once per reconcile, here; capacity and failover use what this
keeps on the build (:attr:`Build.member_docs`).
"""

from __future__ import annotations

from federation.controllers.kit.chain import Verdict
from federation.controllers.kit.view import placement_clusters
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.hub import api


async def load_clusters(ctx: TransformContext, build: Build) -> Verdict | None:
    registered = await ctx.list(api.MEMBER_CLUSTERS)
    build.member_docs = {str(d["metadata"]["name"]): d for d in registered}
    build.clusters = placement_clusters(registered, ctx.members())
    return None

