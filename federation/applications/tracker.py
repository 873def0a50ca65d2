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

Each entry carries the garbage-collect strategy its object was written with (the
policy's ``rules``, :func:`federation.applications.resource_policies.gc_strategy`): an
``onAppDelete`` object no longer rendered is kept (deleted with the Application), a
``never`` or ``orphan`` one is *released*: it leaves the tracker and stays in the member.
A strategy only ever spares an object; what may be deleted is checked when the delete is
planned (only what this Application placed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

JSON = dict[str, Any]
Strategy = Callable[[JSON], tuple[str, str]]
"""A manifest's garbage-collect (strategy, propagation)."""
ON_APP_DELETE = "onAppDelete"
NEVER = "never"
ORPHAN = "orphan"
_STRATEGIES = ("", ON_APP_DELETE, NEVER)
_PROPAGATIONS = ("", ORPHAN, "cascading")


@dataclasses.dataclass(frozen=True, order=True)
class Entry:
    cluster: str
    api_version: str
    kind: str
    namespace: str
    name: str
    revision: int = 0
    step: str = ""
    gc: str = ""
    """The garbage-collect strategy it was written with ("": ``onAppUpdate``)."""
    propagation: str = ""
    shared: bool = False
    """Another Application of the namespace owns the object; this one shares it (its
    ``shared-resource`` policy): never written nor deleted by it, only read."""

    @property
    def released_on_delete(self) -> bool:
        """Left in the member (untracked) where it would be deleted."""
        return self.gc == NEVER or self.propagation == ORPHAN

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        group = self.api_version.rpartition("/")[0]
        return (self.cluster, group, self.kind, self.namespace, self.name)

    def as_json(self) -> JSON:
        return {"cluster": self.cluster, "apiVersion": self.api_version, "kind": self.kind,
                "namespace": self.namespace, "name": self.name, "revision": self.revision,
                "step": self.step, **({"gc": self.gc} if self.gc else {}),
                **({"propagation": self.propagation} if self.propagation else {}),
                **({"shared": True} if self.shared else {})}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Entry:
        return cls(str(data.get("cluster") or ""), str(data.get("apiVersion") or ""),
                   str(data.get("kind") or ""), str(data.get("namespace") or ""),
                   str(data.get("name") or ""), int(data.get("revision") or 0),
                   str(data.get("step") or ""), _one_of(data.get("gc"), _STRATEGIES),
                   _one_of(data.get("propagation"), _PROPAGATIONS),
                   data.get("shared") is True)

    @classmethod
    def of(cls, cluster: str, obj: Mapping[str, Any], revision: int, step: str = "",
           strategy: tuple[str, str] = ("", "")) -> Entry:
        meta = obj.get("metadata") or {}
        gc, propagation = strategy
        return cls(cluster, str(obj.get("apiVersion")), str(obj.get("kind")),
                   str(meta.get("namespace") or ""), str(meta.get("name")), revision, step,
                   _one_of(gc, _STRATEGIES), _one_of(propagation, _PROPAGATIONS))

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name} in {self.cluster}"


def _one_of(value: Any, allowed: Sequence[str]) -> str:
    """``value`` if allowed, else "" (the default; a tracker is the tenant's to write, and
    an unknown strategy must not spare, nor delete, anything)."""
    return value if isinstance(value, str) and value in allowed else ""


@dataclasses.dataclass(frozen=True)
class Diff:
    write: tuple[tuple[Entry, JSON], ...]
    """Objects to hold (created or updated), each with its manifest."""
    delete: tuple[Entry, ...]
    """Tracked objects no longer rendered where they are."""
    keep: tuple[Entry, ...]
    """Tracked objects left as they are (cluster not reached yet, or kept by policy)."""
    release: tuple[Entry, ...] = ()
    """Tracked objects no longer rendered that leave the tracker but stay in the member
    (garbage-collect ``never``, or propagation ``orphan``)."""


def diff(tracked: Iterable[Entry],
         desired: Mapping[tuple[str, str], Sequence[tuple[JSON, int]]],
         keep_legacy: bool = False, final: Iterable[str] = (),
         hold: Iterable[tuple[str, str, str, str, str]] = (),
         strategy: Strategy | None = None) -> Diff:
    """``desired``: per reached (cluster, step), the manifests (with their revision) it must
    hold; ``final``: clusters where nothing else may stay; ``hold``: keys of objects kept
    as they are although their (cluster, step) is reached (a component an ordered deploy
    has not put there yet keeps the previous release's copy); ``strategy``: the
    garbage-collect rules' verdict on a manifest, recorded in its entry."""
    write: list[tuple[Entry, JSON]] = []
    wanted: set[tuple[str, str, str, str, str]] = set()
    for (cluster, step), manifests in sorted(desired.items()):
        for manifest, revision in manifests:
            entry = Entry.of(cluster, manifest, revision, step,
                             strategy(manifest) if strategy is not None else ("", ""))
            if entry.key in wanted:
                continue  # two steps render the same object for a cluster: one write
            wanted.add(entry.key)
            write.append((entry, manifest))
    final_clusters = set(final)
    held = set(hold)
    delete: list[Entry] = []
    keep: list[Entry] = []
    release: list[Entry] = []
    for entry in sorted(set(tracked)):
        if entry.key in wanted:
            continue
        reached = (entry.cluster, entry.step) in desired or entry.cluster in final_clusters
        if not reached or keep_legacy or entry.key in held or entry.gc == ON_APP_DELETE:
            keep.append(entry)
        elif entry.released_on_delete:
            release.append(entry)
        else:
            delete.append(entry)
    return Diff(tuple(write), tuple(delete), tuple(keep), tuple(release))


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
