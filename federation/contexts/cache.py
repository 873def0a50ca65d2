"""Informers: per (cluster, resource) caches kept current by list + watch.

An :class:`Informer` lists its resource (in pages), replaces its :class:`Store`
with the result, then watches from the list's resourceVersion with bookmarks,
so the store follows the server and the resourceVersion it resumes from stays
fresh even when nothing changes. How it reacts to what goes wrong:

- **410 Gone** (the resourceVersion was compacted away, at watch start or as an
  ``ERROR`` event): relist at once. A relist diffs against the store, so
  handlers see exactly the objects that appeared, changed or vanished while
  the watch was away.
- **No answer** (refused, reset, TLS, timeout) or a server error: wait with
  jittered exponential backoff (``backoff_initial`` doubling to ``backoff_max``)
  and watch again from the last resourceVersion; if that is too old by then,
  the server says 410 and we relist.
- **Silence**: a stream that sends nothing for ``inactivity_timeout`` is taken
  for dead (a frozen server keeps the TCP connection open forever). The server
  closes every watch after ``timeoutSeconds`` (randomised around
  ``watch_timeout``), so a healthy but quiet stream never goes that long.
- **The server closes the stream** (its timeout): watch again at once.

Objects are stored as the server's JSON with ``metadata.managedFields``
removed (often half of an object's size, and nothing a controller reads).
Stored dicts are shared and handed out as they are, typed :data:`ReadOnly`:
**copy only what you are about to change** (controller-runtime's
``UnsafeDisableDeepCopy``, kopf's read-only bodies). Deep-copying every object
a reader touches was most of the control plane's CPU; a reader that wants to
edit copies the one object (or the one field) it edits, right before editing
it. The informer itself never edits a stored dict: a change arrives as a new
object that replaces the old one, so a reference taken earlier stays a
consistent snapshot of its version. Indexes: ``namespace``, ``owner`` (owner UIDs) and
``label`` (``key=value``), plus any added with :meth:`Store.add_index`.

Event handlers are plain functions called synchronously in the informer's
task with an :class:`Event`; they must be quick (put a key on a work queue).
A handler that raises is logged and does not stop the informer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, Protocol

from federation.contexts import selectors
from federation.contexts.client import (
    JSON,
    ApiError,
    ClientError,
    ClusterUnavailable,
    ObjectReader,
    Resource,
)

log = logging.getLogger("federation.cache")

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
WatchState = Literal["pending", "listing", "watching", "backoff", "stopped"]
WATCH_STATES: tuple[WatchState, ...] = ("pending", "listing", "watching", "backoff", "stopped")
IndexFunc = Callable[[JSON], Iterable[str]]
ReadOnly = Mapping[str, Any]
"""A cached object as handed out without a copy: shared with the cache and every
other reader, so never to be mutated (not even nested dicts and lists; the type
guards only the top level). ``copy.deepcopy`` it, or the part to change, first."""
Key = tuple[str, str]  # (namespace or "", name)


@dataclasses.dataclass(frozen=True)
class CacheSettings:
    """How informers list, watch and recover."""

    page_size: int = 500
    """Objects per list page: the apiserver's own paginating clients use 500; it
    bounds one response to a few MB and keeps etcd range reads short."""
    watch_timeout: float = 55.0
    """``timeoutSeconds`` asked of the server (plus up to 10% jitter so many
    informers do not reconnect in lockstep). kube-apiserver 1.20 sends its bookmark
    just before a watch times out, so a short timeout keeps the resourceVersion
    fresh (fewer 410s after compaction) at the cost of one request a minute."""
    inactivity_timeout: float = 70.0
    """Seconds of silence after which a stream is dead. The server closes (with a
    bookmark) within ``watch_timeout`` * 1.1 = 60.5 s, so 70 s is never a healthy stream."""
    backoff_initial: float = 0.8
    """First reconnect delay: client-go's reflector starts at 800 ms."""
    backoff_max: float = 30.0
    """Longest reconnect delay: client-go's reflector caps at 30 s; a member that
    comes back is caught up within half a minute at worst."""
    backoff_jitter: float = 0.2
    """Each delay is scaled by a random factor in [1 - j, 1 + j] so informers of
    many kinds on one cluster do not hammer it together when it returns."""
    first_list_from_cache: bool = True
    """An informer's first list asks ``resourceVersion=0``: the API server answers from its
    watch cache (any recent state, ``limit`` ignored: one response) instead of paging a
    consistent read out of etcd; the watch then resumes from that list's version, so
    nothing after it is missed. client-go's reflector lists the same way. Measured at
    10,000 templates, three replicas starting together: the hub's caches synced in
    15.4-17.6 s against 18.5-23.1 s paged. A relist (the version expired: 410) stays a
    consistent paged read, so a lagging server cannot take an informer back in time."""
    first_list_timeout: float = 60.0
    """Seconds the first list's one answer may take in all (pages get the client's own
    10 s). A cold start of three replicas at 10,000 templates asks the hub for 10,000
    bindings three times at once; 10 s was too short for the whole answer and every retry
    started the server's work over. 60 s is what kube-apiserver allows a list itself.
    The answer must keep coming, though: a server silent for the client's own bound
    (before the first byte or between two) fails the list then, as a page would
    (``ClusterClient._call_timeout``), unless ``first_list_silence`` says otherwise. Without
    that, a first list against a frozen member hung for the whole 60 s;
    `tests/e2e/test_failover.py`'s frozen member once failed to fail over in time while it
    did (suspected, not proven, to be the cause). A whole answer that fails makes that
    informer's later first lists paged (each page small, each bounded by the client's own
    10 s): a member too big to answer whole within the silence bound still syncs."""
    first_list_silence: float | None = None
    """Seconds the first list's whole answer may go without a byte, or None for the client's
    own request bound (10 s). The hub's caches wait for the whole ``first_list_timeout``
    (:meth:`for_hub`): kube-apiserver 1.20 builds a list's whole answer before it
    sends a byte, and three replicas starting together at 10,000 templates made the hub
    take more than 10 s over its 10,000 bindings (measured: each replica's list failed
    after 10 s of silence and started the server's work over). A hub that stops answering
    costs nothing more by the wait: no reconcile can write without it. A member is the
    opposite: one of many, and one frozen must not hold anything up."""
    page_retries: int = 3
    """Times a page after the first is asked again (after ``backoff_initial``) when it
    fails, before the list starts over. A cold start at 10,000 templates lists 20 pages
    per resource from API servers busy listing for every informer at once; one page over
    the request timeout made the whole list start over, and every restart was slower
    (caches not synced after 30 s). The continue token stays valid until the server's
    compaction (then 410, and the list starts over as before)."""

    def for_hub(self) -> CacheSettings:
        """These settings for the hub's caches: a whole first list waits out its silence."""
        if self.first_list_silence is not None:
            return self
        return dataclasses.replace(self, first_list_silence=self.first_list_timeout)


