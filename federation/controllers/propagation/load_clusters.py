"""Transformer: the members of the ClusterSet as placement input.

MemberClusters are read once per reconcile, here; capacity and failover use what this
keeps on the build (:attr:`Build.member_docs`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from federation.controllers.propagation.build import Build, Verdict
from federation.controllers.propagation.context import Member, TransformContext
from federation.hub import api
from federation.hub import clusters as hub_clusters
from federation.placement import clusters as clusters_


async def load_clusters(ctx: TransformContext, build: Build) -> Verdict | None:
    registered = await ctx.list(api.MEMBER_CLUSTERS)
    build.member_docs = {str(d["metadata"]["name"]): d for d in registered}
    build.clusters = placement_clusters(registered, ctx.members())
    return None


def placement_clusters(registered: Sequence[Mapping[str, Any]], members: Sequence[Member]
                       ) -> list[clusters_.Cluster]:
    """The members of the ClusterSet, each described by its MemberCluster when it has one.

    The ClusterSet is the one source of truth for which clusters exist: the static
    members (``fedctl run --contexts``) and those joined from a MemberCluster's Secret
    alike. A MemberCluster adds what placement reads (labels, location, taints,
    conditions, capacity) to the member of its name; one naming no member of the set is
    no placement target (nothing here can reach it). A member without one is placed on
    bare. A member is ready when it is engaged, answers, and its MemberCluster (if any)
    does not say Ready=False; a disabled or misconfigured member is known but not ready.
    """
    docs = {str(doc["metadata"]["name"]): doc for doc in registered}
    found = []
    for member in members:
        if member.is_hub and member.name not in docs:
            continue
        doc = docs.get(member.name)
        found.append(hub_clusters.member_cluster(doc, member.reachable) if doc is not None
                     else clusters_.Cluster(name=member.name, ready=member.reachable))
    return found
