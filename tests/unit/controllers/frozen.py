"""Deep-frozen JSON for the fakes: cached objects are shared, so any change is a bug.

The real caches hand out their stored dicts (``copy=False`` reads, typed ``ReadOnly``);
nothing stops a caller from changing one except review. The fakes hand out frozen
copies instead, so a transformer or reconciler that changes what it read fails the
unit tests on the spot. They compare, serialise and ``deepcopy`` (into plain, mutable
JSON) like the dicts and lists they stand for.
"""

from __future__ import annotations

import copy
from typing import Any, NoReturn


def _refuse(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"a cached {type(self).__mro__[1].__name__} was changed: "
                    "copy what you change (see federation.contexts.cache.ReadOnly)")


class FrozenDict(dict[str, Any]):
    __setitem__ = __delitem__ = setdefault = pop = popitem = update = clear = _refuse
    __ior__ = _refuse

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __hash__(self) -> int:  # type: ignore[override]
        raise TypeError("unhashable type: 'dict'")


class FrozenList(list[Any]):
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = _refuse
    sort = reverse = __iadd__ = __imul__ = _refuse

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in self]

    def __copy__(self) -> list[Any]:
        return list(self)


def freeze(value: Any) -> Any:
    """A deep, frozen copy of JSON ``value``."""
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList(freeze(v) for v in value)
    return value
