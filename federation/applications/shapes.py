"""Closed shapes for the parameters of KubeVela's definitions, checked in one walk.

A CUE definition's ``parameter`` is a closed struct: a key it does not declare is an
error, an optional key (``key?:``) may be absent, a key with a default (``*1 | int``) is
filled in. The built-ins written as Python functions read their parameters through
:func:`check`, given the same shape as a Python value, so an unknown key is refused by
its path (nothing accepted and ignored) and a wrong type is one line, never a TypeError:

- ``str``, ``int``, ``bool``: a value of that type (a bool is no int); ``float``: CUE's
  ``number``, an integer or a decimal;
- :class:`Enum`: one of the given strings; :class:`Range`: an integer between bounds;
- ``[shape]``: a list of that shape;
- :data:`STRINGS_MAP`: a map of strings to strings (CUE's ``[string]: string``);
- :data:`OPEN_MAP`: any map (CUE's ``{...}``), read and checked by its consumer;
- ``{"key": shape, "opt?": shape, "dflt": Default(shape, value)}``: a closed map;
- :class:`Either`: the first of several shapes that matches (CUE's ``number | string``).

It never evaluates anything a tenant wrote: shapes are constants of this package.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from federation.applications.model import AppError


@dataclasses.dataclass(frozen=True)
class Enum:
    values: tuple[str, ...]

    def __init__(self, *values: str) -> None:
        object.__setattr__(self, "values", values)


@dataclasses.dataclass(frozen=True)
class Range:
    low: int
    high: int


@dataclasses.dataclass(frozen=True)
class Default:
    shape: Any
    value: Any


@dataclasses.dataclass(frozen=True)
class Either:
    shapes: tuple[Any, ...]
    what: str


STRINGS_MAP = "map of strings"
OPEN_MAP = "open map"
"""CUE's ``{...}``: any map, its content checked by whatever reads it next."""
LABEL_SELECTOR = {"matchLabels?": STRINGS_MAP, "matchExpressions?": [{
    "key": str, "operator": Default(Enum("In", "NotIn", "Exists", "DoesNotExist"), "In"),
    "values?": [str]}]}
"""A label selector as the definitions declare it (``#labelSelector``)."""


def check(value: Any, shape: Any, where: str) -> Any:
    """``value`` as ``shape`` says, defaults filled in; :class:`AppError` naming the path."""
    if isinstance(shape, dict):
        return _closed(value, shape, where)
    if isinstance(shape, list):
        if not isinstance(value, list):
            raise AppError(f"{where}: must be a list")
        return [check(item, shape[0], f"{where}[{index}]") for index, item in enumerate(value)]
    if isinstance(shape, Either):
        for option in shape.shapes:
            try:
                return check(value, option, where)
            except AppError:
                continue
        raise AppError(f"{where}: must be {shape.what}")
    return _scalar(value, shape, where)


def _scalar(value: Any, shape: Any, where: str) -> Any:
    if shape is bool or shape is str:
        if not isinstance(value, shape):
            raise AppError(f"{where}: must be {'true or false' if shape is bool else 'a string'}")
        return value
    if shape is float:  # CUE's number
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise AppError(f"{where}: must be a number")
        return value
    if shape is int or isinstance(shape, Range):
        low, high = (shape.low, shape.high) if isinstance(shape, Range) else (-2**31, 2**31 - 1)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise AppError(f"{where}: must be an integer from {low} to {high}")
        return value
    if isinstance(shape, Enum):
        if value not in shape.values:
            raise AppError(f"{where}: must be one of {', '.join(shape.values)}")
        return value
    if shape == STRINGS_MAP:
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in value.items()):
            raise AppError(f"{where}: must be a map of strings")
        return dict(value)
    if shape == OPEN_MAP:
        if not isinstance(value, dict):
            raise AppError(f"{where}: must be a map")
        return value
    raise TypeError(f"unknown shape {shape!r}")  # a bug in this package, not bad input


def _closed(value: Any, shape: Mapping[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise AppError(f"{where}: must be a map")
    keys = {key.rstrip("?"): key for key in shape}
    for key in value:
        if key not in keys:
            raise AppError(f"{where}.{key}: not supported ({', '.join(sorted(keys))})")
    out: dict[str, Any] = {}
    for name, key in keys.items():
        field = shape[key]
        here = f"{where}.{name}"
        if isinstance(field, Default):
            out[name] = check(value[name], field.shape, here) \
                if value.get(name) is not None else field.value
        elif value.get(name) is not None:
            out[name] = check(value[name], field, here)
        elif not key.endswith("?"):
            raise AppError(f"{here}: required")
    return out