@dataclasses.dataclass(frozen=True)
class Event:
    """One change seen by an informer."""

    type: EventType
    cluster: str
    resource: Resource
    obj: JSON
    old: JSON | None = None
    initial: bool = False
    """Part of a first list (or replayed to a handler added late): the state found at
    start, not a change. A priority queue puts these behind new and changed objects."""


Handler = Callable[[Event], None]


def object_key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def strip(obj: JSON) -> JSON:
    """The object as cached: without managedFields."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def _namespace_index(obj: JSON) -> Iterable[str]:
    return [object_key(obj)[0]]


def _owner_index(obj: JSON) -> Iterable[str]:
    return [str(ref.get("uid")) for ref in (obj.get("metadata") or {}).get("ownerReferences")
            or [] if ref.get("uid")]


def _label_index(obj: JSON) -> Iterable[str]:
    return [f"{k}={v}" for k, v in ((obj.get("metadata") or {}).get("labels") or {}).items()]


DEFAULT_INDEXES: dict[str, IndexFunc] = {
    "namespace": _namespace_index, "owner": _owner_index, "label": _label_index,
}


class Store:
    """Objects by (namespace, name), with secondary indexes."""

    def __init__(self, indexes: Mapping[str, IndexFunc] | None = None) -> None:
        self.objects: dict[Key, JSON] = {}
        self._index_funcs: dict[str, IndexFunc] = dict(DEFAULT_INDEXES if indexes is None
                                                       else indexes)
        self._indexes: dict[str, dict[str, set[Key]]] = {n: {} for n in self._index_funcs}

    def __len__(self) -> int:
        return len(self.objects)

    def add_index(self, name: str, func: IndexFunc) -> None:
        self._index_funcs[name] = func
        self._indexes[name] = {}
        for key, obj in self.objects.items():
            self._index(name, key, obj, add=True)

    def _index(self, name: str, key: Key, obj: JSON, *, add: bool) -> None:
        buckets = self._indexes[name]
        for value in self._index_funcs[name](obj):
            if add:
                buckets.setdefault(value, set()).add(key)
            elif value in buckets:
                buckets[value].discard(key)
                if not buckets[value]:
                    del buckets[value]

    def put(self, obj: JSON) -> JSON | None:
        """Store ``obj``; the object it replaced, if any."""
        key = object_key(obj)
        old = self.objects.get(key)
        if old is not None:
            for name in self._index_funcs:
                self._index(name, key, old, add=False)
        self.objects[key] = obj
        for name in self._index_funcs:
            self._index(name, key, obj, add=True)
        return old

    def remove(self, key: Key) -> JSON | None:
        old = self.objects.pop(key, None)
        if old is not None:
            for name in self._index_funcs:
                self._index(name, key, old, add=False)
        return old

    def get(self, namespace: str | None, name: str) -> JSON | None:
        return self.objects.get((namespace or "", name))

    def by_index(self, index: str, value: str) -> list[JSON]:
        return [self.objects[k] for k in self._indexes[index].get(value, ())]

    def list(self, namespace: str | None = None,
             selector: selectors.Selector | None = None) -> list[JSON]:
        items = self.by_index("namespace", namespace) if namespace else self.objects.values()
        if selector is None or selector.empty:
            return list(items)
        return [o for o in items if selector.matches((o.get("metadata") or {}).get("labels"))]


REPLACE_BATCH = 500
"""Objects of a list stored (and their events handed out) between turns of the event loop.
Storing 10,000 at once held the loop for seconds at a cold start (the watchdog logged
lags of 2-4.7 s per replica), long enough for a shard round to miss its renew deadline.
A reader between batches sees some objects new and some old, as between watch events."""


class _Gone(Exception):
    """The resourceVersion we hold is too old (410): relist."""


class Informer:
    """Keeps a :class:`Store` of one resource of one cluster current."""

    def __init__(self, client: ObjectReader, resource: Resource, *,
                 namespace: str | None = None, label_selector: str | None = None,
                 field_selector: str | None = None, settings: CacheSettings | None = None,
                 cluster: str | None = None) -> None:
        self.client = client
        self.cluster = cluster or client.name
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.settings = settings or CacheSettings()
        self.store = Store()
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()
        self.settled = asyncio.Event()
        """Set once the first list has succeeded or failed: whoever waits for this
        informer only to know whether it can list need wait no longer."""
        self.state: WatchState = "pending"
        self.last_error: str | None = None
        self.resource_version: str | None = None
        self.lists = 0
        """Full lists done; every one after the first is a relist."""
        self.restarts = 0
        """Watches reopened after a failure."""
        self.events = 0
        self._progress = False
        self._woken = asyncio.Event()
        self._whole_failed = False
        """A whole first list failed (silence or timeout): list in pages from now on."""

    @property
    def name(self) -> str:
        return f"informer {self.cluster}/{self.resource.plural}"

    @property
    def relists(self) -> int:
        return max(self.lists - 1, 0)

    def add_handler(self, handler: Handler) -> None:
        """Register ``handler``; it is called at once with ADDED for every object already cached."""
        self.handlers.append(handler)
        for obj in list(self.store.objects.values()):
            self._call(handler, Event("ADDED", self.cluster, self.resource, obj, initial=True))

    async def wait_synced(self, timeout: float | None = None) -> bool:
        """True once the first list is stored; False if ``timeout`` passed first."""
        try:
            await asyncio.wait_for(self.synced.wait(), timeout)
        except TimeoutError:
            return False
        return True

    # -- the loop ----------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled."""
        failures = 0
        try:
            while True:
                try:
                    if self.resource_version is None:
                        self.state = "listing"
                        await self._list()
                    self.state = "watching"
                    self._progress = False
                    await self._watch()
                    failures = 0  # the server ended the stream: a normal cycle
                except _Gone:
                    log.info("%s: resourceVersion %s expired; relisting", self.name,
                             self.resource_version)
                    self.resource_version = None
                except ClientError as exc:
                    if self._progress:  # it worked for a while before it broke
                        failures = 0
                        self._progress = False
                    self.state = "backoff"
                    self.last_error = str(exc)
                    self.settled.set()
                    delay = self.backoff(failures)
                    failures += 1
                    self.restarts += 1
                    # The first failure of a run is a WARNING; the retries of an outage
                    # that follow are DEBUG (the cluster's probe logs the outage once).
                    log.log(logging.WARNING if failures == 1 else logging.DEBUG,
                            "%s: %s; retrying in %.1fs", self.name, exc, delay)
                    self._woken.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._woken.wait(), delay)
        finally:
            self.state = "stopped"

    def wake(self) -> None:
        """Retry now if backing off: the cluster's probe says it answers again, so a long
        backoff left over from the outage would only delay recovery."""
        self._woken.set()

    def backoff(self, failures: int) -> float:
        s = self.settings
        delay = min(s.backoff_initial * 2.0 ** min(failures, 30), s.backoff_max)
        return delay * random.uniform(1 - s.backoff_jitter, 1 + s.backoff_jitter)

    def _query(self) -> dict[str, Any]:
        query = {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}
        return {key: value for key, value in query.items() if value}

    async def _list(self) -> None:
        items: list[JSON] = []
        token: str | None = None
        retries = 0
        from_cache = self.lists == 0 and self.settings.first_list_from_cache and \
            not self._whole_failed
        while True:
            # The watch cache answers whole; a server that pages it anyway returns a
            # continue token, and the pages after the first carry no version.
            whole = from_cache and token is None
            version = {"resourceVersion": "0"} if whole else {}
            try:
                page = await self.client.list(
                    self.resource, self.namespace, limit=self.settings.page_size,
                    request_timeout=self.settings.first_list_timeout if whole else None,
                    silence_timeout=self.settings.first_list_silence if whole else None,
                    **{"continue": token}, **version, **self._query())
            except ClientError as exc:
                if whole and isinstance(exc, ClusterUnavailable):
                    self._whole_failed = True
                    log.info("%s: the whole list failed (%s); listing in pages from now on",
                             self.name, exc)
                if isinstance(exc, ApiError) and exc.status == 410:
                    items, token = [], None  # the continue token expired: start over
                    continue
                if not self._retry_page(token, retries, exc):
                    raise
                retries += 1
                await asyncio.sleep(self.settings.backoff_initial)
                continue
            retries = 0
            kind = self.resource.kind
            for item in page.get("items") or []:
                item.setdefault("kind", kind)
                item.setdefault("apiVersion", self.resource.api_version)
                items.append(strip(item))
            meta = page.get("metadata") or {}
            token = meta.get("continue") or None
            if token is None:
                await self._replace(items)
                self.resource_version = str(meta.get("resourceVersion") or "") or None
                self.lists += 1
                self.last_error = None
                self.synced.set()
                self.settled.set()
                return

    def _retry_page(self, token: str | None, retries: int, exc: ClientError) -> bool:
        """Ask a failed page again (not the first: nothing is lost by starting over)?"""
        if token is None or retries >= self.settings.page_retries or \
                not getattr(exc, "retryable", False):
            return False
        log.info("%s: a page of the list failed (%s); asking it again", self.name, exc)
        return True

    async def _replace(self, items: list[JSON]) -> None:
        # Only the first list is "what was there at start"; a relist's differences are
        # changes missed while away, as urgent as any watch event.
        initial = self.lists == 0
        seen: set[Key] = set()
        for index, obj in enumerate(items):
            if index and index % REPLACE_BATCH == 0:
                await asyncio.sleep(0)  # the rest of the loop runs between batches
            key = object_key(obj)
            seen.add(key)
            old = self.store.put(obj)
            if old is None:
                self._emit(Event("ADDED", self.cluster, self.resource, obj, initial=initial))
            elif _version(old) != _version(obj):
                self._emit(Event("MODIFIED", self.cluster, self.resource, obj, old))
        for key in [k for k in self.store.objects if k not in seen]:
            old = self.store.remove(key)
            if old is not None:
                self._emit(Event("DELETED", self.cluster, self.resource, old, old))

    async def _watch(self) -> None:
        """Watch until the server ends the stream."""
        timeout = int(self.settings.watch_timeout * random.uniform(1.0, 1.1))
        try:
            async for event in self.client.watch(
                self.resource, namespace=self.namespace,
                resource_version=self.resource_version, timeout_seconds=timeout,
                inactivity_timeout=self.settings.inactivity_timeout, **self._query(),
            ):
                self._apply(event)
                self._progress = True
        except ApiError as exc:
            if exc.status == 410:
                raise _Gone() from None
            raise
        self.last_error = None

    def _apply(self, event: JSON) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            code = int(obj.get("code") or 500)
            if code == 410:
                raise _Gone()
            raise ApiError(self.cluster, code, str(obj.get("reason", "")),
                           str(obj.get("message", "")), obj)
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            self.resource_version = str(version) if version else self.resource_version
            return
        self.events += 1
        obj = strip(obj)
        if kind == "DELETED":
            old = self.store.remove(object_key(obj))
            self._emit(Event("DELETED", self.cluster, self.resource, obj, old))
        elif kind in ("ADDED", "MODIFIED"):
            old = self.store.put(obj)
            self._emit(Event("ADDED" if old is None else "MODIFIED", self.cluster,
                             self.resource, obj, old))
        if version:
            self.resource_version = str(version)

    def _emit(self, event: Event) -> None:
        for handler in self.handlers:
            self._call(handler, event)

    def _call(self, handler: Handler, event: Event) -> None:
        try:
            handler(event)
        except Exception:
            log.exception("%s: event handler %r failed", self.name, handler)


