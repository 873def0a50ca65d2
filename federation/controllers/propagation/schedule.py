"""Transformer: the placement engine, fed the previous decision (from the binding), run
off the event loop within its budget (:mod:`federation.controllers.propagation.scheduling`).

A policy with ``placement.workloadAffinity`` also feeds the engine the placements of the
template's peers (:class:`~federation.placement.engine.Peers`): the other bindings of its
namespace whose recorded ``workloadAffinityGroups`` name the same group, read from the
bindings cache, as Karmada's WorkloadAffinity plugins read its binding indexer.

A binding whose ``rescheduleTriggeredAt`` (set by a WorkloadRebalancer) is not the one its
last fresh division answered (``freshScheduledFor``) is divided fresh once (Karmada's Fresh
assignment, :func:`federation.placement.division.divide_fresh`), then Steady again."""

from __future__ import annotations

import dataclasses

from federation.controllers.kit.chain import Problem, Verdict
from federation.controllers.propagation import scheduling
from federation.controllers.propagation.build import Build, policy_ref, template_resource
from federation.controllers.propagation.context import TransformContext
from federation.hub import api, bindings
from federation.placement import engine
from federation.placement import policy as policy_
from federation.placement import resources as resources_


async def schedule(ctx: TransformContext, build: Build) -> Verdict | None:
    assert build.policy is not None
    unknown = unknown_cluster_names(build.policy, {c.name for c in build.clusters})
    if unknown:
        raise Problem("Scheduled", "UnknownCluster",
                      f"{policy_ref(build.policy)} names unknown cluster(s) "
                      f"{', '.join(unknown)} (known: "
                      f"{', '.join(sorted(c.name for c in build.clusters))})")
    # The resource carries the template's metadata.uid: its hash orders Webster's ties, as
    # Karmada's tieBreakerByUID does, so a template divides here as it would in Karmada.
    resource = template_resource(build)
    trigger = fresh_trigger(build)
    key = (*schedule_key(build, resource), str(trigger))
    why = ctx.scheduler.timed_out(key)
    if why is None:
        try:
            decision = await ctx.scheduler.run(engine.place, resource, build.policy,
                                               build.clusters, build.previous,
                                               await peers(ctx, build, resource),
                                               trigger is not None, key=key)
        except scheduling.BudgetExceeded as exc:
            why = str(exc)
    if why is not None:
        raise Problem("Scheduled", "ScheduleTimeout",
                      f"{policy_ref(build.policy)}: {why}; not tried again until the template "
                      "or the policy changes")
    decision = dataclasses.replace(decision, explanation=(*build.notes, *decision.explanation))
    build.decision = decision
    if not decision.ok:
        raise Problem("Scheduled", "ScheduleFailed", f"{decision.error}")
    if trigger is not None:
        build.record[FRESH_FIELD] = trigger
    return None


FRESH_FIELD = "freshScheduledFor"


def fresh_trigger(build: Build) -> str | None:
    """The WorkloadRebalancer's trigger a fresh division is owed to, or None (Steady)."""
    record = build.own_record
    if record is None:
        return None
    asked = record.behaviour.reschedule_triggered_at
    return asked if asked and asked != record.behaviour.fresh_scheduled_for else None


def schedule_key(build: Build, resource: resources_.Resource) -> tuple[str, ...]:
    """What a placement that ran out of budget is remembered by: the template as the engine
    sees it and the policy's version. Cluster changes (capacity, readiness) are left out on
    purpose: they requeue every template, and must not rerun a hopeless placement each time."""
    policy_meta = build.policy_doc.get("metadata") or {}
    return (build.uid, resource.model_dump_json(),
            str(policy_meta.get("uid")), str(policy_meta.get("resourceVersion")),
            policy_ref(build.policy))


def unknown_cluster_names(policy: policy_.Policy, known: set[str]) -> list[str]:
    """The ``clusterNames`` the policy gives anywhere (affinity terms and their overflow
    tiers, static weights, replica bounds) that are not in the fleet: a name there is a
    target, and a target that does not exist is a typo, not a rule to skip."""
    placement = policy.spec.placement
    named: list[str] = []
    for _, affinity in policy_.affinity_terms(placement):
        if affinity is not None:
            named += affinity.cluster_names
    for term in placement.cluster_affinities:
        for overflow in term.overflow_affinities or ():
            named += overflow.cluster_names
    strategy = placement.replica_scheduling
    if strategy and strategy.weight_preference:
        for rule in strategy.weight_preference.static_weight_list:
            named += rule.target_cluster.cluster_names
    for bound in strategy.replica_bounds if strategy else ():
        named += bound.target_cluster.cluster_names
    return sorted(set(named) - known)


async def peers(ctx: TransformContext, build: Build, resource: resources_.Resource
                ) -> engine.Peers | None:
    """What the template's workload-affinity groups' other members hold (None: no group)."""
    assert build.policy is not None
    group, anti = engine.affinity_groups(build.policy, resource)
    if (group is None and anti is None) or build.namespace is None:
        return None
    own = bindings.binding_name(resource.name, resource.kind)
    affinity: list[frozenset[str]] = []
    used: set[str] = set()
    for binding, record in bindings.readable(
            await ctx.list(api.RESOURCE_BINDINGS, build.namespace)):
        # An unreadable peer's record says nothing it could be held to.
        if binding["metadata"].get("name") == own or record is None or \
                record.template_deleted:
            continue
        their_group, their_anti = record.groups
        targets = frozenset(record.decision())
        if group is not None and their_group == group and targets:
            affinity.append(targets)
        if anti is not None and their_anti == anti:
            used |= targets
    return engine.Peers(tuple(affinity), frozenset(used))
