"""Step 5, observe health: what each reached (deploy step, cluster) shows in the caches.

A cluster is healthy for a step when every object the step put there is the content we
wrote (its applied-hash is the digest of exactly what we would write now) and each
workload reports all replicas ready and updated at its current generation; a Deployment
saying ``Progressing=False`` is failed. A member that cannot be read is progressing (the
message names it), never healthy.
"""

from __future__ import annotations

from collections.abc import Sequence

from federation.applications import workflow
from federation.applications.render import WORKLOAD_KINDS
from federation.contexts.cache import ReadOnly
from federation.contexts.client import ClientError
from federation.controllers.applications.build import (
    JSON,
    Build,
    ComponentHealth,
    Health,
    marked,
)
from federation.controllers.applications.view import ApplicationView
from federation.controllers.kit.chain import Verdict
from federation.hub import manifests

Verdicts = tuple[workflow.HealthState, str]


async def observe_health(view: ApplicationView, build: Build) -> Verdict | None:
    if not build.status.get("rollback"):
        assert build.state is not None and build.compiled is not None
        reached = workflow.assignments(build.state)
        specs = {s.name: s for s in build.compiled.steps}
        steps = {s.name: s for s in build.state.steps}
        build.targets = {key: workflow.held(specs[key[0]], steps[key[0]], key[1], objects)[0]
                         for key, objects in build.compiled_targets().items()
                         if key[1] in reached.get(key[0], ())}
        build.component_health = await components_health(view, build, specs)
    build.health = await health_of(view, build)
    return None


async def components_health(view: ApplicationView, build: Build,
                            specs: dict[str, workflow.StepSpec]) -> ComponentHealth:
    """Per component, in the clusters of a deploy step that orders its components (a
    component waits there for the ones it depends on to be healthy)."""
    found: ComponentHealth = {}
    for (step, cluster), objects in build.targets.items():
        if not specs[step].component_deps:
            continue
        for component in sorted({workflow.component_of(o) for o in objects}):
            mine = [o for o in objects if workflow.component_of(o) == component]
            found[(step, cluster, component)] = await cluster_health(view, build, cluster,
                                                                      mine)
    return found


async def health_of(view: ApplicationView, build: Build) -> Health:
    found: Health = {}
    for (step, cluster), objects in build.targets.items():
        found[(step, cluster)] = await cluster_health(view, build, cluster, objects)
    return found


async def cluster_health(view: ApplicationView, build: Build, cluster: str,
                         objects: Sequence[JSON]) -> Verdicts:
    """The worst of the objects' health: failed at the first failure, else progressing
    (the first message) if any is, else healthy."""
    verdict: Verdicts = ("healthy", "")
    for obj in objects:
        one = await object_health(view, build, cluster, obj)
        if one[0] == "failed":
            return one
        if one[0] == "progressing" and verdict[0] == "healthy":
            verdict = one
    return verdict


async def object_health(view: ApplicationView, build: Build, cluster: str, obj: JSON
                        ) -> Verdicts:
    meta = obj["metadata"]
    try:
        resource = await view.resource(cluster, obj)
        live = await view.get(resource, meta["name"], meta.get("namespace"), cluster)
    except ClientError as exc:
        return "progressing", f"{cluster}: {exc}"
    what = f"{obj['kind']} {meta.get('namespace')}/{meta['name']}"
    if live is None:
        return "progressing", f"{what} not created yet"
    wanted = manifests.digest(marked(obj, build.uid, build.owner))
    annotations = live["metadata"].get("annotations") or {}
    if annotations.get(manifests.APPLIED_HASH_ANNOTATION) != wanted:
        return "progressing", f"{what} not updated yet"
    if obj["kind"] not in WORKLOAD_KINDS:
        return "healthy", ""
    return workload_health(what, live)


def workload_health(what: str, live: ReadOnly) -> Verdicts:
    """A workload of our content: failed, rolling, or all replicas ready and updated."""
    status = live.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Progressing" and condition.get("status") == "False":
            return "failed", f"{what}: {condition.get('reason')}: " \
                             f"{condition.get('message', '')}"
    replicas = int((live.get("spec") or {}).get("replicas", 1))
    if int(status.get("observedGeneration") or 0) < int(live["metadata"].get(
            "generation") or 0):
        return "progressing", f"{what}: generation not observed yet"
    ready = int(status.get("readyReplicas") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    if ready < replicas or updated < replicas:
        return "progressing", f"{what}: {ready}/{replicas} ready"
    return "healthy", ""