def _version(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class CachedResource(Protocol):
    """What readers of a :class:`ClusterCache` use of the cache of one resource: an
    :class:`Informer`, or a stand-in for one that caches only some namespaces
    (:class:`federation.contexts.scoped.ScopedInformer`)."""

    resource: Resource
    store: Store
    synced: asyncio.Event

    @property
    def name(self) -> str: ...

    @property
    def state(self) -> WatchState: ...

    @property
    def last_error(self) -> str | None: ...

    @property
    def relists(self) -> int: ...

    @property
    def restarts(self) -> int: ...

    @property
    def events(self) -> int: ...

    def add_handler(self, handler: Handler) -> None: ...

    async def wait_synced(self, timeout: float | None = None) -> bool: ...

    def wake(self) -> None: ...

    async def run(self) -> None: ...


InformerMaker = Callable[[ObjectReader, Resource, CacheSettings, str], CachedResource]
"""Makes the cache of a restricted resource (:meth:`ClusterCache.restrict`)."""


class ClusterCache:
    """The informers of one cluster, started on demand, each in its own named task."""

    def __init__(self, client: ObjectReader, settings: CacheSettings | None = None,
                 cluster: str | None = None) -> None:
        self.client = client
        self.cluster = cluster or client.name
        self.settings = settings or CacheSettings()
        self.informers: dict[Resource, CachedResource] = {}
        self._tasks: dict[Resource, asyncio.Task[None]] = {}
        self._running = False
        self._makers: dict[tuple[str, str], InformerMaker] = {}

    def restrict(self, resource: Resource, make: InformerMaker) -> None:
        """The cache of ``resource`` (any version) is made by ``make`` instead of a
        cluster-wide :class:`Informer`: for resources this cluster may not be listed
        everywhere (the hub's Secrets). Only before its first use."""
        key = (resource.group, resource.plural)
        if any((r.group, r.plural) == key for r in self.informers):
            raise ValueError(f"{self.cluster}: {resource.plural} is cached already")
        self._makers[key] = make

    def informer(self, resource: Resource) -> CachedResource:
        """The informer of ``resource``, created (and started, if the cache runs) on first use."""
        informer = self.informers.get(resource)
        if informer is None:
            make = self._makers.get((resource.group, resource.plural))
            informer = make(self.client, resource, self.settings, self.cluster) if make \
                else Informer(self.client, resource, settings=self.settings,
                              cluster=self.cluster)
            self.informers[resource] = informer
            if self._running:
                self._start(informer)
        return informer

    def _start(self, informer: CachedResource) -> None:
        self._tasks[informer.resource] = asyncio.create_task(informer.run(),
                                                             name=informer.name)

    def start(self) -> None:
        if self._running:
            # Every cached read calls this; once running, :meth:`informer` starts each new
            # informer itself, so there is nothing to look at (walking the informers on
            # every read was a visible share of the control plane's CPU in a burst).
            return
        self._running = True
        for resource, informer in self.informers.items():
            if resource not in self._tasks:
                self._start(informer)

    async def stop(self) -> None:
        self._running = False
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception as exc:  # stopping must finish: a watch dying now is moot
                log.debug("%s ended with %r while stopping", task.get_name(), exc)

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers.values())

    async def wait_synced(self, timeout: float) -> bool:
        """True when every informer listed within ``timeout`` seconds (shared, not each)."""
        deadline = time.monotonic() + timeout
        for informer in list(self.informers.values()):
            if not await informer.wait_synced(max(deadline - time.monotonic(), 0.0)):
                return False
        return True
