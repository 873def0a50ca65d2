"""Finalisation: a template that is gone, or that no policy selects any more (unless
the binding keeps its copies then: :mod:`.unclaimed`).

Templates carry no finalizer (Karmada's way): ``kubectl delete`` of a template returns
at once, and the delete, seen by the watch (or, after a restart, by the clean-up
controller finding a binding whose template is gone), brings the reconcile here. The
binding is the record of where copies are: each is deleted (only ours, only this
template's), then the binding. A member that cannot be reached keeps its copy on the
record: the binding becomes ``templateDeleted`` with ``pendingCleanup`` and a
``CleanupPending`` condition, and the clean-up controller finishes when it returns. A
binding whose ``spec.orphan`` is true (the template was annotated
``federation.io/orphan: "true"``) is deleted and its copies stay. A binding whose
``spec.preserveResourcesOnDeletion`` is true (:mod:`federation.hub.preservation`) has its
copies released (our marks removed) instead of deleted in the clusters of its decision (a
cluster only pending was left before: its copy is deleted); dependencies carried by
``propagateDeps`` (:mod:`.propagate_deps`) go with the template (are released with it)
unless still carried by another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from federation.contexts.cache import ReadOnly
from federation.contexts.client import ClientError, Resource
from federation.controllers.kit import plan
from federation.controllers.kit.copies import release_vertex
from federation.controllers.propagation import propagate_deps
from federation.controllers.propagation.context import TransformContext
from federation.controllers.propagation.record import pending_condition
from federation.hub import bindings, manifests, preservation
from federation.hub import dependencies as dependencies_


async def removal_plan(ctx: TransformContext, hub_resource: Resource, name: str,
                       namespace: str | None, clusters: Sequence[str], uid: str | None,
                       unreachable: dict[str, str], release: Collection[str] = (),
                       dependencies: Sequence[dependencies_.Ref] = ()) -> plan.Plan:
    """Deletes of our copies (of template ``uid`` when given) in ``clusters`` (releases in
    the clusters of ``release``), and of the ``dependencies`` they carried (released
    there too); clusters that cannot be read are added to ``unreachable``."""
    dag = plan.Plan()
    carrier = bindings.binding_name(name, hub_resource.kind)
    for ref in dependencies:
        for cluster in clusters:
            vertex = await propagate_deps.removal_vertex(ctx, ref, namespace, cluster,
                                                         carrier, release=cluster in release)
            if vertex is not None:
                dag.add(vertex)
    known = {m.name for m in ctx.members()}
    for cluster in clusters:
        if cluster not in known:
            continue
        try:
            live = await ctx.copy(hub_resource, cluster, name, namespace)
        except ClientError as exc:
            unreachable[cluster] = str(exc)
            continue
        if live is None or not manifests.is_propagated(live):
            continue
        marked = (live["metadata"].get("annotations") or {}).get(
            manifests.TEMPLATE_UID_ANNOTATION)
        if uid and marked and marked != uid:
            continue  # a newer template's copy: not ours to delete
        dag.add(release_vertex(cluster, live) if cluster in release else
                plan.Vertex(cluster, plan.Action.DELETE, plan.reference(live),
                            reason="template gone"))
    return dag


def left_after(report: plan.Report, unreachable: dict[str, str]) -> dict[str, str]:
    """Clusters whose copy is still there, and why."""
    return {**unreachable, **{o.vertex.cluster: o.error or "delete failed"
                              for o in report.failed()}}


def record_plan(hub: str, binding: ReadOnly, record: bindings.BindingRecord,
                left: dict[str, str], deleted: bool, released: Collection[str] = ()
                ) -> plan.Plan:
    """Delete the binding when nothing is left; else record what is, once. A deleted
    template's record whose copies are released in ``released`` (it preserves) lists the
    other pending clusters (:data:`~federation.hub.preservation.LEFT`): the clean-up
    controller deletes those."""
    dag = plan.Plan()
    if not left:
        dag.add(plan.Vertex(hub, plan.Action.DELETE, plan.reference(binding),
                            reason="nothing left"))
        return dag
    pending = tuple(sorted(left))
    # Also when empty: only then does the record say it (see preservation.releases).
    gone = tuple(c for c in pending if c not in released) \
        if deleted and preservation.preserves(record) else None
    if record.pending_cleanup == pending and record.template_deleted == deleted and \
            record.left_before_deletion == gone:
        return dag
    updated = dataclasses.replace(
        record, pending_cleanup=pending, template_deleted=deleted,
        clusters=() if deleted else record.clusters, left_before_deletion=gone,
        conditions=(pending_condition(pending, record.conditions),))
    dag.add(plan.Vertex(hub, plan.Action.UPDATE, bindings.replaced(binding, updated),
                        reason="pending clean-up"))
    return dag


preserves = preservation.preserves
dependencies = dependencies_.dependencies


def holders(record: bindings.BindingRecord) -> list[str]:
    return record.pending() if record.orphan else record.holders()
