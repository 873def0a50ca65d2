"""What the agent has applied: the last generation answered per object, kept on disk.

The file is the agent's half of resuming: its ``Hello`` lists these generations, and the
hub sends only newer work, so restarting the agent (or the hub) applies nothing twice.
It is written atomically (a temporary file renamed over the old one) after every
answered write, so a crash loses at most the write in progress, which the hub then
delivers again: at least once, and each apply idempotent by its generation.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from federation.contexts.client import Resource
from federation.work.wire import Key


def _encode(key: Key) -> str:
    r = key.resource
    return json.dumps([r.group, r.version, r.plural, r.kind, r.namespaced, key.namespace,
                       key.name], separators=(",", ":"))


def _decode(text: str) -> Key:
    group, version, plural, kind, namespaced, namespace, name = json.loads(text)
    return Key(Resource(group, version, plural, kind, bool(namespaced)), namespace, name)


class Applied:
    """Generation per object; :meth:`set` persists at once."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.generations: dict[Key, int] = {}
        if path is not None and path.exists():
            try:
                raw = json.loads(path.read_text())
                self.generations = {_decode(k): int(v) for k, v in raw.items()}
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{path}: not an applied-state file ({exc}); move it away "
                                 "to start afresh (the hub then re-sends all work once)"
                                 ) from None

    def get(self, key: Key) -> int:
        return self.generations.get(key, 0)

    def set(self, key: Key, generation: int) -> None:
        if generation <= self.generations.get(key, 0):
            return
        self.generations[key] = generation
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({_encode(k): v for k, v in self.generations.items()}))
        os.replace(tmp, self.path)
