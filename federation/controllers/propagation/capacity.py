"""Transformer: availableReplicas of each cluster for this template, from its MemberCluster's
resource summary (see :mod:`federation.hub.capacity`). A number the MemberCluster
states itself (``status.availableReplicas``) wins."""

from __future__ import annotations

from federation.controllers.kit.chain import Verdict
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.hub import capacity, status


async def estimate_capacity(ctx: TransformContext, build: Build) -> Verdict | None:
    if build.template.get("kind") not in status.WORKLOAD_KINDS:
        return None
    requests = capacity.pod_requests(build.template)
    updated = []
    for cluster in build.clusters:
        found = (build.member_docs.get(cluster.name, {}).get("status") or {}
                 ).get("resourceSummary")
        if cluster.available_replicas is None and isinstance(found, dict):
            cluster = cluster.model_copy(
                update={"available_replicas": capacity.estimate(found, requests)})
        updated.append(cluster)
    build.clusters = updated
    return None
