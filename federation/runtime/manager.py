"""The manager: starts caches, then controllers; serves health and metrics; shuts down in bounds.

Start order, as in controller-runtime:

1. The health and metrics servers, so a probe gets an answer (``/readyz``:
   not ready yet) while the rest starts.
2. For every engaged cluster: its /readyz probe, and the informers that the
   controllers' watches (and :meth:`Manager.cache`) ask for, with the
   controllers' event handlers attached.
3. Cache sync, for all clusters at once, each bounded by ``cache_sync_timeout``:
   a member that is down or stuck is reported and left to catch up on its own;
   it never holds up the others. Only then is the manager ready.
4. Leader election, when enabled (caches keep running on standbys, so a new
   leader starts warm).
5. Controllers and other runnables that need leadership.

It stops on :meth:`Manager.stop` (``fedctl run`` wires SIGTERM and SIGINT to
it) or when leadership is lost. Shutdown is bounded by ``shutdown_timeout``:
queues stop taking keys, workers finish the reconcile in hand, the Lease is
released, informers are cancelled, connections closed; whatever is still
running at the deadline is cancelled.

``/healthz`` answers 200 while the process runs its loop. ``/readyz`` answers
200 once caches are started and the hub's caches are synced; its body lists
each check and each cluster (``[+]cluster/member1 ok``,
``[-]cluster/member2 unavailable: ...``). Members do not fail readiness: a
control plane with one member down must stay in service for the others.
``?format=json`` gives the same as JSON. ``/metrics`` is Prometheus text.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import prometheus_client
from aiohttp import web

from federation.contexts.cache import Informer
from federation.contexts.client import Resource
from federation.contexts.clusters import Cluster, ClusterSet
from federation.contexts.multicluster import MultiClusterClient
from federation.runtime import controller as controllers
from federation.runtime import leader, metrics

log = logging.getLogger("federation.manager")

Check = Callable[[], str | None]
"""A health or readiness check: None when fine, else why not."""

Runnable = Callable[[], Awaitable[None]]


class LeadershipLost(Exception):
    """This process stopped leading; it must exit so that it cannot act as a second leader."""


@dataclasses.dataclass(frozen=True)
class ManagerSettings:
    """Process-level settings of ``fedctl run``."""

    metrics_bind_address: str = ":8080"
    """controller-runtime's default; "0" turns the metrics server off."""
    health_probe_bind_address: str = ":8081"
    """controller-runtime's default; "0" turns the probe server off."""
    leader_elect: bool = False
    """Off by default (as controller-runtime) so one process just runs; turn on
    when running more than one replica."""
    leader: leader.LeaderSettings = dataclasses.field(default_factory=leader.LeaderSettings)
    cache_sync_timeout: float = 30.0
    """Seconds to wait for each cluster's first list before starting controllers
    anyway: a healthy member lists thousands of objects in a second or two; one
    that needs 30 s is treated as down and catches up in the background."""
    shutdown_timeout: float = 30.0
    """Seconds from SIGTERM to exit (controller-runtime's graceful shutdown
    default), inside Kubernetes' 30 s termination grace period."""
    field_manager: str = "federation"
    """The server-side apply field manager of every write this manager makes."""


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """``:8080`` -> all interfaces; ``127.0.0.1:0`` -> a free port; ``0`` or ``""`` -> off."""
    if address in ("", "0"):
        return None
    host, _, port = address.rpartition(":")
    try:
        return host or "0.0.0.0", int(port)
    except ValueError:
        raise ValueError(f"bind address {address!r} is not HOST:PORT or :PORT") from None


