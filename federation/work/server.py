"""The work server: ``WorkService.Sync`` over gRPC with mutual TLS, one stream per agent.

The server holds a :class:`~federation.work.pull.PullState` per registered pull member
(:meth:`WorkServer.register`, by the membership controller when a MemberCluster says
``mode: Pull``). A stream is accepted only when, in this order:

1. its TLS client certificate was signed by the work CA (the handshake) and names exactly
   the cluster its ``Hello`` claims (:func:`~federation.work.identity.check_peer`), else
   PERMISSION_DENIED and nothing of it is read;
2. the cluster is a pull member: one whose MemberCluster is gone (or is not in pull mode)
   is NOT_FOUND, the answer an agent takes to mean "stop keeping this member's objects";
   one not registered yet (the control plane is starting) is UNAVAILABLE, and the agent
   retries with backoff; a replica that does not lead is UNAVAILABLE with the trailing
   metadata :data:`STANDBY` (see below);
3. the certificate's serial is the one recorded for the member (or the one a renewal
   replaced, until the new one is first used), else PERMISSION_DENIED: a re-join revokes;
4. no other stream of that cluster is live (:meth:`PullState.busy`), else ALREADY_EXISTS:
   a copy of the agent's key cannot displace the agent that holds it.

Each accepted stream runs two halves: a reader that hands every agent message to the
state, and the response generator that yields :meth:`PullState.outgoing`. gRPC's write
awaits HTTP/2 flow control, so a slow agent slows the generator, not the hub: what waits
meanwhile is the state's one entry per object (see :mod:`federation.work.pull`). A stream
ends at the latest when its certificate expires.

**Two replicas.** Both replicas of the shipped Deployment serve the work port behind one
Service, but only the leader knows the pull members (the membership controller registers
them, and it runs only where the Lease is held): the work state lives in the leader's
memory, so a standby cannot serve a stream. It answers every stream UNAVAILABLE, saying it
does not lead, with :data:`STANDBY` in the trailing metadata. The agent takes that as
"dial again now": it reconnects after a short fixed delay instead of backing off, and each
new connection is a new choice of replica by the Service (kube-proxy balances
connections, not requests), so it reaches the leader within a few tries
(:attr:`federation.agent.agent.AgentSettings.standby_retry`).

**Shards** (``fedctl run --shards N``): every replica that holds a shard serves its agents,
and so does the leader (its health controller judges each member from its own stream), so
``leading`` says whether it holds a shard or leads, each with its own state: its writes, fenced
by its own shard permit as each Work leaves; its mirrors, read by its own informers; its
own generations (``replica``, named in the ``Welcome`` with the ``replicas`` to stream
to). An agent streams to every holder. A cluster's certificate renewal is recorded by the
replica owning :func:`renewal_key` (``renews``); the others answer that the agent should
ask on another stream. docs/runtime.md, "Pull members with shards".

Renewals are signed on one worker thread (:data:`SIGNER_THREADS`), never on the loop, and
recorded on the hub (:attr:`WorkServer.recorder`, the membership controller's conditional
write of the MemberCluster status) before the agent gets the certificate: a certificate
that could not be recorded is never handed out.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence

import grpc
import grpc.aio

from federation.contexts.client import WRITING_FOR, ClientError
from federation.untrusted.text import one_line
from federation.work import identity, pull
from federation.work.proto import work_pb2 as pb

log = logging.getLogger("federation.work")
SERVICE = "federation.work.v1.WorkService"
METHOD = f"/{SERVICE}/Sync"
HELLO_TIMEOUT = 10.0
"""Seconds a new stream has to say who it is (a connection that never does is dropped)."""
MAX_MESSAGE = 4 * 2**20
"""Bytes of one agent message at most (gRPC's default, stated): one object of at most the
API server's 3 MiB, or a Hello of some tens of thousands of generations."""
SIGNER_THREADS = 1
"""Renewals are rare (one per agent per 60 days) and each stream may ask once: one thread
keeps a burst of them off the loop without letting them take more than one core."""
Recorder = Callable[[str, identity.CertificateRecord, str], Awaitable[None]]
"""Records cluster's new certificate record on the hub, provided the record there still
accepts the given serial (the one presented); raises ClientError or IdentityError if not."""
STANDBY = ("federation-work-standby", "true")
"""Trailing metadata of the refusal of a replica that does not lead: dial again at once."""
ANOTHER_STREAM = "ask on another stream"
"""Said in a renewal's refusal by a replica of a sharded hub that does not record the
cluster's renewals: the agent asks on its stream to another replica."""
Membership = Callable[[str], bool | None]
"""Whether a cluster is a pull member by the hub's MemberClusters (None: not known yet)."""


def renewal_key(cluster: str) -> str:
    """The shard key under which a cluster's certificate renewal is recorded (with shards:
    one replica records each cluster's, without any replica having to lead)."""
    return f"MemberCluster/{cluster}"


class _Refused(Exception):
    """A stream that may not open: the gRPC code and the reason the agent is told."""

    def __init__(self, code: grpc.StatusCode, why: str,
                 metadata: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(why)
        self.code, self.why, self.metadata = code, why, metadata


class WorkServer:
    """The pull members' streams, served on one TLS address."""

    def __init__(self, hosts: Sequence[str] = ("127.0.0.1", "localhost"),
                 settings: pull.PullSettings | None = None, replica: str = "",
                 replicas: int = 0) -> None:
        self.replica = replica
        """This replica's identity with shards ("" without): every state's (see
        :attr:`federation.work.pull.PullState.replica`)."""
        self.replicas = replicas
        """With shards, how many replicas the agents stream to (the shard count), unless
        :attr:`serving` counts them."""
        self.serving: Callable[[], int] | None = None
        """With shards, the replicas serving agents now (the live shards' holders and the
        leader), told to each agent in its Welcome; None: :attr:`replicas`."""
        self.renews: Callable[[str], str | None] | None = None
        """With shards, whether this replica records a cluster's certificate renewal: None
        when it owns the cluster's :func:`renewal_key`, else why not (the agent asks on
        another stream). None (the attribute): the leader, the only one serving, does."""
        self.ca: identity.CA | None = None
        """The work CA, loaded from the hub Secret at :meth:`start`."""
        self.hosts = list(hosts)
        self.settings = settings or pull.PullSettings()
        self.states: dict[str, pull.PullState] = {}
        self.refused = 0
        """Streams refused for their certificate or because another one was live (each
        also a WARNING line)."""
        self._server: grpc.aio.Server | None = None
        self.port: int | None = None
        self.listeners: list[Callable[[str, bool], None]] = []
        """Called with (cluster, connected) on every connect and disconnect."""
        self.recorder: Recorder | None = None
        """Writes a member's certificate record on the hub (the membership controller);
        None: renewals are refused, as nothing could record them."""
        self.membership: Membership | None = None
        """Tells a deleted member from one not registered yet (the membership controller);
        None: every unregistered cluster is told to retry."""
        self.leading: Callable[[], bool] | None = None
        """Whether this process serves streams: it leads (the manager's), or with shards it
        holds a shard; None: it always does (one replica). One that does not refuses every
        stream with :data:`STANDBY`."""
        self._signer = concurrent.futures.ThreadPoolExecutor(
            SIGNER_THREADS, thread_name_prefix="work renewal signer")
        self._tasks: set[asyncio.Task[None]] = set()

    def register(self, name: str, record: identity.CertificateRecord | None = None
                 ) -> pull.PullState:
        state = self.states.get(name)
        if state is None:
            state = self.states[name] = pull.PullState(
                name, self.settings, replica=self.replica, replicas=self.replicas)
            state.renew = lambda csr, peer, name=name: self._renew(name, csr, peer)
        if record is not None:
            state.track(record)
        return state

    async def _renew(self, name: str, csr: bytes, peer: identity.Presented) -> bytes:
        """Sign (off the loop), record on the hub, then hand out: see the module docstring."""
        if self.ca is None or self.recorder is None:
            raise identity.IdentityError("renewal is not enabled on this hub")
        why = self.renews(name) if self.renews is not None else None
        if why is not None:
            raise identity.IdentityError(f"renewal: this replica does not record the "
                                         f"certificate of {name} ({why}); {ANOTHER_STREAM}")
        cert: bytes = await asyncio.get_running_loop().run_in_executor(
            self._signer, identity.sign_csr, self.ca, csr, name, peer)
        record = identity.CertificateRecord(identity.serial_of(cert), peer.serial)
        token = WRITING_FOR.set(renewal_key(name))  # with shards: that key's permit
        try:
            await self.recorder(name, record, peer.serial)
        finally:
            WRITING_FOR.reset(token)
        state = self.states.get(name)
        if state is not None:
            state.track(record)
        log.info("renewed the agent certificate of %s: serial %s replaces %s", name,
                 record.serial, peer.serial)
        return cert

    def unregister(self, name: str) -> None:
        state = self.states.pop(name, None)
        if state is not None:
            state.disconnect("the cluster left the federation")

    async def start(self, address: str, ca: identity.CA) -> int:
        """Listen on ``address`` (host:port; port 0 picks one) with a serving certificate
        from ``ca``, which also verifies the agents; the port bound."""
        self.ca = ca
        cert, key = identity.issue_server(ca, self.hosts)
        credentials = grpc.ssl_server_credentials([(key, cert)],
                                                  root_certificates=ca.cert_pem,
                                                  require_client_auth=True)
        server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE),
            ("grpc.keepalive_time_ms", 10_000),
            ("grpc.keepalive_timeout_ms", 5_000),
            ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
            ("grpc.keepalive_permit_without_calls", 1),
        ])
        handler = grpc.stream_stream_rpc_method_handler(
            self._sync, request_deserializer=pb.AgentMessage.FromString,
            response_serializer=pb.HubMessage.SerializeToString)
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            SERVICE, {"Sync": handler})])
        self.port = server.add_secure_port(address, credentials)
        if not self.port:
            raise OSError(f"work server: cannot listen on {address}")
        await server.start()
        self._server = server
        log.info("work server listening on %s (port %d)", address, self.port)
        return self.port

    def stopping(self) -> None:
        """The control plane is stopping (SIGTERM): writes waiting for an agent that has
        left fail now, so the manager's drain does not wait for them (docs/runtime.md,
        "Shutdown"). Streams stay open until :meth:`stop`."""
        for name, state in self.states.items():
            told = state.abandon("the control plane is stopping")
            if told:
                log.info("%s: %d writes waiting for its agent failed: the control plane is "
                         "stopping", name, told)

    async def stop(self, grace: float = 1.0) -> None:
        for state in self.states.values():
            state.disconnect("the control plane is stopping")
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
        self._signer.shutdown(wait=False, cancel_futures=True)

    def _notify(self, name: str, connected: bool) -> None:
        for listener in list(self.listeners):
            try:
                listener(name, connected)
            except Exception:
                log.exception("work listener %r failed", listener)

    async def _sync(self, requests: AsyncIterator[pb.AgentMessage],
                    context: grpc.aio.ServicerContext[pb.AgentMessage, pb.HubMessage]
                    ) -> AsyncIterator[pb.HubMessage]:
        try:
            first = await asyncio.wait_for(anext(requests), HELLO_TIMEOUT)
        except (TimeoutError, StopAsyncIteration):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no hello")
            return
        if first.WhichOneof("body") != "hello" or not first.hello.cluster_name:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "the first message must be a hello naming the cluster")
            return
        try:
            state, peer = self._admit(first.hello.cluster_name, context.auth_context())
        except _Refused as refused:
            await context.abort(refused.code, refused.why, trailing_metadata=refused.metadata)
            return
        if self.serving is not None:
            state.replicas = self.serving()
        try:
            state.connect(first.hello, peer)
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"hello: {exc}")
            return
        async for message in self._serve(state, peer, requests):
            yield message

    def _admit(self, cluster: str, auth: Mapping[str, Iterable[bytes]]
               ) -> tuple[pull.PullState, identity.Presented]:
        """The state of ``cluster`` and the certificate presented, if the stream may open
        (else :class:`_Refused` with its code): the steps of the module docstring."""
        names = [n.decode(errors="replace") for n in auth.get("x509_common_name", [])]
        why = identity.check_peer(names, cluster)
        if why is not None:
            raise self._refuse(cluster, grpc.StatusCode.PERMISSION_DENIED, why)
        if self.leading is not None and not self.leading():
            raise _Refused(grpc.StatusCode.UNAVAILABLE, (
                "this control-plane replica does not lead (a standby, or starting): dial "
                "again, the next connection may reach the leader"), (STANDBY,))
        state = self.states.get(cluster)
        if state is None:
            if self.membership is not None and self.membership(cluster) is False:
                raise _Refused(grpc.StatusCode.NOT_FOUND, (
                    f"cluster {cluster!r} is not a member of this federation (its "
                    "MemberCluster was deleted or is not in pull mode)"))
            raise _Refused(grpc.StatusCode.UNAVAILABLE,
                           f"cluster {cluster!r} is not a pull member of this federation")
        try:
            peer = identity.presented(next(iter(auth.get("x509_pem_cert", []))))
        except (StopIteration, identity.IdentityError):
            raise self._refuse(cluster, grpc.StatusCode.PERMISSION_DENIED,
                               "no usable client certificate") from None
        why = state.certificate.refusal(peer.serial, cluster)
        if why is not None:
            raise self._refuse(cluster, grpc.StatusCode.PERMISSION_DENIED, why)
        why = state.busy()
        if why is not None:
            raise self._refuse(cluster, grpc.StatusCode.ALREADY_EXISTS, why)
        return state, peer

    def _refuse(self, cluster: str, code: grpc.StatusCode, why: str) -> _Refused:
        """A refusal worth a warning (a certificate that may not speak, a second stream)."""
        self.refused += 1
        why = one_line(why, 300)
        log.warning("work stream for cluster %s refused: %s", one_line(cluster, 100), why)
        return _Refused(code, why)

    async def _serve(self, state: pull.PullState, peer: identity.Presented,
                     requests: AsyncIterator[pb.AgentMessage]) -> AsyncIterator[pb.HubMessage]:
        stream = state.stream
        cluster = state.name
        log.info("agent of %s connected (certificate serial %s, %d objects applied before)",
                 cluster, peer.serial, len(state.applied))
        self._notify(cluster, True)
        if state.certificate.previous and peer.serial == state.certificate.serial:
            self._spawn(self._first_use(state, peer), f"record certificate of {cluster}")
        expiry = asyncio.get_running_loop().call_later(
            max((peer.not_after - datetime.datetime.now(datetime.UTC)).total_seconds(), 0),
            state.disconnect, "its certificate expired", stream)
        reader = asyncio.create_task(self._read(state, stream, requests),
                                     name=f"work stream of {cluster}")
        try:
            async for message in state.outgoing(stream):
                yield message
        finally:
            expiry.cancel()
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            if state.stream == stream:  # not replaced by a newer stream: it is gone
                if state.connected:
                    state.disconnect("stream closed")
                log.warning("agent of %s: %s", cluster, state.agent_detail)
                self._notify(cluster, False)

    async def _first_use(self, state: pull.PullState, peer: identity.Presented) -> None:
        """The renewed certificate is in use: the one it replaced is accepted no more."""
        record = identity.CertificateRecord(peer.serial)
        state.track(record)
        if self.recorder is None:
            return
        try:
            await self.recorder(state.name, record, peer.serial)
        except (ClientError, identity.IdentityError) as exc:
            # The hub is away or its record moved on (a re-join): the in-memory record
            # holds meanwhile, and the membership controller follows the hub's.
            log.warning("could not record that %s's renewed certificate is in use: %s",
                        state.name, exc)

    def _spawn(self, coroutine: Awaitable[None], name: str) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coroutine)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _read(self, state: pull.PullState, stream: int,
                    requests: AsyncIterator[pb.AgentMessage]) -> None:
        why = "the agent closed the stream"
        try:
            async for message in requests:
                if state.stream != stream:
                    return
                state.receive(message)
        except ValueError as exc:
            why = f"protocol error: {one_line(str(exc), 300)}"  # logged as it ends
        except (grpc.aio.AioRpcError, grpc.RpcError, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError):
                raise
            why = "the stream broke"
        state.disconnect(why, stream)  # the response side ends and tells the listeners
