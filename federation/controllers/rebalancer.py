"""The WorkloadRebalancer controller (``workload-rebalancer``): Karmada's, on our bindings.

For each workload a rebalancer lists that has no result yet, the workload's binding (by
Karmada's name, ``<name>-<kind>``) gets ``rescheduleTriggeredAt`` = the rebalancer's
creation time, unless it already has a later one; the propagation controller follows
binding changes of that field and divides the workload once with Karmada's Fresh
assignment. A binding that does not exist (or is another object's) makes the workload
``Failed`` / ``ReferencedBindingNotFound``; any other failure (a conflict with
propagation's own write of the binding, the hub away) leaves it without a result and the
rebalancer is retried with backoff. The status (:mod:`federation.hub.rebalancers`) is
written only when it changes, with ``finishTime`` once every workload has a result; with
``ttlSecondsAfterFinished`` the rebalancer is deleted that long after (conditional on the
version read, so an edit in between is not lost).

Writes: the bindings' spec (a PUT with the cached version) and the rebalancer's status
subresource and deletion, all through the multi-cluster client. A rebalancer is
cluster-scoped: only whoever may create those may ask for a fresh division, in any
namespace (as in Karmada).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

from federation.contexts.client import ApiError, ClientError
from federation.contexts.multicluster import MultiCluster
from federation.controllers.kit import events
from federation.hub import api, bindings, failover, rebalancers
from federation.runtime.reconcile import Request, Result

log = logging.getLogger("federation.rebalancer")


class TriggersFailed(Exception):
    """Some bindings could not be written now; the rebalancer is retried with backoff."""

    retryable = True


class Reconciler:
    def __init__(self, mc: MultiCluster, hub: str, recorder: events.EventSink,
                 clock: Callable[[], float] = time.time) -> None:
        self.mc = mc
        self.hub = hub
        self.recorder = recorder
        self.clock = clock

    async def reconcile(self, request: Request) -> Result | None:
        doc = await self.mc.get(api.WORKLOAD_REBALANCERS, request.name, None, cluster=self.hub)
        if doc is None or doc["metadata"].get("deletionTimestamp"):
            return None
        try:
            rebalancer = rebalancers.parse(doc)
        except rebalancers.RebalancerError as exc:
            await self.recorder.emit(doc, "Warning", "InvalidRebalancer", str(exc))
            return None
        observed, retries = await self._trigger(rebalancer)
        finish = rebalancer.finish_time
        wanted = rebalancer.status_obj(observed, finish)
        version = doc["metadata"].get("resourceVersion")
        if wanted != rebalancer.current_status():
            if not retries:
                finish = failover.format_time(self.clock())
                wanted = rebalancer.status_obj(observed, finish)
            written = await self.mc.cluster(self.hub).patch_status(
                api.WORKLOAD_REBALANCERS, rebalancer.name, {"status": wanted})
            version = written.get("metadata", {}).get("resourceVersion", version)
        if retries:
            raise TriggersFailed(f"{retries} workload(s) of WorkloadRebalancer "
                                 f"{rebalancer.name} could not be triggered yet")
        return await self._expire(rebalancer, finish, version)

    async def _expire(self, rebalancer: rebalancers.Rebalancer, finish: str | None,
                      version: str | None) -> Result | None:
        left = rebalancers.seconds_left(rebalancer, finish, self.clock())
        if left is None:
            return None
        if left > 0:
            return Result(requeue_after=left)
        try:
            await self.mc.cluster(self.hub).delete(api.WORKLOAD_REBALANCERS, rebalancer.name,
                                                   resource_version=version)
        except ApiError as exc:
            if exc.status not in (404, 409):
                raise
            # Gone already, or changed since it was read: its event brings it back.
        return None

    async def _trigger(self, rebalancer: rebalancers.Rebalancer
                       ) -> tuple[tuple[rebalancers.Observed, ...], int]:
        """Each workload's result after this round, and how many must be retried."""
        found: list[rebalancers.Observed] = []
        retries = 0
        for item in rebalancers.synced(rebalancer):
            if not item.result:
                result = await self._trigger_one(rebalancer, item.workload)
                if result is None:
                    retries += 1
                else:
                    item = result
            found.append(item)
        return tuple(found), retries

    async def _trigger_one(self, rebalancer: rebalancers.Rebalancer,
                           workload: rebalancers.Workload) -> rebalancers.Observed | None:
        """Successful, Failed (no binding), or None (retry)."""
        resource = api.RESOURCE_BINDINGS if workload.namespace else api.CLUSTER_RESOURCE_BINDINGS
        name = bindings.binding_name(workload.name, workload.kind)
        namespace = workload.namespace or None
        not_found = rebalancers.Observed(workload, rebalancers.FAILED, rebalancers.NOT_FOUND)
        try:
            binding = await self.mc.get(resource, name, namespace, cluster=self.hub)
            record = bindings.read(binding) if binding is not None else None
            if binding is None or (record is not None and (
                    not record.records(workload.kind, workload.name) or record.template_deleted)):
                return not_found
            if record is None:
                log.warning("%s: the binding of %s is unreadable; not triggered",
                            rebalancer.name, workload.describe())
                return None
            if rebalancers.needs_trigger(rebalancer.created,
                                         record.behaviour.reschedule_triggered_at):
                asked = dataclasses.replace(record.behaviour,
                                            reschedule_triggered_at=rebalancer.created)
                await self.mc.cluster(self.hub).update(
                    bindings.replaced(binding, dataclasses.replace(record, behaviour=asked)),
                    resource=resource)
        except ApiError as exc:
            if exc.status == 404:
                return not_found
            log.info("%s: %s not triggered yet: %s", rebalancer.name, workload.describe(), exc)
            return None
        except ClientError as exc:
            log.info("%s: %s not triggered yet: %s", rebalancer.name, workload.describe(), exc)
            return None
        return rebalancers.Observed(workload, rebalancers.SUCCESSFUL)
