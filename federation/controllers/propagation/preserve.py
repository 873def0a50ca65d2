"""Transformer: ``preserveResourcesOnDeletion``, the policy's choice recorded in the binding
(``spec.preserveResourcesOnDeletion``), so that it survives the template and the policy.
What a deletion then does (copies released rather than deleted, in the clusters of the
decision) is :mod:`federation.hub.preservation`'s, read by finalisation and clean-up."""

from __future__ import annotations

from federation.controllers.kit.chain import Verdict
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.hub.preservation import FIELD


async def record_preservation(ctx: TransformContext, build: Build) -> Verdict | None:
    assert build.policy is not None
    build.record[FIELD] = build.policy.spec.preserve_resources_on_deletion or None
    return None
