"""Transformers: the graceful-eviction tasks' two effects on the copies.

:func:`inject_preserved_state` (after render): the preserved labels of the latest task go
into the new copy, as Karmada's injectReservedLabelState (only Directly, one target, a
cluster that held no copy before), after overrides, so nothing overrides them; our own
labels are never written this way.

:func:`plan_eviction_tasks` (after the removals): each task is assessed as Karmada's
graceful-eviction controller does (kept while deletion is suppressed, until every new
copy is healthy, or until its grace period ends); while one is kept and its purge mode
keeps the old copy (Gracefully, Never), the delete of that copy is dropped from the plan
and the cluster stays in the pending clean-up. A task that ends is left out of the record,
and the template is looked at again at once: its cluster is a candidate again and its
labels leave the new copy.
"""

from __future__ import annotations

from typing import Any

from federation.controllers.kit import plan
from federation.controllers.kit.chain import Verdict, either, requeue
from federation.controllers.propagation import customized
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.hub import eviction_tasks as tasks_
from federation.hub import manifests

JSON = dict[str, Any]


async def inject_preserved_state(ctx: TransformContext, build: Build) -> Verdict | None:
    for cluster, desired in build.desired.items():
        labels = tasks_.injected_labels(build.eviction_tasks, cluster, build.targets)
        if labels:
            meta: JSON = desired.setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), **labels}
            # Marked again: the labels are part of the content's digest, so the copy is
            # rewritten without them once the task ends (an extra label is no drift).
            build.desired[cluster] = manifests.mark(desired, build.uid)
    return None


async def plan_eviction_tasks(ctx: TransformContext, build: Build) -> Verdict | None:
    tasks = build.eviction_tasks
    if not tasks:
        return None
    now = ctx.now()
    healthy = await new_copies_healthy(ctx, build)
    kept = [task for task in tasks if tasks_.assess(task, now, healthy)]
    for task in kept:
        if task.keeps_copy and task.from_cluster in build.removals:
            hold(build, task)
    build.eviction_tasks = kept
    build.record[tasks_.TASKS] = [task.to_obj() for task in kept]
    after = tasks_.next_look(kept, now)
    verdict = requeue(after) if after is not None else None
    if len(kept) < len(tasks):
        # At once, not at the next unrelated event: the cluster is a candidate again and
        # the ended task's labels leave the new copy.
        verdict = either(verdict, requeue(0.1))
    return verdict


def hold(build: Build, task: tasks_.Task) -> None:
    for vertex in list(build.dag):
        if vertex.cluster == task.from_cluster and vertex.action is plan.Action.DELETE:
            del build.dag.vertices[vertex.key]
    why = "deletion suppressed (purgeMode Never) until a user sets the task's " \
          "suppressDeletion to false" if task.suppress_deletion else \
          "graceful eviction: old copy kept until the new copies are healthy"
    build.failover.held[task.from_cluster] = why
    build.notes.append(f"eviction: {task.from_cluster}: {why}")


async def new_copies_healthy(ctx: TransformContext, build: Build) -> bool:
    """Karmada's allScheduledResourceInHealthyState: every target has a healthy copy."""
    if not build.targets:
        return False
    for cluster in build.targets:
        copy = build.live.get(cluster)
        if copy is None or await customized.healthy(ctx, copy) is not True:
            return False
    return True
