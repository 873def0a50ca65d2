"""The config-store steps on the hub (:mod:`federation.applications.config_store`).

:func:`observe` (part of step 6, evaluate workflow) reads, for each config-store step not
ended yet, the Secret it names (list-config: the namespace's Secrets) from the hub's cache
of Secrets, in the Application's own namespace only. That cache is the scoped one
(:mod:`federation.controllers.kit.secrets`): Secrets are cached only in namespaces granted
to the control plane, and a read elsewhere is ``NotGranted``, which the step shows while it
waits. The decision of each step goes to the state machine; a read's ``config`` (or a
list's ``configs``) is the step's ``output``, kept only where the step's ``outputs`` say.

:func:`plan_writes`, once the state machine has run, plans the hub writes of the steps
running now: a create (POST: never over an object of that name), an update carrying the
resourceVersion of the store Secret read (a Secret put in its place since fails with 409)
or a delete with that version's UID and resourceVersion as preconditions. The step stays
running until the cache shows the write, so it never succeeds on a write that did not
happen; :func:`written` makes a failed write a problem (retried) and a made one an Event.
No message, Event or status names a value of a config.
"""

from __future__ import annotations

from federation.applications import config_store, workflow
from federation.contexts.client import ClientError
from federation.controllers.applications.build import JSON, Build
from federation.controllers.applications.view import ApplicationView
from federation.controllers.kit import plan
from federation.controllers.kit.secrets import SECRETS

WRITTEN = "ConfigWritten"
DELETED = "ConfigDeleted"


async def observe(view: ApplicationView, build: Build) -> dict[str, JSON]:
    """``output`` of each config-store step not ended yet (its decision in
    :attr:`Build.stores`)."""
    assert build.compiled is not None and build.state is not None
    ended = {s.name for s in build.state.steps if s.phase in workflow.FINISHED}
    found: dict[str, JSON] = {}
    for step, chosen in build.compiled.stores.items():
        if step in ended:
            continue
        decision = await _decide(view, build, chosen)
        build.stores[step] = decision
        found[step] = config_store.output(chosen, decision)
    return found


async def _decide(view: ApplicationView, build: Build, chosen: config_store.StoreStep
                  ) -> config_store.Decision:
    try:
        if chosen.kind == "list":
            listing = await view.list(SECRETS, build.namespace)
            return config_store.decide(chosen, build.namespace, build.owner, None, listing)
        live = await view.get(SECRETS, chosen.name, build.namespace, view.hub)
    except ClientError as exc:
        return config_store.Decision("waiting", f"cannot read the config store: {exc}")
    return config_store.decide(chosen, build.namespace, build.owner, live)


def outcomes(build: Build) -> dict[str, tuple[str, str]]:
    """What the state machine sees of each decision."""
    return {step: (d.outcome, d.message) for step, d in build.stores.items()}


def plan_writes(hub: str, build: Build) -> None:
    """The hub writes of the config-store steps running after this evaluation."""
    assert build.state is not None and build.compiled is not None
    running = {s.name for s in build.state.steps if s.phase == "running"}
    for step, decision in build.stores.items():
        if step not in running or decision.outcome != "write" or decision.write is None:
            continue
        vertex = build.plan.add(_vertex(hub, build.compiled.stores[step].kind, step,
                                        decision.write))
        if build.revision_vertex is not None:
            build.plan.depend(vertex, build.revision_vertex)
        build.store_writes[vertex.key] = step


def _vertex(hub: str, kind: str, step: str, body: JSON) -> plan.Vertex:
    reason = f"{kind}-config step {step}"
    if kind == "delete":
        return plan.Vertex(hub, plan.Action.DELETE, plan.reference(body, exact=True),
                           reason=reason)
    meta = body["metadata"]
    if meta.get("resourceVersion"):
        return plan.Vertex(hub, plan.Action.UPDATE, body, reason=reason,
                           expect=plan.Identity.of(body))
    return plan.Vertex(hub, plan.Action.CREATE, body, reason=reason,
                       expect=plan.Identity.of(body))


def written(build: Build, report: plan.Report) -> None:
    """A failed write is a problem (retried; the step keeps running), a made one an Event
    once the status is written."""
    for key, step in build.store_writes.items():
        result = report.outcomes.get(key)
        if result is None:
            continue
        name = result.vertex.obj["metadata"]["name"]
        deleting = result.vertex.action is plan.Action.DELETE
        what = f"config {name} ({'deleting' if deleting else 'writing'} Secret " \
               f"{build.namespace}/{name})"
        if not result.ok:
            build.problems.append(f"step {step}: {what}: {_error(result.error)}")
        else:
            build.events.append(("Normal", DELETED if deleting else WRITTEN,
                                 f"config {name} {'deleted' if deleting else 'written'} by "
                                 f"step {step}"))


def _error(error: str | None) -> str:
    """The write's error, at most one line of 300 characters (an API server's answer
    names the object and the reason, never the data sent)."""
    line = (error or "failed").splitlines()[0] if error else "failed"
    return line[:300]
