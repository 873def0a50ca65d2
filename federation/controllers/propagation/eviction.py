"""Transformer: graceful eviction keeps old copies on an evicted cluster until the new
copies are ready, or ``gracePeriodSeconds`` after the eviction (the cluster stays in
the pending clean-up meanwhile, so the copy is found again on every reconcile). New
copies ready end the move: its budget goes back after the plan ran."""

from __future__ import annotations

from federation.controllers.kit import plan
from federation.controllers.kit.chain import Verdict, either, requeue
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.hub import failover as rules


async def plan_graceful_eviction(ctx: TransformContext, build: Build) -> Verdict | None:
    outcome = build.failover
    state = ctx.failover
    ready = rules.copies_ready(build.desired, build.live)
    if ready:
        build.budget.done = True  # the move is over: given back once the plan ran
    if outcome.behaviour.purge_mode != "Gracefully":
        return None
    seconds = outcome.behaviour.grace_period_seconds
    grace = state.settings.grace_period if seconds is None else float(seconds)
    now = ctx.now()
    verdict: Verdict | None = None
    for cluster, evicted_at in outcome.evicted.items():
        if cluster not in build.removals or ready or now >= evicted_at + grace:
            continue
        for vertex in list(build.dag):
            if vertex.cluster == cluster and vertex.action is plan.Action.DELETE:
                del build.dag.vertices[vertex.key]
        outcome.held[cluster] = "graceful eviction: old copy kept until the new copies " \
                                "are ready"
        build.notes.append(f"failover: {cluster}: {outcome.held[cluster]} (at most until "
                           f"{rules.format_time(evicted_at + grace)})")
        verdict = either(verdict, requeue(evicted_at + grace - now + 0.1))
    return verdict
