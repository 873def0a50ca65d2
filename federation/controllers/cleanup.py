"""Finishing deletions a template could not wait for.

When a template is deleted while a member holding its copy is unreachable,
the propagation controller waits a bounded time, then releases the template
and leaves its ResourceBinding with ``spec.templateDeleted: true`` and
``status.pendingCleanup`` listing those members. This controller retries them:
on every binding event, every MemberCluster change and every few seconds, it
deletes our copy (only ours: the ownership label is checked) in each member
listed in ``spec.pendingCleanup`` it can reach, and deletes the binding when none
is left.
"""

from __future__ import annotations

import logging
from typing import Any

from federation.contexts.client import ApiError, ClientError
from federation.contexts.multicluster import MultiClusterClient
from federation.controllers import api, events, manifests, status
from federation.runtime.reconcile import Request, Result

log = logging.getLogger("federation.cleanup")
JSON = dict[str, Any]

RETRY = 5.0
"""Seconds between attempts while members are still unreachable."""


class Reconciler:
    def __init__(self, mc: MultiClusterClient, hub: str, recorder: events.Recorder) -> None:
        self.mc = mc
        self.hub = hub
        self.recorder = recorder

    async def reconcile(self, request: Request) -> Result | None:
        resource = api.RESOURCE_BINDINGS if request.namespace else api.CLUSTER_RESOURCE_BINDINGS
        binding = await self.mc.get(resource, request.name, request.namespace or None,
                                    cluster=self.hub)
        if binding is None or not (binding.get("spec") or {}).get("templateDeleted"):
            return None
        pending = list(binding["spec"].get("pendingCleanup") or [])
        left = [cluster for cluster in pending if not await self._clean(binding, cluster)]
        writer = self.mc.cluster(self.hub)
        meta = binding["metadata"]
        if not left:
            try:
                await writer.delete(resource, meta["name"], meta.get("namespace"))
            except ApiError as exc:
                if exc.status != 404:
                    raise
            log.info("%s: pending copies removed from %s", meta["name"], ", ".join(pending))
            return None
        if left != pending:
            await writer.patch(resource, meta["name"], {"spec": {"pendingCleanup": left}},
                               namespace=meta.get("namespace"),
                               resource_version=meta.get("resourceVersion"))
            conditions = [status.condition(
                "CleanupPending", True, "MemberUnreachable",
                f"copies still to delete in {', '.join(left)}",
                (binding.get("status") or {}).get("conditions") or [])]
            await writer.patch_status(resource, meta["name"],
                                      {"status": {"pendingCleanup": left,
                                                  "conditions": conditions}},
                                      namespace=meta.get("namespace"))
        return Result(requeue_after=RETRY)

    async def _clean(self, binding: JSON, cluster: str) -> bool:
        """True when ``cluster`` holds no copy of ours any more."""
        target = (binding.get("spec") or {}).get("resource") or {}
        try:
            writer = self.mc.cluster(cluster)
            resource = await writer.resource(target)
            live = await writer.get(resource, target["name"], target.get("namespace"))
        except ApiError as exc:
            return exc.status == 404
        except ClientError as exc:
            log.info("%s: %s still unreachable: %s", binding["metadata"]["name"], cluster, exc)
            return False
        if not manifests.is_ours(live):
            return True
        try:
            await writer.delete(resource, target["name"], target.get("namespace"),
                                uid=live["metadata"].get("uid"))
        except ApiError as exc:
            return exc.status == 404
        except ClientError:
            return False
        return True
