"""Plans: the DAG of object actions a reconcile intends, and the one executor that writes.

A reconcile never writes while it thinks. Transformers (small, single-purpose,
read-only) add :class:`Vertex` objects to a :class:`Plan`, each one intended
action on one object in one cluster, with edges for what must happen first (a
Namespace before the objects in it, a CRD before its custom resources). Then
:func:`execute` walks the DAG and is the only place that calls a
:class:`Writer`. Each vertex starts as soon as everything it depends on has
succeeded, so a slow member cluster delays only its own chain; a vertex whose
dependency failed is skipped, with the reason, never attempted blind.

The outcome of every vertex is reported, success or not: a caller can always
say which writes happened, which failed and why, and which were not tried.

A vertex may carry the :class:`Identity` its object must have (a member copy:
the template's group, kind, namespace and name). The executor refuses a write
whose object has another identity, whatever produced it: overrides are
validated long before, but this is the last point where a bug there could
still write a different object (a ClusterRoleBinding instead of a ConfigMap, a
copy in ``kube-system``). The refusal is an outcome like any failure, its
error starting with :data:`REFUSED`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import functools
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

JSON = dict[str, Any]


REFUSED = "refused:"
"""How the error of a write the executor (or the writer) refused begins."""


@dataclasses.dataclass(frozen=True)
class Identity:
    """Which object a write is about: API group (not version), kind, namespace, name."""

    group: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Identity:
        meta = obj.get("metadata") or {}
        group = str(obj.get("apiVersion") or "").rpartition("/")[0]
        return cls(group, str(obj.get("kind") or ""), str(meta.get("namespace") or ""),
                   str(meta.get("name") or ""))

    def __str__(self) -> str:
        kind = f"{self.kind}.{self.group}" if self.group else self.kind
        return f"{kind} {self.namespace + '/' if self.namespace else ''}{self.name}"

    def mismatch(self, obj: Mapping[str, Any]) -> str | None:
        """Why ``obj`` is not this object, or None when it is."""
        found = Identity.of(obj)
        if found == self:
            return None
        return f"the object to write is {found}, not {self}"


class Action(enum.Enum):
    CREATE = "create"
    """POST: the object must not exist (someone else's object is never taken over)."""
    UPDATE = "update"
    """PUT with the live resourceVersion: a concurrent change fails instead of being lost."""
    APPLY = "apply"
    """Server-side apply under our field manager, with the live resourceVersion: a
    concurrent change fails instead of being lost (``applyStrategy: ServerSideApply``)."""
    STATUS = "status"
    """Merge patch of the status subresource."""
    DELETE = "delete"
    RECREATE = "recreate"
    """DELETE of the exact live version in :attr:`Vertex.gone` (its UID and resourceVersion
    as preconditions), then POST of the object: for a change an update cannot make (an
    immutable field). The writer checks the new object before deleting the old one."""
    NOOP = "noop"


@dataclasses.dataclass
class Vertex:
    """One intended action on one object in one cluster."""

    cluster: str
    action: Action
    obj: JSON
    reason: str = ""
    depends_on: set[str] = dataclasses.field(default_factory=set)
    expect: Identity | None = None
    """The identity ``obj`` must have; the executor refuses the write otherwise."""
    replacing: str | None = None
    """The resourceVersion of the object this write changes, when ``obj`` does not carry
    it (a status patch is sent without one)."""
    gone: JSON | None = None
    """A RECREATE's object to delete first: :func:`reference` of the live version judged
    ours, ``exact`` (a newer or another object of that name survives the delete)."""

    def replaces(self) -> str | None:
        """The resourceVersion this write replaces, as far as it is known."""
        return self.replacing or (self.obj.get("metadata") or {}).get("resourceVersion")

    @functools.cached_property
    def key(self) -> str:
        # Computed once: a plan looks keys up many times per vertex (edges, order, report),
        # and a vertex's cluster, action and object identity never change once built.
        key = vertex_key(self.cluster, self.obj)
        return f"{key}|status" if self.action is Action.STATUS else key

    def describe(self) -> str:
        meta = self.obj.get("metadata", {})
        where = f"{meta['namespace']}/" if meta.get("namespace") else ""
        return f"{self.action.value} {self.obj.get('kind')} {where}{meta.get('name')} " \
               f"in {self.cluster}"


def reference(obj: Mapping[str, Any], exact: bool = False) -> JSON:
    """What a DELETE vertex needs of ``obj`` (kind, name, namespace, the UID precondition),
    as a new dict: ``obj`` may be a cached object, shared and never to be changed.

    ``exact``: delete only this version of it. The reference then carries Kubernetes'
    DeleteOptions ``preconditions`` (UID and resourceVersion), which the writer sends: an
    object rewritten since it was read survives the delete (409), for a controller that
    reads it live and must not delete a newer one (clean-up: a re-created template may
    have taken it over)."""
    meta = obj.get("metadata") or {}
    kept = {key: meta[key] for key in ("name", "namespace", "uid", "resourceVersion")
            if meta.get(key)}
    found: JSON = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                   "metadata": kept}
    if exact:
        found[PRECONDITIONS] = {key: kept[key] for key in ("uid", "resourceVersion")
                                if key in kept}
    return found


