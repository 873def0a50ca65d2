"""The Application API as KubeVela spells it, validated: every field is honoured or refused.

``core.oam.dev/v1beta1`` Application: ``spec.components[]`` (``name``, ``type``,
``properties``, ``traits[]`` of ``type`` and ``properties``), ``spec.policies[]``
(``name``, ``type``, ``properties``) and ``spec.workflow.steps[]`` (``name``, ``type``,
``properties``, ``timeout``, ``if``). KubeVela fields we do not implement (``inputs``,
``outputs``, ``dependsOn``, sub-steps, ``workflow.ref``, ``scopes``...) are refused by
name rather than ignored: an Application that relies on them would otherwise deliver
something else than its author meant. Errors are :class:`AppError` with a field path
(``spec.components[0].traits[1].type``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field

JSON = dict[str, Any]

API_VERSION = "core.oam.dev/v1beta1"
COMPONENT_TYPES = ("webservice", "worker", "config", "k8s-objects")
TRAIT_TYPES = ("scaler", "labels", "annotations", "env", "expose", "storage")
POLICY_TYPES = ("topology", "override", "health", "garbage-collect")
STEP_TYPES = ("deploy", "suspend", "approve", "notification")


class AppError(ValueError):
    """An Application (or Policy) that cannot be honoured; the message names the field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Trait(_Model):
    type: str = Field(min_length=1)
    properties: dict[str, Any] = Field(default_factory=dict)


class Component(_Model):
    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    type: str = Field(min_length=1)
    properties: dict[str, Any] = Field(default_factory=dict)
    traits: tuple[Trait, ...] = ()


class PolicySpec(_Model):
    name: str = Field(min_length=1)
    type: str = Field(min_length=1)
    properties: dict[str, Any] = Field(default_factory=dict)


class Step(_Model):
    name: str = Field(min_length=1)
    type: str = Field(min_length=1)
    properties: dict[str, Any] = Field(default_factory=dict)
    timeout: str | None = None
    if_: str | None = Field(default=None, alias="if")


class Workflow(_Model):
    steps: tuple[Step, ...] = ()
    mode: dict[str, str] | None = None


class AppSpec(_Model):
    components: tuple[Component, ...] = Field(min_length=1)
    policies: tuple[PolicySpec, ...] = ()
    workflow: Workflow | None = None


_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def duration_seconds(text: str, where: str) -> float:
    """``1h2m3s``, ``10m``, ``30s`` (Go's duration subset KubeVela's examples use)."""
    match = _DURATION.match(text.strip()) if text else None
    if not match or not any(match.groups()):
        raise AppError(f"{where}: {text!r} is not a duration such as 30s, 10m or 1h")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return float(hours * 3600 + minutes * 60 + seconds)


def _path(loc: Sequence[int | str], prefix: str) -> str:
    out = prefix
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def parse_spec(spec: Mapping[str, Any], where: str = "spec") -> AppSpec:
    """The Application's spec, validated: types, names, steps and their options."""
    try:
        parsed = AppSpec.model_validate(spec)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        message = "not supported by this control plane" \
            if first["type"] == "extra_forbidden" else first["msg"]
        raise AppError(f"{_path(first['loc'], where)}: {message}") from None
    _check_names(parsed, where)
    for index, component in enumerate(parsed.components):
        if component.type not in COMPONENT_TYPES:
            raise AppError(f"{where}.components[{index}].type: {component.type!r} is not a "
                           f"built-in type ({', '.join(COMPONENT_TYPES)})")
        for t_index, trait in enumerate(component.traits):
            if trait.type not in TRAIT_TYPES:
                raise AppError(f"{where}.components[{index}].traits[{t_index}].type: "
                               f"{trait.type!r} is not a built-in trait "
                               f"({', '.join(TRAIT_TYPES)})")
    for index, policy in enumerate(parsed.policies):
        if policy.type not in POLICY_TYPES:
            raise AppError(f"{where}.policies[{index}].type: {policy.type!r} is not a "
                           f"built-in policy ({', '.join(POLICY_TYPES)})")
    if parsed.workflow is not None:
        if parsed.workflow.mode not in (None, {"steps": "StepByStep"}, {}):
            raise AppError(f"{where}.workflow.mode: only StepByStep steps are supported")
        for index, step in enumerate(parsed.workflow.steps):
            _check_step(step, f"{where}.workflow.steps[{index}]")
    return parsed


