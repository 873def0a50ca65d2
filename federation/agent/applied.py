"""What the agent has applied: the last generation answered per object, kept on disk.

With each generation the file keeps the last manifest the hub asked for (created or
updated, without its resourceVersion): while the hub is away, the agent puts an object
that someone changed or deleted back to it (:meth:`Worker.reassert
<federation.agent.session.Worker.reassert>`).

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
from typing import Any

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
        self.manifests: dict[Key, dict[str, Any]] = {}
        """The last desired manifest per object the agent keeps (deleted ones are not)."""
        if path is not None and path.exists():
            try:
                raw = json.loads(path.read_text())
                self.generations = {_decode(k): int(v)
                                    for k, v in raw["generations"].items()}
                self.manifests = {_decode(k): dict(v) for k, v in raw["manifests"].items()}
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise ValueError(f"{path}: not an applied-state file ({exc}); move it away "
                                 "to start afresh (the hub then re-sends all work once)"
                                 ) from None

    def get(self, key: Key) -> int:
        return self.generations.get(key, 0)

    def set(self, key: Key, generation: int, manifest: dict[str, Any] | None = None,
            deleted: bool = False) -> None:
        """Record ``generation`` answered; with ``manifest`` (a successful create or update)
        or ``deleted``, also what the object should be while the hub is away."""
        if generation <= self.generations.get(key, 0):
            return
        self.generations[key] = generation
        if manifest is not None:
            meta = {k: v for k, v in (manifest.get("metadata") or {}).items()
                    if k != "resourceVersion"}
            self.manifests[key] = {**manifest, "metadata": meta}
        elif deleted:
            self.manifests.pop(key, None)
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({
            "generations": {_encode(k): v for k, v in self.generations.items()},
            "manifests": {_encode(k): v for k, v in self.manifests.items()}}))
        os.replace(tmp, self.path)
