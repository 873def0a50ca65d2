"""What the dashboard shows, kept current: each hub resource listed, then watched.

One loop per resource (and per namespace when the user may not list cluster-wide)
reads with the user's own client: what the user may not see is never read, and the
refusal is kept as a note the page shows ("Applications: forbidden cluster-wide; namespace
shop only"). Every change bumps :attr:`Mirror.version`, which the pages' live streams wait on.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from federation.contexts import client as kube
from federation.hub import api
from federation.hub import rollouts as hub_rollouts

JSON = dict[str, Any]
Key = tuple[str, str]
Sleep = Callable[[float], Awaitable[None]]
MAX_PAUSE = 30.0
EVENTS_KEPT = 1000
"""The newest events kept (a busy hub writes many; the page shows recent ones)."""


@dataclasses.dataclass(frozen=True)
class Source:
    name: str
    resource: kube.Resource


SOURCES = (
    Source("members", api.MEMBER_CLUSTERS),
    Source("bindings", api.RESOURCE_BINDINGS),
    Source("clusterbindings", api.CLUSTER_RESOURCE_BINDINGS),
    Source("applications", api.APPLICATIONS),
    Source("rollouts", hub_rollouts.RECONFIGURE_POLICIES),
    Source("events", api.EVENTS),
)


class Mirror:
    """The hub objects of :data:`SOURCES` the user may read, by source and (namespace, name)."""

    def __init__(self, client: kube.ObjectReader, namespaces: Sequence[str] = (),
                 fallback_namespace: str = "default", *, sleep: Sleep = asyncio.sleep,
                 sources: Sequence[Source] = SOURCES) -> None:
        self.client = client
        self.namespaces = tuple(namespaces)
        """Given by the user (``-n``): only these are read."""
        self.fallback = fallback_namespace
        self.sleep = sleep
        self.sources = tuple(sources)
        self.objects: dict[str, dict[Key, JSON]] = {s.name: {} for s in self.sources}
        self.notes: dict[str, str] = {}
        """Source -> why it is incomplete or empty (forbidden, unreachable)."""
        self.version = 0
        self._changed = asyncio.Condition()

    def items(self, source: str) -> list[JSON]:
        return [self.objects[source][key] for key in sorted(self.objects[source])]

    async def run(self) -> None:
        """Follow every source until cancelled."""
        async with asyncio.TaskGroup() as group:
            for source in self.sources:
                group.create_task(self._follow_source(source))

    async def wait(self, seen: int) -> int:
        """The version after ``seen``, once there is one."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.version > seen)
            return self.version

    async def _bump(self) -> None:
        async with self._changed:
            self.version += 1
            self._changed.notify_all()

    async def _follow_source(self, source: Source) -> None:
        scoped = source.resource.namespaced
        if scoped and self.namespaces:
            await self._each_namespace(source, self.namespaces, "")
            return
        try:
            await self._follow(source, None)
        except kube.ApiError as exc:
            if exc.status != 403 or not scoped:
                raise
            await self._each_namespace(source, (self.fallback,),
                                       f"forbidden cluster-wide ({_short(exc)}); ")

    async def _each_namespace(self, source: Source, namespaces: Sequence[str],
                              why: str) -> None:
        self.notes[source.name] = f"{why}namespace {', '.join(namespaces)} only"
        await self._bump()
        async with asyncio.TaskGroup() as group:
            for namespace in namespaces:
                group.create_task(self._follow(source, namespace))

    async def _follow(self, source: Source, namespace: str | None) -> None:
        """List and watch one scope until cancelled; a 403 at cluster scope is raised (the
        caller narrows to namespaces), any other failure is noted and tried again."""
        pause = 1.0
        while True:
            try:
                version = await self._list(source, namespace)
                pause = 1.0
                await self._watch(source, namespace, version)
            except kube.ApiError as exc:
                if exc.status == 403 and namespace is None and source.resource.namespaced:
                    raise
                await self._note(source, exc)
            except kube.ClientError as exc:
                await self._note(source, exc)
            else:
                continue  # the server ended the watch: list again
            await self.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE)

    async def _note(self, source: Source, exc: kube.ClientError) -> None:
        self.notes[source.name] = _short(exc)
        await self._bump()

    async def _list(self, source: Source, namespace: str | None) -> str:
        found = await self.client.list(source.resource, namespace)
        store = self.objects[source.name]
        for key in [k for k in store if namespace is None or k[0] == namespace]:
            del store[key]
        for item in found.get("items") or []:
            store[_key(item)] = item
        self._trim(source.name)
        if source.name in self.notes and not self.notes[source.name].endswith(" only"):
            del self.notes[source.name]
        await self._bump()
        return str((found.get("metadata") or {}).get("resourceVersion") or "")

    async def _watch(self, source: Source, namespace: str | None, version: str) -> None:
        store = self.objects[source.name]
        async for event in self.client.watch(source.resource, namespace=namespace,
                                             resource_version=version or None):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                return  # expired (410) or similar: list again
            if kind in ("ADDED", "MODIFIED"):
                store[_key(obj)] = obj
                self._trim(source.name)
            elif kind == "DELETED":
                store.pop(_key(obj), None)
            else:
                continue  # BOOKMARK
            await self._bump()

    def _trim(self, source: str) -> None:
        store = self.objects[source]
        if source != "events" or len(store) <= EVENTS_KEPT:
            return
        for key in sorted(store, key=lambda k: event_time(store[k]))[:-EVENTS_KEPT]:
            del store[key]


def event_time(event: JSON) -> str:
    """When an Event last happened, as an RFC 3339 text that sorts."""
    return str(event.get("lastTimestamp") or event.get("eventTime")
               or (event.get("metadata") or {}).get("creationTimestamp") or "")


def _key(obj: JSON) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _short(exc: kube.ClientError) -> str:
    return str(exc)[:300]
