"""Step 6, evaluate workflow: the pure state machine (:mod:`federation.applications.workflow`)
advanced with the health observed and the clock, and what each reached cluster holds.

For every deploy step, the clusters it has started hold this revision's objects for that
step; once the workflow succeeded (or failed, with the garbage-collect policy's
``continueOnFailure``) every tracked cluster is final (those the release no longer targets
are cleaned too). A failed step that asks for ``rollbackOnFailure``
records a rollback to the last revision that succeeded, deployed from the next reconcile
on. A step waiting asks to be looked at again; a running depends-on-app step whose
Application is missing plans its create (:mod:`.dependencies`). While a rollback is
recorded the workflow is not evaluated: :mod:`.rollback` says what deploys.
"""

from __future__ import annotations

import copy
from typing import Any

from federation.applications import endpoints, revision, steps, workflow
from federation.applications.tracker import Entry
from federation.contexts.client import ClientError
from federation.controllers.applications import calls, dependencies, stores
from federation.controllers.applications.build import JSON, Build, last_good
from federation.controllers.applications.settings import stamp
from federation.controllers.applications.view import ApplicationView
from federation.controllers.kit.chain import Verdict, requeue
from federation.hub import manifests


async def evaluate_workflow(view: ApplicationView, build: Build) -> Verdict | None:
    if build.status.get("rollback"):
        return None
    compiled, state = build.compiled, build.state
    assert compiled is not None and state is not None
    now = view.now()
    outputs = await applied_objects(view, build)  # the config-store steps' decisions too
    obs = workflow.Observations(build.health, build.resume, compiled.health.window,
                                compiled.health.probe_interval, outputs, context_of(build),
                                build.component_health, stores=stores.outcomes(build))
    state, build.actions = workflow.evaluate(state, compiled.steps, obs, now)
    build.state = state
    dependencies.plan_creations(view.hub, build)
    stores.plan_writes(view.hub, build)
    held(build)
    done = state.phase == "succeeded" or (state.phase == "failed"
                                          and compiled.gc.continue_on_failure)
    build.final = {e.cluster for e in build.entries()} if done else set()
    if any(isinstance(a, workflow.Rollback) for a in build.actions):
        good = last_good(build.revisions, build.number)
        if good is not None:
            build.status["rollback"] = {"revision": good, "from": build.number,
                                        "time": stamp(now)}
    waits = [a.seconds for a in build.actions if isinstance(a, workflow.Wait)]
    due = state.restart_due()
    if due is not None:  # a restart-workflow step's schedule: looked at again then
        waits.append(max(due - now, 0.0))
    if build.restart_asked and state.end is not None:  # ``true``: it ended, restart it
        waits.append(0.0)
    return requeue(min(waits)) if waits else None


def held(build: Build) -> None:
    """What each reached (cluster, step) holds: this revision's objects, but those a
    clean-jobs step took away since the step ended (then deleted through the tracker, as
    any object no longer held: only what this Application placed) and those an ordered
    deploy has not released yet (kept as they are)."""
    compiled, state = build.compiled, build.state
    assert compiled is not None and state is not None
    specs = {s.name: s for s in compiled.steps}
    states = {s.name: s for s in state.steps}
    cleaned = workflow.cleaning(state, compiled.cleans)
    for step, clusters in workflow.assignments(state).items():
        for cluster in clusters:
            objects = [o for o in compiled.targets[step].clusters.get(cluster, ())
                       if not any(steps.cleaned(o, build.namespace, selector)
                                  for selector in cleaned.get(step, ()))]
            now_held, later = workflow.held(specs[step], states[step], cluster, objects)
            build.desired[(cluster, step)] = [(o, build.number) for o in now_held]
            build.hold |= {Entry.of(cluster, o, build.number, step).key for o in later}


def context_of(build: Build) -> dict[str, Any]:
    """KubeVela's ``context`` in the workflow's expressions (``context.name``...)."""
    return {"name": build.name, "namespace": build.namespace, "appName": build.name,
            "appRevision": revision.revision_name(build.name, build.number),
            "appRevisionNum": build.number, "workflowName": build.name}


async def applied_objects(view: ApplicationView, build: Build) -> dict[str, JSON]:
    """``output`` of each apply-component step with outputs that has started: its
    component's first object (the workload) as read back from its cluster's cache, as
    KubeVela reads it back after the apply. Only what this Application placed: the
    objects of its own rendered target."""
    assert build.compiled is not None and build.state is not None
    started = workflow.assignments(build.state)
    found: dict[str, JSON] = {}
    for spec in build.compiled.steps:
        target = build.compiled.targets.get(spec.name)
        if spec.type != "apply-component" or not spec.outputs or target is None:
            continue
        for cluster in started.get(spec.name, ()):
            objects: list[JSON] = list(target.clusters.get(cluster) or ())
            live = await read_back(view, cluster, objects[0]) if objects else None
            if live is not None:
                found[spec.name] = live
    found.update(await read_objects(view, build))
    found.update(await collected_endpoints(view, build))
    found.update(await dependencies.awaited_apps(view, build))
    found.update(await stores.observe(view, build))
    found.update(answers(view, build))
    return found


