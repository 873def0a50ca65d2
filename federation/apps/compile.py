"""One revision compiled: every step's spec for the state machine and every deploy step's
per-cluster manifests, from the Application spec, its policies and the fleet."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from federation.apps import model, policies, scope, workflow
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
    budget = model.RenderBudget()
    for index, step in enumerate(model.default_steps(spec)):
        where = f"spec.workflow.steps[{index}]"
        props = step.properties
        timeout = model.duration_seconds(step.timeout, f"{where}.timeout") \
            if step.timeout else None
        if step.type == "deploy":
            names = list(props.get("policies") or [])
            target = policies.deploy_target(spec, app, namespace, names, known, fleet,
                                            local_cluster, where, grant, budget)
            targets[step.name] = target
            order = _order(names, known, local_cluster)
            clusters = sorted(target.clusters, key=lambda c: (order.get(c, len(order)), c))
            rollback = props.get("rollbackOnFailure", False)
            if not isinstance(rollback, bool):
                raise model.AppError(f"{where}.properties.rollbackOnFailure: true or false")
            steps.append(workflow.StepSpec(step.name, "deploy", tuple(clusters),
                                           int(props.get("parallelism", 5)), timeout,
                                           step.if_ == "always",
                                           rollback_on_failure=rollback))
        else:
            duration = model.duration_seconds(str(props["duration"]),
                                              f"{where}.properties.duration") \
                if "duration" in props else None
            message = _message(props)
            if step.type == "notification":
                notifications[step.name] = model.notification(props, f"{where}.properties")
                message = notifications[step.name].message
            steps.append(workflow.StepSpec(step.name, step.type, (), 1, timeout,
                                           step.if_ == "always", duration, message))
    chosen = list(known.values())
    return Compiled(spec, tuple(steps), targets, policies.health_of(chosen),
                    policies.gc_of(chosen), notifications)


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
