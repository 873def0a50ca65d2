"""Parsed once per version: hub objects validated by pydantic, memoised by identity.

Every reconcile of every template reads all policies that could select it; validating
each one with pydantic on every read cost more than the reconcile's own work. A hub
object's ``(uid, resourceVersion)`` names one immutable version of it (the API server
changes ``resourceVersion`` on every write), so the parse of that version can be kept
and handed out again. Objects without both (files read by ``fedctl plan``) are parsed
every time. The memo is bounded: past ``limit`` entries the oldest go first, so deleted
policies cannot grow it for ever.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Memo(Generic[T]):
    """``parse(doc)`` results by the document's version (see the module docstring)."""

    def __init__(self, parse: Callable[[Mapping[str, Any]], T], limit: int = 4096) -> None:
        self._parse = parse
        self._limit = limit
        self._found: OrderedDict[Hashable, T] = OrderedDict()

    def __call__(self, doc: Mapping[str, Any]) -> T:
        key = version_key(doc)
        if key is None:
            return self._parse(doc)
        if key in self._found:
            self._found.move_to_end(key)
            return self._found[key]
        value = self._parse(doc)  # an exception is not memoised: it is raised every time
        self._found[key] = value
        if len(self._found) > self._limit:
            self._found.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._found)


def version_key(doc: Mapping[str, Any]) -> Hashable | None:
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    uid, version = meta.get("uid"), meta.get("resourceVersion")
    if not uid or not version:
        return None
    return (str(doc.get("kind")), str(uid), str(version))
