"""Transformer: the policy's ``dependentOverrides``.

As Karmada's detector: a PropagationPolicy waits until every OverridePolicy it names
exists in its namespace (a ClusterPropagationPolicy: every ClusterOverridePolicy it
names), of either API group, before it propagates anything, so that a bundle applied at
once never reaches members without its overrides. While waiting, nothing is placed and
no copy changes; the binding says which are missing (``Scheduled=False``, reason
``WaitingForOverrides``). Creating an override policy requeues every template.
"""

from __future__ import annotations

from federation.controllers.kit.chain import Problem, Verdict
from federation.controllers.propagation.build import Build, policy_ref
from federation.controllers.propagation.context import TransformContext
from federation.hub import api


async def wait_for_overrides(ctx: TransformContext, build: Build) -> Verdict | None:
    policy = build.policy
    assert policy is not None
    if not policy.spec.dependent_overrides:
        return None
    # Either group's override policy of the same scope counts: both apply alike.
    present: set[str] = set()
    for kind in api.OVERRIDE_POLICY_RESOURCES:
        if kind.namespaced == policy.namespaced:
            present |= {str(doc["metadata"].get("name"))
                        for doc in await ctx.list(kind, policy.namespace)}
    missing = [n for n in policy.spec.dependent_overrides if n not in present]
    if missing:
        where = f" in {policy.namespace}" if policy.namespace else ""
        kind_name = "OverridePolicy" if policy.namespaced else "ClusterOverridePolicy"
        raise Problem("Scheduled", "WaitingForOverrides",
                      f"{policy_ref(policy)} waits for its dependentOverrides: {kind_name} "
                      f"{', '.join(missing)} not found{where}")
    return None
