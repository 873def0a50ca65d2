"""The ResourceTracker's bookkeeping: what is placed where, and what must go, pure.

An :class:`Entry` is one object an Application put in one cluster, with the revision
that put it there. :func:`diff` compares the tracker with what the current assignments
render and says what to write and what to delete: an object tracked in a cluster that
the current assignment of that cluster no longer renders is deleted (unless the
garbage-collect policy keeps legacy resources); a cluster with no assignment yet keeps
what it has (a rollout that has not reached it leaves the old revision running).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

JSON = dict[str, Any]


@dataclasses.dataclass(frozen=True, order=True)
class Entry:
    cluster: str
    api_version: str
    kind: str
    namespace: str
    name: str
    revision: int = 0

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        group = self.api_version.rpartition("/")[0]
        return (self.cluster, group, self.kind, self.namespace, self.name)

    def as_json(self) -> JSON:
        return {"cluster": self.cluster, "apiVersion": self.api_version, "kind": self.kind,
                "namespace": self.namespace, "name": self.name, "revision": self.revision}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Entry:
        return cls(str(data.get("cluster") or ""), str(data.get("apiVersion") or ""),
                   str(data.get("kind") or ""), str(data.get("namespace") or ""),
                   str(data.get("name") or ""), int(data.get("revision") or 0))

    @classmethod
    def of(cls, cluster: str, obj: Mapping[str, Any], revision: int) -> Entry:
        meta = obj.get("metadata") or {}
        return cls(cluster, str(obj.get("apiVersion")), str(obj.get("kind")),
                   str(meta.get("namespace") or ""), str(meta.get("name")), revision)

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name} in {self.cluster}"


@dataclasses.dataclass(frozen=True)
class Diff:
    write: tuple[tuple[Entry, JSON], ...]
    """Objects to hold (created or updated), each with its manifest."""
    delete: tuple[Entry, ...]
    """Tracked objects no longer rendered where they are."""
    keep: tuple[Entry, ...]
    """Tracked objects left as they are (cluster not reached yet, or kept by policy)."""


def diff(tracked: Iterable[Entry], desired: Mapping[str, Sequence[tuple[JSON, int]]],
         keep_legacy: bool = False) -> Diff:
    """``desired``: per assigned cluster, the manifests (with their revision) it must hold.
    Clusters absent from ``desired`` keep what they have."""
    write: list[tuple[Entry, JSON]] = []
    wanted: set[tuple[str, str, str, str, str]] = set()
    for cluster, manifests in sorted(desired.items()):
        for manifest, revision in manifests:
            entry = Entry.of(cluster, manifest, revision)
            if entry.key in wanted:
                continue  # two steps render the same object for a cluster: one write
            wanted.add(entry.key)
            write.append((entry, manifest))
    delete: list[Entry] = []
    keep: list[Entry] = []
    for entry in sorted(set(tracked)):
        if entry.key in wanted:
            continue
        if entry.cluster in desired and not keep_legacy:
            delete.append(entry)
        else:
            keep.append(entry)
    return Diff(tuple(write), tuple(delete), tuple(keep))


def record(previous: Iterable[Entry], written: Iterable[Entry], deleted: Iterable[Entry]
           ) -> list[Entry]:
    """The tracker after a reconcile: what was there, with what was written replacing the
    entry of the same object and what was deleted removed."""
    by_key = {e.key: e for e in previous}
    for entry in deleted:
        by_key.pop(entry.key, None)
    for entry in written:
        by_key[entry.key] = entry
    return sorted(by_key.values())
