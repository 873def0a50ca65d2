"""Transformer: the policy's ``schedulerName``.

We are the scheduler Karmada calls ``default-scheduler`` (an empty name means it too).
A policy naming another scheduler is that scheduler's: as Karmada's scheduler skips such
bindings, we place nothing for it and change no copy; the binding says so
(``Scheduled=False``, reason ``SchedulerNotOurs``).
"""

from __future__ import annotations

from federation.controllers.kit.chain import Problem, Verdict
from federation.controllers.propagation.build import Build, policy_ref
from federation.controllers.propagation.context import TransformContext
from federation.placement import policy as policy_


async def check_scheduler_name(ctx: TransformContext, build: Build) -> Verdict | None:
    assert build.policy is not None
    name = build.policy.spec.scheduler_name or policy_.DEFAULT_SCHEDULER
    if name != policy_.DEFAULT_SCHEDULER:
        raise Problem("Scheduled", "SchedulerNotOurs",
                      f"{policy_ref(build.policy)}: spec.schedulerName is {name!r}; this control "
                      f"plane is {policy_.DEFAULT_SCHEDULER!r} and leaves the template to "
                      "that scheduler (nothing placed, no copy changed)")
    return None
