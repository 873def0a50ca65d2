"""The workflow's shape, as KubeVela runs it: levels, modes, dependencies and data passing.

A workflow is a list of steps; a ``step-group`` step holds ``subSteps`` (one level deep).
Each level runs in its mode (``spec.workflow.mode``): KubeVela's defaults are
``StepByStep`` for the steps (each starts once the one before it finished) and ``DAG``
for a group's sub-steps (all start together). A step also waits for the steps it names
in ``dependsOn`` and for the steps producing its ``inputs``. Without a workflow, the
components' own ``dependsOn``/``inputs``/``outputs`` make KubeVela's default workflow: an
``apply-component`` step per component, run as a DAG (only without topology and override
policies, as KubeVela generates it then).

:func:`flatten` checks what the state machine cannot honour and refuses it by path: a
name used twice at any level, ``dependsOn`` or ``inputs[].from`` naming nothing, a wait
that can never end (a cycle, or a step waiting for a later one in StepByStep mode: found
on a graph of every step's start and end), sub-steps outside a ``step-group`` or nested,
``inputs`` a step type cannot take, a ``parameterKey`` that is no field path. It returns
the steps in document order, each sub-step after its group, with its resolved waits.
Nothing here evaluates an expression or renders a component.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping, Sequence

from federation.applications.model import (
    MAX_STEPS,
    AppError,
    AppSpec,
    Component,
    Step,
    StepInput,
    default_steps,
)

INPUT_TYPES = ("apply-component", "notification", "suspend", "approve", "step-group",
               "read-object", "export2config", "export2secret", "print-message-in-status",
               "collect-service-endpoints", "export-data", "depends-on-app", "clean-jobs",
               "apply-terraform-config", "apply-terraform-provider", "create-config",
               "read-config", "list-config", "delete-config", "webhook", "request",
               "check-metrics", "export-service", "generate-jdbc-connection", "vela-cli",
               "build-push-image")
"""Step types whose ``inputs`` we honour: a deploy step's properties are policy names and
numbers, which no output should change (pass a value to a component through an
apply-component step, or a component's ``inputs``)."""

_KEY = re.compile(r"^[A-Za-z_$][\w$-]*(\[\d+\])*(\.[A-Za-z_$][\w$-]*(\[\d+\])*)*$")
"""A ``parameterKey``: dotted field names, each optionally indexed (``env[0].value``)."""


@dataclasses.dataclass(frozen=True)
class FlatStep:
    """One step (or sub-step) as the compile needs it."""

    step: Step
    """The step, with its component's ``dependsOn``/``inputs``/``outputs`` merged in."""
    where: str
    """Its path (``spec.workflow.steps[2].subSteps[0]``) for every refusal about it."""
    group: str = ""
    """The step group it belongs to ("" at the top level)."""
    dag: bool = False
    """Its level runs as a DAG (else StepByStep)."""
    depends_on: tuple[str, ...] = ()
    """``dependsOn`` as step names (a component name stands for the step applying it)."""


def flatten(spec: AppSpec, where: str = "spec") -> tuple[FlatStep, ...]:
    """The steps to run, in order, checked (:class:`AppError` naming the field)."""
    steps, dag = _effective(spec)
    mode = spec.workflow.mode if spec.workflow is not None else None
    sub_dag = mode is None or mode.subSteps in (None, "DAG")
    flat: list[FlatStep] = []
    for index, step in enumerate(steps):
        here = f"{where}.workflow.steps[{index}]"
        flat.append(FlatStep(_merged(step, spec), here, "", dag))
        if step.subSteps and step.type != "step-group":
            raise AppError(f"{here}.subSteps: only a step-group step has sub-steps")
        for number, sub in enumerate(step.subSteps):
            inner = f"{here}.subSteps[{number}]"
            if sub.type == "step-group" or sub.subSteps:
                raise AppError(f"{inner}.type: a step group's sub-step cannot be a step "
                               "group (KubeVela's groups are one level deep)")
            flat.append(FlatStep(_merged(sub, spec), inner, step.name, sub_dag))
    if len(flat) > MAX_STEPS:
        raise AppError(f"{where}.workflow.steps: {len(flat)} steps with their sub-steps; "
                       f"this control plane takes at most {MAX_STEPS} per Application")
    _check_names(flat)
    _check_components(spec, flat, where)
    flat = [dataclasses.replace(f, depends_on=_resolve(f, flat)) for f in flat]
    producers = _producers(flat)
    for item in flat:
        _check_inputs(item, producers)
    _check_waits(flat, producers)
    return tuple(flat)


def _effective(spec: AppSpec) -> tuple[tuple[Step, ...], bool]:
    """The steps and whether the top level is a DAG: the workflow's (StepByStep unless its
    mode says DAG), or KubeVela's default."""
    if spec.workflow is not None and spec.workflow.steps:
        mode = spec.workflow.mode
        return spec.workflow.steps, mode is not None and mode.steps == "DAG"
    placing = any(p.type in ("topology", "override") for p in spec.policies)
    if not placing and any(_passes_data(c) for c in spec.components):
        # KubeVela's ApplyComponentWorkflowStepGenerator: a step per component, a DAG
        return tuple(Step(name=c.name, type="apply-component",
                          properties={"component": c.name}) for c in spec.components), True
    mode = spec.workflow.mode if spec.workflow is not None else None
    return default_steps(spec), mode is not None and mode.steps == "DAG"


def _passes_data(component: Component) -> bool:
    return bool(component.dependsOn or component.inputs or component.outputs)


def _merged(step: Step, spec: AppSpec) -> Step:
    """An apply-component step takes its component's ``dependsOn``, ``inputs`` and
    ``outputs``, and every input's ``parameterKey`` (its own and its component's) is under
    ``properties.`` unless it names ``properties`` or ``traits[``, as KubeVela's step
    convertor does (pkg/controller/.../application/generator.go)."""
    if step.type != "apply-component":
        return step
    # KubeVela's generator prefixes the step's own inputs too (``cpu`` is
    # ``properties.cpu`` of the component), not only the component's
    step = step.model_copy(update={"inputs": tuple(
        i.model_copy(update={"parameterKey": component_key(i.parameterKey)})
        for i in step.inputs)})
    component = next((c for c in spec.components
                      if c.name == step.properties.get("component")), None)
    if component is None or not _passes_data(component):
        return step
    inputs = tuple(i.model_copy(update={"parameterKey": component_key(i.parameterKey)})
                   for i in component.inputs)
    return step.model_copy(update={"dependsOn": step.dependsOn + component.dependsOn,
                                   "inputs": step.inputs + inputs,
                                   "outputs": step.outputs + component.outputs})


def component_key(key: str) -> str:
    """A component's ``parameterKey`` relative to the component (KubeVela: ``properties.``
    is implied unless the key starts with ``properties`` or ``traits[``)."""
    key = key.strip()
    if key and not key.startswith("properties") and not key.startswith("traits["):
        return f"properties.{key}"
    return key


def _check_names(flat: Sequence[FlatStep]) -> None:
    seen: set[str] = set()
    for item in flat:
        if item.step.name in seen:
            raise AppError(f"{item.where}.name: {item.step.name!r} is used twice (steps and "
                           "sub-steps share one set of names)")
        seen.add(item.step.name)


def _check_components(spec: AppSpec, flat: Sequence[FlatStep], where: str) -> None:
    """A component's ``dependsOn`` orders it where an apply-component step applies it (the
    steps wait) and inside a deploy step (cluster by cluster, :mod:`.workflow`); its
    ``inputs``/``outputs`` are honoured where an apply-component step applies it only."""
    applied = {f.step.properties.get("component") for f in flat
               if f.step.type == "apply-component"}
    names = {c.name for c in spec.components}
    for index, component in enumerate(spec.components):
        here = f"{where}.components[{index}]"
        for number, name in enumerate(component.dependsOn):
            if name not in names:
                raise AppError(f"{here}.dependsOn[{number}]: {name!r} names no component of "
                               "the Application")
            if name == component.name or _component_reaches(spec, name, component.name):
                raise AppError(f"{here}.dependsOn[{number}]: waits for ever: {name!r} "
                               "depends on this component (a cycle)")
        if (component.inputs or component.outputs) and component.name not in applied:
            field = "inputs" if component.inputs else "outputs"
            raise AppError(f"{here}.{field}: honoured only when an apply-component step "
                           "applies the component (a deploy step renders its components "
                           "together; without topology and override policies the default "
                           "workflow applies each component in its own step)")


def _component_reaches(spec: AppSpec, start: str, goal: str) -> bool:
    """``start`` depends on ``goal``, directly or not."""
    by_name = {c.name: c for c in spec.components}
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name == goal:
            return True
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        todo.extend(by_name[name].dependsOn)
    return False


def _resolve(item: FlatStep, flat: Sequence[FlatStep]) -> tuple[str, ...]:
    """``dependsOn`` as step names: a step's name, or (KubeVela's additional name) a
    component an apply-component step applies."""
    steps = {f.step.name for f in flat}
    by_component = {str(f.step.properties.get("component")): f.step.name for f in flat
                    if f.step.type == "apply-component"}
    resolved: list[str] = []
    for number, name in enumerate(item.step.dependsOn):
        target = name if name in steps else by_component.get(name)
        if target is None:
            raise AppError(f"{item.where}.dependsOn[{number}]: {name!r} names no step of "
                           "the workflow (nor a component an apply-component step applies)")
        if target == item.step.name:
            raise AppError(f"{item.where}.dependsOn[{number}]: a step cannot wait for itself")
        if target not in resolved:
            resolved.append(target)
    return tuple(resolved)


def _producers(flat: Sequence[FlatStep]) -> dict[str, str]:
    """Output name -> the step producing it (a name given twice is refused: the value an
    input reads would depend on which step ended last)."""
    found: dict[str, str] = {}
    for item in flat:
        for number, output in enumerate(item.step.outputs):
            if output.name in found:
                raise AppError(f"{item.where}.outputs[{number}].name: {output.name!r} is "
                               f"also an output of step {found[output.name]!r}")
            found[output.name] = item.step.name
    return found


def source(input_: StepInput) -> str:
    """The output an input reads: ``from`` up to its first dot (``out.field`` reads field
    ``field`` of output ``out``)."""
    return input_.from_.split(".", 1)[0]


def _check_inputs(item: FlatStep, producers: Mapping[str, str]) -> None:
    step = item.step
    if step.inputs and step.type not in INPUT_TYPES:
        raise AppError(f"{item.where}.inputs: not supported for a {step.type} step (its "
                       "properties are policy names and numbers; pass a value to a "
                       "component through an apply-component step or the component's "
                       "inputs)")
    for number, input_ in enumerate(step.inputs):
        here = f"{item.where}.inputs[{number}]"
        if source(input_) not in producers:
            raise AppError(f"{here}.from: {source(input_)!r} is no output of a step of this "
                           "workflow")
        if producers[source(input_)] == step.name:
            raise AppError(f"{here}.from: {source(input_)!r} is this step's own output")
        key = input_.parameterKey.strip()
        if not key:
            continue
        if not _KEY.match(key):
            raise AppError(f"{here}.parameterKey: not a field path such as message or "
                           "properties.env[0].value")
        if step.type == "step-group":
            raise AppError(f"{here}.parameterKey: a step group has no properties (its "
                           "inputs serve its if condition only)")


# -- waits that can never end --------------------------------------------------------------


def _check_waits(flat: Sequence[FlatStep], producers: Mapping[str, str]) -> None:
    """Refuse a wait that would never end. Nodes are each step's start and end; edges say
    "happens before": a step starts before it ends, a group starts before its sub-steps
    and ends after them, in StepByStep mode a step starts after the previous one at its
    level ended, and a step starts after what it waits for ended. The implied edges form
    no cycle; each explicit wait is added in document order and refused when its step's
    start already comes before the end it would wait for."""
    graph: dict[tuple[str, str], set[tuple[str, str]]] = {}

    def edge(a: tuple[str, str], b: tuple[str, str]) -> None:
        graph.setdefault(a, set()).add(b)

    previous: dict[str, str] = {}
    for item in flat:
        name = item.step.name
        edge(("start", name), ("end", name))
        if item.group:
            edge(("start", item.group), ("start", name))
            edge(("end", name), ("end", item.group))
        if not item.dag and item.group in previous:
            edge(("end", previous[item.group]), ("start", name))
        previous[item.group] = name
    for item, field, number, target in _explicit_waits(flat, producers):
        if _reaches(graph, ("start", item.step.name), ("end", target)):
            raise AppError(f"{item.where}.{field}[{number}]: waits for ever: step {target!r} "
                           "can only end after this step starts (a cycle of dependencies, "
                           "or a wait for a later step in StepByStep mode; mode: {steps: "
                           "DAG} runs steps by their dependencies)")
        edge(("end", target), ("start", item.step.name))


def _explicit_waits(flat: Sequence[FlatStep], producers: Mapping[str, str]
                    ) -> Iterator[tuple[FlatStep, str, int, str]]:
    for item in flat:
        for number, target in enumerate(item.depends_on):
            yield item, "dependsOn", number, target
        for number, input_ in enumerate(item.step.inputs):
            yield item, "inputs", number, producers[source(input_)]


def _reaches(graph: Mapping[tuple[str, str], set[tuple[str, str]]], start: tuple[str, str],
             goal: tuple[str, str]) -> bool:
    seen = {start}
    todo = [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        for after in graph.get(node, ()):
            if after not in seen:
                seen.add(after)
                todo.append(after)
    return False


def producer_of(flat: Sequence[FlatStep], name: str) -> str:
    """The step producing output ``name`` (checked to exist by :func:`flatten`)."""
    return _producers(flat)[name]
