"""The ResourceTracker's bookkeeping: what is placed where, and what must go, pure.

An :class:`Entry` is one object an Application put in one cluster, with the revision and
the deploy step that put it there. :func:`diff` compares the tracker with what the
current assignments render and says what to write and what to delete. Assignments are
per (cluster, step): two steps may deploy to the same cluster (KubeVela's first-steps
example puts ``default`` and ``prod`` in one cluster), and a rollout that has reached a
cluster through its first step must not delete what a later step put there. So an
object no longer rendered is deleted when the (cluster, step) that put it there has
been reached by the current workflow, or when its cluster is *final* (the workflow
succeeded, a rollback, a deletion); otherwise it is kept (unless never: the
garbage-collect policy's ``keepLegacyResource`` keeps everything).
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
    step: str = ""

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        group = self.api_version.rpartition("/")[0]
        return (self.cluster, group, self.kind, self.namespace, self.name)

    def as_json(self) -> JSON:
        return {"cluster": self.cluster, "apiVersion": self.api_version, "kind": self.kind,
                "namespace": self.namespace, "name": self.name, "revision": self.revision,
                "step": self.step}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Entry:
        return cls(str(data.get("cluster") or ""), str(data.get("apiVersion") or ""),
                   str(data.get("kind") or ""), str(data.get("namespace") or ""),
                   str(data.get("name") or ""), int(data.get("revision") or 0),
                   str(data.get("step") or ""))

    @classmethod
    def of(cls, cluster: str, obj: Mapping[str, Any], revision: int, step: str = ""
           ) -> Entry:
        meta = obj.get("metadata") or {}
        return cls(cluster, str(obj.get("apiVersion")), str(obj.get("kind")),
                   str(meta.get("namespace") or ""), str(meta.get("name")), revision, step)

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


def diff(tracked: Iterable[Entry],
         desired: Mapping[tuple[str, str], Sequence[tuple[JSON, int]]],
         keep_legacy: bool = False, final: Iterable[str] = (),
         hold: Iterable[tuple[str, str, str, str, str]] = ()) -> Diff:
    """``desired``: per reached (cluster, step), the manifests (with their revision) it must
    hold; ``final``: clusters where nothing else may stay; ``hold``: keys of objects kept
    as they are although their (cluster, step) is reached (a component an ordered deploy
    has not put there yet keeps the previous release's copy)."""
    write: list[tuple[Entry, JSON]] = []
    wanted: set[tuple[str, str, str, str, str]] = set()
    for (cluster, step), manifests in sorted(desired.items()):
        for manifest, revision in manifests:
            entry = Entry.of(cluster, manifest, revision, step)
            if entry.key in wanted:
                continue  # two steps render the same object for a cluster: one write
            wanted.add(entry.key)
            write.append((entry, manifest))
    final_clusters = set(final)
    held = set(hold)
    delete: list[Entry] = []
    keep: list[Entry] = []
    for entry in sorted(set(tracked)):
        if entry.key in wanted:
            continue
        reached = (entry.cluster, entry.step) in desired or entry.cluster in final_clusters
        if reached and not keep_legacy and entry.key not in held:
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
