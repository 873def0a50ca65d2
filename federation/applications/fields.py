"""Checks of one field of a component's or trait's ``properties``, each raising
:class:`~.model.AppError` with the field's path and what it must be: the renderers read
untrusted maps through these, so a wrong type is a one-line refusal, never a TypeError."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from federation.applications.model import AppError

JSON = dict[str, Any]


def allowed(props: Mapping[str, Any], allowed: AbstractSet[str], where: str) -> None:
    for key in props:
        if key not in allowed:
            raise AppError(f"{where}.{key}: not supported ({', '.join(sorted(allowed))})")


def string(props: Mapping[str, Any], key: str, where: str, required: bool = False
            ) -> str | None:
    value = props.get(key)
    if value is None:
        if required:
            raise AppError(f"{where}.{key}: required")
        return None
    if not isinstance(value, str) or not value:
        raise AppError(f"{where}.{key}: must be a non-empty string")
    return value


def integer(value: Any, where: str, low: int = 0, high: int = 65535) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise AppError(f"{where}: must be an integer from {low} to {high}")
    return value


def strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AppError(f"{where}: must be a list of strings")
    return list(value)


def maps(value: Any, where: str) -> list[JSON]:
    """A list of maps (``null``: none), each entry's path in the refusal."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise AppError(f"{where}: must be a list")
    for index, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise AppError(f"{where}[{index}]: must be a map")
    return list(value)


def boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise AppError(f"{where}: must be true or false")
    return value


def quantity(value: Any, where: str) -> str:
    """A Kubernetes quantity as KubeVela's templates take it: a string or a number."""
    if isinstance(value, bool) or not isinstance(value, str | int | float) or value == "":
        raise AppError(f"{where}: must be a quantity such as 500m or 1Gi")
    return str(value)


def string_map(value: Any, where: str, nulls: bool = False) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and (isinstance(v, str) or (nulls and v is None))
            for k, v in value.items()):
        raise AppError(f"{where}: must be a map of strings")
    return dict(value)


def env_list(value: Any, where: str) -> list[JSON]:
    """A container's ``env`` as KubeVela's definitions take it (name, value, valueFrom)."""
    if not isinstance(value, list):
        raise AppError(f"{where}: must be a list of {{name, value}}")
    out = []
    for index, entry in enumerate(value):
        here = f"{where}[{index}]"
        if not isinstance(entry, dict):
            raise AppError(f"{here}: must be a map")
        allowed(entry, {"name", "value", "valueFrom"}, here)
        string(entry, "name", here, required=True)
        if "value" in entry and not isinstance(entry["value"], str):
            raise AppError(f"{here}.value: must be a string")
        out.append(dict(entry))
    return out


def key_items(raw: Any, where: str) -> list[JSON]:
    """A ConfigMap or Secret volume's ``items``: key, path, mode (0 to 0777, default 0777)."""
    out = []
    for index, item in enumerate(maps(raw, where)):
        here = f"{where}[{index}]"
        allowed(item, {"key", "path", "mode"}, here)
        out.append({"key": string(item, "key", here, required=True),
                    "path": string(item, "path", here, required=True),
                    "mode": integer(item.get("mode", 511), f"{here}.mode", 0, 511)})
    return out
