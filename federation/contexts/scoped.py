"""The cache of a resource the control plane may read only in some namespaces (hub Secrets).

Kubernetes RBAC cannot grant "every namespace but these", so the control plane is not
given the hub's Secrets cluster-wide: it may read them only where a grant (a RoleBinding)
says so. A :class:`ScopedInformer` stands where the cluster's one informer of such a
resource would be (:meth:`~federation.contexts.cache.ClusterCache.restrict`). It watches
the grants (objects of another resource, narrowed by a field selector; :class:`Grants`
says which namespace each one grants, if any) and runs one namespaced
:class:`~federation.contexts.cache.Informer` per granted namespace. Its store is the
union of theirs and its handlers see their events, so readers and event handlers need
not know; a read of one namespace goes to that namespace's informer
(:meth:`ScopedInformer.namespace`).

What it must never do is let a missing grant look like a deleted object: a read outside
every grant raises :class:`NotGranted` (retryable: a grant may come), never "not found";
a namespace whose grant goes away is dropped without DELETED events, so nothing of it is
taken for deleted and its copies stay where they are; the first list of a namespace
granted while running is news (its events are not ``initial``), so what waited for it
is reconciled at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable

from federation.contexts.cache import (
    CacheSettings,
    Event,
    Handler,
    Informer,
    ReadOnly,
    Store,
    WatchState,
    object_key,
)
from federation.contexts.client import ClientError, ClusterUnavailable, ObjectReader, Resource

log = logging.getLogger("federation.cache")


class NotGranted(ClientError):
    """A read of a namespace no grant covers. Retryable: a grant may be given later, and
    nothing may conclude from it that an object is gone."""

    retryable = True


@dataclasses.dataclass(frozen=True)
class Grants:
    """Where a restricted resource may be read."""

    resource: Resource
    """The grants' own resource (RoleBindings)."""
    field_selector: str | None
    """Narrows what is listed and watched to the grants (``metadata.name=...``)."""
    namespace_of: Callable[[ReadOnly], str | None]
    """The namespace a grant object opens, or None (not a grant, or one never honoured)."""
    refusal: Callable[[str], str]
    """Why a namespace cannot be read and how to grant it: :class:`NotGranted`'s message."""


Listener = Callable[[frozenset[str]], None]
"""Told the granted namespaces whenever they change."""


