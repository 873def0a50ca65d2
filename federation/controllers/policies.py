"""Policy validation on the hub: a ``Valid`` condition and an event per policy.

Policy CRDs keep their spec schema open (unknown fields preserved) so that a
typo reaches our validation, which names it, instead of being pruned in
silence by the API server. This controller runs that validation on every
policy change and writes the verdict as the policy's ``Valid`` condition
(shown by ``kubectl get pp``) plus a Warning event when it is invalid. Invalid
policies place nothing; the propagation controller skips them.
"""

from __future__ import annotations

from typing import Any

from federation.contexts.client import Resource
from federation.contexts.multicluster import MultiClusterClient
from federation.controllers import api, events, overrides, status
from federation.placement import loader
from federation.runtime.reconcile import Request, Result

JSON = dict[str, Any]
BY_KIND = {r.kind: r for r in (api.PROPAGATION_POLICIES, api.CLUSTER_PROPAGATION_POLICIES,
                               api.OVERRIDE_POLICIES, api.CLUSTER_OVERRIDE_POLICIES)}


def problem(doc: JSON) -> str | None:
    """Why the policy is invalid (field path and message), or None."""
    body = {k: v for k, v in doc.items() if k != "status"}
    where = f"{doc.get('kind')} {doc['metadata'].get('name')}"
    try:
        if doc.get("kind") in overrides.KINDS:
            overrides.parse(body)
        else:
            loader.parse_policy(body, where)
    except loader.LoadError as exc:
        return f"{exc.path}: {exc.message}" if exc.path else exc.message
    except overrides.OverrideError as exc:
        return str(exc)
    return None


class Reconciler:
    def __init__(self, mc: MultiClusterClient, hub: str, recorder: events.Recorder) -> None:
        self.mc = mc
        self.hub = hub
        self.recorder = recorder

    async def reconcile(self, request: Request) -> Result | None:
        resource: Resource = BY_KIND[request.kind.split(".", 1)[0]]
        doc = await self.mc.get(resource, request.name, request.namespace or None,
                                cluster=self.hub)
        if doc is None:
            return None
        found = problem(doc)
        previous = (doc.get("status") or {}).get("conditions") or []
        condition = status.condition("Valid", found is None,
                                     "Valid" if found is None else "Invalid",
                                     found or "policy is valid", previous)
        if any(c.get("type") == "Valid" and c.get("status") == condition["status"]
               and c.get("message") == condition["message"] for c in previous):
            return None
        if found is not None:
            await self.recorder.emit(doc, "Warning", "InvalidPolicy", found)
        meta = doc["metadata"]
        await self.mc.cluster(self.hub).patch_status(
            resource, meta["name"], {"status": {"conditions": [condition]}},
            namespace=meta.get("namespace"))
        return None
