"""What the agent has applied: the last generation answered per object, kept on disk.

With each generation the agent keeps the last manifest the hub asked for (created or
updated, without its resourceVersion): while the hub is away, it puts an object that
someone changed or deleted back to it (:meth:`Worker.reassert
<federation.agent.session.Worker.reassert>`).

The file is the agent's half of resuming: its ``Hello`` lists these generations, and the
hub sends only newer work, so restarting the agent (or the hub) applies nothing twice.
It is written atomically (a temporary file renamed over the old one) after every
answered write, so a crash loses at most the write in progress, which the hub then
delivers again: at least once, and each apply idempotent by its generation.

**No secret on disk.** A Secret's ``data`` and ``stringData`` are kept in memory only; the
file holds a SHA-256 digest of them instead (:func:`data_digest`), enough to tell whether
the member's copy still holds what was applied, never the bytes. So after a restart of the
agent while the hub is away a changed or deleted Secret is reported, not restored (its
other objects are). The file is mode 0600 in a directory of mode 0700 (tightened if it
was looser): the rest of it (names, ConfigMaps' data) is the member's business only.

**One table of generations per control-plane replica.** With ``fedctl run --shards`` each
replica numbers its own writes (docs/runtime.md, "Pull members with shards"), so the
generations are kept per replica (the ``Welcome`` names it; ``""`` without shards) and
compared only with that replica's. A replica's table is dropped once no stream reached it
for :data:`RETENTION` seconds (its process is gone; a Work it re-sent after that would be
written again, the same manifest twice, never a write lost). The manifests kept for "the
hub is away" are per object: the last one applied, whichever replica sent it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from federation.contexts.client import Resource
from federation.work.wire import MAX_GENERATION, Key

log = logging.getLogger("federation.agent")
SECRET_FIELDS = ("data", "stringData")
RETENTION = 600.0
"""Seconds a replica's generations are kept after its last stream: far longer than a
reconnect after a network cut (seconds), so only a replica that is gone loses its table."""


def _encode(key: Key) -> str:
    r = key.resource
    return json.dumps([r.group, r.version, r.plural, r.kind, r.namespaced, key.namespace,
                       key.name], separators=(",", ":"))


def _decode(text: str) -> Key:
    group, version, plural, kind, namespaced, namespace, name = json.loads(text)
    return Key(Resource(group, version, plural, kind, bool(namespaced)), namespace, name)


def is_secret(key: Key) -> bool:
    return key.resource.group == "" and key.resource.plural == "secrets"


def data_digest(obj: dict[str, Any]) -> str:
    """``sha256:`` of a Secret's data (``stringData`` read as the API server stores it)."""
    data = dict(obj.get("data") or {})
    for name, value in (obj.get("stringData") or {}).items():
        data[name] = value  # compared as written: an API server turns it into data
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


