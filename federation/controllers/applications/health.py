"""Step 5, observe health: what each reached (deploy step, cluster) shows in the caches.

A cluster is healthy for a step when every object the step put there is the content we
wrote (its applied-hash is the digest of exactly what we would write now) and each
workload is healthy as KubeVela's definitions judge it (:func:`workload_health`: every
replica, or every scheduled DaemonSet pod, ready and updated; a Job's pods succeeded); a
Deployment saying ``Progressing=False`` or a Job saying ``Failed`` is failed. A member
that cannot be read is progressing (the message names it), never healthy. A
terraform-controller Configuration is healthy once its module is applied (``Available``).
"""

from __future__ import annotations

from collections.abc import Sequence

from federation.applications import (
    custom_status,
    pod_steps,
    resource_policies,
    terraform,
    workflow,
)
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
from federation.controllers.applications.statuses import judge
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
            found[(step, cluster, component)] = await cluster_health(view, build, step,
                                                                      cluster, mine)
    return found


async def health_of(view: ApplicationView, build: Build) -> Health:
    found: Health = {}
    for (step, cluster), objects in build.targets.items():
        found[(step, cluster)] = await cluster_health(view, build, step, cluster, objects)
    return found


async def cluster_health(view: ApplicationView, build: Build, step: str, cluster: str,
                         objects: Sequence[JSON]) -> Verdicts:
    """The worst of the objects' health: failed at the first failure, else progressing
    (the first message) if any is, else healthy. A workload whose definitions have a
    status is judged by it too (:mod:`.statuses`)."""
    statuses = await judge(view, build, step, cluster, objects)
    step_type = _step_type(build, step)
    verdict: Verdicts = ("healthy", "")
    for obj in objects:
        one = await object_health(view, build, cluster, obj,
                                  statuses.get(custom_status.identity(obj)), step_type)
        if one[0] == "failed":
            return one
        if one[0] == "progressing" and verdict[0] == "healthy":
            verdict = one
    return verdict


def _step_type(build: Build, step: str) -> str:
    """The type of the compiled step ``step`` ("" when there is no compiled revision)."""
    steps = build.compiled.steps if build.compiled is not None else ()
    return next((s.type for s in steps if s.name == step), "")


async def object_health(view: ApplicationView, build: Build, cluster: str, obj: JSON,
                        status: custom_status.Status | None = None, step_type: str = ""
                        ) -> Verdicts:
    """``step_type``: the type of the step that placed ``obj`` (a vela-cli or
    build-push-image step waits on its Job or Pod as its definition does)."""
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
    read_only = build.compiled is not None and (
        build.compiled.read_only.match(obj) or shared_here(build, obj, live))
    if not read_only and annotations.get(manifests.APPLIED_HASH_ANNOTATION) != wanted:
        return "progressing", f"{what} not updated yet"
    if status is not None and (status.judged or not status.healthy):
        # its definition's healthPolicy alone judges the workload (KubeVela's); an
        # unhealthy trait keeps the component waiting too
        return ("healthy", "") if status.healthy else \
            ("progressing", f"{what}: {status.message or 'not healthy (healthPolicy)'}")
    if step_type in pod_steps.STEP_TYPES:  # the step's own Job or Pod
        return pod_steps.health(step_type, what, live)
    if terraform.is_configuration(obj):  # a Terraform component, as KubeVela judges it
        return terraform.health(what, live)
    if terraform.is_provider(obj):  # apply-terraform-provider's wait, for any Provider
        return terraform.provider_health(what, live)
    if obj["kind"] not in WORKLOAD_KINDS:
        return "healthy", ""
    return workload_health(what, live, obj["kind"])


def shared_here(build: Build, obj: JSON, live: ReadOnly) -> bool:
    """Shared with its owner, another Application of this namespace: its content is the
    owner's, so only its health counts here."""
    assert build.compiled is not None
    return build.compiled.shared.match(obj) and \
        manifests.application_of(live) != build.owner and \
        resource_policies.not_shared(live, build.namespace) is None


def workload_health(what: str, live: ReadOnly, kind: str | None = None) -> Verdicts:
    """A workload of our content as KubeVela's definitions judge it (their
    ``healthPolicy``): a DaemonSet every scheduled pod ready and updated, a Job its
    ``parallelism`` pods succeeded, a Deployment or StatefulSet every replica ready and
    updated; each at its current generation (a Job reports none). A Deployment that
    stopped progressing, or a Job that failed (its retries spent), fails the step at once
    where KubeVela would wait for its timeout: neither gets better by waiting."""
    status = live.get("status") or {}
    kind = kind or live.get("kind")
    failed = _failed(what, status, "Failed" if kind == "Job" else "Progressing",
                     "True" if kind == "Job" else "False")
    if failed is not None:
        return failed
    if kind == "Job":
        return _job(what, live, status)
    if int(status.get("observedGeneration") or 0) < int(live["metadata"].get(
            "generation") or 0):
        return "progressing", f"{what}: generation not observed yet"
    if kind == "DaemonSet":
        return _daemon_set(what, status)
    replicas = int((live.get("spec") or {}).get("replicas", 1))
    ready = int(status.get("readyReplicas") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    current = int(status.get("replicas") or 0) if kind == "StatefulSet" else replicas
    if ready < replicas or updated < replicas or current != replicas:
        return "progressing", f"{what}: {ready}/{replicas} ready"
    return "healthy", ""


def _failed(what: str, status: ReadOnly, condition: str, value: str) -> Verdicts | None:
    for found in status.get("conditions") or []:
        if found.get("type") == condition and found.get("status") == value:
            return "failed", f"{what}: {found.get('reason')}: {found.get('message', '')}"
    return None


def _daemon_set(what: str, status: ReadOnly) -> Verdicts:
    """daemon.cue: desired == ready == updated == current scheduled pods."""
    desired = int(status.get("desiredNumberScheduled") or 0)
    counts = [int(status.get(key) or 0) for key in ("numberReady", "updatedNumberScheduled",
                                                     "currentNumberScheduled")]
    if any(count != desired for count in counts):
        return "progressing", f"{what}: Ready:{counts[0]}/{desired}"
    return "healthy", ""


def _job(what: str, live: ReadOnly, status: ReadOnly) -> Verdicts:
    """task.cue: ``succeeded == spec.parallelism`` (parallelism defaults to 1)."""
    wanted = int((live.get("spec") or {}).get("parallelism", 1))
    succeeded = int(status.get("succeeded") or 0)
    if succeeded != wanted:
        return "progressing", (f"{what}: Active/Failed/Succeeded:{int(status.get('active') or 0)}"
                               f"/{int(status.get('failed') or 0)}/{succeeded}")
    return "healthy", ""