def _check_names(spec: AppSpec, where: str) -> None:
    groups: tuple[tuple[str, Sequence[Component | PolicySpec | Step]], ...] = (
        ("components", spec.components), ("policies", spec.policies),
        ("workflow.steps", spec.workflow.steps if spec.workflow else ()))
    for field, items in groups:
        seen: set[str] = set()
        for index, item in enumerate(items):
            if item.name in seen:
                raise AppError(f"{where}.{field}[{index}].name: {item.name!r} is used twice")
            seen.add(item.name)


def _check_step(step: Step, where: str) -> None:
    if step.type not in STEP_TYPES:
        raise AppError(f"{where}.type: {step.type!r} is not a built-in step "
                       f"({', '.join(STEP_TYPES)})")
    if step.if_ not in (None, "always"):
        raise AppError(f"{where}.if: only 'always' is supported, not {step.if_!r}")
    if step.timeout is not None:
        duration_seconds(step.timeout, f"{where}.timeout")
    allowed = {"deploy": {"policies", "parallelism", "auto", "rollbackOnFailure"},
               "suspend": {"duration", "message"}, "approve": {"duration", "message"},
               "notification": {"webhook", "slack", "message"}}[step.type]
    for key in step.properties:
        if key not in allowed:
            raise AppError(f"{where}.properties.{key}: not supported for a {step.type} step "
                           f"({', '.join(sorted(allowed))})")
    props = step.properties
    if step.type == "deploy":
        parallelism = props.get("parallelism", 5)
        if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1:
            raise AppError(f"{where}.properties.parallelism: must be an integer >= 1")
        policies = props.get("policies", [])
        if not isinstance(policies, list) or not all(isinstance(p, str) for p in policies):
            raise AppError(f"{where}.properties.policies: must be a list of policy names")
        if props.get("auto", True) is not True:
            raise AppError(f"{where}.properties.auto: only true is supported (use a suspend "
                           "step before the deploy)")
    if step.type in ("suspend", "approve") and "duration" in props:
        duration_seconds(str(props["duration"]), f"{where}.properties.duration")


def default_steps(spec: AppSpec) -> tuple[Step, ...]:
    """KubeVela's default workflow when none is given: one deploy step with every topology
    and override policy (or the whole Application to the default target)."""
    if spec.workflow is not None and spec.workflow.steps:
        return spec.workflow.steps
    names = [p.name for p in spec.policies if p.type in ("topology", "override")]
    return (Step(name="deploy", type="deploy", properties={"policies": names}),)


def external_policy(document: Mapping[str, Any]) -> PolicySpec:
    """A ``Policy`` object (KubeVela's external policy: ``type`` and ``properties`` at the
    top level) as the policy entry it stands for."""
    meta = document.get("metadata") or {}
    name = str(meta.get("name") or "")
    where = f"Policy {meta.get('namespace', '')}/{name}"
    extra = set(document) - {"apiVersion", "kind", "metadata", "type", "properties"}
    if extra:
        raise AppError(f"{where}: {sorted(extra)[0]}: not supported by this control plane")
    try:
        policy = PolicySpec.model_validate({"name": name, "type": document.get("type") or "",
                                            "properties": document.get("properties") or {}})
    except pydantic.ValidationError as exc:
        raise AppError(f"{where}: {_path(exc.errors()[0]['loc'], '')[1:]}: "
                       f"{exc.errors()[0]['msg']}") from None
    if policy.type not in POLICY_TYPES:
        raise AppError(f"{where}.type: {policy.type!r} is not a built-in policy")
    return policy
