"""Transformer: ``applyStrategy.type: ReportDiff`` writes nothing and records differences.

Each chosen cluster's copy is compared with the member's object (fields the member owns and
the policy's ``ignoredFields`` left out) and the differing paths go into the binding
(``spec.reportedDifferences``: ``missing`` when there is no object, ``not managed by
federation`` first when it is someone else's). Creates and updates are dropped from the
plan, as suspension drops them; deletions of copies on clusters no longer chosen still
happen, as under suspension.
"""

from __future__ import annotations

from federation.controllers.kit import plan
from federation.controllers.kit.chain import Verdict
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.hub import manifests

FIELD = "reportedDifferences"
HELD_BACK = (plan.Action.CREATE, plan.Action.UPDATE, plan.Action.APPLY,
             plan.Action.NOOP)


def _differences(build: Build, cluster: str, ignored: tuple[str, ...]) -> list[str]:
    desired, live = build.desired[cluster], build.live.get(cluster)
    if live is None:
        return ["missing"]
    if not manifests.same_placer(desired, live):
        return [f"not managed by federation ({manifests.placer(live)})",
                *manifests.differences(manifests.without_marks(desired), live, ignored)]
    return manifests.differences(desired, live, ignored)


async def report_only(ctx: TransformContext, build: Build) -> Verdict | None:
    assert build.policy is not None
    spec = build.policy.spec
    if not spec.report_only():
        build.record[FIELD] = None
        return None
    reported = {cluster: found for cluster in sorted(build.desired)
                if cluster not in build.unreachable and cluster not in build.suspended
                and (found := _differences(build, cluster, spec.ignored_fields()))}
    build.record[FIELD] = reported or None
    dropped = {v.key for v in build.dag if v.action in HELD_BACK}
    for key in dropped:
        del build.dag.vertices[key]
    for vertex in build.dag:
        vertex.depends_on -= dropped
    build.report_only = True
    build.conflicts.clear()  # a foreign object is reported, never taken over
    return None
