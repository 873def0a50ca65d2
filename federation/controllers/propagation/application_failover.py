"""Transformer: evictions, as Karmada records them (graceful-eviction tasks).

Reads the binding's tasks (:mod:`federation.hub.eviction_tasks` has the rules) and adds:

- application failover (``spec.failover.application``): the copy on each cluster of the
  last decision that is itself ready (cluster failover judged it so) is asked its health
  (a ResourceInterpreterCustomization's InterpretHealth, else the built-in one); one
  unhealthy for ``tolerationSeconds`` is evicted;
- cluster failover with ``statePreservation``: a cluster failover just evicted gets a task
  carrying the state read from its copy's last observed status.

Every cluster with a task is shown to the engine as not ready, so its replicas are placed
elsewhere and it is not chosen again while the task lasts (Karmada's ClusterEviction
filter). The tasks and the unhealthy clocks go into the binding's record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.contexts.cache import ReadOnly
from federation.contexts.client import ClientError
from federation.controllers.kit.chain import Problem, Verdict, requeue
from federation.controllers.propagation import customized
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.hub import eviction_tasks as tasks_
from federation.hub import failover as rules
from federation.hub.bindings import BindingError
from federation.placement import policy as policy_


def recorded_tasks(build: Build) -> list[tasks_.Task]:
    own = build.own_record
    try:
        return tasks_.read(own.behaviour.eviction_tasks) if own is not None else []
    except BindingError as exc:
        raise Problem("Scheduled", "BindingInvalid", str(exc)) from None


def recorded_since(build: Build) -> dict[str, float]:
    own = build.own_record
    found = own.behaviour.unhealthy_since if own is not None else None
    since = {}
    for cluster, stamp in (found or {}).items():
        when = rules.parse_time(stamp)
        if when is not None:
            since[str(cluster)] = when
    return since


async def apply_application_failover(ctx: TransformContext, build: Build) -> Verdict | None:
    assert build.policy is not None
    now = ctx.now()
    tasks = recorded_tasks(build)
    tasks += cluster_failover_tasks(build, tasks, now)
    verdict: Verdict | None = None
    since: dict[str, float] = {}
    failover = build.policy.spec.failover
    application = failover.application if failover is not None else None
    if application is not None:
        fine, unhealthy, copies = await look(ctx, build, tasks_.evicting(tasks))
        since = {c: t for c, t in tasks_.observe(recorded_since(build), unhealthy, fine,
                                                 now).items() if c in build.previous}
        tolerate = application.decision_conditions.toleration_seconds
        evict, next_at = tasks_.due(since, tolerate, now)
        for cluster in evict:
            tasks.append(evict_unhealthy(build, application, cluster, copies[cluster], now))
            del since[cluster]
        if next_at is not None:
            verdict = requeue(next_at - now + 0.1)
    build.eviction_tasks = tasks
    build.record[tasks_.TASKS] = [task.to_obj() for task in tasks]
    build.record[tasks_.SINCE] = {c: rules.format_time(t) for c, t in sorted(since.items())}
    exclude(build, tasks_.evicting(tasks))
    return verdict


def evict_unhealthy(build: Build, application: policy_.ApplicationFailoverBehavior,
                    cluster: str, copy: ReadOnly | None, now: float) -> tasks_.Task:
    status = (copy or {}).get("status")
    try:
        task = tasks_.application_task(application, cluster, build.previous.get(cluster, 0),
                                       status, build.previous, now)
    except tasks_.PreservationError as exc:
        raise Problem("Scheduled", "StatePreservationFailed", f"{cluster}: {exc}") from None
    seconds = application.decision_conditions.toleration_seconds
    build.notes.append(f"application failover: {cluster} evicted: its copy was unhealthy "
                       f"for more than {seconds}s (purgeMode {application.purge_mode})")
    return task


async def look(ctx: TransformContext, build: Build, evicting: set[str]
               ) -> tuple[list[str], list[str], dict[str, ReadOnly | None]]:
    """Over the clusters of the last decision: those whose clock stops (a copy healthy, of
    unknown health or gone; a cluster not ready), those whose copy is unhealthy, and the
    copies read. A copy that cannot be read is in neither."""
    fine: list[str] = []
    unhealthy: list[str] = []
    copies: dict[str, ReadOnly | None] = {}
    for cluster in sorted(set(build.previous) - evicting):
        judgement = build.failover.judgements.get(cluster)
        if judgement is None or judgement.state is not rules.State.READY:
            fine.append(cluster)  # cluster failover's, not ours
            continue
        try:
            copy = await ctx.copy(build.resource, cluster, build.name, build.namespace)
        except ClientError:
            continue  # not readable now: neither healthy nor unhealthy
        copies[cluster] = copy
        verdict = await customized.healthy(ctx, copy) if copy is not None else None
        (unhealthy if verdict is False else fine).append(cluster)
    return fine, unhealthy, copies


def cluster_failover_tasks(build: Build, tasks: list[tasks_.Task], now: float
                           ) -> list[tasks_.Task]:
    """A task for each cluster a cluster failover evicts now, when the policy preserves
    state (the task carries it; the old copy's fate stays cluster failover's)."""
    behaviour = build.failover.behaviour
    if behaviour.state_preservation is None:
        return []
    known = tasks_.evicting(tasks)
    last = last_statuses(build)
    added = []
    for cluster, judgement in sorted(build.failover.judgements.items()):
        if judgement.state is not rules.State.EVICTED or cluster in known or \
                cluster not in build.previous:
            continue
        try:
            added.append(tasks_.cluster_task(behaviour, cluster, build.previous[cluster],
                                             last.get(cluster), build.previous, now))
        except tasks_.PreservationError as exc:
            raise Problem("Scheduled", "StatePreservationFailed", f"{cluster}: {exc}") from None
    return added


def last_statuses(build: Build) -> dict[str, Mapping[str, Any] | None]:
    """Each cluster's copy status as the binding last recorded it."""
    own = build.own_record
    return {entry.cluster: entry.status for entry in own.aggregated} if own is not None else {}


def exclude(build: Build, evicting: set[str]) -> None:
    """Clusters being evicted from: not ready, for this template's engine."""
    if not evicting:
        return
    gone = rules.Judgement(rules.State.EVICTED, "graceful eviction in progress")
    build.clusters = [rules.engine_view(c, gone) if c.name in evicting else c
                      for c in build.clusters]
