"""depends-on-app on the hub: the Application each waiting step names, and the one it
creates from a ConfigMap when that Application does not exist (vela-core's way).

:func:`awaited_apps` (part of step 6, evaluate workflow) reads, from the hub's cache and in
the waiting Application's own namespace only, the Application each step not ended yet
names; only its name and ``status.status`` are kept for the step. When it is missing,
the ConfigMap of that name *in the same namespace* is read and what it holds checked by
:mod:`federation.applications.depends_on_app`; :func:`plan_creations`, once the state
machine has run, plans the hub create for the steps whose turn it is (a step still
pending creates nothing), and :func:`created` reads the executor's report: a failed
create is a problem of the reconcile (retried), a made one an Event. Read-only but for
the plan vertices; the ConfigMap's content never reaches a message or the status.
"""

from __future__ import annotations

from federation.applications import depends_on_app, workflow
from federation.applications.model import AppError
from federation.contexts import client as kube
from federation.contexts.client import ClientError
from federation.controllers.applications.build import JSON, Build
from federation.controllers.applications.view import ApplicationView
from federation.controllers.kit import plan
from federation.hub import api

CREATED = "ApplicationCreated"
"""The Event reason of an Application a depends-on-app step created."""


async def awaited_apps(view: ApplicationView, build: Build) -> dict[str, JSON]:
    """``dependsOn`` of each depends-on-app step not ended yet: the Application it names,
    of this Application's namespace on the hub (its name and phase), or why not."""
    assert build.compiled is not None and build.state is not None
    ended = {s.name for s in build.state.steps if s.phase in workflow.FINISHED}
    found: dict[str, JSON] = {}
    for step, name in build.compiled.awaits.items():
        if step not in ended:
            found[step] = {"dependsOn": {"$returns": await _returns(view, build, step, name)}}
    return found


async def _returns(view: ApplicationView, build: Build, step: str, name: str) -> JSON:
    what = f"Application {build.namespace}/{name} on the hub"
    try:
        live = await view.get(api.APPLICATIONS, name, build.namespace, view.hub)
    except ClientError as exc:
        return {"err": f"cannot read {what}: {exc}"}
    if live is None:
        return {"err": f"{what} not found{await _missing(view, build, step, name)}"}
    shown = live.get("status")  # whoever may write its status chose its shape
    phase = shown.get("status") if isinstance(shown, dict) else None
    return {"value": {"metadata": {"name": name, "namespace": build.namespace},
                      "status": {"status": phase if isinstance(phase, str) else ""}}}


async def _missing(view: ApplicationView, build: Build, step: str, name: str) -> str:
    """What the step does about a missing Application (the rest of its message): the
    ConfigMap of that name in this namespace, checked; the create is kept for
    :func:`plan_creations`."""
    source = f"ConfigMap {build.namespace}/{name}"
    try:
        config_map = await view.get(kube.CONFIGMAPS, name, build.namespace, view.hub)
    except ClientError as exc:
        return f"; cannot read {source}: {exc}: waiting for it"
    if config_map is None:
        return f", nor {source} to create it from: waiting for it"
    try:
        build.creations[step] = depends_on_app.application(
            config_map, name, build.namespace, build.owner, step)
    except AppError as exc:
        return f"; not created: {exc}: waiting for it"
    return f": creating it from {source}"


def plan_creations(hub: str, build: Build) -> None:
    """The hub creates of the running depends-on-app steps' missing Applications, after
    the new revision is on record. An Application created meanwhile by someone else (409
    AlreadyExists) is the one waited for: see :func:`shared`."""
    assert build.state is not None
    running = {s.name for s in build.state.steps if s.phase == "running"}
    for step, body in build.creations.items():
        if step not in running:
            continue
        vertex = build.plan.add(plan.Vertex(hub, plan.Action.CREATE, body,
                                            reason=f"depends-on-app step {step}",
                                            expect=plan.Identity.of(body)))
        if build.revision_vertex is not None:
            build.plan.depend(vertex, build.revision_vertex)
        build.created[vertex.key] = step


def shared(build: Build) -> list[str]:
    """The creates for which 409 AlreadyExists is done."""
    return list(build.created)


def created(build: Build, report: plan.Report) -> None:
    """What became of the creates: a failure is a problem (the reconcile is retried and
    the step keeps waiting), a create an Event once the status is written."""
    for key, step in build.created.items():
        result = report.outcomes.get(key)
        if result is None:
            continue
        meta = result.vertex.obj["metadata"]
        what = f"Application {meta['namespace']}/{meta['name']}"
        if not result.ok:
            build.problems.append(f"depends-on-app step {step}: creating {what}: "
                                  f"{result.error}")
        elif ((result.result or {}).get("metadata") or {}).get("uid"):  # made by us:
            # a 409 (made first by someone else) counts as done but has no server answer
            build.events.append(("Normal", CREATED, f"{what} created from ConfigMap "
                                 f"{meta['namespace']}/{meta['name']} by step {step}"))
