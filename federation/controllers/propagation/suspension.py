"""Transformer: the policy's ``suspension`` (Karmada's dispatching suspension).

``dispatching: true`` stops every write to members; ``dispatchingOnClusters.clusterNames``
stops them for the named clusters. Scheduling goes on (the binding records the new
decision) and nothing already in a member is touched; resuming (the field removed or
false) writes whatever is due at the next reconcile, which the policy's change itself
brings. Deletions are not suspended, as in Karmada (its execution controller deletes a
Work's resources before it looks at the suspension): copies on clusters the template
left, and all copies when the template is deleted, still go. The binding gets a
``Dispatching=False`` condition, reason ``SuspendDispatching``, naming the clusters, and
carries the policy's ``suspension`` in its spec (as Karmada's ResourceBinding does).
"""

from __future__ import annotations

from federation.controllers.kit import plan
from federation.controllers.kit.chain import Verdict
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext

HELD_BACK = (plan.Action.CREATE, plan.Action.UPDATE, plan.Action.APPLY, plan.Action.NOOP)
"""What suspension drops from the plan: writes (and their no-op twins, so that nothing
reports a copy that a suspended cluster may not have); deletes are left alone."""


async def apply_suspension(ctx: TransformContext, build: Build) -> Verdict | None:
    assert build.policy is not None
    suspension = build.policy.spec.suspension
    # The binding carries the policy's suspension, as Karmada's does: which clusters are
    # held is a change of the record (a condition's message alone is not rewritten).
    build.record["suspension"] = suspension.model_dump(by_alias=True, exclude_none=True) \
        if suspension is not None else None
    if suspension is None:
        return None
    held = {c for c in build.targets if suspension.suspends(c)}
    if not held:
        return None
    dropped = {v.key for v in build.dag if v.cluster in held and v.action in HELD_BACK}
    for key in dropped:
        del build.dag.vertices[key]
    for vertex in build.dag:
        vertex.depends_on -= dropped
    build.suspended = sorted(held)
    for cluster in held:
        # Nothing is attempted there: no conflict, and a member away is no failure (as a
        # suspended Work is not synced at all); nothing to retry until the suspension ends.
        build.conflicts.pop(cluster, None)
        build.unreachable.pop(cluster, None)
        build.causes.pop(cluster, None)
    return None