class Applied:
    """Generation per (replica, object); :meth:`set` persists at once."""

    def __init__(self, path: Path | None, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        """Wall clock (the tables' last use is kept across restarts)."""
        self.generations: dict[Key, int] = {}
        """The generations of the control plane without shards (replica "")."""
        self.replicas: dict[str, dict[Key, int]] = {}
        """The generations of each replica of a sharded control plane, by its identity."""
        self.seen: dict[str, float] = {}
        """When a stream last reached each replica of :attr:`replicas` (wall clock)."""
        self.manifests: dict[Key, dict[str, Any]] = {}
        """The last desired manifest per object the agent keeps (deleted ones are not),
        Secrets with their data: only what this process was sent."""
        self.withheld: dict[Key, str] = {}
        """Secrets kept before this process started: their data's digest only."""
        if path is None:
            return
        _private_directory(path.parent)
        if path.exists():
            self._load(path)
            self._save()  # an older file may hold Secret data or be readable by others

    def _load(self, path: Path) -> None:
        try:
            raw = json.loads(path.read_text())
            self.generations = {_decode(k): int(v) for k, v in raw["generations"].items()}
            self.manifests = {_decode(k): dict(v) for k, v in raw["manifests"].items()}
            self.withheld = {_decode(k): str(v)
                             for k, v in (raw.get("secretDigests") or {}).items()}
            for replica, table in (raw.get("replicas") or {}).items():
                self.replicas[str(replica)] = {_decode(k): int(v)
                                               for k, v in table["generations"].items()}
                self.seen[str(replica)] = float(table["seen"])
            wrong = [g for table in (self.generations, *self.replicas.values())
                     for g in table.values() if not 0 <= g <= MAX_GENERATION]
            if wrong:
                raise ValueError(f"generation {wrong[0]} out of range")
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"{path}: not an applied-state file ({exc}); move it away "
                             "to start afresh (the hub then re-sends all work once)"
                             ) from None

    def table(self, replica: str = "") -> dict[Key, int]:
        """The generations of ``replica`` ("" without shards)."""
        if not replica:
            return self.generations
        return self.replicas.setdefault(replica, {})

    def get(self, key: Key, replica: str = "") -> int:
        return self.table(replica).get(key, 0)

    def reached(self, replica: str) -> None:
        """A stream reached ``replica``: keep its table, and drop those of replicas no
        stream reached for :data:`RETENTION` seconds (gone: nobody asks for them again)."""
        now = self.clock()
        stale = [r for r, seen in self.seen.items() if now - seen > RETENTION and r != replica]
        for gone in stale:
            self.replicas.pop(gone, None)
            del self.seen[gone]
            log.info("dropped the generations of control-plane replica %s (no stream for "
                     "%.0fs)", gone, RETENTION)
        if replica:
            self.table(replica)
            self.seen[replica] = now
        if stale or replica:
            self._save()

    def set(self, key: Key, generation: int, manifest: dict[str, Any] | None = None,
            deleted: bool = False, replica: str = "") -> None:
        """Record ``generation`` answered to ``replica``; with ``manifest`` (a successful
        create or update) or ``deleted``, also what the object should be while the hub is
        away."""
        table = self.table(replica)
        if generation <= table.get(key, 0):
            return
        table[key] = generation
        if replica:
            self.seen[replica] = self.clock()
        if manifest is not None:
            meta = {k: v for k, v in (manifest.get("metadata") or {}).items()
                    if k != "resourceVersion"}
            self.manifests[key] = {**manifest, "metadata": meta}
            self.withheld.pop(key, None)
        elif deleted:
            self.manifests.pop(key, None)
            self.withheld.pop(key, None)
        self._save()

    def forget(self) -> None:
        """Keep no object any more (the hub says this cluster left): nothing is put back,
        no Secret's digest is kept. The generations stay (they only ever increase)."""
        if self.manifests or self.withheld:
            self.manifests.clear()
            self.withheld.clear()
            self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        manifests, digests = {}, dict(self.withheld)
        for key, manifest in self.manifests.items():
            if is_secret(key):
                digests[key] = data_digest(manifest)
            else:
                manifests[_encode(key)] = manifest
        text = json.dumps({
            "generations": {_encode(k): v for k, v in self.generations.items()},
            "replicas": {replica: {"seen": self.seen.get(replica, 0.0),
                                   "generations": {_encode(k): v for k, v in table.items()}}
                         for replica, table in self.replicas.items()},
            "manifests": manifests,
            "secretDigests": {_encode(k): v for k, v in digests.items()}})
        tmp = self.path.with_suffix(".tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, self.path)


def _private_directory(directory: Path) -> None:
    """``directory`` exists with mode 0700 (the agent's own state: made so, or tightened)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = stat.S_IMODE(directory.stat().st_mode)
    if mode & 0o077:
        os.chmod(directory, 0o700)
        log.info("state directory %s was mode %04o; now 0700", directory, mode)
