"""Finishing deletions a template could not wait for.

When a template is deleted while a member holding its copy is unreachable, the
propagation controller deletes what it can and leaves the ResourceBinding with
``spec.templateDeleted: true`` and ``spec.pendingCleanup`` listing those members
(templates carry no finalizer: the delete itself is never held). A Warning event
says so once copies have been pending ``cleanup_wait`` seconds. A binding whose
template is gone but which is not marked (the template was deleted while no
control plane ran: every binding is seen at start) is handed to propagation's
queue, which finalises it. This controller retries them:
on every binding event, every MemberCluster change and every few seconds, it
deletes our copy (only ours: the ownership label is checked) in each member
listed in ``spec.pendingCleanup`` it can reach (and the dependencies the template
carried there with ``propagateDeps``, unless another binding still carries them there
or their own policy places them), and deletes the binding when none is left.

It writes nothing itself: it reads the leftovers and asks for a removal plan
(:meth:`Reconciler.removal_plan`: the deletes, or releases for a template that preserved
its copies, each dependency after its workload's copy), which the kit's executor runs
through the same :class:`~federation.controllers.kit.executor.Writer` as propagation's
plans (the deny list, the identity check); the binding's update or delete is a plan too.
The rules it shares with propagation are pure and live below both
(:mod:`federation.hub.preservation`, :mod:`federation.hub.dependencies`). It runs as
many workers as propagation: after an outage it has as many bindings to finish as
propagation has templates to fix.

A template re-created under the same name takes the leftover over (see
:mod:`federation.hub.bindings`): once its reconcile has recorded the
pending clusters, the binding is its own again (``templateDeleted`` false) and
this controller lets it be. Until then both may meet the same member copy,
so this controller never deletes a copy a live template claims (its
``federation.io/template-uid`` is that template's UID: the new template has
already taken it over), and deletes with the copy's resourceVersion as a
precondition (:func:`~federation.controllers.kit.plan.reference` ``exact``), so a copy
rewritten between our read and our delete survives.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from federation.contexts.cache import ReadOnly
from federation.contexts.client import ApiError, ClientError, Resource
from federation.contexts.multicluster import MultiCluster
from federation.contexts.scoped import NotGranted
from federation.controllers.kit import events, executor, plan
from federation.controllers.kit.copies import release_vertex
from federation.hub import api, bindings, deny, failover, manifests, preservation, status
from federation.hub import dependencies as dependencies_
from federation.runtime.reconcile import Request, Result

log = logging.getLogger("federation.cleanup")
JSON = dict[str, Any]

RETRY = 5.0
"""Seconds between attempts while members are still unreachable (``fedctl run`` passes
PropagationSettings.retry_pending)."""


@dataclasses.dataclass
class Removal:
    """What clean-up intends for one leftover binding: the plan of member writes, and the
    clusters it could not look at (they stay pending)."""

    dag: plan.Plan = dataclasses.field(default_factory=plan.Plan)
    unread: dict[str, str] = dataclasses.field(default_factory=dict)
    """Cluster -> why its copies could not be read."""

    def left_after(self, report: plan.Report, pending: list[str]) -> list[str]:
        """The pending clusters still holding something of ours after ``report``: those not
        read, and those with a write that failed (a 404 is done: it is gone already)."""
        failed = {o.vertex.cluster for o in report.failed() if not _gone(o.exception)}
        return [c for c in pending if c in self.unread or c in failed]


def _gone(exc: BaseException | None) -> bool:
    return isinstance(exc, ApiError) and exc.status == 404


class Reconciler:
    def __init__(self, mc: MultiCluster, hub: str, recorder: events.EventSink,
                 retry: float = RETRY, wait: float = 30.0,
                 gone: Callable[[Request], None] | None = None,
                 clock: Callable[[], float] = time.time,
                 denied: deny.DenyList | None = None) -> None:
        self.mc = mc
        self.hub = hub
        self.recorder = recorder
        self.retry = retry
        self.wait = wait
        """PropagationSettings.cleanup_wait: how long pending copies are quiet."""
        self.gone = gone
        """Hands a binding whose template is gone to propagation's queue (the wiring)."""
        self.clock = clock
        self.writer: plan.Writer = executor.Writer(mc, hub, denied)
        """The kit's writer (deny list, identity check): the only way anything is written."""

    async def reconcile(self, request: Request) -> Result | None:
        resource = api.RESOURCE_BINDINGS if request.namespace else api.CLUSTER_RESOURCE_BINDINGS
        binding = await self.mc.get(resource, request.name, request.namespace or None,
                                    cluster=self.hub, copy=False)
        if binding is None:
            return None
        try:
            record = bindings.cached(binding)
        except bindings.BindingError as exc:
            # Never act on a record nobody can read: no template lookup, no member delete.
            log.warning("%s: not cleaned up: %s", binding["metadata"]["name"], exc)
            return None
        if not record.template_deleted:
            await self._check_template(record.resource)
            return None
        if not (record.resource.api_version and record.resource.kind and record.resource.name):
            log.warning("%s: not cleaned up: spec.resource names no template",
                        binding["metadata"]["name"])
            return None
        if record.resource.namespace != (binding["metadata"].get("namespace") or ""):
            # A binding records a template of its own namespace (a cluster-scoped one, a
            # ClusterResourceBinding): one naming another is not ours to act on.
            log.warning("%s: not cleaned up: spec.resource names a template outside the "
                        "binding's namespace", binding["metadata"]["name"])
            return None
        pending = list(record.pending_cleanup)
        removal = await self.removal_plan(binding, record)
        left = removal.left_after(await executor.execute(removal.dag, self.writer), pending)
        if not left:
            return await self._forget(binding, pending)
        if left != pending:
            written = await executor.execute(self._pending_plan(binding, record, left), self.writer)
            written.raise_for_failure()  # a 409 (rewritten since read): read it again
        await self._warn_if_lasting(binding, record, left)
        return Result(requeue_after=self.retry)

    async def _forget(self, binding: ReadOnly, pending: list[str]) -> Result | None:
        """Nothing of ours is left: the binding goes (only the version we read)."""
        dag = plan.Plan()
        dag.add(plan.Vertex(self.hub, plan.Action.DELETE, plan.reference(binding, exact=True),
                            reason="copies cleaned up"))
        failure = next(iter((await executor.execute(dag, self.writer)).failed()), None)
        if failure is not None and not _gone(failure.exception):
            exc = failure.exception
            if isinstance(exc, ApiError) and exc.status == 409:
                return Result(requeue_after=0.0)  # changed (taken over?): read it again
            raise exc or RuntimeError(failure.error)
        log.info("%s: pending copies removed from %s", binding["metadata"]["name"],
                 ", ".join(pending))
        return None

    def _pending_plan(self, binding: ReadOnly, record: bindings.BindingRecord,
                      left: list[str]) -> plan.Plan:
        """The binding with ``left`` still pending: spec and status in one write (bindings
        have no status subresource), conditional on the version we read."""
        condition = status.condition(
            "CleanupPending", True, "MemberUnreachable",
            f"copies still to delete in {', '.join(left)}", record.conditions)
        updated = dataclasses.replace(record, pending_cleanup=tuple(left),
                                      conditions=(condition,))
        dag = plan.Plan()
        dag.add(plan.Vertex(self.hub, plan.Action.UPDATE, bindings.replaced(binding, updated),
                            reason="pending clean-up recorded"))
        return dag

    async def _warn_if_lasting(self, binding: ReadOnly, record: bindings.BindingRecord,
                               left: list[str]) -> None:
        """A Warning event once copies have been pending longer than ``wait`` seconds: in the
        few retries after the deadline passes, so a restart of ours long after it does not
        repeat it (the binding's CleanupPending condition keeps saying so meanwhile)."""
        pending = next((c for c in record.conditions if c.get("type") == "CleanupPending"),
                       None)
        target = record.resource
        since = failover.parse_time((pending or {}).get("lastTransitionTime"))
        if not events.overdue_once(since, self.clock(), self.wait, self.retry):
            return
        message = (f"{target.kind} {target.name} deleted; copies left in "
                   f"{', '.join(left)} (unreachable for {self.wait:.0f}s) are deleted when "
                   "they return")
        await self.recorder.emit(binding, "Warning", "CleanupPending", message)

    async def _check_template(self, target: bindings.TemplateRef) -> None:
        """A binding whose template is gone (deleted while nobody watched: found at start)
        goes to propagation, which finalises it; a live template's binding is left alone."""
        if self.gone is None or not target.kind or not target.name:
            return
        try:
            resource = await self.mc.cluster(self.hub).resource(target.to_obj())
            live = await self.mc.get(resource, target.name, target.namespace or None,
                                     cluster=self.hub, copy=False)
        except NotGranted:
            return  # a template we may not read now (a Secret's namespace) is not gone
        except ClientError as exc:
            if getattr(exc, "retryable", False):
                raise
            live = None  # the hub serves no such kind any more
            resource = None
        if live is not None and live["metadata"].get("uid") == (target.uid or None):
            return
        kind = f"{target.kind}.{resource.group}" if resource is not None and \
            resource.group else target.kind
        self.gone(Request(self.hub, kind, target.namespace, target.name))

    async def claimed_uid(self, target: bindings.TemplateRef) -> str | None:
        """The UID of a live hub template of the binding's name (a re-created one), if any."""
        writer = self.mc.cluster(self.hub)
        try:
            resource = await writer.resource(target.to_obj())
            live = await writer.get(resource, target.name, target.namespace or None)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        except ClientError as exc:
            if getattr(exc, "retryable", False):
                raise
            return None  # the hub serves no such kind any more: no template can claim a copy
        uid = live["metadata"].get("uid")
        return str(uid) if uid else None

    # -- the removal plan ------------------------------------------------------------------

    async def removal_plan(self, binding: ReadOnly, record: bindings.BindingRecord) -> Removal:
        """The writes that finish ``binding``'s pending clusters: per cluster, the copy's
        delete (or release), then the dependencies it carried there. A cluster that cannot
        be read gets nothing and stays pending; nothing is written here."""
        removal = Removal()
        claimed = _Claim(self, record.resource)
        for cluster in record.pending_cleanup:
            try:
                copy = await self._copy_vertex(binding, record, cluster, claimed)
                if copy is not None:
                    removal.dag.add(copy)
                for vertex in await self._dependency_vertices(binding, record, cluster,
                                                              claimed):
                    added = removal.dag.add(vertex)
                    if copy is not None:
                        removal.dag.depend(added, on=copy)  # the workload goes first
            except ClientError as exc:
                # Every retry of an outage: DEBUG (the cluster's transition is logged once).
                log.debug("%s: %s not cleaned up yet: %s", binding["metadata"]["name"],
                          cluster, exc)
                removal.unread[cluster] = str(exc)
                for vertex in [v for v in removal.dag if v.cluster == cluster]:
                    del removal.dag.vertices[vertex.key]
        return removal

    async def _copy_vertex(self, binding: ReadOnly, record: bindings.BindingRecord,
                           cluster: str, claimed: _Claim) -> plan.Vertex | None:
        """The delete (or release) of the deleted template's copy in ``cluster``; None when
        there is none of ours (gone, someone else's, or the re-created template's)."""
        target = record.resource
        writer = self.mc.cluster(cluster)
        live = await _live(writer, await writer.resource(target.to_obj()), target.name,
                           target.namespace or None)
        if live is None or not manifests.is_propagated(live):
            return None
        marked = (live["metadata"].get("annotations") or {}).get(
            manifests.TEMPLATE_UID_ANNOTATION)
        if marked and marked == await claimed.uid():
            return None  # the re-created template has taken this copy over
        # preserveResourcesOnDeletion: release it, unless the template had left the
        # cluster before its deletion (then it goes, as any cluster left loses its copy).
        if preservation.releases(record, cluster):
            return release_vertex(cluster, live)
        return plan.Vertex(cluster, plan.Action.DELETE, plan.reference(live, exact=True),
                           reason="template deleted", expect=_identity(binding, target))

    async def _dependency_vertices(self, binding: ReadOnly, record: bindings.BindingRecord,
                                   cluster: str, claimed: _Claim) -> list[plan.Vertex]:
        """The deletes (or releases) of what the template carried to ``cluster`` with
        ``propagateDeps``, unless still carried there by another binding or placed there
        by its own policy."""
        refs = dependencies_.dependencies(record)
        namespace = binding["metadata"].get("namespace") or None
        if not refs or namespace is None or await claimed.uid() is not None:
            # A re-created template of the name owns the record's dependencies now: its
            # own reconcile removes what it no longer carries.
            return []
        carriers = await self._hub_list(api.RESOURCE_BINDINGS, namespace)
        release = preservation.releases(record, cluster)  # released with the copy
        found = []
        for ref in refs:
            if await self._placed_by_own_policy(ref, namespace, cluster):
                continue
            if dependencies_.carried_by_another(ref, cluster, carriers,
                                                str(binding["metadata"]["name"])):
                continue
            vertex = await self._dependency_vertex(ref, namespace, cluster, release)
            if vertex is not None:
                found.append(vertex)
        return found

    async def _placed_by_own_policy(self, ref: dependencies_.Ref, namespace: str,
                                    cluster: str) -> bool:
        """Whether the dependency's own binding places it in ``cluster`` (its own reconcile
        keeps it there). One that cannot be read counts as placing it: nothing is deleted on
        the word of a record nobody can read."""
        own = await self.mc.get(api.RESOURCE_BINDINGS, bindings.binding_name(ref.name, ref.kind),
                                namespace, cluster=self.hub, copy=False)
        try:
            return cluster in dependencies_.owned_clusters(dependencies_.own_record(ref, own))
        except bindings.BindingError:
            return True

    async def _dependency_vertex(self, ref: dependencies_.Ref, namespace: str, cluster: str,
                                 release: bool) -> plan.Vertex | None:
        writer = self.mc.cluster(cluster)
        live = await _live(writer, dependencies_.KINDS[ref.kind], ref.name, namespace)
        if live is None or not manifests.is_propagated(live):
            return None
        if release:
            return release_vertex(cluster, live, what=f"dependency {ref}")
        return plan.Vertex(cluster, plan.Action.DELETE, plan.reference(live, exact=True),
                           reason=f"dependency {ref} not needed",
                           expect=plan.Identity.of(live))

    async def _hub_list(self, resource: Resource, namespace: str) -> list[ReadOnly]:
        listing = await self.mc.list(resource, namespace, clusters=[self.hub], copy=False)
        error = listing.errors.get(self.hub)
        if error is not None:
            raise error
        return list(listing.items.get(self.hub, []))


class _Claim:
    """The UID of a live hub template of the binding's name (a re-created one), read once
    per reconcile and only when needed."""

    def __init__(self, reconciler: Reconciler, target: bindings.TemplateRef) -> None:
        self.reconciler = reconciler
        self.target = target
        self._read = False
        self._uid: str | None = None

    async def uid(self) -> str | None:
        if not self._read:
            self._uid = await self.reconciler.claimed_uid(self.target)
            self._read = True
        return self._uid


def _identity(binding: ReadOnly, target: bindings.TemplateRef) -> plan.Identity:
    """The identity a copy of the recorded template has, in the binding's own namespace
    (the executor refuses a delete of anything else)."""
    return plan.Identity(target.api_version.rpartition("/")[0], target.kind,
                         str(binding["metadata"].get("namespace") or ""), target.name)


async def _live(writer: Any, resource: Resource, name: str, namespace: str | None
                ) -> JSON | None:
    """A live read of one member object (None when there is none); any other failure
    raises, so the cluster stays pending."""
    try:
        found: JSON = await writer.get(resource, name, namespace)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    return found
