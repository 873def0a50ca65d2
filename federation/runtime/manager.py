"""The manager: starts caches, then controllers; serves health and metrics; shuts down in bounds.

Start order, as in controller-runtime:

1. The event-loop watchdog (:mod:`federation.runtime.watchdog`), and the
   health and metrics servers, so a probe gets an answer (``/readyz``: not
   ready yet) while the rest starts.
2. For every engaged cluster, its engagement
   (:class:`~federation.contexts.engagement.Engagement`): its one prober (the
   cluster's health signal) and the informers that the controllers' watches
   (and :meth:`Manager.cache`) ask for, with the controllers' event handlers
   attached.
3. Cache sync, for all clusters at once, each bounded by ``cache_sync_timeout``:
   a member that is down or stuck is reported and left to catch up on its own;
   it never holds up the others. Only then is the manager ready. The garbage
   collector is held meanwhile and the cached fleet frozen out of its passes once
   synced (:mod:`federation.runtime.heap`). With shards, shard membership starts after
   the sync, not with it (tried: three replicas listing 10,000 templates each kept the
   hub so busy that their shard rounds missed the renew deadline, and all three exited
   before their caches synced).
4. Leader election, when enabled (caches keep running on standbys, so a new
   leader starts warm).
5. Controllers and other runnables that need leadership.

It stops on :meth:`Manager.stop` (``fedctl run`` wires SIGTERM and SIGINT to
it) or when leadership is lost. On a stop, queues stop taking keys and workers
get ``drain_timeout`` to finish the reconcile in hand; one still running then (a
write waiting for a pull member's absent agent, a request to a hub that does not
answer) is cancelled. Then the shard and leader Leases are released (together
bounded by ``release_timeout``), every other task is cancelled and connections
closed; ``shutdown_timeout`` caps the whole. On a **loss** of leadership nothing
is allowed to finish: the fence (see :mod:`federation.runtime.leader`) already
refuses every write, and controllers and runnables are cancelled at once.

``/healthz`` answers 200 while the process runs its loop. ``/readyz`` answers
200 once caches are started, the hub's caches have synced once, and the hub
is ready by its one prober *now* (``hub-available``: the same health signal as
every cluster's, so a hub that stops answering turns readiness off after
``failure_threshold`` failed probes, 4-6 s by default, and back on after
``success_threshold`` answers);
its body lists each check and each cluster (``[+]cluster/member1 ok``,
``[-]cluster/member2 unavailable: ...``). Members do not fail readiness: a
control plane with one member down must stay in service for the others.
``?format=json`` gives the same as JSON. ``/metrics`` is Prometheus text.

**Exposure.** Both servers listen on loopback by default. Cluster names and
error details (addresses, causes) are shown only on a loopback probe server;
on any other address the checks answer ``reason withheld`` (as kube-apiserver
does) and the per-cluster report moves to ``/debug/clusters`` on the metrics
server, which serves it only on loopback or with ``metrics_secure``. With
``metrics_secure`` the metrics server speaks HTTPS and every request is
authenticated and authorized by the hub (see :mod:`federation.runtime.auth`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import json
import logging
import math
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import Any, Protocol

import prometheus_client
from aiohttp import web

from federation.contexts import client as kube
from federation.contexts.cache import CachedResource
from federation.contexts.client import Resource
from federation.contexts.clusters import Cluster, ClusterSet
from federation.contexts.multicluster import MultiCluster, MultiClusterClient
from federation.runtime import auth, heap, leader, metrics, peers, watchdog
from federation.runtime import controller as controllers

log = logging.getLogger("federation.manager")

Check = Callable[[], str | None]
"""A health or readiness check: None when fine, else why not."""

Runnable = Callable[[], Awaitable[None]]
Handler = Callable[[web.Request], Awaitable[web.Response]]


class LeadershipLost(Exception):
    """This process stopped leading; it must exit so that it cannot act as a second leader."""


@dataclasses.dataclass(frozen=True)
class ManagerSettings:
    """Process-level settings of ``fedctl run``."""

    metrics_bind_address: str = "127.0.0.1:8080"
    """controller-runtime's port, on loopback: metrics name every cluster and are
    served without authentication unless ``metrics_secure``; exposing them is a
    choice (``:8080``), not a default. "0" turns the metrics server off."""
    health_probe_bind_address: str = "127.0.0.1:8081"
    """controller-runtime's port, on loopback: a kubelet probes the pod's own
    address, so a pod sets ``:8081``; elsewhere nothing remote needs it. "0" turns
    the probe server off."""
    metrics_secure: bool = False
    """Serve metrics over HTTPS, each request authenticated (TokenReview) and
    authorized (SubjectAccessReview) by the hub. Off by default, as in
    controller-runtime, because it needs RBAC on the hub for scrapers and for us."""
    metrics_cert_dir: Path | None = None
    """Directory with ``tls.crt`` and ``tls.key`` for secure metrics; without one a
    self-signed certificate is made at start (fine behind a scraper that pins it)."""
    metrics_auth: auth.AuthSettings = dataclasses.field(default_factory=auth.AuthSettings)
    identity: str | None = None
    """This process's name in the Lease and in every request's User-Agent (hence in
    the API servers' audit logs); default: host name, pid and a random suffix."""
    leader_elect: bool = False
    """Off by default (as controller-runtime) so one process just runs; turn on
    when running more than one replica."""
    leader: leader.LeaderSettings = dataclasses.field(default_factory=leader.LeaderSettings)
    watchdog: watchdog.WatchdogSettings = dataclasses.field(
        default_factory=watchdog.WatchdogSettings)
    """The event-loop watchdog's period and the lag it logs (1 s)."""
    heap: heap.HeapSettings = dataclasses.field(default_factory=heap.HeapSettings)
    """How the cached fleet is kept out of the garbage collector's passes
    (:mod:`federation.runtime.heap`)."""
    cache_sync_timeout: float = 30.0
    """Seconds to wait for each cluster's first list before starting controllers
    anyway: a healthy member lists thousands of objects in a second or two; one
    that needs 30 s is treated as down and catches up in the background."""
    shutdown_timeout: float = 30.0
    """Seconds from SIGTERM to exit at most (controller-runtime's graceful shutdown
    default; the shipped Deployment's grace period is longer). The phases below are
    bounded on their own, so a clean stop takes a fraction of it."""
    drain_timeout: float = 5.0
    """Seconds workers get after a stop to finish the reconcile in hand. Reconciles take
    milliseconds; one that waits longer waits on something that may not come in time (a
    pull member's agent that left: its write waits for it up to 30 s; a hub that does
    not answer: 10 s a request), so it is cancelled and reconciled again by whoever
    holds its key next, from what is there then (reconciles are level-triggered)."""
    release_timeout: float = 5.0
    """Seconds to give the shard and leader Leases up. A hub that does not answer by
    then cannot hand them over anyway: the others take them when they expire."""
    field_manager: str = "federation"
    """The server-side apply field manager of every write this manager makes."""
    shards: int = 0
    """0: one replica does everything (the leader, with ``leader_elect``). N > 0: the
    sharded controllers' keys are divided among up to N replicas holding shard Leases
    (:mod:`federation.runtime.peers`); cluster-wide duties stay with the elected leader,
    so it needs ``leader_elect``."""

    def __post_init__(self) -> None:
        if self.shards and not self.leader_elect:
            raise ValueError("shards need leader election: cluster-wide duties (membership "
                             "status, cluster health, policy validation) stay with one leader")


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """``:8080`` -> all interfaces; ``127.0.0.1:0`` -> a free port; ``0`` or ``""`` -> off."""
    if address in ("", "0"):
        return None
    host, _, port = address.rpartition(":")
    try:
        return host or "0.0.0.0", int(port)
    except ValueError:
        raise ValueError(f"bind address {address!r} is not HOST:PORT or :PORT") from None


def is_loopback(address: str) -> bool:
    """True when a bind address only accepts connections from this host."""
    bind = parse_bind_address(address)
    if bind is None:
        return True
    host = bind[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name may resolve to anything


class Fleet(Protocol):
    """The clusters a manager runs for, its multi-cluster client over them, and whether
    this process leads: what every controller reads of the manager."""

    @property
    def clusters(self) -> ClusterSet: ...

    @property
    def client(self) -> MultiCluster: ...

    @property
    def is_leader(self) -> bool: ...


class Host(Fleet, Protocol):
    """What a controller's ``install`` asks of the :class:`Manager`: registration."""

    def add(self, controller: controllers.Controller) -> controllers.Controller: ...

    def add_runnable(self, name: str, runnable: Runnable) -> None: ...

    def cache(self, resource: Resource, clusters: controllers.ClusterScope = "all") -> None: ...


class Engager(Fleet, Protocol):
    """What the membership controller asks of the :class:`Manager`: engaging a cluster
    joined at runtime, and letting one go."""

    def engage(self, cluster: Cluster) -> None: ...

    async def disengage(self, name: str) -> None: ...


class Manager:
    """Runs caches, controllers and runnables for one :class:`ClusterSet` (a :class:`Host`
    and an :class:`Engager`; controllers take those)."""

    def __init__(self, cluster_set: ClusterSet, settings: ManagerSettings | None = None) -> None:
        self.clusters = cluster_set
        self.settings = settings or ManagerSettings()
        self.identity = self.settings.identity or leader.identity()
        self.client = MultiClusterClient(cluster_set, self.settings.field_manager)
        self.metrics = metrics.Metrics()
        self.watchdog = watchdog.LoopWatchdog(self.metrics, self.settings.watchdog)
        self.heap = heap.Heap(self.settings.heap)
        self.collection_timer = heap.CollectionTimer(self.metrics.observe_collection)
        self.controllers: list[controllers.Controller] = []
        self.runnables: list[tuple[str, Runnable]] = []
        self.cached: list[controllers.Watch] = []
        self.health_checks: dict[str, Check] = {"ping": lambda: None}
        self.ready_checks: dict[str, Check] = {"caches-started": self._caches_started,
                                               "hub-synced": self._hub_synced,
                                               "hub-available": self._hub_available}
        self.elector: leader.LeaderElector | None = None
        self.fence: kube.WritePermit | None = None
        """Set once leader election starts: every cluster client consults it before writing
        (the leader's fence; with shards, a :class:`~federation.contexts.client.ShardedPermit`
        over it)."""
        self.peers: peers.Peers | None = None
        """This replica's shard, when sharding (set as the manager starts)."""
        self._shard_task: asyncio.Task[None] | None = None
        """Shard membership's rounds (started before the caches list)."""
        self.reviewer: auth.Reviewer | None = None
        self.caches_started = False
        self.started = asyncio.Event()
        """Set once caches are started and synced (or timed out): the manager is ready."""
        self.started_at = time.monotonic()
        self.ports: dict[str, int] = {}
        self.detail = is_loopback(self.settings.health_probe_bind_address)
        """Whether /healthz and /readyz show causes and clusters (only to this host)."""
        self._stop = asyncio.Event()
        self._runners: list[web.AppRunner] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._own_clients: list[kube.ClusterClient] = []
        for cluster in cluster_set.engaged:
            self._adopt(cluster)
        metrics.StateCollector(cluster_set, lambda: self.controllers,
                               lambda: self.is_leader).register(self.metrics.registry)

    # -- registration --------------------------------------------------------------------

    def add(self, controller: controllers.Controller) -> controllers.Controller:
        controller.metrics = self.metrics
        self.controllers.append(controller)
        return controller

    def add_runnable(self, name: str, runnable: Runnable) -> None:
        """Run ``runnable`` while leading (like controllers), in a task named ``name``."""
        self.runnables.append((name, runnable))

    def cache(self, resource: Resource, clusters: controllers.ClusterScope = "all") -> None:
        """Keep ``resource`` cached in ``clusters`` even if no controller watches it."""
        self.cached.append(controllers.Watch(resource, clusters))

    @property
    def is_leader(self) -> bool:
        return self.elector.is_leader if self.elector else self.caches_started

    def stop(self) -> None:
        self._stop.set()

    def _adopt(self, cluster: Cluster) -> None:
        """Give a cluster's client our metrics, User-Agent and (once elected) fence."""
        if cluster.client is None:
            return
        cluster.client.fence = self.fence
        if isinstance(cluster.client, kube.ClusterClient):  # HTTP's own (a pull member's
            # calls are the agent's, under its User-Agent, and not timed here)
            cluster.client.observer = self.metrics.observe_request
            cluster.client.user_agent = kube.user_agent(self.identity)

    def _own_client(self, settings: kube.ClientSettings) -> kube.ClusterClient:
        """A hub client of our own, without the controllers' fence (the Lease, which the
        elector gives its own permit; reviews); closed at shutdown."""
        context = self.clusters.hub.context
        if context is None:
            raise ValueError(f"hub {self.clusters.hub.name} has no kubeconfig context")
        client = kube.ClusterClient(context, settings)
        client.user_agent = kube.user_agent(self.identity)
        self._own_clients.append(client)
        return client

    # -- checks --------------------------------------------------------------------------

    def _caches_started(self) -> str | None:
        return None if self.caches_started else "caches are starting"

    def _hub_synced(self) -> str | None:
        """The hub's caches listed once: a start gate (``hub-available`` is the live one)."""
        hub = self.clusters.hub
        if hub.cache is not None and not hub.cache.synced:
            return f"hub caches not synced ({hub.detail})"
        return None

    def _hub_available(self) -> str | None:
        """The hub is ready by its prober now: without it nothing can be read fresh or written."""
        hub = self.clusters.hub
        if hub.available is None:
            probes = hub.health.probes
            return "hub not probed yet" if not probes else \
                f"hub not judged yet after {probes} probes: {hub.health.detail}"
        if hub.available is False:
            return f"hub unavailable: {hub.last_probe_error}"
        return None

    def cluster_report(self) -> dict[str, dict[str, Any]]:
        report = {}
        for cluster in self.clusters.clusters.values():
            informers = list(cluster.cache.informers.values()) if cluster.cache else []
            report[cluster.name] = {
                "role": "hub" if cluster.is_hub else "member",
                "state": cluster.state, "detail": cluster.detail,
                "health": {"ready": cluster.health.ready.value,
                           "reachable": cluster.health.reachable.value,
                           "probe": cluster.health.detail, "probes": cluster.health.probes},
                "synced": bool(cluster.cache and cluster.cache.synced),
                "informers": {i.resource.plural: _informer_report(i) for i in informers},
            }
        return report

    # -- http ----------------------------------------------------------------------------

    def _check_response(self, request: web.Request, checks: dict[str, Check],
                        clusters: bool) -> web.Response:
        results = {name: check() for name, check in checks.items()}
        ok = all(r is None for r in results.values())
        clusters = clusters and self.detail
        if not self.detail:
            results = {n: r if r is None else "reason withheld" for n, r in results.items()}
        kind = request.path.strip("/")
        if request.query.get("format") == "json":
            body: dict[str, Any] = {"status": "ok" if ok else "failed",
                                    "checks": {n: r or "ok" for n, r in results.items()}}
            if clusters:
                body["clusters"] = self.cluster_report()
            return web.json_response(body, status=200 if ok else 503)
        lines = [f"[+]{n} ok" if r is None else f"[-]{n} failed: {r}"
                 for n, r in results.items()]
        if clusters:
            for cluster in self.clusters.clusters.values():
                sign = "+" if cluster.detail == "ok" else "-"
                optional = "" if cluster.is_hub or sign == "+" else " (not required)"
                lines.append(f"[{sign}]cluster/{cluster.name} {cluster.detail}{optional}")
        lines.append(f"{kind} check passed" if ok else f"{kind} check failed")
        return web.Response(text="\n".join(lines) + "\n", status=200 if ok else 503)

    async def _healthz(self, request: web.Request) -> web.Response:
        return self._check_response(request, self.health_checks, clusters=False)

    async def _readyz(self, request: web.Request) -> web.Response:
        return self._check_response(request, self.ready_checks, clusters=True)

    async def _metrics(self, request: web.Request) -> web.Response:
        # ``name[]=...`` (as prometheus_client's own exposition servers accept) renders only
        # those series: a poller that wants the queue depth does not pay, in our CPU, for
        # every histogram bucket of every cluster.
        names = request.query.getall("name[]", [])
        registry = self.metrics.registry.restricted_registry(names) if names \
            else self.metrics.registry
        data = prometheus_client.generate_latest(registry)
        return web.Response(body=data,
                            headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})

    async def _clusters(self, request: web.Request) -> web.Response:
        return web.json_response({"clusters": self.cluster_report()})

    async def _serve(self, name: str, address: str, routes: list[tuple[str, Handler]], *,
                     tls: ssl.SSLContext | None = None,
                     middlewares: tuple[Any, ...] = ()) -> None:
        bind = parse_bind_address(address)
        if bind is None:
            return
        app = web.Application(middlewares=middlewares)
        for path, handler in routes:
            app.router.add_get(path, handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self._runners.append(runner)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(bind)
        except OSError as exc:
            sock.close()
            raise OSError(exc.errno, f"cannot serve {name} on {address}: {exc.strerror}"
                          ) from None
        sock.listen(128)
        sock.setblocking(False)
        await web.SockSite(runner, sock, ssl_context=tls).start()
        self.ports[name] = sock.getsockname()[1]
        log.info("%s server listening on %s://%s:%d", name, "https" if tls else "http",
                 bind[0], self.ports[name])

    async def _serve_metrics(self) -> None:
        address = self.settings.metrics_bind_address
        bind = parse_bind_address(address)
        if bind is None:
            return
        routes: list[tuple[str, Handler]] = [("/metrics", self._metrics)]
        if not self.settings.metrics_secure:
            if is_loopback(address):
                routes.append(("/debug/clusters", self._clusters))
            else:
                log.warning("metrics on %s are served to anyone who can reach them, without "
                            "authentication; use --metrics-secure", address)
            await self._serve("metrics", address, routes)
            return
        tls, fingerprint = auth.server_tls(self.settings.metrics_cert_dir, bind[0])
        self.reviewer = auth.Reviewer(self._own_client(kube.ClientSettings(
            qps=self.settings.metrics_auth.review_qps,
            burst=self.settings.metrics_auth.review_burst)), self.settings.metrics_auth)
        routes.append(("/debug/clusters", self._clusters))
        await self._serve("metrics", address, routes, tls=tls,
                          middlewares=(self.reviewer.middleware,))
        log.info("metrics: TLS certificate SHA-256 %s; requests authenticated and authorized "
                 "by the hub", fingerprint)

    # -- lifecycle -----------------------------------------------------------------------

    def _engage(self, cluster: Cluster) -> None:
        """Attach the informers every watch asks for, then start the cluster's engagement."""
        assert cluster.cache is not None and cluster.engagement is not None
        for ctl in self.controllers:
            for watch in ctl.watches:
                if watch.applies_to(cluster.name, cluster.is_hub, cluster.is_member):
                    cluster.cache.informer(watch.resource).add_handler(ctl.handler(watch))
        for watch in self.cached:
            if watch.applies_to(cluster.name, cluster.is_hub, cluster.is_member):
                cluster.cache.informer(watch.resource)
        cluster.engagement.start()

    def engage(self, cluster: Cluster) -> None:
        """Start a cluster added at runtime (``ClusterSet.join``): the informers every watch
        asks for, with their handlers, and its prober. Its caches sync on their own."""
        self._adopt(cluster)
        if cluster.engaged:
            self._engage(cluster)

    async def disengage(self, name: str) -> None:
        """Remove a cluster added at runtime: one call stops its engagement (prober,
        informers, tasks, connections) and tells the leave listeners."""
        await self.clusters.leave(name)

    def _spawn(self, coroutine: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coroutine)
        task.set_name(name)
        self._tasks.append(task)
        return task

    async def _sync(self) -> None:
        async def one(cluster: Cluster) -> None:
            assert cluster.cache is not None
            started = time.monotonic()
            if await cluster.cache.wait_synced(self.settings.cache_sync_timeout):
                log.info("cluster %s: caches synced in %.2fs", cluster.name,
                         time.monotonic() - started)
            else:
                log.warning("cluster %s: caches not synced after %.0fs (%s); starting "
                            "without it, it catches up when it can", cluster.name,
                            self.settings.cache_sync_timeout, cluster.detail)

        await asyncio.gather(*(one(c) for c in self.clusters.engaged))

    async def run(self) -> None:
        """Run until :meth:`stop`; raises :class:`LeadershipLost` if leadership ends first."""
        lost = False
        try:
            self._spawn(self.watchdog.run(), "event-loop watchdog")
            if self.settings.shards:
                self._prepare_shards()
            await self._serve("health", self.settings.health_probe_bind_address,
                              [("/healthz", self._healthz), ("/readyz", self._readyz)])
            await self._serve_metrics()
            self.collection_timer.install()
            if self.peers is not None:
                await self._take_shard_first()
            self.heap.hold()  # the first lists are the heap: no pass over them meanwhile
            for cluster in self.clusters.engaged:
                self._engage(cluster)
            sync = self._spawn(self._sync(), "cache sync")
            await _first(sync, self._stop)
            self.heap.settle()
            self._spawn(self.heap.keep(), "heap keeper")
            self.caches_started = True
            self.started.set()
            if not self._stop.is_set():
                lost = await (self._share_and_run() if self.peers is not None
                              else self._lead_and_run())
        finally:
            if self.heap.held:  # stopped before the caches synced
                self.heap.settle()
            self.collection_timer.remove()
            await self._shutdown(lost)
        if lost:
            raise LeadershipLost("leadership lost; exiting")

    def _make_elector(self) -> leader.LeaderElector:
        """The elector, on a hub client of its own: its Lease writes answer to its own
        permit (the renew deadline), not to the controllers' fence."""
        lease_client = self._own_client(self._hub_client().settings)
        return leader.LeaderElector(lease_client, self.settings.leader, self.identity)

    def _prepare_shards(self) -> None:
        """Before any informer starts: sharded queues park what this replica does not own
        (nothing yet), and a handover queues what it gains."""
        self.peers = self._make_peers()
        for ctl in self.controllers:
            if ctl.shard_key is not None:
                ctl.shard(self.peers.owns)
        self.peers.listeners.append(self._handover)
        self.metrics.registry.register(metrics.ShardCollector(
            lambda: self.peers, lambda: self.controllers))

    async def _take_shard_first(self) -> None:
        """Start shard membership and give its first round a moment before the caches list:
        the claim wait then runs while they list. Started after the lists, a replica's
        first round waited seconds behind their decoding (three replicas at 10,000
        templates took their shards 1 to 13 s after spawn, and the last claim set the
        restart's end). A lapse while the caches list costs only a new claim wait
        (:meth:`peers.Peers.permit`)."""
        assert self.peers is not None
        self._shard_task = self._spawn(self.peers.run(), "shard membership")
        try:
            async with asyncio.timeout(self.settings.leader.retry_period):
                await _first(self.peers.first_round, self._shard_task, self._stop)
        except TimeoutError:
            log.info("shard membership: no answer from the hub within %.0fs; listing "
                     "meanwhile", self.settings.leader.retry_period)

    def _make_peers(self) -> peers.Peers:
        """This replica's shard membership, on a hub client of its own (its Lease writes
        answer to their own permit, as the elector's)."""
        return peers.Peers(self._own_client(self._hub_client().settings),
                           self.settings.leader, self.settings.shards, self.identity)

    def _handover(self) -> None:
        """The keys this replica owns may have changed: queue the parked ones it owns now
        (those it lost are parked as workers reach them)."""
        for ctl in self.controllers:
            if ctl.owns is not None:
                ctl.queue.unpark()

    def _runs_everywhere(self, ctl: controllers.Controller) -> bool:
        return ctl.shard_key is not None or ctl.every_replica

    async def _share_and_run(self) -> bool:
        """Sharded: hold a shard and run the sharded controllers (and the runnables, which
        serve them) on every replica at once; the rest once elected. True if either the
        shard or the leadership was lost."""
        assert self.peers is not None
        self.elector = self._make_elector()
        self.fence = kube.ShardedPermit(self.peers.permit, self.elector.fence)
        for cluster in self.clusters.clusters.values():
            self._adopt(cluster)
        shard = self._shard_task
        assert shard is not None, "shard membership starts before the caches list"
        election = self._spawn(self.elector.run(), "leader election")
        for ctl in filter(self._runs_everywhere, self.controllers):
            self._spawn(ctl.run(), f"controller {ctl.name}")
        for name, runnable in self.runnables:
            self._spawn(runnable(), name)
        ending = (self._stop, self.peers.lost, self.elector.lost, shard, election)
        await _first(self.elector.elected, *ending)
        if self.elector.elected.is_set() and not self.elector.lost.is_set():
            self.metrics.leader.inc()
            for ctl in self.controllers:
                if not self._runs_everywhere(ctl):
                    self._spawn(ctl.run(), f"controller {ctl.name}")
            await _first(*ending)
        for task in (shard, election):
            _report_crash(task)
        return not self._stop.is_set()

    async def _lead_and_run(self) -> bool:
        """Run controllers (after winning the election, if enabled); True if leadership was lost."""
        lost = asyncio.Event()
        election: asyncio.Task[Any] | None = None
        if self.settings.leader_elect:
            self.elector = self._make_elector()
            self.fence = self.elector.fence
            for cluster in self.clusters.clusters.values():
                self._adopt(cluster)
            election = self._spawn(self.elector.run(), "leader election")
            await _first(self.elector.elected, self._stop, election)
            if self._stop.is_set() or not self.elector.elected.is_set():
                _report_crash(election)
                return not self._stop.is_set()
            self.metrics.leader.inc()
            lost = self.elector.lost
        for ctl in self.controllers:
            self._spawn(ctl.run(), f"controller {ctl.name}")
        for name, runnable in self.runnables:
            self._spawn(runnable(), name)
        await _first(self._stop, lost, *([election] if election else []))
        if election is not None:
            _report_crash(election)
        return not self._stop.is_set()

    def _hub_client(self) -> kube.ClusterClient:
        client = self.clusters.hub.client
        assert isinstance(client, kube.ClusterClient), "the hub is reached over HTTP"
        return client

    async def _shutdown(self, lost: bool = False) -> None:
        loop = asyncio.get_running_loop()  # its clock: the waits below are timed by it
        started = loop.time()
        deadline = started + self.settings.shutdown_timeout

        def left(limit: float = math.inf) -> float:
            return max(min(deadline - loop.time(), limit), 0.1)

        for ctl in self.controllers:
            ctl.shutdown()
        workers = [t for t in self._tasks if t.get_name().startswith("controller ")]
        if lost:
            # Nothing may finish: the fence refuses their writes already; stop trying.
            leading = workers + [t for t in self._tasks
                                 if t.get_name() in {n for n, _ in self.runnables}]
            log.warning("leadership lost: cancelling %d controllers and runnables now",
                        len(leading))
            await _cancel(leading, left())
        elif workers:
            await self._drain(workers, left(self.settings.drain_timeout), left)
        await self._release(lost, left)
        if self.elector is not None:
            self.elector.fence.revoke("shutting down")
        if self.peers is not None and self.peers.revoked is None:
            self.peers.revoked = "shutting down"
        await _cancel(self._tasks, left())
        self._tasks.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.close(), left())
        log.info("manager stopped in %.1fs", loop.time() - started)

    async def _drain(self, workers: list[asyncio.Task[Any]], timeout: float,
                     left: Callable[[], float]) -> None:
        """Let the workers finish the reconcile in hand for ``timeout``; cancel the rest."""
        _, pending = await asyncio.wait(workers, timeout=timeout)
        if not pending:
            return
        busy = [t.get_name() for t in asyncio.all_tasks()
                if " worker " in t.get_name() and not t.done()]
        log.warning("%d reconciles still running %.1fs after the stop (%s); cancelling them: "
                    "they are reconciled again by whoever holds their keys next", len(busy),
                    timeout, ", ".join(sorted(busy)[:5]) + (", ..." if len(busy) > 5 else ""))
        await _cancel(pending, left())

    async def _release(self, lost: bool, left: Callable[[float], float]) -> None:
        """Give the shard and the leadership up so others take over now. After a loss only
        the shard (if its own permit still holds: ``Peers.release`` checks), since the
        leadership may be someone else's; a lost shard is never released. Both within
        ``release_timeout``: a hub that does not answer cannot hand them over anyway."""
        end = asyncio.get_running_loop().time() + self.settings.release_timeout
        for release in (self.peers.release if self.peers else None,
                        None if lost else self.elector.release if self.elector else None):
            if release is not None:
                timeout = left(end - asyncio.get_running_loop().time())
                try:
                    await asyncio.wait_for(release(), timeout)
                except TimeoutError:
                    log.warning("the hub did not answer the release of a Lease in %.1fs; "
                                "the others take it when it expires", timeout)

    async def close(self) -> None:
        """Close servers, caches and every connection; safe to call more than once, and on
        a manager that never ran (``fedctl run`` calls it on every exit path)."""
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
        await self.clusters.close()
        for client in self._own_clients:
            await client.close()
        self._own_clients.clear()


def _informer_report(informer: CachedResource) -> dict[str, Any]:
    return {"state": informer.state, "synced": informer.synced.is_set(),
            "objects": len(informer.store), "relists": informer.relists,
            "restarts": informer.restarts, "last_error": informer.last_error}


async def _first(*waitables: asyncio.Event | asyncio.Future[Any]) -> None:
    """Wait until the first event is set or future done; shared futures are left running.

    Events are waited on in tasks made and cancelled here, so no ``Event.wait()``
    coroutine is ever left un-awaited (which Python reports as a RuntimeWarning).
    """
    owned = [asyncio.ensure_future(w.wait()) for w in waitables
             if isinstance(w, asyncio.Event)]
    shared = [w for w in waitables if not isinstance(w, asyncio.Event)]
    try:
        await asyncio.wait([*owned, *shared], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in owned:
            task.cancel()


async def _cancel(tasks: Collection[asyncio.Task[Any]], timeout: float) -> None:
    """Cancel ``tasks`` and wait up to ``timeout`` for them to end (a task that catches
    its cancellation and goes on waiting must not hold the process)."""
    for task in tasks:
        task.cancel()
    if tasks:
        ended, stuck = await asyncio.wait(tasks, timeout=timeout)
        for task in ended:
            _ = task.cancelled() or task.exception()  # retrieved: ended as they may
        for task in stuck:
            log.warning("%s did not end when cancelled; leaving it", task.get_name())


def _report_crash(task: asyncio.Task[Any]) -> None:
    """Log why a task that should never end on its own (the election) ended, if it did."""
    if task.done() and not task.cancelled() and task.exception() is not None:
        log.error("%s failed: %r", task.get_name(), task.exception())


def dumps(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True)
