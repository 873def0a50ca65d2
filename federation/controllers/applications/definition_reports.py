"""The definition controller: Events on definitions not used, revisions of those used.

A definition outside the system namespaces is a tenant's (``DefinitionNotUsed``), one of
the system namespaces' that cannot be honoured is refused (``DefinitionRefused``, naming
the field), and one shadowed by a namespace listed earlier says that (``Shadowed``): the
author learns it from ``kubectl describe``, not from an Application refused elsewhere.
The recorder writes each (object, reason, message) once.

A definition that is used gets its ``DefinitionRevision`` when its spec is new
(:func:`federation.applications.definition_revisions.planned`): created beside it, in its
own namespace, and the oldest past the history limit deleted. Nothing is written for a
tenant's, a refused or a shadowed definition, and nothing outside the definition's
namespace. Like every controller it runs on the leader only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from federation.applications import definition_revisions, definitions
from federation.controllers.applications.view import ApplicationView, Recorder
from federation.controllers.kit import plan
from federation.hub import api
from federation.runtime.reconcile import Request, Result, group_kind

Execute = Callable[[plan.Plan], Awaitable[plan.Report]]

_BY_KIND = {group_kind(r): r for r in api.DEFINITIONS}
_REASONS = {"NotInSystemNamespace": "DefinitionNotUsed", "Refused": "DefinitionRefused",
            "Shadowed": "DefinitionShadowed"}


async def report(view: ApplicationView, recorder: Recorder, execute: Execute,
                 request: Request) -> Result | None:
    resource = _BY_KIND.get(request.kind)
    if resource is None:
        return None
    doc = await view.get(resource, request.name, request.namespace, view.hub)
    if doc is None:
        return None
    same = [d for d in await view.list(resource) if (d.get("metadata") or {}).get("name")
            == request.name]
    catalog, reports = definitions.catalog(same, view.settings.definition_namespaces)
    for found in reports:
        meta = found["doc"].get("metadata") or {}
        if meta.get("namespace") == request.namespace:
            await recorder.emit(doc, "Warning", _REASONS[found["reason"]], found["message"])
    used = catalog.get(definitions.KINDS[str(doc.get("kind"))], request.name)
    if used is not None and used.namespace == request.namespace:
        await write_revisions(view, recorder, execute, doc)
    return None


async def write_revisions(view: ApplicationView, recorder: Recorder, execute: Execute,
                          doc: Mapping[str, Any]) -> None:
    """Create the definition's revision if its spec is new, delete the oldest past the
    limit, and say which is current in its ``status.latestRevision`` (as vela-core); a
    failed write fails the reconcile (retried)."""
    field = definitions.KINDS[str(doc.get("kind"))]
    meta = doc.get("metadata") or {}
    label = definition_revisions.NAME_LABELS[field]
    there = await view.list(api.DEFINITION_REVISIONS, meta.get("namespace"))
    existing = [r for r in there
                if ((r.get("metadata") or {}).get("labels") or {}).get(label) ==
                meta.get("name") and definition_revisions.type_of(r) is not None]
    created, old = definition_revisions.planned(doc, existing)
    if created is not None and await _conflict(recorder, doc, created, there, existing):
        created = None
    dag = plan.Plan()
    first = None if created is None else dag.add(
        plan.Vertex(view.hub, plan.Action.CREATE, created, reason="new spec"))
    for revision in old:
        dag.add(plan.Vertex(view.hub, plan.Action.DELETE, plan.reference(revision),
                            reason=f"past the history limit of "
                                   f"{definition_revisions.HISTORY_LIMIT}"))
    latest = definition_revisions.latest(doc, [*existing, *([created] if created else [])])
    if latest is not None and (doc.get("status") or {}).get("latestRevision") != latest:
        mark = dag.add(plan.Vertex(view.hub, plan.Action.STATUS, {
            "apiVersion": doc.get("apiVersion"), "kind": doc.get("kind"),
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
            "status": {"latestRevision": latest}}, reason="its current revision"))
        if first is not None:
            dag.depend(mark, first)
    if not len(dag):
        return
    (await execute(dag)).raise_for_failure()
    if created is not None:
        await recorder.emit(doc, "Normal", "DefinitionRevisionCreated",
                            f"revision {created['spec']['revision']}: DefinitionRevision "
                            f"{created['metadata']['name']}")


async def _conflict(recorder: Recorder, doc: Mapping[str, Any], created: Mapping[str, Any],
                    there: Sequence[Mapping[str, Any]],
                    existing: Sequence[Mapping[str, Any]]) -> bool:
    """Another definition's revision has the name (a TraitDefinition and a
    ComponentDefinition of one name share vela-core's naming): said, never replaced."""
    taken = {str((r.get("metadata") or {}).get("name")) for r in there} - \
        {str((r.get("metadata") or {}).get("name")) for r in existing}
    name = created["metadata"]["name"]
    if name not in taken:
        return False
    await recorder.emit(doc, "Warning", "DefinitionRevisionConflict",
                        f"no revision written: DefinitionRevision {name} exists and is not "
                        f"this {doc.get('kind')}'s")
    return True
