"""One revision compiled: every step's spec for the state machine and every deploy step's
per-cluster manifests, from the Application spec, its policies and the fleet."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from federation.applications import (
    cloud_resource,
    config_store,
    dataflow,
    endpoints,
    export_service,
    flow,
    http_steps,
    jdbc,
    model,
    pod_steps,
    policies,
    render,
    replication,
    resource_policies,
    scope,
    steps,
    terraform_steps,
    workflow,
)
from federation.placement import clusters as clusters_

JSON = dict[str, Any]
ReadObject = steps.Read


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
    reads: Mapping[str, ReadObject] = dataclasses.field(default_factory=dict)
    """read-object step name -> what it reads (the controller reads it for the step)."""
    cleans: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    """clean-jobs step name -> the label selector of the Jobs and Pods it takes away."""
    awaits: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """depends-on-app step name -> the Application of the namespace it waits for."""
    collects: Mapping[str, endpoints.Collect] = dataclasses.field(default_factory=dict)
    """collect-service-endpoints step name -> its filters (the controller reads the
    Application's own Services and Ingresses for it)."""
    resource_update: resource_policies.ResourceUpdate = dataclasses.field(
        default_factory=resource_policies.ResourceUpdate)
    """Which member objects are deleted and created again instead of updated
    (``resource-update``)."""
    shared: resource_policies.ReadOnly = dataclasses.field(
        default_factory=resource_policies.ReadOnly)
    """The objects it shares with the Applications of its namespace (``shared-resource``:
    marked in :attr:`targets`)."""
    calls: Mapping[str, http_steps.HttpCall] = dataclasses.field(default_factory=dict)
    """webhook, request and check-metrics step name -> the HTTP call it makes (the
    controller's sender makes it, off the reconcile)."""
    stores: Mapping[str, config_store.StoreStep] = dataclasses.field(default_factory=dict)
    """config-store step name -> what it writes, reads, lists or deletes (the controller
    does it in the Application's own namespace on the hub)."""
    take_over: resource_policies.ReadOnly = dataclasses.field(
        default_factory=resource_policies.ReadOnly)
    """The objects it may adopt from a member when no one placed them (``take-over``)."""


def compile_app(spec_doc: Mapping[str, Any], app: str, namespace: str,
                external: Mapping[str, Mapping[str, Any]],
                fleet: Sequence[clusters_.Cluster], local_cluster: str | None = None,
                grant: scope.Grant | None = None, user: render.UserTypes | None = None,
                values: Mapping[str, Any] | None = None,
                export_allow: export_service.Allow | None = None) -> Compiled:
    """Validate and render a revision (raises :class:`model.AppError` naming the field).
    ``grant``: the member namespaces it may write (default: ``namespace`` only);
    ``user``: the types administrators defined (:mod:`.definitions`);
    ``values``: the outputs of the steps that ended (the workflow's state): a step with
    ``inputs`` renders with them once they are all known, and is left unrendered before;
    ``export_allow``: the addresses export-service steps may export (default none)."""
    grant = grant or scope.Grant(namespace)
    spec = model.parse_spec(spec_doc, types=user.types() if user else model.BUILT_IN)
    outside = {name: model.external_policy(doc) for name, doc in external.items()}
    scope.check_spec(spec, outside, grant)
    known = policies.resolve_policies(spec, outside)
    specs: list[workflow.StepSpec] = []
    targets: dict[str, policies.Target] = {}
    notifications: dict[str, model.Notification] = {}
    beside = _Beside()
    context = _Context(spec, app, namespace, known, fleet, local_cluster, grant,
                       model.RenderBudget(), user, export_allow or export_service.Allow())
    for item in flow.flatten(spec):
        try:
            filled = dataflow.filled(item, spec, values or {})
            if filled is None:
                specs.append(_step_spec(item, workflow.StepSpec(item.step.name,
                                                                item.step.type),
                                        unrendered=True))
                continue
            target, step_spec, note = _compile_step(filled.step, dataclasses.replace(
                context, spec=filled.spec), item.where)
            beside.add(filled.step, context, item.where)
        except model.AppError as exc:
            if not item.step.inputs:
                raise
            # rendered with its inputs' values: the step fails, the Application stands
            specs.append(dataclasses.replace(
                _step_spec(item, workflow.StepSpec(item.step.name, item.step.type),
                           failure=str(exc)),
                rendered_inputs={i.from_: workflow.input_value(values or {}, i.from_)
                                 for i in item.step.inputs}))
            continue
        if target is not None:
            targets[item.step.name] = target
        if note is not None:
            notifications[item.step.name] = note
        specs.append(dataclasses.replace(
            _step_spec(item, step_spec, properties=filled.step.properties),
            rendered_inputs={i.from_: workflow.input_value(values or {}, i.from_)
                             for i in item.step.inputs}))
    replication.check_named(spec, [item.step for item in flow.flatten(spec)])
    return _assemble(spec, specs, targets, notifications, beside, list(known.values()))


def _assemble(spec: model.AppSpec, specs: Sequence[workflow.StepSpec],
              targets: dict[str, policies.Target], notifications: dict[str, model.Notification],
              beside: _Beside, chosen: list[model.PolicySpec]) -> Compiled:
    """The compiled revision from its rendered steps and the policies it chose."""
    made_by = {key: made for target in targets.values() for key, made in
               target.made_by.items()}
    compiled = Compiled(spec, tuple(specs), targets, policies.health_of(chosen),
                        policies.gc_of(chosen, made_by), notifications,
                        resource_policies.apply_once_of(chosen, made_by),
                        resource_policies.read_only_of(chosen, made_by),
                        _reads(beside.reads, targets),
                        beside.cleans, beside.awaits, beside.collects,
                        resource_policies.resource_update_of(chosen, made_by),
                        calls=beside.calls, stores=beside.stores,
                        take_over=resource_policies.take_over_of(chosen, made_by))
    return _shared(compiled, chosen, made_by)

def _shared(compiled: Compiled, chosen: Sequence[model.PolicySpec],
            made_by: resource_policies.Provenance) -> Compiled:
    """``compiled`` with its ``shared-resource`` selection and the objects it selects
    marked shareable (the owner writes the mark, and what a sharer may read is only what
    its owner marked)."""
    shared = resource_policies.shared_of(chosen, made_by)
    if not shared.selectors:
        return compiled
    return dataclasses.replace(compiled, shared=shared, targets={
        name: dataclasses.replace(target, clusters={
            cluster: tuple(resource_policies.mark_shared(o) if shared.match(o) else o
                           for o in objects)
            for cluster, objects in target.clusters.items()})
        for name, target in compiled.targets.items()})


@dataclasses.dataclass
class _Beside:
    """What the controller does for some steps beside the state machine: the reads of
    read-object, the waits of depends-on-app and collect-service-endpoints, the selectors
    of clean-jobs, the config-store steps, by step name."""

    reads: dict[str, tuple[steps.Read, str]] = dataclasses.field(default_factory=dict)
    cleans: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    awaits: dict[str, str] = dataclasses.field(default_factory=dict)
    collects: dict[str, endpoints.Collect] = dataclasses.field(default_factory=dict)
    calls: dict[str, http_steps.HttpCall] = dataclasses.field(default_factory=dict)
    stores: dict[str, config_store.StoreStep] = dataclasses.field(default_factory=dict)

    def add(self, step: model.Step, context: _Context, where: str) -> None:
        here, app, namespace = f"{where}.properties", context.app, context.namespace
        if step.type == "read-object":
            self.reads[step.name] = (steps.read_object(step, namespace, here), where)
        elif step.type == "clean-jobs":
            self.cleans[step.name] = steps.clean_jobs(step, app, namespace, here)
        elif step.type == "depends-on-app":
            self.awaits[step.name] = steps.depends_on_app(step, app, namespace, here)
        elif step.type in config_store.STEP_TYPES:
            self.stores[step.name] = config_store.check(step, namespace, here)
        elif step.type == "collect-service-endpoints":
            self.collects[step.name] = endpoints.collect(
                step, app, namespace, [c.name for c in context.spec.components], here)
        elif step.type in http_steps.STEP_TYPES:
            self.calls[step.name] = http_steps.compiled(step.type, step.properties, namespace,
                                                        here)[0]


def _reads(reads: Mapping[str, tuple[steps.Read, str]],
           targets: Mapping[str, policies.Target]) -> dict[str, steps.Read]:
    """The read-object steps' reads, each of the hub or of a member some step of this
    Application deploys to (a member it does not deploy to is none of its business)."""
    deployed = {cluster for target in targets.values() for cluster in target.clusters}
    for read, where in reads.values():
        if read.cluster and read.cluster not in deployed:
            raise model.AppError(f"{where}.properties.cluster: {read.cluster!r} is not a "
                                 "cluster this Application deploys to (a step reads the hub "
                                 "or a member the Application's steps deploy to)")
    return {name: read for name, (read, _) in reads.items()}


def _compile_step(step: model.Step, context: _Context, where: str
                  ) -> tuple[policies.Target | None, workflow.StepSpec,
                             model.Notification | None]:
    timeout = model.duration_seconds(step.timeout, f"{where}.timeout") \
        if step.timeout else None
    if step.type in cloud_resource.STEP_TYPES:
        target = _cloud_resource(step, context, where)
        return target, workflow.StepSpec(step.name, step.type, tuple(sorted(target.clusters)),
                                         5, timeout, step.if_ == "always"), None
    if step.type in workflow.DEPLOYING:
        target, step_spec = _deploying(step, context, where, timeout)
        cloud_resource.refuse_forged(target.clusters, where)
        if step.type != export_service.STEP_TYPE:
            export_service.refuse_forged(target.clusters, where)
        return target, step_spec, None
    step_spec = _waiting(step, where, timeout)
    if step.type == "restart-workflow":
        first, every, relative = model.restart_schedule(step.properties, f"{where}.properties")
        return None, dataclasses.replace(step_spec, restart=(first, every),
                                         restart_relative=relative), None
    if step.type == "print-message-in-status":
        message = model.status_message(step.properties, f"{where}.properties")
        return None, dataclasses.replace(step_spec, message=message), None
    if step.type == jdbc.STEP_TYPE:
        env = jdbc.env(step, context.namespace, f"{where}.properties")
        return None, dataclasses.replace(step_spec, template={"env": env}), None
    if step.type == "check-metrics":
        check = http_steps.compiled(step.type, step.properties, context.namespace,
                                    f"{where}.properties")[1]
        return None, dataclasses.replace(step_spec, metrics=check), None
    if step.type != "notification":
        return None, step_spec, None
    note = model.notification(step.properties, f"{where}.properties")
    return None, dataclasses.replace(step_spec, message=note.message), note


def _step_spec(item: flow.FlatStep, base: workflow.StepSpec, *, unrendered: bool = False,
               failure: str = "", properties: Mapping[str, Any] | None = None
               ) -> workflow.StepSpec:
    """The compiled step with its place in the workflow: level, mode, waits, data."""
    step = item.step
    return dataclasses.replace(
        base, always=step.if_ == "always", condition=step.if_ if step.if_ not in (
            None, "always") else "", group=item.group, dag=item.dag,
        depends_on=item.depends_on,
        inputs=tuple(workflow.DataInput(i.from_, i.parameterKey) for i in step.inputs),
        outputs=tuple(workflow.DataOutput(o.name, o.valueFrom) for o in step.outputs),
        properties=dict(properties if properties is not None else step.properties),
        unrendered=unrendered, failure=failure)


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
    user: render.UserTypes | None = None
    export_allow: export_service.Allow = dataclasses.field(default_factory=export_service.Allow)


def _cloud_resource(step: model.Step, context: _Context, where: str) -> policies.Target:
    """deploy-cloud-resource / share-cloud-resource (:mod:`.cloud_resource`): the env's
    Configurations, renamed, to the local cluster (deploy only); the copies of their
    connection Secrets to the env's clusters (share: the placements'), all in the
    Application's namespace."""
    chosen = cloud_resource.check(step, context.spec, context.namespace, where)
    env = _place(context, context.spec, list(chosen.policies),
                 {**context.known, **chosen.policies}, where)
    rendered = next(iter(env.clusters.values()), ())
    made: list[JSON] = []
    secrets: list[tuple[str, str, str]] = []
    for obj in cloud_resource.configurations(rendered):
        found = cloud_resource.renamed(obj, chosen.env, context.namespace, where)
        if found is not None:
            if any(m["metadata"]["name"] == found[0]["metadata"]["name"] for m in made):
                raise model.AppError(f"{where}.properties.env: two Configurations would both "
                                     f"be {found[0]['metadata']['name']} (<component>-<env>): "
                                     "a cloud resource is one Configuration per component")
            made.append(found[0])
            secrets.append((found[1], found[2], found[0]["metadata"]["name"]))
    if not made:
        raise model.AppError(f"{where}.properties.env: env {chosen.env[:64]!r} deploys no "
                             "Terraform component that writes a connection Secret "
                             "(writeConnectionSecretToRef)")
    local = _objects_to(step, context, made, [steps.LOCAL], where, "the Configurations")
    [local_cluster] = local.clusters
    if step.type == "share-cloud-resource":  # KubeVela's binds only: the deploy step applies
        local = policies.Target({})
    copies = [cloud_resource.copy_manifest(secret, cloud_resource.Source(
        local_cluster, source, configuration)) for secret, source, configuration in secrets]
    shared = _objects_to(step, context, copies,
                         list(chosen.clusters or sorted(env.clusters)),
                         f"{where}.properties.placements" if chosen.clusters else where,
                         "the Secret copies")
    clusters = {c: (*local.clusters.get(c, ()), *shared.clusters.get(c, ()))
                for c in sorted({*local.clusters, *shared.clusters})}
    return policies.Target(clusters, (*local.explanation, *shared.explanation),
                           made_by={**local.made_by, **shared.made_by})


def _objects_to(step: model.Step, context: _Context, objects: list[JSON],
                clusters: list[str], where: str, what: str) -> policies.Target:
    """``objects`` as one ``k8s-objects`` component named after the step, placed on
    ``clusters`` (``local``: the local cluster)."""
    component = steps.step_component(step, objects, where, what)
    topology = model.PolicySpec(name=f"{where} ({what})", type="topology",
                                properties={"clusters": clusters})
    spec = context.spec.model_copy(update={"components": (component,)})
    return _place(context, spec, [topology.name], {topology.name: topology}, where)


def _place(context: _Context, spec: model.AppSpec, names: list[str],
           known: Mapping[str, model.PolicySpec], where: str) -> policies.Target:
    return policies.deploy_target(spec, context.app, context.namespace, names, known,
                                  context.fleet, context.local_cluster, where,
                                  context.grant, context.budget, context.user)


def _deploying(step: model.Step, context: _Context, where: str, timeout: float | None
               ) -> tuple[policies.Target, workflow.StepSpec]:
    """A ``deploy`` step (its policies), or an ``apply-component`` step (one component to
    one cluster, as a topology of that cluster): its target and its spec."""
    props = step.properties
    known = context.known
    spec = context.spec
    if step.type == "deploy":
        names = list(props.get("policies") or [])
    elif step.type == "export-data":
        spec, topology = steps.export_data(step, spec, context.app, context.namespace, known,
                                           where)
        names, known = [topology.name], {**known, topology.name: topology}
    elif step.type == export_service.STEP_TYPE:
        spec, topology = export_service.export_service(
            step, spec, context.app, context.namespace, known, context.export_allow, where)
        names, known = [topology.name], {**known, topology.name: topology}
    elif step.type in steps.OBJECT_STEPS:
        spec, topology = steps.object_step(step, spec, context.app, context.namespace, where)
        names, known = [topology.name], {**known, topology.name: topology}
    elif step.type in terraform_steps.STEP_TYPES:
        spec, topology = terraform_steps.deploy_step(step, spec, context.app,
                                                     context.namespace, where)
        names, known = [topology.name], {**known, topology.name: topology}
    elif step.type in pod_steps.STEP_TYPES:
        spec, topology = pod_steps.deploy_step(step, spec, context.app, context.namespace,
                                               where)
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
                                    context.grant, context.budget, context.user)
    order = _order(names, known, context.local_cluster)
    clusters = sorted(target.clusters, key=lambda c: (order.get(c, len(order)), c))
    rollback = props.get("rollbackOnFailure", False)
    if not isinstance(rollback, bool):
        raise model.AppError(f"{where}.properties.rollbackOnFailure: true or false")
    deps = _component_order(context.spec, target, step, where) if step.type == "deploy" \
        else {}
    placed = {cluster: tuple(sorted({workflow.component_of(o) for o in objects}))
              for cluster, objects in target.clusters.items()} if deps else {}
    return target, workflow.StepSpec(step.name, step.type, tuple(clusters),
                                     int(props.get("parallelism", 5)), timeout,
                                     step.if_ == "always", rollback_on_failure=rollback,
                                     component_deps=deps, components=placed,
                                     approval=props.get("auto", True) is False)


def _component_order(spec: model.AppSpec, target: policies.Target, step: model.Step,
                     where: str) -> dict[str, tuple[str, ...]]:
    """The components' ``dependsOn`` among what this deploy step places (KubeVela orders
    them in each cluster); a dependency the step does not deploy at all is refused (the
    component would wait for it for ever)."""
    deployed = {workflow.component_of(o) for objects in target.clusters.values()
                for o in objects}
    deps: dict[str, tuple[str, ...]] = {}
    for index, component in enumerate(spec.components):
        if not component.dependsOn or component.name not in deployed:
            continue
        for number, name in enumerate(component.dependsOn):
            if name not in deployed:
                raise model.AppError(
                    f"spec.components[{index}].dependsOn[{number}]: {name!r} is not "
                    f"deployed by step {step.name} ({where}), which deploys "
                    f"{component.name!r}: it would wait for it for ever")
        deps[component.name] = component.dependsOn
    return deps


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
