"""The ``Valid`` condition of ConfigConstraints (cluster-scoped, written by admins).

The CRD keeps the spec open so that a typo reaches this validation, which names the
field, instead of being pruned by the API server. The condition is what ``kubectl get cc``
shows; policies naming an invalid constraint are refused (``InvalidConstraint``) by the
rollout reconciler, which reads the same spec through the same model.
"""

from __future__ import annotations

import pydantic

from federation.contexts.cache import ReadOnly
from federation.controllers.rollouts import load, rollout
from federation.controllers.rollouts.view import RolloutView, StatusWriter
from federation.hub import rollouts as hub_api
from federation.runtime.reconcile import Request, Result


def problem(doc: ReadOnly) -> str | None:
    """Why the constraint's spec is invalid (field path and message), or None."""
    try:
        hub_api.parsed_constraint(doc)
    except pydantic.ValidationError as exc:
        return load.validation_message(exc, "spec")
    return None


class Reconciler:
    def __init__(self, view: RolloutView, writer: StatusWriter) -> None:
        self.view = view
        self.writer = writer

    async def reconcile(self, request: Request) -> Result | None:
        doc = await self.view.constraint(hub_api.ConstraintKind.CONFIG_CONSTRAINT.value,
                                         request.name)
        if doc is None:
            return None
        found = problem(doc)
        previous = (doc.get("status") or {}).get("conditions") or []
        wanted = rollout.condition("Valid", found is None, "Valid" if found is None else "Invalid",
                                   found or "the constraint is valid", previous,
                                   self.view.now())
        if any(c.get("type") == "Valid" and c.get("status") == wanted["status"]
               and c.get("message") == wanted["message"] for c in previous):
            return None
        kept = [dict(c) for c in previous if c.get("type") != "Valid"]
        await self.writer.constraint_status(request.name, {"status": {"conditions":
                                                                      [*kept, wanted]}})
        return None
