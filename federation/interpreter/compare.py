"""Expected against actual, as Karmada's ``thirdparty_test.go`` compares its test data.

Objects (``revised``, ``retained``, ``aggregatedStatus``) are equal as decoded JSON, except
at paths the expected object marks ``{{EXCLUDE}}`` (a time the script stamps); replica
requirements as Go's types, quantities by amount (``0.1`` is ``100m``); dependencies and
components in any order; anything else as its JSON. Numbers compare as JSON numbers (``1``
is ``1.0``). One difference from Karmada: the ``status`` of InterpretStatus is compared as
data, where Karmada compares JSON bytes whose key order is the Lua table's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.interpreter import declarative, quantity

EXCLUDE = "{{EXCLUDE}}"
_OBJECTS = ("revised", "retained", "aggregatedStatus")


def normal(value: Any) -> Any:
    """JSON as Go's decoder reads it back: whole floats as integers."""
    if isinstance(value, Mapping):
        return {str(k): normal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normal(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _excluded(expected: Any, actual: Any) -> Any:
    """``actual`` without the fields ``expected`` marks ``{{EXCLUDE}}`` (lists by index)."""
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        return {k: _excluded(expected.get(k), v) for k, v in actual.items()
                if expected.get(k) != EXCLUDE}
    if isinstance(expected, list) and isinstance(actual, list):
        return [_excluded(expected[i] if i < len(expected) else None, v)
                for i, v in enumerate(actual)]
    return actual


def _without_marks(expected: Any) -> Any:
    if isinstance(expected, Mapping):
        return {k: _without_marks(v) for k, v in expected.items() if v != EXCLUDE}
    if isinstance(expected, list):
        return [_without_marks(v) for v in expected]
    return expected


def _quantities_equal(expected: Any, actual: Any) -> bool:
    if not isinstance(expected, Mapping) or not isinstance(actual, Mapping):
        return bool(expected == actual)
    return set(expected) == set(actual) and all(
        quantity.equal(expected[k], actual[k]) for k in expected)


def _requirements_equal(expected: Any, actual: Any) -> bool:
    if expected is None or actual is None:
        return expected is None and actual is None
    want = declarative.requirements(normal(expected))
    have = declarative.requirements(normal(actual))
    return _quantities_equal(want.pop("resourceRequest", {}), have.pop("resourceRequest", {})) \
        and want == have


def _sorted(items: Any, key: Any) -> list[Any]:
    return sorted(items or [], key=key)


def _dependency_key(d: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(d.get(k, "")) for k in ("apiVersion", "kind", "namespace", "name"))


def _components_equal(expected: Any, actual: Any) -> bool:
    want = _sorted([declarative.component(normal(c)) for c in expected or []],
                   key=lambda c: str(c.get("name", "")))
    have = _sorted(actual, key=lambda c: str(c.get("name", "")))
    if len(want) != len(have):
        return False
    for one, other in zip(want, have, strict=True):
        if not _requirements_equal(one.pop("replicaRequirements", None),
                                   dict(other).pop("replicaRequirements", None)):
            return False
        if one != {k: v for k, v in other.items() if k != "replicaRequirements"}:
            return False
    return True


def equal(name: str, expected: Any, actual: Any) -> bool:
    """Whether the result ``name`` matches ``expected`` as Karmada's test decides."""
    if name in _OBJECTS:
        return bool(_without_marks(normal(expected)) == normal(_excluded(expected, actual)))
    if name == "requires":
        return _requirements_equal(expected, actual)
    if name == "dependencies":
        want = _sorted([declarative.dependency(normal(d)) for d in expected or []],
                       key=_dependency_key)
        return want == _sorted(normal(actual), key=_dependency_key)
    if name == "components":
        return _components_equal(expected, actual)
    return bool(normal(expected) == normal(actual))