def answers(view: ApplicationView, build: Build) -> dict[str, JSON]:
    """Each running HTTP step's observation of the call it waits for, once answered."""
    assert build.state is not None
    found: dict[str, JSON] = {}
    for step in calls.waiting(build.state):
        answer = view.answered(calls.key_of(build.app, build.state, step), step.type)
        if answer is not None:
            found[step.name] = answer
    return found


async def collected_endpoints(view: ApplicationView, build: Build) -> dict[str, JSON]:
    """The template of each collect-service-endpoints step not ended yet, from the
    endpoints of the Application's own Services and Ingresses: the ones this revision
    renders (of the step's components) in the clusters its steps started, read from those
    clusters' caches, and only when the live object is this Application's (our
    annotation names it): another's object of that name is not read."""
    assert build.compiled is not None and build.state is not None
    ended = {s.name for s in build.state.steps if s.phase in workflow.FINISHED}
    pending = {n: c for n, c in build.compiled.collects.items() if n not in ended}
    if not pending:
        return {}
    found = await _own_endpoints(view, build)
    return {name: endpoints.template(chosen, [
        e for e in found if chosen.components is None or e["component"] in chosen.components])
        for name, chosen in pending.items()}


async def _own_endpoints(view: ApplicationView, build: Build) -> list[JSON]:
    assert build.compiled is not None and build.state is not None
    found: list[JSON] = []
    seen: set[tuple[str, str, str]] = set()
    for step, clusters in workflow.assignments(build.state).items():
        target = build.compiled.targets.get(step)
        for cluster in clusters if target is not None else ():
            for obj in target.clusters.get(cluster) or () if target else ():
                key = (cluster, obj["kind"], obj["metadata"]["name"])
                if not endpoints.collectable(obj) or key in seen:
                    continue
                seen.add(key)
                live = await read_back(view, cluster, obj)
                if live is not None and manifests.application_of(live) == build.owner:
                    found.extend(endpoints.of_object(live, cluster,
                                                     workflow.component_of(obj)))
    return found


async def read_objects(view: ApplicationView, build: Build) -> dict[str, JSON]:
    """``output`` of each read-object step not ended yet: the object it names, read from
    the cache of the hub or of a member the Application deploys to, in the Application's
    own namespace (the compile checked where; KubeVela's ``$returns.value``, and
    ``value`` as its older ``op.#Read`` gave it), or ``$returns.err`` saying why not."""
    assert build.compiled is not None and build.state is not None
    ended = {s.name for s in build.state.steps if s.phase in workflow.FINISHED}
    return {name: await read_object(view, build.namespace, read)
            for name, read in build.compiled.reads.items() if name not in ended}


async def read_object(view: ApplicationView, namespace: str, read: steps.Read) -> JSON:
    cluster = read.cluster or view.hub
    what = f"{read.kind} {namespace}/{read.name} on {read.cluster or 'the hub'}"
    request = {"apiVersion": read.api_version, "kind": read.kind,
               "metadata": {"name": read.name, "namespace": namespace}}
    params = {"cluster": read.cluster, "value": request}
    try:
        resource = await view.resource(cluster, request)
        if resource.kind == "Secret" or not resource.namespaced:
            # the compile refuses both by name; discovery may map a kind differently
            return {"$params": params, "$returns": {"err": f"{what}: not readable"}}
        live = await view.get(resource, read.name, namespace, cluster)
    except ClientError as exc:
        return {"$params": params, "$returns": {"err": f"cannot read {what}: {exc}"}}
    if live is None:
        return {"$params": params, "$returns": {"err": f"{what} not found"}}
    value = readable(live)
    return {"$params": params, "$returns": {"value": value}, "value": value}


async def read_back(view: ApplicationView, cluster: str, obj: JSON) -> JSON | None:
    meta = obj["metadata"]
    try:
        resource = await view.resource(cluster, obj)
        live = await view.get(resource, meta["name"], meta.get("namespace"), cluster)
    except ClientError:
        return None
    return readable(live) if live is not None else None


def readable(live: Any) -> JSON:
    """What an expression may read of an applied object: a copy without a Secret's data
    (a member's token controller fills a Secret the author did not write; the value
    would be kept in the Application's status) and without ``managedFields``."""
    found: JSON = copy.deepcopy(dict(live))
    found.get("metadata", {}).pop("managedFields", None)
    if found.get("kind") == "Secret" and found.get("apiVersion") == "v1":
        found.pop("data", None)
        found.pop("stringData", None)
    return found
