"""``ResourceInterpreterCustomization`` (config.karmada.io/v1alpha1): Karmada's field names,
parsed once into a frozen value, every field honoured or refused by name.

The object is cluster-scoped: only a hub admin may write one (docs/security.md, "Resource
interpreter scripts"); a tenant cannot reach it. Priority, as Karmada's: an operation a
customization scripts wins over the built-in interpreter for its target kind; when two
customizations of one target script the same operation, the first by name wins and the
other's script is reported unused, except InterpretDependency, whose scripts all run and
whose references are united (Karmada's configuration manager merges them so).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from typing import Any

GROUP = "config.karmada.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ResourceInterpreterCustomization"
MAX_SCRIPT = 256 * 1024
"""Bytes of one script: the largest of Karmada's corpus is under 10 KiB."""


class Operation(enum.Enum):
    """Karmada's interpreter operations, with the customization field and Lua function of
    each."""

    INTERPRET_REPLICA = "InterpretReplica"
    REVISE_REPLICA = "ReviseReplica"
    RETAIN = "Retain"
    AGGREGATE_STATUS = "AggregateStatus"
    INTERPRET_STATUS = "InterpretStatus"
    INTERPRET_HEALTH = "InterpretHealth"
    INTERPRET_DEPENDENCY = "InterpretDependency"
    INTERPRET_COMPONENT = "InterpretComponent"

    @property
    def field(self) -> str:
        return _FIELDS[self][0]

    @property
    def function(self) -> str:
        return _FIELDS[self][1]

    @classmethod
    def named(cls, text: str) -> Operation:
        """By name, case-insensitive as ``karmadactl interpret --operation`` takes it."""
        for operation in cls:
            if operation.value.lower() == text.lower():
                return operation
        names = ", ".join(o.value for o in cls)
        raise CustomizationError(f"operation {text!r} is not one of: {names}")


_FIELDS = {
    Operation.INTERPRET_REPLICA: ("replicaResource", "GetReplicas"),
    Operation.REVISE_REPLICA: ("replicaRevision", "ReviseReplica"),
    Operation.RETAIN: ("retention", "Retain"),
    Operation.AGGREGATE_STATUS: ("statusAggregation", "AggregateStatus"),
    Operation.INTERPRET_STATUS: ("statusReflection", "ReflectStatus"),
    Operation.INTERPRET_HEALTH: ("healthInterpretation", "InterpretHealth"),
    Operation.INTERPRET_DEPENDENCY: ("dependencyInterpretation", "GetDependencies"),
    Operation.INTERPRET_COMPONENT: ("componentResource", "GetComponents"),
}
_BY_FIELD = {field: operation for operation, (field, _) in _FIELDS.items()}


class CustomizationError(ValueError):
    """A customization we cannot honour, said in one line naming the field."""


@dataclasses.dataclass(frozen=True)
class Target:
    api_version: str
    kind: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return obj.get("apiVersion") == self.api_version and obj.get("kind") == self.kind

    def __str__(self) -> str:
        return f"{self.kind}.{self.api_version}"


@dataclasses.dataclass(frozen=True)
class Customization:
    name: str
    target: Target
    scripts: Mapping[Operation, str]

    def script(self, operation: Operation) -> str | None:
        return self.scripts.get(operation)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise CustomizationError(f"{where} must be an object")
    return value


def _only(value: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise CustomizationError(f"{where}: unknown field {unknown[0]!r}")


def parse(obj: Mapping[str, Any]) -> Customization:
    """One customization object, or a one-line :class:`CustomizationError`."""
    if obj.get("apiVersion") != API_VERSION or obj.get("kind") != KIND:
        raise CustomizationError(f"not a {KIND} of {API_VERSION}: "
                                 f"{obj.get('kind')} of {obj.get('apiVersion')}")
    meta = _mapping(obj.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise CustomizationError("metadata.name is required")
    if meta.get("namespace"):
        raise CustomizationError(f"{name}: {KIND} is cluster-scoped; metadata.namespace "
                                 "must not be set")
    spec = _mapping(obj.get("spec"), f"{name}: spec")
    _only(spec, ("target", "customizations"), f"{name}: spec")
    target = _mapping(spec.get("target"), f"{name}: spec.target")
    _only(target, ("apiVersion", "kind"), f"{name}: spec.target")
    api_version, kind = target.get("apiVersion"), target.get("kind")
    if not isinstance(api_version, str) or not api_version or \
            not isinstance(kind, str) or not kind:
        raise CustomizationError(f"{name}: spec.target needs apiVersion and kind")
    return Customization(name, Target(api_version, kind),
                         _scripts(name, _mapping(spec.get("customizations") or {},
                                                 f"{name}: spec.customizations")))


def _scripts(name: str, customizations: Mapping[str, Any]) -> dict[Operation, str]:
    _only(customizations, _BY_FIELD, f"{name}: spec.customizations")
    found: dict[Operation, str] = {}
    for field, value in customizations.items():
        where = f"{name}: spec.customizations.{field}"
        rule = _mapping(value, where)
        _only(rule, ("luaScript",), where)
        script = rule.get("luaScript")
        if not isinstance(script, str) or not script.strip():
            raise CustomizationError(f"{where}.luaScript must be a non-empty string")
        if len(script.encode()) > MAX_SCRIPT:
            raise CustomizationError(f"{where}.luaScript is over {MAX_SCRIPT} bytes")
        found[_BY_FIELD[field]] = script
    return found


@dataclasses.dataclass(frozen=True)
class Chosen:
    """The script that runs for one operation on one kind, and whose it is."""

    customization: str
    script: str


class Registry:
    """The customizations in force, by target; Karmada's priority between them."""

    def __init__(self, customizations: Iterable[Customization] = ()) -> None:
        self._by_target: dict[Target, list[Customization]] = {}
        for customization in sorted(customizations, key=lambda c: c.name):
            self._by_target.setdefault(customization.target, []).append(customization)

    def choose(self, obj: Mapping[str, Any], operation: Operation) -> Chosen | None:
        """The script for ``operation`` on ``obj``'s kind; None: the built-in decides."""
        target = Target(str(obj.get("apiVersion")), str(obj.get("kind")))
        for customization in self._by_target.get(target, ()):
            script = customization.script(operation)
            if script is not None:
                return Chosen(customization.name, script)
        return None

    def choose_all(self, obj: Mapping[str, Any], operation: Operation) -> list[Chosen]:
        """Every script for ``operation`` on ``obj``'s kind: InterpretDependency runs them
        all and keeps the union (Karmada's rule); the other operations run the first."""
        target = Target(str(obj.get("apiVersion")), str(obj.get("kind")))
        return [Chosen(c.name, script) for c in self._by_target.get(target, ())
                if (script := c.script(operation)) is not None]

    def shadowed(self) -> list[str]:
        """One line per script that never runs: an earlier customization (by name) of the
        same target scripts the same operation."""
        found = []
        for customizations in self._by_target.values():
            seen: dict[Operation, str] = {}
            for customization in customizations:
                for operation in customization.scripts:
                    if operation in seen and operation is not Operation.INTERPRET_DEPENDENCY:
                        found.append(f"{customization.name}: {operation.value} is not used; "
                                     f"{seen[operation]} scripts it for "
                                     f"{customization.target}")
                    else:
                        seen[operation] = customization.name
        return found
