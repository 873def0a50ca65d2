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
listed in ``spec.pendingCleanup`` it can reach (and, through propagation, the
dependencies the template carried there with ``propagateDeps``), and deletes the binding
when none is left. It runs as many workers as propagation: after an outage it has as
many bindings to finish as propagation has templates to fix.

A template re-created under the same name takes the leftover over (see
:mod:`federation.hub.bindings`): once its reconcile has recorded the
pending clusters, the binding is its own again (``templateDeleted`` false) and
this controller lets it be. Until then both may meet the same member copy,
so this controller never deletes a copy a live template claims (its
``federation.io/template-uid`` is that template's UID: the new template has
already taken it over), and deletes with the copy's resourceVersion as a
precondition, so a copy rewritten between our read and our delete survives.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from federation.contexts.cache import ReadOnly
from federation.contexts.client import ApiError, ClientError
from federation.contexts.multicluster import MultiClusterClient
from federation.contexts.scoped import NotGranted
from federation.controllers.kit import events
from federation.controllers.propagation import preserve
from federation.hub import api, bindings, failover, manifests, status
from federation.runtime.reconcile import Request, Result

log = logging.getLogger("federation.cleanup")
JSON = dict[str, Any]

RETRY = 5.0
"""Seconds between attempts while members are still unreachable (``fedctl run`` passes
PropagationSettings.retry_pending)."""


class Reconciler:
    def __init__(self, mc: MultiClusterClient, hub: str, recorder: events.Recorder,
                 retry: float = RETRY, wait: float = 30.0,
                 gone: Callable[[Request], None] | None = None,
                 clock: Callable[[], float] = time.time,
                 dependencies: Callable[[ReadOnly, str], Awaitable[bool]] | None = None
                 ) -> None:
        self.mc = mc
        self.hub = hub
        self.recorder = recorder
        self.retry = retry
        self.wait = wait
        """PropagationSettings.cleanup_wait: how long pending copies are quiet."""
        self.gone = gone
        """Hands a binding whose template is gone to propagation's queue (the wiring)."""
        self.clock = clock
        self.dependencies = dependencies
        """Deletes what the binding's template carried with ``propagateDeps`` in a cluster
        (propagation's :meth:`~federation.controllers.propagation.Reconciler.
        finish_dependencies`); True when nothing is left there."""

    async def reconcile(self, request: Request) -> Result | None:
        resource = api.RESOURCE_BINDINGS if request.namespace else api.CLUSTER_RESOURCE_BINDINGS
        binding = await self.mc.get(resource, request.name, request.namespace or None,
                                    cluster=self.hub, copy=False)
        if binding is None:
            return None
        try:
            record = bindings.BindingRecord.of(binding)
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
        pending = list(record.pending_cleanup)
        left = [cluster for cluster in pending
                if not await self._finish(binding, record, cluster)]
        writer = self.mc.cluster(self.hub)
        meta = binding["metadata"]
        if not left:
            try:
                await writer.delete(resource, meta["name"], meta.get("namespace"),
                                    resource_version=meta.get("resourceVersion"))
            except ApiError as exc:
                if exc.status == 409:
                    return Result(requeue_after=0.0)  # changed (taken over?): read it again
                if exc.status != 404:
                    raise
            log.info("%s: pending copies removed from %s", meta["name"], ", ".join(pending))
            return None
        if left != pending:
            # One merge patch, spec and status (bindings have no status subresource).
            conditions = [status.condition(
                "CleanupPending", True, "MemberUnreachable",
                f"copies still to delete in {', '.join(left)}", record.conditions)]
            await writer.patch(resource, meta["name"],
                               {"spec": {"pendingCleanup": left},
                                "status": {"conditions": conditions}},
                               namespace=meta.get("namespace"),
                               resource_version=meta.get("resourceVersion"))
        await self._warn_if_lasting(binding, record, left)
        return Result(requeue_after=self.retry)

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

    async def _claimed_uid(self, target: bindings.TemplateRef) -> str | None:
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

    async def _finish(self, binding: ReadOnly, record: bindings.BindingRecord,
                      cluster: str) -> bool:
        """True when ``cluster`` holds neither the copy nor a carried dependency any more
        (the copy first: a dependency goes only once its workload has)."""
        if not await self._clean(binding, record, cluster):
            return False
        if self.dependencies is None or not record.behaviour.dependencies:
            return True
        if await self._claimed_uid(record.resource) is not None:
            # A re-created template of the name owns the record's dependencies now: its
            # own reconcile removes what it no longer carries (its binding shares the
            # name, so it would not count as another carrier here).
            return True
        return await self.dependencies(binding, cluster)

    async def _clean(self, binding: ReadOnly, record: bindings.BindingRecord,
                     cluster: str) -> bool:
        """True when ``cluster`` holds no copy of the deleted template any more."""
        target = record.resource
        try:
            writer = self.mc.cluster(cluster)
            resource = await writer.resource(target.to_obj())
            live = await writer.get(resource, target.name, target.namespace or None)
        except ApiError as exc:
            return exc.status == 404
        except ClientError as exc:
            # Every retry of an outage: DEBUG (the cluster's transition is logged once).
            log.debug("%s: %s still unreachable: %s", binding["metadata"]["name"], cluster, exc)
            return False
        if not manifests.is_propagated(live):
            return True
        meta = live["metadata"]
        marked = (meta.get("annotations") or {}).get(manifests.TEMPLATE_UID_ANNOTATION)
        if marked and marked == await self._claimed_uid(target):
            return True  # the re-created template has taken this copy over
        try:
            # preserveResourcesOnDeletion: release it, unless the template had left the
            # cluster before its deletion (then it goes, as any cluster left loses its copy).
            if preserve.releases(record, cluster):
                await writer.update(preserve.released(live), resource=resource)
            else:
                await writer.delete(resource, target.name, target.namespace or None,
                                    uid=meta.get("uid"),
                                    resource_version=meta.get("resourceVersion"))
        except ApiError as exc:
            return exc.status == 404  # 409: rewritten since we read it; look again next time
        except ClientError:
            return False
        return True
