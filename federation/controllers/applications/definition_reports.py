"""Definitions that are not used say so: a Warning Event on each.

A definition outside the system namespaces is a tenant's (``DefinitionNotUsed``), one of
the system namespaces' that cannot be honoured is refused (``DefinitionRefused``, naming
the field), and one shadowed by a namespace listed earlier says that (``Shadowed``): the
author learns it from ``kubectl describe``, not from an Application refused elsewhere.
Read-only but for the Event; the recorder writes each (object, reason, message) once.
"""

from __future__ import annotations

from federation.applications import definitions
from federation.controllers.applications.view import ApplicationView, Recorder
from federation.hub import api
from federation.runtime.reconcile import Request, Result, group_kind

_BY_KIND = {group_kind(r): r for r in api.DEFINITIONS}
_REASONS = {"NotInSystemNamespace": "DefinitionNotUsed", "Refused": "DefinitionRefused",
            "Shadowed": "DefinitionShadowed"}


async def report(view: ApplicationView, recorder: Recorder, request: Request
                 ) -> Result | None:
    resource = _BY_KIND.get(request.kind)
    if resource is None:
        return None
    doc = await view.get(resource, request.name, request.namespace, view.hub)
    if doc is None:
        return None
    same = [d for d in await view.list(resource) if (d.get("metadata") or {}).get("name")
            == request.name]
    _, reports = definitions.catalog(same, view.settings.definition_namespaces)
    for found in reports:
        meta = found["doc"].get("metadata") or {}
        if meta.get("namespace") == request.namespace:
            await recorder.emit(doc, "Warning", _REASONS[found["reason"]], found["message"])
    return None
