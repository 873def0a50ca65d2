"""One revision compiled: every step's spec for the state machine and every deploy step's
per-cluster manifests, from the Application spec, its policies and the fleet."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from federation.applications import (
    model,
    policies,
    resource_policies,
    scope,
    steps,
    workflow,
)
from federation.placement import clusters as clusters_

JSON = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Compiled:
    spec: model.AppSpec
    steps: tuple[workflow.StepSpec, ...]
    targets: Mapping[str, policies.Target]
    """deploy step name -> per-cluster manifests."""
    health: policies.Health
    gc: policies.GarbageCollect
    notifications: Mapping[str, model.Notification] = dataclasses.field(default_factory=dict)
    """notification step name -> its message and URLs (what the controller sends)."""
    apply_once: resource_policies.ApplyOnce = dataclasses.field(
        default_factory=resource_policies.ApplyOnce)
    """What of the member objects the controller leaves as it finds them (``apply-once``)."""
    read_only: resource_policies.ReadOnly = dataclasses.field(
        default_factory=resource_policies.ReadOnly)
    """The objects the controller only reads (``read-only``)."""


def compile_app(spec_doc: Mapping[str, Any], app: str, namespace: str,
                external: Mapping[str, Mapping[str, Any]],
                fleet: Sequence[clusters_.Cluster], local_cluster: str | None = None,
                grant: scope.Grant | None = None) -> Compiled:
    """Validate and render a revision (raises :class:`model.AppError` naming the field).
    ``grant``: the member namespaces it may write (default: ``namespace`` only)."""
    grant = grant or scope.Grant(namespace)
    spec = model.parse_spec(spec_doc)
    outside = {name: model.external_policy(doc) for name, doc in external.items()}
    scope.check_spec(spec, outside, grant)
    known = policies.resolve_policies(spec, outside)
    steps: list[workflow.StepSpec] = []
    targets: dict[str, policies.Target] = {}
    notifications: dict[str, model.Notification] = {}
    context = _Context(spec, app, namespace, known, fleet, local_cluster, grant,
                       model.RenderBudget())
    for index, step in enumerate(model.default_steps(spec)):
        where = f"spec.workflow.steps[{index}]"
        timeout = model.duration_seconds(step.timeout, f"{where}.timeout") \
            if step.timeout else None
        if step.type in workflow.DEPLOYING:
            target, step_spec = _deploying(step, context, where, timeout)
            targets[step.name] = target
        else:
            step_spec = _waiting(step, where, timeout)
            if step.type == "notification":
                notifications[step.name] = model.notification(step.properties,
                                                              f"{where}.properties")
                step_spec = dataclasses.replace(step_spec,
                                                message=notifications[step.name].message)
        steps.append(step_spec)
    chosen = list(known.values())
    return Compiled(spec, tuple(steps), targets, policies.health_of(chosen),
                    policies.gc_of(chosen), notifications,
                    resource_policies.apply_once_of(chosen),
                    resource_policies.read_only_of(chosen))


@dataclasses.dataclass(frozen=True)
class _Context:
    """What every deploying step of one compile renders from."""

    spec: model.AppSpec
    app: str
    namespace: str
    known: Mapping[str, model.PolicySpec]
    fleet: Sequence[clusters_.Cluster]
    local_cluster: str | None
    grant: scope.Grant
    budget: model.RenderBudget


def _deploying(step: model.Step, context: _Context, where: str, timeout: float | None
               ) -> tuple[policies.Target, workflow.StepSpec]:
    """A ``deploy`` step (its policies), or an ``apply-component`` step (one component to
    one cluster, as a topology of that cluster): its target and its spec."""
    props = step.properties
    known = context.known
    spec = context.spec
    if step.type == "deploy":
        names = list(props.get("policies") or [])
    elif step.type in steps.OBJECT_STEPS:
        spec, topology = steps.object_step(step, spec, context.app, where)
        names, known = [topology.name], {**known, topology.name: topology}
    elif step.type in steps.DEPRECATED_STEPS:
        names, known = steps.deprecated_step(step, spec, known, where)
    else:
        chosen = _one_component(step, context.spec, where)
        namespace = props.get("namespace")
        if namespace and not context.grant.allows(namespace):
            raise context.grant.refuse(namespace, f"{where}.properties.namespace")
        names = [p.name for p in chosen]
        known = {**known, **{p.name: p for p in chosen}}
    target = policies.deploy_target(spec, context.app, context.namespace, names, known,
                                    context.fleet, context.local_cluster, where,
                                    context.grant, context.budget)
    order = _order(names, known, context.local_cluster)
    clusters = sorted(target.clusters, key=lambda c: (order.get(c, len(order)), c))
    rollback = props.get("rollbackOnFailure", False)
    if not isinstance(rollback, bool):
        raise model.AppError(f"{where}.properties.rollbackOnFailure: true or false")
    return target, workflow.StepSpec(step.name, step.type, tuple(clusters),
                                     int(props.get("parallelism", 5)), timeout,
                                     step.if_ == "always", rollback_on_failure=rollback)


def _one_component(step: model.Step, spec: model.AppSpec, where: str
                   ) -> tuple[model.PolicySpec, model.PolicySpec]:
    """KubeVela's ``apply-component``: ``component`` (required), ``cluster`` (default: the
    local cluster), ``namespace`` (default: the Application's), as the policies a deploy
    step would name: a topology of that cluster and an override selecting the component
    (so refusals keep the component's own path, ``spec.components[3]``)."""
    props = step.properties
    name = props.get("component")
    if not any(c.name == name for c in spec.components):
        raise model.AppError(f"{where}.properties.component: names no component of the "
                             "Application")
    cluster = props.get("cluster") or policies.LOCAL
    topology: dict[str, Any] = {"clusters": [cluster]}
    if props.get("namespace"):
        topology["namespace"] = props["namespace"]
    return (model.PolicySpec(name=where, type="topology", properties=topology),
            model.PolicySpec(name=f"{where} component", type="override",
                             properties={"selector": [name]}))


def _waiting(step: model.Step, where: str, timeout: float | None) -> workflow.StepSpec:
    """A suspend, approve or notification step."""
    props = step.properties
    duration = model.duration_seconds(str(props["duration"]), f"{where}.properties.duration") \
        if "duration" in props else None
    return workflow.StepSpec(step.name, step.type, (), 1, timeout, step.if_ == "always",
                             duration, _message(props))


def _message(props: Mapping[str, Any]) -> str:
    message = props.get("message")
    if isinstance(message, dict):
        message = message.get("text") or message.get("content")
    return str(message or "")


def _order(names: Sequence[str], known: Mapping[str, model.PolicySpec],
           local_cluster: str | None) -> dict[str, int]:
    """Clusters in the order the step's topology policies list them (the rollout order)."""
    order: dict[str, int] = {}
    for name in names:
        policy = known.get(name)
        if policy is None or policy.type != "topology":
            continue
        for cluster in policy.properties.get("clusters") or []:
            cluster = local_cluster if cluster == policies.LOCAL else cluster
            if isinstance(cluster, str):
                order.setdefault(cluster, len(order))
    return order
