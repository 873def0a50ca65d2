"""Transformer: judge every cluster for this policy (ready, held, evicted) and show the
engine that view; the rules are :mod:`federation.hub.failover`'s. A held
cluster's deadline, or a move the disruption budget cannot take yet, is a requeue
verdict, not a call to the queue. The budget is only asked whether the move fits; the
reconciler takes it once the plan ran (see :mod:`federation.controllers.propagation.disruption`)."""

from __future__ import annotations

from federation.controllers.kit.chain import Verdict, either, requeue
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.hub import failover as rules
from federation.placement import resources as resources_


async def apply_failover(ctx: TransformContext, build: Build) -> Verdict | None:
    assert build.policy is not None
    taints = {name: (doc.get("spec") or {}).get("taints") or []
              for name, doc in build.member_docs.items()}
    tolerate = rules.toleration_time(build.policy.spec.placement.cluster_tolerations)
    state = ctx.failover
    now = ctx.now()
    outcome = build.failover
    outcome.behaviour = rules.behaviour(build.policy)
    previous = build.previous
    replica_less = resources_.from_manifest(build.template).replicas == 0
    judged = {c.name: rules.judge(c.ready, taints.get(c.name, []), tolerate, now)
              for c in build.clusters}
    moving = sum(previous.get(name, 0) for name, j in judged.items()
                 if j.state is rules.State.EVICTED)
    admitted = moving == 0 or state.budget.fits(build.budget_key, moving)
    if moving and admitted:
        build.budget.moving = moving  # taken once the plan is written
    verdict: Verdict | None = None
    shown = []
    for cluster in build.clusters:
        judgement = judged[cluster.name]
        if judgement.state is rules.State.EVICTED and not admitted and \
                previous.get(cluster.name):
            judgement = rules.Judgement(
                rules.State.HELD, "waiting for the fleet's disruption budget "
                f"({state.budget.in_use}/{state.budget.max_moving} replicas moving)")
            verdict = either(verdict, requeue(state.settings.budget_retry))
        if judgement.deadline is not None:
            verdict = either(verdict, requeue(judgement.deadline - now + 0.1))
        if judgement.state is not rules.State.READY:
            build.notes.append(f"failover: {cluster.name} {judgement.state.value}: "
                               f"{judgement.reason}")
        outcome.judgements[cluster.name] = judgement
        shown.append(rules.engine_view(cluster, judgement,
                                       holds_copy=replica_less and cluster.name in previous))
    build.clusters = shown
    return verdict

