"""A controller: watches feeding one work queue, drained by N workers calling a reconciler.

Wiring is declarative, as with controller-runtime's builder::

    ctl = controller.Controller("propagation", reconciler, workers=4)
    ctl.watch(FEDERATED_DEPLOYMENTS, clusters="hub")
    ctl.watch(kube.DEPLOYMENTS, clusters="members", map=owner_on_hub)
    manager.add(ctl)

Each :class:`Watch` names a resource, which clusters to watch it in (``"hub"``,
``"members"``, ``"all"`` or a tuple of names) and optionally a ``map`` from an
event to the requests it should trigger (default: the object itself, in the
cluster it was seen in) and a ``predicate`` to drop events. The manager
attaches the watches to the informers of the engaged clusters. Requests from an
informer's first list (or a cache replayed to a late handler) are queued at
:data:`~federation.runtime.queue.LOW_PRIORITY`, everything else at the default
priority, so new and changed objects are reconciled before the backlog of a
start; retries and requeues keep the priority the request was handed out with.

Workers never die of a reconcile: an exception is logged with the request
(at DEBUG when it is a :class:`ClusterUnavailable`: an outage is logged once, by
the cluster's probe, not once per retry of every object it touches),
counted, and the key is retried with backoff; ``Result(requeue_after=s)``
schedules the key again; anything else forgets the key's failures. The one
exception is a write refused by a write permit
(:class:`~federation.contexts.client.WriteRefused`; for the leader-election fence
:class:`~federation.contexts.client.NotLeader`): this process may not make that
write (it has lost leadership and is shutting down), so the key is not retried
and no traceback is logged.

**Sharding.** A controller whose :attr:`Controller.shard_key` is set is sharded: the
manager gives it :attr:`Controller.owns` (does this replica hold the key's shard now?),
its queue parks the requests of keys it does not own (and queues them when a handover
brings them), a request whose key moved away while it waited is parked instead of
reconciled, and each reconcile runs with
:data:`~federation.contexts.client.WRITING_FOR` set to its key, so every write it makes,
in whatever task, is checked against that key's shard as it is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from typing import Literal

from federation.contexts.cache import Event
from federation.contexts.client import WRITING_FOR, ClusterUnavailable, Resource, WriteRefused
from federation.runtime import metrics, queue, reconcile

log = logging.getLogger("federation.controller")

ClusterScope = Literal["hub", "members", "all"] | tuple[str, ...]
Mapper = Callable[[Event], Iterable[reconcile.Request]]
Predicate = Callable[[Event], bool]


def request_for(event: Event) -> reconcile.Request:
    """The request for the object an event is about, in the cluster it was seen in."""
    meta = event.obj.get("metadata") or {}
    return reconcile.Request(event.cluster, reconcile.group_kind(event.resource),
                             str(meta.get("namespace") or ""), str(meta.get("name") or ""))


@dataclasses.dataclass(frozen=True)
class Watch:
    resource: Resource
    clusters: ClusterScope = "members"
    map: Mapper | None = None
    predicate: Predicate | None = None

    def applies_to(self, cluster: str, is_hub: bool, is_member: bool) -> bool:
        if self.clusters == "all":
            return True
        if self.clusters == "hub":
            return is_hub
        if self.clusters == "members":
            return is_member
        return cluster in self.clusters

    def requests(self, event: Event) -> Iterable[reconcile.Request]:
        if self.predicate is not None and not self.predicate(event):
            return ()
        return self.map(event) if self.map is not None else (request_for(event),)


def priority_of(event: Event) -> int:
    """Low for the state found at start (a first list), the default for a change."""
    return queue.LOW_PRIORITY if event.initial else queue.DEFAULT_PRIORITY


def fenced(exc: BaseException) -> bool:
    """True when a write was refused, unsent, because this process may not make it
    (it no longer leads)."""
    return isinstance(exc, WriteRefused)


class Controller:
    """Watches, a queue, and workers running a reconciler."""

    def __init__(self, name: str,
                 reconciler: reconcile.Reconciler | reconcile.ReconcileFunc, *,
                 workers: int = 2, queue_settings: queue.QueueSettings | None = None,
                 rank: Callable[[reconcile.Request], int] | None = None) -> None:
        self.name = name
        self.reconcile_func: reconcile.ReconcileFunc = (
            reconciler.reconcile if hasattr(reconciler, "reconcile") else reconciler)
        self.workers = workers
        self.queue: queue.WorkQueue[reconcile.Request] = queue.WorkQueue(
            name, queue_settings, rank)
        self.watches: list[Watch] = []
        self.metrics: metrics.Metrics | None = None
        self.reconciles = 0
        self.errors = 0
        self.shard_key: Callable[[reconcile.Request], str] | None = None
        """The key a request is sharded by (``namespace/name`` of the object it is about);
        None: the controller is not sharded (a cluster-wide duty, run by the leader)."""
        self.every_replica = False
        """Not sharded, but run by every replica when sharding (membership: each replica
        engages the clusters joined at runtime; its hub writes stay the leader's)."""
        self.owns: Callable[[str], bool] | None = None
        """Set by the manager when sharding: whether this replica owns a key now."""

    def shard(self, owns: Callable[[str], bool]) -> None:
        """Reconcile only the keys ``owns`` says are ours (the manager calls it)."""
        key_of = self.shard_key
        assert key_of is not None, f"{self.name} is not sharded"
        # Each request's key is worked out once: every handover asks the queue to admit
        # each parked request again (all the other replicas' keys), and working the keys
        # out anew was a fifth of a replica's CPU in a cold start of three at 10,000
        # templates. The memo holds what the queue's ``known`` holds.
        keys: dict[reconcile.Request, str] = {}

        def key(request: reconcile.Request) -> str:
            found = keys.get(request)
            if found is None:
                found = keys[request] = key_of(request)
            return found

        self.owns = owns
        self.queue.admit = lambda request: owns(key(request))

    def keys_held(self) -> int:
        """Distinct keys seen by this controller that this replica owns now."""
        if self.owns is None or self.shard_key is None:
            return 0
        return len({k for k in map(self.shard_key, self.queue.known) if self.owns(k)})

    def watch(self, resource: Resource, *, clusters: ClusterScope = "members",
              map: Mapper | None = None, predicate: Predicate | None = None) -> Controller:
        """Reconcile on events of ``resource`` in ``clusters`` (chainable)."""
        self.watches.append(Watch(resource, clusters, map, predicate))
        return self

    def handler(self, watch: Watch) -> Callable[[Event], None]:
        """The informer event handler for ``watch``: map the event and queue the requests."""

        def enqueue(event: Event) -> None:
            priority = priority_of(event)
            for request in watch.requests(event):
                self.queue.add(request, priority)

        return enqueue

    async def run(self) -> None:
        """Run the workers until the queue shuts down or the task is cancelled."""
        async with asyncio.TaskGroup() as group:
            for index in range(self.workers):
                group.create_task(self._worker(), name=f"{self.name} worker {index}")

    async def _worker(self) -> None:
        with contextlib.suppress(queue.ShutDown):
            while True:
                request, priority = await self.queue.get_with_priority()
                try:
                    await self._process(request, priority)
                finally:
                    self.queue.done(request)

    async def _process(self, request: reconcile.Request,
                       priority: int = queue.DEFAULT_PRIORITY) -> None:
        key = self.shard_key(request) if self.shard_key is not None else None
        if key is not None and self.owns is not None and not self.owns(key):
            self.queue.park(request)  # moved to another shard while it waited
            return
        started = time.monotonic()
        outcome = "success"
        token = WRITING_FOR.set(key)
        try:
            result = await self.reconcile_func(request)
        except Exception as exc:
            outcome = "error"
            self.errors += 1
            if fenced(exc):
                log.warning("%s: reconcile %s stopped: %s", self.name, request, exc)
                if key is not None and self.owns is not None:
                    # A shard's permit lapsed or moved: kept, queued again when the keys
                    # are this replica's (a handover, or a round after the lapse).
                    self.queue.park(request)
                return
            failures = self.queue.failures(request)
            # A cluster being away fails every reconcile that touches it; its outage is
            # logged once, when its probe sees it go (contexts.clusters), so each retry
            # is DEBUG. Anything else is an ERROR, with a traceback unless it is retryable.
            level = logging.DEBUG if isinstance(exc, ClusterUnavailable) else logging.ERROR
            log.log(level, "%s: reconcile %s failed (attempt %d): %s", self.name, request,
                    failures + 1, exc, exc_info=not getattr(exc, "retryable", False))
            self.queue.add_rate_limited(request, priority)
        else:
            self.queue.forget(request)
            if result is not None and result.requeue_after is not None:
                outcome = "requeue_after"
                self.queue.add_after(request, result.requeue_after, priority)
        finally:
            WRITING_FOR.reset(token)
            self.reconciles += 1
            if self.metrics is not None:
                seconds = time.monotonic() - started
                self.metrics.reconcile_duration.labels(self.name).observe(seconds)
                self.metrics.reconcile_total.labels(self.name, request.cluster, outcome).inc()
                if outcome == "error":
                    self.metrics.reconcile_errors.labels(self.name, request.cluster).inc()

    def shutdown(self) -> None:
        self.queue.shutdown()
