"""Transformer: ``schedulePriority``, the priority templates are scheduled in.

As Karmada's detector does when it builds a binding, the policy's
``priorityClassName`` is looked up among the hub's Kubernetes PriorityClasses (the
``KubePriorityClass`` source, the only one Karmada implements) and its ``value`` is
recorded in the binding (``spec.schedulePriority.priority``, Karmada's field). The work
queue reads it from there: among templates waiting, the higher priority is handed out
first, and templates waiting for room are retried highest first (:mod:`.room`).

A class that does not exist stops the template here, as Karmada's detector returns an
error and builds no binding: nothing is placed and no copy changes; the binding says so
(``Scheduled=False``, ``PriorityClassNotFound``) and a PriorityClass event requeues it.
A policy without the field records nothing: the template has Karmada's default, 0.
"""

from __future__ import annotations

from federation.controllers.kit.chain import Problem, Verdict
from federation.controllers.propagation.build import Build, policy_ref
from federation.controllers.propagation.context import TransformContext
from federation.hub import api

FIELD = "schedulePriority"
INT32 = range(-2**31, 2**31)


async def resolve_priority(ctx: TransformContext, build: Build) -> Verdict | None:
    assert build.policy is not None
    wanted = build.policy.spec.schedule_priority
    if wanted is None:
        build.record[FIELD] = None
        return None
    name = wanted.priority_class_name
    found = await ctx.get(api.PRIORITY_CLASSES, name, None, ctx.hub) if name else None
    value = found.get("value") if found is not None else None
    if found is None or isinstance(value, bool) or not isinstance(value, int) or \
            value not in INT32:
        why = "not found on the hub" if found is None else "has no int32 value"
        raise Problem("Scheduled", "PriorityClassNotFound",
                      f"{policy_ref(build.policy)}: spec.schedulePriority.priorityClassName: "
                      f"PriorityClass {name!r} {why} (nothing placed, no copy changed)")
    build.record[FIELD] = {"priority": value}
    return None