ADOPT = "adoptManagedFields"
"""The field of an APPLY vertex's object with the ``managedFields`` the writer first sets
(a merge patch conditional on the object's resourceVersion) so that the apply owns every
field we wrote before with a create or a full update (:func:`federation.hub.ownership.adopted`)."""

PRECONDITIONS = "preconditions"
"""The field of a DELETE vertex's reference whose resourceVersion the writer sends as a
precondition (see :func:`reference`)."""


def vertex_key(cluster: str, obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata", {})
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return f"{cluster}|{group}|{obj.get('kind')}|{meta.get('namespace', '')}|{meta.get('name')}"


class PlanError(Exception):
    """The plan itself is inconsistent (a cycle, an edge to nothing)."""


class Plan:
    """A DAG of vertices keyed by (cluster, group, kind, namespace, name)."""

    def __init__(self) -> None:
        self.vertices: dict[str, Vertex] = {}

    def add(self, vertex: Vertex) -> Vertex:
        """Add a vertex; adding the same object twice keeps the first and merges edges."""
        existing = self.vertices.get(vertex.key)
        if existing is not None:
            existing.depends_on |= vertex.depends_on
            return existing
        self.vertices[vertex.key] = vertex
        return vertex

    def depend(self, vertex: Vertex, on: Vertex) -> None:
        if vertex.key != on.key:
            vertex.depends_on.add(on.key)

    def __iter__(self) -> Iterator[Vertex]:
        return iter(self.vertices.values())

    def __len__(self) -> int:
        return len(self.vertices)

    def writes(self) -> list[Vertex]:
        return [v for v in self.vertices.values() if v.action is not Action.NOOP]

    def order(self) -> list[Vertex]:
        """A topological order (dependencies first, ties by key); raises on a cycle."""
        missing = {d for v in self.vertices.values() for d in v.depends_on} - set(self.vertices)
        if missing:
            raise PlanError(f"edges to vertices not in the plan: {sorted(missing)}")
        done: list[Vertex] = []
        placed: set[str] = set()
        remaining = dict(self.vertices)
        while remaining:
            ready = sorted(k for k, v in remaining.items() if v.depends_on <= placed)
            if not ready:
                raise PlanError(f"dependency cycle among {sorted(remaining)}")
            for key in ready:
                done.append(remaining.pop(key))
                placed.add(key)
        return done


class Writer(Protocol):
    """What the executor needs from the multi-cluster client."""

    async def create(self, cluster: str, obj: JSON) -> JSON: ...

    async def update(self, cluster: str, obj: JSON) -> JSON: ...

    async def apply(self, cluster: str, obj: JSON) -> JSON: ...

    async def patch_status(self, cluster: str, obj: JSON) -> JSON: ...

    async def delete(self, cluster: str, obj: JSON) -> JSON: ...


@runtime_checkable
class Recreator(Protocol):
    """A writer that can carry out :attr:`Action.RECREATE` (the Applications' one)."""

    async def recreate(self, cluster: str, gone: JSON, obj: JSON) -> JSON:
        """Delete ``gone`` (an exact :func:`reference`), then create ``obj``; nothing is
        deleted when ``obj`` may not be written."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    vertex: Vertex
    ok: bool
    error: str | None = None
    attempted: bool = True
    exception: BaseException | None = dataclasses.field(default=None, repr=False,
                                                       compare=False)
    result: JSON | None = dataclasses.field(default=None, repr=False, compare=False)
    """What the server answered to a successful write."""

    @property
    def refused(self) -> bool:
        """Refused before reaching a server (wrong identity, denied object): retrying the
        same plan cannot help, only a change of its inputs can."""
        return bool(self.error and self.error.startswith(REFUSED))


@dataclasses.dataclass(frozen=True)
class Report:
    outcomes: Mapping[str, Outcome]

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes.values())

    def result(self, vertex: Vertex | None) -> JSON | None:
        outcome = self.outcomes.get(vertex.key) if vertex is not None else None
        return outcome.result if outcome is not None else None

    def raise_for_failure(self) -> None:
        """Raise the first failure's exception (for plans that must succeed as a whole)."""
        failures = self.failed()
        if failures:
            raise failures[0].exception or RuntimeError(failures[0].error)

    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes.values() if not o.ok]



