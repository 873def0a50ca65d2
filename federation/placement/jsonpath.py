"""Field paths of Kubernetes' JSONPath, the part state preservation needs.

Karmada's ``statePreservation`` rules name a value of the evicted copy's status with a
kubectl JSONPath template such as ``{ .jobStatus.jobID }``. We take one ``{...}``
expression of field names (``.a``, ``['a.b']``) and list indexes (``[0]``), which is
what every rule in Karmada's documents uses; filters, wildcards, slices, recursive descent
and text around the braces are refused by :func:`problem` when the policy loads (Karmada
would only fail when a copy is evicted). The path is evaluated on the status given to
:func:`evaluate` and nothing else: it cannot reach the copy's spec, its metadata or any
other object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

MAX_LENGTH = 256
"""Longer than any status path a workload has; a bound on what a policy makes us parse."""

_STEP = re.compile(r"""\s*(?:\.([A-Za-z0-9_\-]+)|\[(\d{1,9})\]|\['([^'\]]*)'\]|\["([^"\]]*)"\])""")


class PathError(ValueError):
    """The path does not select a value in the status (a missing key, an index beyond)."""


def steps(path: str) -> list[str | int] | None:
    """The keys and indexes of ``path``, or None when it is not a supported path."""
    text = path.strip()
    if len(text) > MAX_LENGTH or not (text.startswith("{") and text.endswith("}")):
        return None
    body = text[1:-1].strip()
    if body.startswith("$"):
        body = body[1:]
    found: list[str | int] = []
    at = 0
    while at < len(body):
        match = _STEP.match(body, at)
        if match is None:
            return None
        name, index, single, double = match.groups()
        found.append(int(index) if index is not None else
                     next(part for part in (name, single, double) if part is not None))
        at = match.end()
    return found or None


def problem(path: str) -> str | None:
    """Why ``path`` is refused, or None."""
    if steps(path) is None:
        return ("must be one JSONPath field path such as {.jobStatus.jobID} (names, "
                "['quoted.names'] and [indexes]; at most 256 characters)")
    return None


def _has(value: Any, step: str | int) -> bool:
    if isinstance(step, int):
        return isinstance(value, Sequence) and not isinstance(value, str) and step < len(value)
    return isinstance(value, Mapping) and step in value


def evaluate(path: str, status: Any) -> str:
    """The value at ``path`` in ``status``, printed as kubectl prints it (strings as they
    are, other scalars and objects as JSON). Raises :class:`PathError` when it is missing."""
    found = steps(path)
    if found is None:
        raise PathError(problem(path) or "unsupported path")
    value = status
    for step in found:
        if not _has(value, step):
            raise PathError(f"{step} is not found")
        value = value[step]
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
