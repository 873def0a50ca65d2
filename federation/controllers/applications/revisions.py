"""Step 1, load revision: the content hash, the revisions kept, and the one to create.

The revision covers the spec, the Workflow its ``workflow.ref`` names and the external
Policies its deploy steps name (:mod:`federation.applications.revision`); a new content
is a new ``<app>-vN``, planned here as a hub create that every member write of the
reconcile waits for (a revision is on record before anything of it is deployed).
Read-only: the create is a plan vertex.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from federation.applications import definition_revisions, definitions, revision, workflow_ref
from federation.applications.model import AppError
from federation.applications.render import APP_LABEL
from federation.controllers.applications.build import JSON, Build, revision_number
from federation.controllers.applications.compilation import INVALID, RENDERED
from federation.controllers.applications.view import ApplicationView
from federation.controllers.kit import plan
from federation.controllers.kit.chain import Problem, Verdict
from federation.hub import api


async def load_revision(view: ApplicationView, build: Build) -> Verdict | None:
    await read_workflow(view, build)
    build.external = await external_policies(view, build.namespace, build.steps_spec)
    build.catalog = await catalog(view)
    snapshot = revision.content(build.spec, build.external,
                                build.catalog.used(build.steps_spec), build.ref_workflow)
    build.digest = revision.content_hash(snapshot)
    build.revisions = await revisions_of(view, build.namespace, build.name)
    numbers = [(revision_number(r), str((r.get("spec") or {}).get("revisionHash")))
               for r in build.revisions]
    build.number, new = revision.next_revision(numbers, build.digest)
    if new:
        body = revision_body(build, snapshot)
        build.revision_vertex = build.plan.add(plan.Vertex(view.hub, plan.Action.CREATE, body,
                                                           reason="new content"))
        build.revisions.append(body)
    return None


async def read_workflow(view: ApplicationView, build: Build) -> None:
    """The Workflow ``spec.workflow.ref`` names, read from the cache in the Application's
    namespace (no other is ever read), and the spec with its steps; a refusal when it is
    missing or malformed (the Application waits: Workflows are watched)."""
    try:
        name = workflow_ref.name_of(build.spec)
        found = await view.get(api.OAM_WORKFLOWS, name, build.namespace, view.hub) \
            if name is not None else None
        build.ref_workflow = workflow_ref.covered(found)
        build.resolved = workflow_ref.resolved(build.spec, build.ref_workflow, build.namespace)
    except AppError as exc:
        raise Problem(RENDERED, INVALID, str(exc)) from None


async def external_policies(view: ApplicationView, namespace: str,
                            spec: Mapping[str, Any]) -> dict[str, JSON]:
    """The Policies of ``namespace`` the deploy steps name and the spec does not inline,
    as much of each as the revision covers."""
    inline = {p.get("name") for p in spec.get("policies") or [] if isinstance(p, dict)}
    wanted = {str(n) for s in _steps((spec.get("workflow") or {}).get("steps"))
              for n in ((s.get("properties") or {}).get("policies") or [])
              if isinstance(n, str)} - inline
    found: dict[str, JSON] = {}
    for name in sorted(wanted):
        doc = await view.get(api.OAM_POLICIES, name, namespace, view.hub)
        if doc is not None:
            found[name] = {k: doc[k] for k in ("apiVersion", "kind", "type", "properties")
                           if k in doc} | {"metadata": {"name": name, "namespace": namespace}}
    return found


async def catalog(view: ApplicationView) -> definitions.Catalog:
    """Every definition and definition revision on the hub (the cache), as the catalog of
    the system namespaces'."""
    docs = [doc for resource in api.DEFINITIONS for doc in await view.list(resource)]
    found = definitions.catalog(docs, view.settings.definition_namespaces)[0]
    return definition_revisions.with_revisions(
        found, await view.list(api.DEFINITION_REVISIONS))


def _steps(steps: Any) -> list[Mapping[str, Any]]:
    """The workflow's steps and a step group's sub-steps (maps only: the compile refuses
    the rest)."""
    found: list[Mapping[str, Any]] = []
    for step in steps if isinstance(steps, list) else ():
        if isinstance(step, dict):
            found.append(step)
            found.extend(s for s in step.get("subSteps") or () if isinstance(s, dict))
    return found


async def revisions_of(view: ApplicationView, namespace: str, app: str) -> list[Any]:
    """The Application's revisions on the hub (by our label), oldest first."""
    found = [r for r in await view.list(api.APPLICATION_REVISIONS, namespace)
             if ((r.get("metadata") or {}).get("labels") or {}).get(APP_LABEL) == app]
    return sorted(found, key=revision_number)


def revision_body(build: Build, snapshot: Mapping[str, Any]) -> JSON:
    return {"apiVersion": api.APPLICATION_REVISIONS.api_version,
            "kind": "ApplicationRevision",
            "metadata": {"name": revision.revision_name(build.name, build.number),
                         "namespace": build.namespace, "labels": {APP_LABEL: build.name}},
            "spec": {"application": {"metadata": {"name": build.name,
                                                  "namespace": build.namespace},
                                     "spec": copy.deepcopy(snapshot["spec"])},
                     "externalPolicies": copy.deepcopy(snapshot["externalPolicies"]),
                     **({"workflow": copy.deepcopy(snapshot["workflow"])}
                        if "workflow" in snapshot else {}),
                     **({"definitions": copy.deepcopy(snapshot["definitions"])}
                        if "definitions" in snapshot else {}),
                     "revision": build.number, "revisionHash": build.digest},
            "status": {}}
