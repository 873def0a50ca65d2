"""A step's ``inputs`` written into what it runs with, KubeVela's way.

An input takes the value of an output (``from``: the output's name, or ``name.field`` for
a field of it) and writes it at ``parameterKey``: in the step's properties
(``slack.message.text`` of a notification step, ``duration`` of a suspend step), or, for
an ``apply-component`` step, in its component (``properties.env[0].value``,
``traits[1].properties.replicas``; a component's own inputs are relative to its
``properties``). Intermediate maps are made; a list index must exist. The values come
from the workflow's state; a step whose inputs are not all known yet is not rendered
(:func:`filled` says None) and waits. Pure: nothing here evaluates an expression.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from federation.applications import flow, model, workflow

_PART = re.compile(r"([^.\[\]]+)((?:\[\d+\])*)")


@dataclasses.dataclass(frozen=True)
class Filled:
    """The step and the Application as the step runs them."""

    step: model.Step
    spec: model.AppSpec


def filled(item: flow.FlatStep, spec: model.AppSpec, values: Mapping[str, Any]
           ) -> Filled | None:
    """``item``'s step with its inputs written in (None while one has no value yet);
    :class:`model.AppError` naming the input when a value cannot go where it says."""
    step = item.step
    if not step.inputs:
        return Filled(step, spec)
    if any(flow.source(i) not in values for i in step.inputs):
        return None
    if step.type == "apply-component":
        return Filled(step, _component_filled(item, spec, values))
    props = copy.deepcopy(dict(step.properties))
    for number, input_ in enumerate(step.inputs):
        if input_.parameterKey.strip():
            set_path(props, input_.parameterKey.strip(),
                     workflow.input_value(values, input_.from_),
                     f"{item.where}.inputs[{number}].parameterKey")
    new = step.model_copy(update={"properties": props})
    model.check_step(new, f"{item.where} (with its inputs)")
    return Filled(new, spec)


def _component_filled(item: flow.FlatStep, spec: model.AppSpec,
                      values: Mapping[str, Any]) -> model.AppSpec:
    """The Application with the step's component as its inputs make it."""
    name = item.step.properties.get("component")
    index = next((i for i, c in enumerate(spec.components) if c.name == name), None)
    if index is None:
        return spec  # the compile refuses the step naming no component
    raw = spec.components[index].model_dump(by_alias=True, exclude={
        "dependsOn", "inputs", "outputs"})
    for number, input_ in enumerate(item.step.inputs):
        key = input_.parameterKey.strip()
        if key:
            set_path(raw, key, workflow.input_value(values, input_.from_),
                     f"{item.where}.inputs[{number}].parameterKey")
    where = f"spec.components[{index}] (with the inputs of step {item.step.name})"
    component = model.component(raw, where)
    model.check_types(component, where)
    components = list(spec.components)
    components[index] = component
    return spec.model_copy(update={"components": tuple(components)})


def set_path(target: dict[str, Any], key: str, value: Any, where: str) -> None:
    """Write ``value`` at ``key`` (``a.b[0].c``) in ``target``, making missing maps."""
    parts = _parts(key)
    node: Any = target
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if isinstance(part, int):
            if not isinstance(node, list) or not 0 <= part < len(node):
                raise model.AppError(f"{where}: {key!r} indexes past a list or into no list")
            if last:
                node[part] = copy.deepcopy(value)
            else:
                node = node[part]
            continue
        if not isinstance(node, dict):
            raise model.AppError(f"{where}: {key!r} goes through a value that is no map")
        if last:
            node[part] = copy.deepcopy(value)
        else:
            node = node.setdefault(part, [] if isinstance(parts[index + 1], int) else {})


def _parts(key: str) -> list[str | int]:
    parts: list[str | int] = []
    for piece in key.split("."):
        match = _PART.fullmatch(piece)
        if match is None:
            raise model.AppError(f"{key!r} is not a field path")
        parts.append(match[1])
        parts.extend(int(n) for n in re.findall(r"\d+", match[2]))
    return parts
