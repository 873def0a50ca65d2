"""``fedctl agent``: a pull member's agent, dialling out to the hub's work server.

The agent connects with its client certificate (:mod:`federation.work.identity`), says
``Hello`` with the generations it applied, and then serves the stream
(:mod:`federation.agent.session`) until it breaks; then it reconnects with jittered
exponential backoff (:attr:`AgentSettings.backoff_initial` doubling to ``backoff_max``).
Meanwhile nothing in its cluster is touched: what was applied stays as it was (the last
desired state), and its informers keep the objects current for the next snapshot.

Its certificate and key are read from their files at every connect. Once two thirds of
the certificate's lifetime have passed (checked when a stream opens and every
``renew_check`` seconds on it), the agent asks for a new certificate over the stream, for
the same key (the request is signed with it; the hub signs nothing else), writes it back
to ``--tls-cert`` and reconnects with it at once, so the hub can stop accepting the old
one. A new key comes with a re-join. Neither is ever logged.

A stream refused with NOT_FOUND means the hub has no such member any more (its
MemberCluster was deleted or left pull mode): the agent keeps nothing from then on
(:meth:`Worker.leave <federation.agent.session.Worker.leave>`) and keeps dialling, in case
it is joined again. PERMISSION_DENIED (a revoked certificate, after a re-join) and
ALREADY_EXISTS (another stream of this cluster is live) are logged and retried.

``/healthz`` answers 200 while the loop runs; ``/readyz`` 200 only while a stream is
open and the agent's own API server is ready; ``/metrics`` has the stream state, the
writes made, duplicates skipped and reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import grpc
import grpc.aio
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from federation.agent.applied import Applied
from federation.agent.session import Session, Worker
from federation.contexts.client import ObjectClient
from federation.work import identity
from federation.work.proto import work_pb2 as pb
from federation.work.server import METHOD

log = logging.getLogger("federation.agent")
Handler = Callable[[web.Request], Awaitable[web.Response]]


@dataclasses.dataclass(frozen=True)
class AgentSettings:
    hub_address: str
    cluster: str
    tls_cert: Path
    tls_key: Path
    tls_ca: Path
    state_dir: Path
    tls_server_name: str | None = None
    """The name to verify in the hub's certificate when the address is not in it."""
    backoff_initial: float = 0.5
    """First reconnect delay: a hub restart is back within seconds."""
    backoff_max: float = 30.0
    """Longest delay between attempts: a thousand agents of a hub that was away for an
    hour come back spread over half a minute, not all at once."""
    renew_check: float = 3600.0
    """Seconds between checks of the certificate's age on an open stream (renewal is at two
    thirds of 90 days; an hour's lateness is nothing)."""


