"""Parsed once per version: hub objects validated by pydantic, memoised by identity.

Every reconcile of every template reads all policies that could select it; validating
each one with pydantic on every read cost more than the reconcile's own work. A hub
object's ``(uid, resourceVersion)`` names one immutable version of it (the API server
changes ``resourceVersion`` on every write), so the parse of that version can be kept
and handed out again. Objects without both (files read by ``fedctl plan``) are parsed
every time. The memo is bounded: past ``limit`` entries the oldest go first, so deleted
policies cannot grow it for ever. With ``latest_only`` it keeps one entry per object (its
last version read), so its size follows the number of live objects, not of versions seen:
for kinds with one object per template (bindings), whose count passes any fixed limit.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Memo(Generic[T]):
    """``parse(doc)`` results by the document's version (see the module docstring)."""

    def __init__(self, parse: Callable[[Mapping[str, Any]], T], limit: int = 4096,
                 latest_only: bool = False) -> None:
        self._parse = parse
        self._limit = limit
        self._latest_only = latest_only
        self._found: OrderedDict[Hashable, tuple[Hashable, T]] = OrderedDict()
        """Slot (the version key, or the object's with ``latest_only``) -> (version key, parse)."""

    def __call__(self, doc: Mapping[str, Any]) -> T:
        key = version_key(doc)
        if key is None:
            return self._parse(doc)
        slot = key[:2] if self._latest_only else key
        found = self._found.get(slot)
        if found is not None and found[0] == key:
            self._found.move_to_end(slot)
            return found[1]
        value = self._parse(doc)  # an exception is not memoised: it is raised every time
        self._found[slot] = (key, value)
        self._found.move_to_end(slot)
        if len(self._found) > self._limit:
            self._found.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._found)


def version_key(doc: Mapping[str, Any]) -> tuple[str, str, str] | None:
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    uid, version = meta.get("uid"), meta.get("resourceVersion")
    if not uid or not version:
        return None
    return (str(doc.get("kind")), str(uid), str(version))