class ScopedInformer:
    """One resource of one cluster, cached only in the granted namespaces (see the
    module docstring); a :class:`~federation.contexts.cache.CachedResource`."""

    def __init__(self, client: ObjectReader, resource: Resource, grants: Grants, *,
                 settings: CacheSettings | None = None, cluster: str | None = None) -> None:
        self.client = client
        self.cluster = cluster or client.name
        self.resource = resource
        self.grants = grants
        self.settings = settings or CacheSettings()
        self.store = Store()
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()
        self.grant_informer = Informer(client, grants.resource,
                                       field_selector=grants.field_selector,
                                       settings=self.settings, cluster=self.cluster)
        self.children: dict[str, Informer] = {}
        """Granted namespace -> its informer."""
        self.listeners: list[Listener] = []
        self._granted_by: dict[str, bool] = {}
        """Namespace of each grant object -> whether it grants (a namespace has one)."""
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._late: set[str] = set()
        """Namespaces granted after the first sync: their first list is news."""
        self._running = False
        self._stopped = False
        self.grant_informer.add_handler(self._grant_event)

    # -- what readers see ----------------------------------------------------------------

    @property
    def name(self) -> str:
        return f"informer {self.cluster}/{self.resource.plural} (granted namespaces)"

    @property
    def granted(self) -> frozenset[str]:
        return frozenset(self.children)

    @property
    def known(self) -> bool:
        """The grants have been listed: :attr:`granted` is the truth, not a start."""
        return self.grant_informer.synced.is_set()

    @property
    def state(self) -> WatchState:
        if self._stopped:
            return "stopped"
        if self.grant_informer.state == "backoff":
            return "backoff"
        return "watching" if self.synced.is_set() else "listing" if self._running \
            else "pending"

    @property
    def last_error(self) -> str | None:
        errors = [f"grants: {self.grant_informer.last_error}"] \
            if self.grant_informer.last_error else []
        errors += [f"namespace {ns}: {child.last_error}"
                   for ns, child in sorted(self.children.items()) if child.last_error]
        return "; ".join(errors) or None

    @property
    def relists(self) -> int:
        return sum(c.relists for c in self.children.values())

    @property
    def restarts(self) -> int:
        return self.grant_informer.restarts + sum(c.restarts for c in self.children.values())

    @property
    def events(self) -> int:
        return sum(c.events for c in self.children.values())

    def add_handler(self, handler: Handler) -> None:
        """Register ``handler``; it is called at once with ADDED for every object cached."""
        self.handlers.append(handler)
        for obj in list(self.store.objects.values()):
            _call(self.name, handler, Event("ADDED", self.cluster, self.resource, obj,
                                            initial=True))

    async def wait_synced(self, timeout: float | None = None) -> bool:
        try:
            await asyncio.wait_for(self.synced.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def wake(self) -> None:
        self.grant_informer.wake()
        for child in self.children.values():
            child.wake()

    async def namespace(self, namespace: str, timeout: float) -> Informer:
        """The informer of ``namespace``; :class:`NotGranted` when no grant covers it,
        :class:`~federation.contexts.client.ClusterUnavailable` while the grants cannot be
        listed (waiting up to ``timeout`` seconds for their first list)."""
        grants = self.grant_informer
        if not grants.synced.is_set():
            with contextlib.suppress(TimeoutError):  # listed, or failed once: no longer
                await asyncio.wait_for(grants.settled.wait(), timeout)
            if not grants.synced.is_set():
                raise ClusterUnavailable(self.cluster, f"cannot tell where "
                                         f"{self.resource.plural} may be read: "
                                         f"{grants.last_error or 'grants not listed yet'}")
        child = self.children.get(namespace)
        if child is None:
            raise NotGranted(self.cluster, self.grants.refusal(namespace))
        return child

    # -- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        """Follow the grants and the granted namespaces until cancelled."""
        self._running, self._stopped = True, False
        grants = asyncio.create_task(self.grant_informer.run(), name=self.grant_informer.name)
        for namespace in self.children:
            self._start(namespace)
        try:
            # Synced once the grants and the namespaces granted then have each listed or
            # failed once: a namespace that cannot be listed must not hold up the others.
            await self.grant_informer.settled.wait()
            for child in list(self.children.values()):
                await child.settled.wait()
            self.synced.set()
            await grants
        finally:
            self._running = False
            self._stopped = True
            tasks = [grants, *self._tasks.values()]
            self._tasks.clear()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def _grant_event(self, event: Event) -> None:
        namespace = object_key(event.obj)[0]
        if event.type == "DELETED":
            self._granted_by.pop(namespace, None)
        else:
            self._granted_by[namespace] = self.grants.namespace_of(event.obj) == namespace
        self._rescope(frozenset(ns for ns, yes in self._granted_by.items() if yes))

    def _rescope(self, granted: frozenset[str]) -> None:
        if granted == self.granted:
            return
        for namespace in sorted(granted - self.granted):
            self._add(namespace)
        for namespace in sorted(self.granted - granted):
            self._drop(namespace)
        for listener in list(self.listeners):
            try:
                listener(granted)
            except Exception:
                log.exception("%s: grant listener %r failed", self.name, listener)

    def _add(self, namespace: str) -> None:
        child = Informer(self.client, self.resource, namespace=namespace,
                         settings=self.settings, cluster=self.cluster)
        self.children[namespace] = child
        child.add_handler(self._forward(namespace, child))
        if self.synced.is_set():
            self._late.add(namespace)
        if self._running:
            self._start(namespace)
        log.info("%s: namespace %s granted", self.name, namespace)

    def _drop(self, namespace: str) -> None:
        """Forget a namespace whose grant went: silently (no DELETED event: its objects
        were not deleted, only hidden from us; their copies stay)."""
        child = self.children.pop(namespace)
        task = self._tasks.pop(namespace, None)
        if task is not None:
            task.cancel()
        for key in list(child.store.objects):
            self.store.remove(key)
        self._late.discard(namespace)
        log.info("%s: namespace %s no longer granted; its objects are no longer read",
                 self.name, namespace)

    def _start(self, namespace: str) -> None:
        child = self.children[namespace]
        self._tasks[namespace] = asyncio.create_task(child.run(), name=child.name)

    def _forward(self, namespace: str, child: Informer) -> Handler:
        """A child's events: into the shared store, then to our handlers."""

        def forward(event: Event) -> None:
            if self.children.get(namespace) is not child:
                return  # dropped (or replaced) meanwhile
            if event.type == "DELETED":
                self.store.remove(object_key(event.obj))
            else:
                self.store.put(event.obj)
            if event.initial and namespace in self._late:
                event = dataclasses.replace(event, initial=False)
            for handler in list(self.handlers):
                _call(self.name, handler, event)

        return forward


def _call(name: str, handler: Handler, event: Event) -> None:
    try:
        handler(event)
    except Exception:
        log.exception("%s: event handler %r failed", name, handler)