async def execute(plan: Plan, writer: Writer, concurrency: int = 16) -> Report:
    """Apply every vertex, dependencies first, independent chains concurrently."""
    ordered = plan.order()  # also validates: no cycle, no dangling edge
    limit = asyncio.Semaphore(concurrency)
    tasks: dict[str, asyncio.Task[Outcome]] = {}
    settled: dict[str, Outcome] = {}
    """Outcomes known without waiting: a no-op whose dependencies are settled no-ops (most
    of a reconcile that changes nothing) needs no task of its own."""

    async def outcome_of(key: str) -> Outcome:
        known = settled.get(key)
        return known if known is not None else await tasks[key]

    async def run(vertex: Vertex) -> Outcome:
        for dependency in sorted(vertex.depends_on):
            before = await outcome_of(dependency)
            if not before.ok:
                return Outcome(vertex, ok=False, attempted=False, error=_not_attempted(before))
        if vertex.action is Action.NOOP:
            return Outcome(vertex, ok=True, attempted=False)
        mismatch = _mismatch(vertex)
        if mismatch is not None:
            return Outcome(vertex, ok=False, attempted=False,
                           error=f"{REFUSED} {vertex.describe()}: {mismatch}")
        async with limit:
            try:
                answer = await _write(writer, vertex)
            except Exception as exc:  # every failure becomes an outcome, none is lost
                return Outcome(vertex, ok=False, error=str(exc), exception=exc)
        return Outcome(vertex, ok=True, result=answer)

    for vertex in ordered:
        if vertex.action is Action.NOOP and all(
                key in settled and settled[key].ok for key in vertex.depends_on):
            settled[vertex.key] = Outcome(vertex, ok=True, attempted=False)
        else:
            tasks[vertex.key] = asyncio.create_task(run(vertex), name=vertex.describe())
    results = [*settled.values(), *await asyncio.gather(*tasks.values())]
    by_key = {outcome.vertex.key: outcome for outcome in results}
    return Report({vertex.key: by_key[vertex.key] for vertex in ordered})


def _mismatch(vertex: Vertex) -> str | None:
    """Why the vertex's object (and a recreate's deleted one) is not the expected one."""
    if vertex.action is Action.RECREATE:
        if vertex.gone is None or vertex.expect is None:
            return "a recreate names the object it deletes and the one it creates"
        found = vertex.expect.mismatch(vertex.gone)
        if found is not None or not (vertex.gone.get(PRECONDITIONS) or {}).get("uid"):
            return f"the object to delete is not the one recreated ({found or 'no UID'})"
    return vertex.expect.mismatch(vertex.obj) if vertex.expect is not None else None


def _not_attempted(before: Outcome) -> str:
    """Why a vertex was skipped, with the cause: a skipped dependency passes its own reason
    on (the first write that failed, and how), so a chain never hides where it broke."""
    if not before.attempted and before.error:
        return before.error
    return f"not attempted: {before.vertex.describe()} failed: {before.error or 'unknown error'}"


async def _write(writer: Writer, vertex: Vertex) -> JSON:
    if vertex.action is Action.RECREATE:
        if not isinstance(writer, Recreator):
            raise RuntimeError(f"{REFUSED} {vertex.describe()}: this writer cannot recreate")
        assert vertex.gone is not None  # _mismatch refused it otherwise
        return await writer.recreate(vertex.cluster, vertex.gone, vertex.obj)
    verbs = {Action.CREATE: writer.create, Action.UPDATE: writer.update,
             Action.APPLY: writer.apply, Action.STATUS: writer.patch_status,
             Action.DELETE: writer.delete}
    return await verbs[vertex.action](vertex.cluster, vertex.obj)
