"""Label selectors, matched locally against cached objects.

The same syntax as ``kubectl -l``: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``,
``a notin (x)``, ``a`` (exists) and ``!a`` (does not exist), joined by commas.
A mapping ``{"a": "b"}`` means ``a=b`` for each pair. Parsing happens once; a
:class:`Selector` is a tuple of requirements, cheap to test per object.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Literal

Operator = Literal["=", "!=", "in", "notin", "exists", "!"]

_SET = re.compile(r"^\s*([^\s!=,()]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_COMPARE = re.compile(r"^\s*([^\s!=,()]+)\s*(==|=|!=)\s*([^\s!=,()]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*$")


class SelectorError(ValueError):
    """A label selector that does not parse."""


@dataclasses.dataclass(frozen=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "exists":
            return self.key in labels
        if self.operator == "!":
            return self.key not in labels
        if self.operator in ("=", "in"):
            return labels.get(self.key) in self.values
        return labels.get(self.key) not in self.values  # "!=", "notin"


@dataclasses.dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p for p in parts if p.strip()]


def _requirement(text: str) -> Requirement:
    if match := _SET.match(text):
        values = frozenset(v.strip() for v in match.group(3).split(",") if v.strip())
        return Requirement(match.group(1), "in" if match.group(2) == "in" else "notin", values)
    if match := _COMPARE.match(text):
        operator: Operator = "!=" if match.group(2) == "!=" else "="
        return Requirement(match.group(1), operator, frozenset([match.group(3)]))
    if match := _EXISTS.match(text):
        return Requirement(match.group(2), "!" if match.group(1) else "exists")
    raise SelectorError(f"cannot parse label selector term {text.strip()!r}")


def parse(selector: str | Mapping[str, str] | Selector | None) -> Selector:
    """A :class:`Selector` from a string, a mapping of required labels, or None (everything)."""
    if selector is None:
        return Selector()
    if isinstance(selector, Selector):
        return selector
    if isinstance(selector, Mapping):
        return Selector(tuple(Requirement(k, "=", frozenset([v]))
                              for k, v in sorted(selector.items())))
    return Selector(tuple(_requirement(term) for term in _split(selector)))