class Manager:
    """Runs caches, controllers and runnables for one :class:`ClusterSet`."""

    def __init__(self, cluster_set: ClusterSet, settings: ManagerSettings | None = None) -> None:
        self.clusters = cluster_set
        self.settings = settings or ManagerSettings()
        self.client = MultiClusterClient(cluster_set, self.settings.field_manager)
        self.metrics = metrics.Metrics()
        self.controllers: list[controllers.Controller] = []
        self.runnables: list[tuple[str, Runnable]] = []
        self.cached: list[controllers.Watch] = []
        self.health_checks: dict[str, Check] = {"ping": lambda: None}
        self.ready_checks: dict[str, Check] = {"caches-started": self._caches_started,
                                               "hub-synced": self._hub_synced}
        self.elector: leader.LeaderElector | None = None
        self.caches_started = False
        self.started = asyncio.Event()
        """Set once caches are started and synced (or timed out): the manager is ready."""
        self.started_at = time.monotonic()
        self.ports: dict[str, int] = {}
        self._stop = asyncio.Event()
        self._runners: list[web.AppRunner] = []
        self._tasks: list[asyncio.Task[Any]] = []
        for cluster in cluster_set.engaged:
            assert cluster.client is not None
            cluster.client.observer = self.metrics.observe_request
        self.metrics.registry.register(metrics.StateCollector(
            cluster_set, lambda: self.controllers, lambda: self.is_leader))

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

    # -- checks --------------------------------------------------------------------------

    def _caches_started(self) -> str | None:
        return None if self.caches_started else "caches are starting"

    def _hub_synced(self) -> str | None:
        hub = self.clusters.hub
        if hub.cache is not None and not hub.cache.synced:
            return f"hub caches not synced ({hub.detail})"
        return None

    def cluster_report(self) -> dict[str, dict[str, Any]]:
        report = {}
        for cluster in self.clusters.clusters.values():
            informers = list(cluster.cache.informers.values()) if cluster.cache else []
            report[cluster.name] = {
                "role": "hub" if cluster.is_hub else "member",
                "state": cluster.state, "detail": cluster.detail,
                "synced": bool(cluster.cache and cluster.cache.synced),
                "informers": {i.resource.plural: _informer_report(i) for i in informers},
            }
        return report

    # -- http ----------------------------------------------------------------------------

    def _check_response(self, request: web.Request, checks: dict[str, Check],
                        clusters: bool) -> web.Response:
        results = {name: check() for name, check in checks.items()}
        ok = all(r is None for r in results.values())
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
        data = prometheus_client.generate_latest(self.metrics.registry)
        return web.Response(body=data,
                            headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})

    async def _serve(self, name: str, address: str,
                     routes: list[tuple[str, Callable[[web.Request], Awaitable[web.Response]]]]
                     ) -> None:
        bind = parse_bind_address(address)
        if bind is None:
            return
        app = web.Application()
        for path, handler in routes:
            app.router.add_get(path, handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(bind)
        sock.listen(128)
        sock.setblocking(False)
        await web.SockSite(runner, sock).start()
        self._runners.append(runner)
        self.ports[name] = sock.getsockname()[1]
        log.info("%s server listening on %s:%d", name, bind[0], self.ports[name])

    # -- lifecycle -----------------------------------------------------------------------

    def _engage(self, cluster: Cluster) -> None:
        assert cluster.cache is not None
        for ctl in self.controllers:
            for watch in ctl.watches:
                if watch.applies_to(cluster.name, cluster.is_hub, cluster.is_member):
                    cluster.cache.informer(watch.resource).add_handler(ctl.handler(watch))
        for watch in self.cached:
            if watch.applies_to(cluster.name, cluster.is_hub, cluster.is_member):
                cluster.cache.informer(watch.resource)
        cluster.cache.start()
        self._spawn(cluster.run_probes(), f"probe of {cluster.name}")

    def engage(self, cluster: Cluster) -> None:
        """Start a cluster added at runtime (``ClusterSet.join``): the informers every watch
        asks for, with their handlers, and its probe. Its caches sync on their own."""
        if cluster.client is not None:
            cluster.client.observer = self.metrics.observe_request
        if cluster.engaged:
            self._engage(cluster)

    async def disengage(self, name: str) -> None:
        """Stop a cluster added at runtime: its probe, caches and connections."""
        for task in [t for t in self._tasks if t.get_name() == f"probe of {name}"]:
            task.cancel()
            self._tasks.remove(task)
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
            await self._serve("health", self.settings.health_probe_bind_address,
                              [("/healthz", self._healthz), ("/readyz", self._readyz)])
            await self._serve("metrics", self.settings.metrics_bind_address,
                              [("/metrics", self._metrics)])
            for cluster in self.clusters.engaged:
                self._engage(cluster)
            sync = self._spawn(self._sync(), "cache sync")
            await _first(sync, self._stop.wait())
            self.caches_started = True
            self.started.set()
            if not self._stop.is_set():
                lost = await self._lead_and_run()
        finally:
            await self._shutdown()
        if lost:
            raise LeadershipLost("leadership lost; exiting")

    async def _lead_and_run(self) -> bool:
        """Run controllers (after winning the election, if enabled); True if leadership was lost."""
        lost_wait: Awaitable[Any] = asyncio.Event().wait()
        if self.settings.leader_elect:
            self.elector = leader.LeaderElector(self._hub_client(), self.settings.leader)
            self._spawn(self.elector.run(), "leader election")
            await _first(self.elector.elected.wait(), self._stop.wait())
            if self._stop.is_set():
                return False
            self.metrics.leader.inc()
            lost_wait = self.elector.lost.wait()
        for ctl in self.controllers:
            self._spawn(ctl.run(), f"controller {ctl.name}")
        for name, runnable in self.runnables:
            self._spawn(runnable(), name)
        await _first(self._stop.wait(), lost_wait)
        return not self._stop.is_set()

    def _hub_client(self) -> Any:
        client = self.clusters.hub.client
        assert client is not None
        return client

    async def _shutdown(self) -> None:
        deadline = time.monotonic() + self.settings.shutdown_timeout
        for ctl in self.controllers:
            ctl.shutdown()
        workers = [t for t in self._tasks if t.get_name().startswith("controller ")]
        if workers:
            _, pending = await asyncio.wait(workers, timeout=max(deadline - time.monotonic(), 0))
            for task in pending:
                log.warning("%s did not finish in time; cancelling", task.get_name())
        if self.elector is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.elector.release(),
                                       max(deadline - time.monotonic(), 0.1))
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.clusters.close(), max(deadline - time.monotonic(), 0.1))
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
        log.info("manager stopped")


def _informer_report(informer: Informer) -> dict[str, Any]:
    return {"state": informer.state, "synced": informer.synced.is_set(),
            "objects": len(informer.store), "relists": informer.relists,
            "restarts": informer.restarts, "last_error": informer.last_error}


async def _first(*awaitables: Awaitable[Any]) -> None:
    """Wait until the first of ``awaitables`` completes; cancel the rest (not shared tasks)."""
    tasks = [a if isinstance(a, asyncio.Future) else asyncio.ensure_future(a)
             for a in awaitables]
    owned = [t for t, a in zip(tasks, awaitables, strict=True) if t is not a]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in owned:
            task.cancel()


def dumps(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True)
