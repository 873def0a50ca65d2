"""Our own hub writes that the cache has not shown yet (kube-controller-manager's
"expectations").

A reconcile reads the template and its binding from the hub's cache. Right after a
reconcile wrote one of them (created or replaced the binding, patched the template's
status), the next reconcile of the same key can start before the watch delivers that
write: it would see the old object and write again. A replaced binding then fails with
409 and is retried (a wasted hub request), and a template status patch, which carries no
precondition, is simply sent twice. Both were seen in a 500-template burst at 64 workers.

So every successful hub write is remembered with the resourceVersion it replaced (none for
a create). While the cache still shows exactly that version (or, for a create, nothing),
the cache is behind *our own* write and the reconcile waits a moment instead of acting.
Any other version (the write arrived, or someone wrote after us) ends the wait, and so does
:data:`WAIT`: a watch that lost the event must not stall a template for good.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from federation.contexts.client import Resource
from federation.controllers.kit import plan

WAIT = 5.0
"""Seconds a key waits for the cache to show our write. A watch delivers within
milliseconds; one that has not in seconds is broken or relisting, and the level-triggered
reconcile is then right to go on with what the cache says."""

PRUNE_AT = 10_000
"""Entries kept before those past :data:`WAIT` are dropped. An entry goes when its key is
next reconciled; one whose key never is (a binding deleted with its template) would
otherwise stay for the life of the process."""

RECHECK = 0.05
"""Seconds before a reconcile that found the cache behind looks again: about one watch
delivery on a busy hub."""

@dataclasses.dataclass
class _Written:
    replaced: str | None
    """The resourceVersion our write replaced; None for a create."""
    deadline: float


class Expectations:
    """Hub writes by object key, until the cache shows them."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._written: dict[str, _Written] = {}

    def __len__(self) -> int:
        return len(self._written)

    def observe(self, report: plan.Report, hub: str) -> None:
        """Remember each successful hub write of ``report``."""
        for outcome in report.outcomes.values():
            vertex = outcome.vertex
            if vertex.cluster != hub or not outcome.ok or not outcome.attempted or \
                    vertex.action is plan.Action.NOOP:
                continue
            replaced = None if vertex.action is plan.Action.CREATE else vertex.replaces()
            self._written[object_key(vertex.obj)] = _Written(replaced, self._clock() + WAIT)
        if len(self._written) > PRUNE_AT:
            now = self._clock()
            self._written = {k: w for k, w in self._written.items() if now < w.deadline}

    def behind(self, obj_key: str, cached: Mapping[str, Any] | None) -> bool:
        """True while the cache shows what our write to ``obj_key`` replaced."""
        written = self._written.get(obj_key)
        if written is None:
            return False
        version = (cached.get("metadata") or {}).get("resourceVersion") \
            if cached is not None else None
        if version == written.replaced and self._clock() < written.deadline:
            return True
        del self._written[obj_key]
        return False


def object_key(obj: Mapping[str, Any]) -> str:
    """The identity of an object on the hub (group, kind, namespace, name)."""
    return plan.vertex_key("", obj)


def key_of(resource: Resource, name: str, namespace: str | None) -> str:
    """:func:`object_key` of the object of ``resource`` so named, whether cached or not."""
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return object_key({"apiVersion": resource.api_version, "kind": resource.kind,
                       "metadata": meta})
