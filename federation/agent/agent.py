"""``fedctl agent``: a pull member's agent, dialling out to the hub's work server.

The agent connects with its client certificate (:mod:`federation.work.identity`), says
``Hello`` with the generations it applied, and then serves the stream
(:mod:`federation.agent.session`) until it breaks; then it reconnects with jittered
exponential backoff (:attr:`AgentSettings.backoff_initial` doubling to ``backoff_max``).
Meanwhile nothing in its cluster is touched: what was applied stays as it was (the last
desired state), and its informers keep the objects current for the next snapshot.

Its certificate, key and the work CA are read from their store
(:mod:`federation.agent.credentials`: files, or a Secret of its member) at every connect.
Once two thirds of the certificate's lifetime have passed (checked when a stream opens and
every ``renew_check`` seconds on it), the agent asks for a new certificate over the stream,
for the same key (the request is signed with it; the hub signs nothing else), stores it
and only then reconnects with it, so the hub can stop accepting the old one: a renewal
that could not be stored is not used (the next check asks again). A new key comes with a
re-join. Neither is ever logged.

A stream refused with NOT_FOUND means the hub has no such member any more (its
MemberCluster was deleted or left pull mode): the agent keeps nothing from then on
(:meth:`Worker.leave <federation.agent.session.Worker.leave>`) and keeps dialling, in case
it is joined again. PERMISSION_DENIED (a revoked certificate, after a re-join) and
ALREADY_EXISTS (another stream of this cluster is live) are logged and retried.
UNAVAILABLE from a replica that does not lead (:data:`~federation.work.server.STANDBY` in
its trailing metadata) is retried after :attr:`AgentSettings.standby_retry`, not backed off,
for :attr:`AgentSettings.standby_tries` answers in a row: the next connection is a new
choice of replica, and may be the leader (the work server's module docstring).

**A sharded control plane** (``fedctl run --shards N``) has every replica holding a shard
serve its own writes, so the agent streams to each: one stream per :class:`Slot`, as many
slots as ``--hub-address`` lists addresses or a ``Welcome`` says there are replicas
(``replicas``), whichever is more. Slots beyond the addresses dial them round-robin; with
one address (a Service in front of the replicas) a connection that lands on a replica it
already streams to is refused ALREADY_EXISTS, and is retried like a standby's answer until
kube-proxy picks another one. A renewal is asked on one stream at a time; a replica that
does not record this cluster's renewals says so, and the agent asks on another stream.

``/healthz`` answers 200 while the loop runs; ``/readyz`` 200 only while a stream is
open and the agent's own API server is ready; ``/metrics`` has the stream state, the
writes made, duplicates skipped and reconnects.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import grpc
import grpc.aio
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from federation.agent import credentials
from federation.agent.applied import Applied
from federation.agent.session import Session, Worker
from federation.contexts.client import ClientError, ObjectClient
from federation.work import identity
from federation.work.proto import work_pb2 as pb
from federation.work.server import ANOTHER_STREAM, METHOD, STANDBY

log = logging.getLogger("federation.agent")
Handler = Callable[[web.Request], Awaitable[web.Response]]


@dataclasses.dataclass(frozen=True)
class AgentSettings:
    hub_address: str
    cluster: str
    tls_cert: Path | None
    tls_key: Path | None
    tls_ca: Path | None
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
    standby_retry: float = 0.5
    """Seconds before dialling again after a standby's answer: a Service choosing either
    replica at random reaches the leader within 2 tries on average."""
    standby_tries: int = 8
    """Standby answers in a row retried at ``standby_retry``; then the ordinary backoff (no
    replica leads: an election in progress, at most a lease of 15 s). With a leader behind
    the Service, 8 standby answers in a row happen once in 256 reconnects."""
    tls_secret: tuple[str, str] | None = None
    """(namespace, name) of the member Secret holding the three files instead (in a pod)."""

    def store(self, client: credentials.SecretClient) -> credentials.Store:
        """The Secret when one is named, else the three files."""
        if self.tls_secret is not None:
            return credentials.SecretStore(client, *self.tls_secret)
        if self.tls_cert is None or self.tls_key is None or self.tls_ca is None:
            raise ValueError("the agent needs --tls-secret or --tls-cert, --tls-key and "
                             "--tls-ca")
        return credentials.FileStore(self.tls_cert, self.tls_key, self.tls_ca)


@dataclasses.dataclass(eq=False)
class Slot:
    """One stream the agent keeps: the address it dials and how its last tries went."""

    address: str
    standbys: int = 0
    """Standby (or already-streamed replica) answers in a row (reset by any other outcome)."""
    session: Session | None = None
    replica: str = ""
    """The replica its open stream reached (its Welcome says; "" without shards)."""
    task: asyncio.Task[None] | None = None


class Agent:
    def __init__(self, settings: AgentSettings, client: ObjectClient) -> None:
        self.settings = settings
        self.client = client
        self.worker = Worker(settings.cluster, client,
                             Applied(settings.state_dir / "applied.json"))
        self.worker.renewal = self._renewed
        self.store = settings.store(client)
        self.bundle: credentials.Bundle | None = None
        """The credentials of the current (or last) stream, as the store gave them."""
        self._keeping: set[asyncio.Task[bool]] = set()
        self.addresses = [a.strip() for a in settings.hub_address.split(",") if a.strip()]
        self.slots = [Slot(address) for address in self.addresses]
        self.replicas = 0
        """The most replicas a Welcome asked this agent to stream to (0: one)."""
        self._more = asyncio.Event()
        """Set when a Welcome asks for more streams than there are slots."""
        self.streams = 0
        """Streams open now."""
        self.registry = CollectorRegistry()
        self.m_connected = Gauge("federation_agent_connected", "work streams open (1, or one "
                                 "per replica of a sharded control plane)",
                                 registry=self.registry)
        self.m_reconnects = Counter("federation_agent_reconnects", "streams opened",
                                    registry=self.registry)
        self.m_left = Gauge("federation_agent_left", "1 while the hub says this cluster is "
                            "no member (nothing is kept or restored)", registry=self.registry)
        self.registry.register(_StatsCollector(self.worker))

    # -- the connection loop ---------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self.streams > 0

    @property
    def standbys(self) -> int:
        """The first slot's standby answers in a row (one address, no shards: the only)."""
        return self.slots[0].standbys

    @standbys.setter
    def standbys(self, value: int) -> None:
        self.slots[0].standbys = value

    async def run(self) -> None:
        """Keep every slot's stream, adding slots when a Welcome asks for more (until
        cancelled, which ends every stream)."""
        try:
            while True:
                while len(self.slots) < self.replicas:
                    self.slots.append(Slot(self.addresses[len(self.slots) %
                                                          len(self.addresses)]))
                for slot in self.slots:
                    if slot.task is None:
                        slot.task = asyncio.create_task(self.keep(slot),
                                                        name=f"work stream to {slot.address}")
                self._more.clear()
                await self._more.wait()
        finally:
            tasks = [slot.task for slot in self.slots if slot.task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for slot in self.slots:
                slot.task = None

    async def keep(self, slot: Slot) -> None:
        """One slot's stream, dialled again whenever it ends."""
        failures = 0
        while True:
            # A standby's answers say nothing of the next failure: that one is logged.
            opened = await self.attempt(quiet=failures > 0 and slot.standbys == 0, slot=slot)
            failures = 0 if opened else failures + 1
            await asyncio.sleep(self.delay(failures, slot) * random.uniform(0.8, 1.2))

    def delay(self, failures: int, slot: Slot | None = None) -> float:
        """Seconds before the next attempt (before jitter), after ``failures`` in a row:
        ``standby_retry`` while the failures are the first standby answers in a row, else
        exponential from the first failure that was not (or from the last fast try)."""
        s = self.settings
        standbys = (slot or self.slots[0]).standbys
        if 0 < standbys <= s.standby_tries:
            return s.standby_retry
        counted = failures - min(standbys, s.standby_tries)
        return min(s.backoff_initial * 2.0 ** min(counted, 20), s.backoff_max)

    async def attempt(self, quiet: bool = False, slot: Slot | None = None) -> bool:
        """One stream until it ends, its refusal or failure handled (NOT_FOUND: the hub has
        no such member, keep nothing); True when the hub accepted it."""
        slot = slot or self.slots[0]
        standby = False
        try:
            return await self.connect_once(slot)
        except grpc.aio.AioRpcError as exc:
            standby = self._retry_soon(exc)
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                self.worker.leave(exc.details() or "NOT_FOUND")
                self.m_left.set(1)
            level = logging.INFO if standby else logging.WARNING  # a standby is expected
            log.log(logging.DEBUG if quiet else level, "work stream to %s: %s %s",
                    slot.address, exc.code().name, exc.details())
        except (OSError, ValueError, ClientError) as exc:
            log.warning("work stream to %s: %s", slot.address, exc)
        finally:
            slot.standbys = slot.standbys + 1 if standby else 0
            if slot.session is not None:  # ended by connect_once, unless it never began
                self.worker.end_session(slot.session)
                slot.session, slot.replica = None, ""
        return False

    def _retry_soon(self, exc: grpc.aio.AioRpcError) -> bool:
        """A refusal worth dialling again at once: a standby's, or (with another stream
        open) a replica saying it streams with this agent already: the next connection may
        reach another replica."""
        if exc.code() == grpc.StatusCode.UNAVAILABLE and _says_standby(exc):
            return True
        return exc.code() == grpc.StatusCode.ALREADY_EXISTS and self.connected

    async def load(self) -> credentials.Bundle:
        """The store's credentials, checked to be this cluster's (CredentialsError if not)."""
        bundle = await self.store.load()
        self.bundle = credentials.check(bundle, self.settings.cluster, self.store.describe())
        return self.bundle

    async def _credentials(self) -> grpc.ChannelCredentials:
        bundle = await self.load()
        return grpc.ssl_channel_credentials(root_certificates=bundle.ca_pem,
                                            private_key=bundle.key_pem,
                                            certificate_chain=bundle.cert_pem)

    async def connect_once(self, slot: Slot | None = None) -> bool:
        """One stream of ``slot`` (default: the first), until it ends; True when the hub
        accepted it."""
        slot = slot or self.slots[0]
        options: list[tuple[str, str | int]] = [
            ("grpc.keepalive_time_ms", 10_000), ("grpc.keepalive_timeout_ms", 5_000)]
        if self.settings.tls_server_name:
            options.append(("grpc.ssl_target_name_override", self.settings.tls_server_name))
        async with grpc.aio.secure_channel(slot.address, await self._credentials(),
                                           options=options) as channel:
            sync = channel.stream_stream(METHOD,
                                         request_serializer=pb.AgentMessage.SerializeToString,
                                         response_deserializer=pb.HubMessage.FromString)
            session = slot.session = self.worker.session()
            call = sync(self._requests(session))
            opened = False
            side: list[asyncio.Task[None]] = []
            try:
                async for message in call:
                    if not opened:
                        opened = self._opened(slot, message)
                        side = [asyncio.create_task(self.worker.heartbeats(session)),
                                asyncio.create_task(self._renewals(session))]
                    self.worker.handle(session, message)
            finally:
                for task in side:
                    task.cancel()
                await asyncio.gather(*side, return_exceptions=True)
                self.worker.end_session(session)  # the others' streams go on
                if opened:
                    self.streams -= 1
                    self.m_connected.set(self.streams)
            return opened

    def _opened(self, slot: Slot, first: pb.HubMessage) -> bool:
        """A stream the hub accepted (its first message is the Welcome)."""
        welcome = first.welcome
        slot.replica = welcome.replica
        self.streams += 1
        self.m_connected.set(self.streams)
        self.m_reconnects.inc()
        self.worker.left = None
        self.m_left.set(0)
        if welcome.replicas > max(self.replicas, len(self.slots)):
            self.replicas = welcome.replicas
            self._more.set()
        log.info("work stream to %s open (cluster %s%s, %d objects applied)", slot.address,
                 self.settings.cluster,
                 f", replica {welcome.replica}" if welcome.replica else "",
                 len(self.worker.applied.table(welcome.replica)))
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
        bundle = self.bundle
        if bundle is None or session.renews_elsewhere or \
                any(s.renewing for s in self.worker.sessions):
            return
        try:
            if not identity.needs_renewal(bundle.cert_pem):
                return
            key = identity.load_key(bundle.key_pem)
        except ValueError:
            log.warning("certificate renewal: cannot read the certificate or key of %s",
                        self.store.describe())
            return
        session.renewing = True
        session.send(pb.AgentMessage(renew=pb.RenewRequest(
            csr_pem=identity.csr(self.settings.cluster, key))))
        log.info("asked the hub to renew the certificate of %s", self.settings.cluster)

    def _renewed(self, session: Session, answer: pb.RenewAnswer) -> None:
        session.renewing = False
        if ANOTHER_STREAM in answer.error:  # a sharded hub: another replica records it
            session.renews_elsewhere = True
            log.info("certificate renewal: %s", answer.error)
            for other in self.worker.sessions:
                self._maybe_renew(other)
            return
        if answer.error:
            log.warning("certificate renewal refused: %s", answer.error)
            return
        why = self._unusable(answer.cert_pem)
        if why is not None:
            log.warning("certificate renewal: the hub's certificate %s", why)
            return
        task = asyncio.ensure_future(self.keep_renewal(answer.cert_pem, session))
        task.set_name(f"keep renewed certificate of {self.settings.cluster}")
        self._keeping.add(task)
        task.add_done_callback(self._keeping.discard)

    async def keep_renewal(self, cert_pem: bytes, session: Session | None) -> bool:
        """Store a renewed certificate, then reconnect with it; True if it was stored. Not
        stored, it is not used: the hub would stop accepting the one the store still has."""
        try:
            await self.store.save_certificate(cert_pem)
        except credentials.CredentialsError as exc:
            log.warning("certificate of %s renewed but not kept, so not used (asked again at "
                        "the next check): %s", self.settings.cluster, exc)
            return False
        log.info("certificate of %s renewed and kept in %s; reconnecting with it",
                 self.settings.cluster, self.store.describe())
        if session is not None:
            session.close()  # the stream ends; the next one presents the new certificate
        return True

    def _unusable(self, cert_pem: bytes) -> str | None:
        """Why a renewed certificate cannot replace ours (None: it can)."""
        if self.bundle is None:
            return "came before any certificate was loaded"
        try:
            ours = identity.presented(self.bundle.cert_pem)
            new = identity.presented(cert_pem)
            named = identity.common_name(cert_pem)
        except ValueError as exc:
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


def _says_standby(exc: grpc.aio.AioRpcError) -> bool:
    """The refusal carries :data:`~federation.work.server.STANDBY` in its trailing metadata."""
    pairs: list[object] = list(exc.trailing_metadata() or ())
    return any(isinstance(p, tuple) and tuple(map(str, p)) == STANDBY for p in pairs)


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