class Agent:
    def __init__(self, settings: AgentSettings, client: ObjectClient) -> None:
        self.settings = settings
        self.client = client
        self.worker = Worker(settings.cluster, client,
                             Applied(settings.state_dir / "applied.json"))
        self.worker.renewal = self._renewed
        self.connected = False
        self.registry = CollectorRegistry()
        self.m_connected = Gauge("federation_agent_connected", "1 while a work stream is open",
                                 registry=self.registry)
        self.m_reconnects = Counter("federation_agent_reconnects", "streams opened",
                                    registry=self.registry)
        self.m_left = Gauge("federation_agent_left", "1 while the hub says this cluster is "
                            "no member (nothing is kept or restored)", registry=self.registry)
        self.registry.register(_StatsCollector(self.worker))

    # -- the connection loop ---------------------------------------------------------------

    async def run(self) -> None:
        failures = 0
        while True:
            opened = await self.attempt(quiet=failures > 0)
            failures = 0 if opened else failures + 1
            delay = min(self.settings.backoff_initial * 2.0 ** min(failures, 20),
                        self.settings.backoff_max) * random.uniform(0.8, 1.2)
            await asyncio.sleep(delay)

    async def attempt(self, quiet: bool = False) -> bool:
        """One stream until it ends, its refusal or failure handled (NOT_FOUND: the hub has
        no such member, keep nothing); True when the hub accepted it."""
        try:
            return await self.connect_once()
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                self.worker.leave(exc.details() or "NOT_FOUND")
                self.m_left.set(1)
            log.log(logging.DEBUG if quiet else logging.WARNING, "work stream to %s: %s %s",
                    self.settings.hub_address, exc.code().name, exc.details())
        except (OSError, ValueError) as exc:
            log.warning("work stream to %s: %s", self.settings.hub_address, exc)
        finally:
            self.connected = False
            self.m_connected.set(0)
            self.worker.end_session()
        return False

    def _credentials(self) -> grpc.ChannelCredentials:
        s = self.settings
        return grpc.ssl_channel_credentials(root_certificates=s.tls_ca.read_bytes(),
                                            private_key=s.tls_key.read_bytes(),
                                            certificate_chain=s.tls_cert.read_bytes())

    async def connect_once(self) -> bool:
        """One stream, until it ends; True when the hub accepted it."""
        options: list[tuple[str, str | int]] = [
            ("grpc.keepalive_time_ms", 10_000), ("grpc.keepalive_timeout_ms", 5_000)]
        if self.settings.tls_server_name:
            options.append(("grpc.ssl_target_name_override", self.settings.tls_server_name))
        async with grpc.aio.secure_channel(self.settings.hub_address, self._credentials(),
                                           options=options) as channel:
            sync = channel.stream_stream(METHOD,
                                         request_serializer=pb.AgentMessage.SerializeToString,
                                         response_deserializer=pb.HubMessage.FromString)
            session = self.worker.session()
            call = sync(self._requests(session))
            opened = False
            side: list[asyncio.Task[None]] = []
            try:
                async for message in call:
                    if not opened:
                        opened = self._opened(session)
                        side = [asyncio.create_task(self.worker.heartbeats(session)),
                                asyncio.create_task(self._renewals(session))]
                    self.worker.handle(session, message)
            finally:
                for task in side:
                    task.cancel()
                await asyncio.gather(*side, return_exceptions=True)
            return opened

    def _opened(self, session: Session) -> bool:
        self.connected = True
        self.m_connected.set(1)
        self.m_reconnects.inc()
        self.worker.left = None
        self.m_left.set(0)
        log.info("work stream to %s open (cluster %s, %d objects applied)",
                 self.settings.hub_address, self.settings.cluster,
                 len(self.worker.applied.generations))
        return True

    async def _requests(self, session: Session) -> AsyncIterator[pb.AgentMessage]:
        yield self.worker.hello()
        while True:
            message = await session.outbox.get()
            if message is None:
                return
            yield message

    # -- certificate renewal ---------------------------------------------------------------

    async def _renewals(self, session: Session) -> None:
        """Ask for a renewal when due: at once, then every ``renew_check`` seconds."""
        while not session.closed:
            self._maybe_renew(session)
            await asyncio.sleep(self.settings.renew_check)

    def _maybe_renew(self, session: Session) -> None:
        if session.renewing:
            return
        try:
            if not identity.needs_renewal(self.settings.tls_cert.read_bytes()):
                return
            key = identity.load_key(self.settings.tls_key.read_bytes())
        except (OSError, ValueError) as exc:
            log.warning("certificate renewal: cannot read the certificate or key: %s", exc)
            return
        session.renewing = True
        session.send(pb.AgentMessage(renew=pb.RenewRequest(
            csr_pem=identity.csr(self.settings.cluster, key))))
        log.info("asked the hub to renew the certificate of %s", self.settings.cluster)

    def _renewed(self, answer: pb.RenewAnswer) -> None:
        session = self.worker.session_
        if session is not None:
            session.renewing = False
        if answer.error:
            log.warning("certificate renewal refused: %s", answer.error)
            return
        why = self._unusable(answer.cert_pem)
        if why is not None:
            log.warning("certificate renewal: the hub's certificate %s", why)
            return
        _write_private(self.settings.tls_cert, answer.cert_pem)
        log.info("certificate of %s renewed; reconnecting with it", self.settings.cluster)
        if session is not None:
            session.close()  # the stream ends; the next one presents the new certificate

    def _unusable(self, cert_pem: bytes) -> str | None:
        """Why a renewed certificate cannot replace ours (None: it can)."""
        try:
            ours = identity.presented(self.settings.tls_cert.read_bytes())
            new = identity.presented(cert_pem)
            named = identity.common_name(cert_pem)
        except (OSError, ValueError) as exc:
            return f"cannot be read ({exc})"
        if named != self.settings.cluster:
            return "names another cluster"
        if new.public_key != ours.public_key:
            return "is for another key"
        return None

    # -- health and metrics ----------------------------------------------------------------

    async def serve(self, health_address: str | None, metrics_address: str | None
                    ) -> list[web.AppRunner]:
        runners = []
        routes: dict[str | None, list[tuple[str, Handler]]] = {}
        routes.setdefault(health_address, []).extend(
            [("/healthz", self._healthz), ("/readyz", self._readyz)])
        routes.setdefault(metrics_address, []).append(("/metrics", self._metrics))
        for address, handlers in routes.items():
            if not address:
                continue
            app = web.Application()
            for path, handler in handlers:
                app.router.add_get(path, handler)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            host, _, port = address.rpartition(":")
            await web.TCPSite(runner, host or "127.0.0.1", int(port)).start()
            runners.append(runner)
        return runners

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self.worker.left is not None:
            return web.Response(text="the hub says this cluster is no member; nothing is "
                                     "kept\n", status=503)
        if not self.connected:
            return web.Response(text="no work stream to the hub\n", status=503)
        if not self.worker.cluster_ready:
            return web.Response(text=f"own API server: {self.worker.cluster_detail}\n",
                                status=503)
        return web.Response(text="ok\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry),
                            content_type="text/plain", charset="utf-8")


class _StatsCollector(Collector):
    """The worker's counters, read at scrape time."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def collect(self) -> Iterator[Metric]:
        stats = self.worker.stats
        writes = CounterMetricFamily("federation_agent_writes",
                                     "writes made to the member API server", labels=["verb"])
        for verb, n in sorted(stats.writes.items()):
            writes.add_metric([verb], n)
        yield writes
        yield CounterMetricFamily("federation_agent_duplicates",
                                  "work already applied at its generation (nothing written)",
                                  value=stats.duplicates)
        yield CounterMetricFamily("federation_agent_refused",
                                  "writes the member API server refused", value=stats.refused)


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)
