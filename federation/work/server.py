"""The work server: ``WorkService.Sync`` over gRPC with mutual TLS, one stream per agent.

The server holds a :class:`~federation.work.pull.PullState` per registered pull member
(:meth:`WorkServer.register`, by the membership controller when a MemberCluster says
``mode: Pull``). A stream is accepted only when its TLS client certificate was signed by
the work CA (the handshake) *and* names exactly the cluster its ``Hello`` claims
(:func:`~federation.work.identity.check_peer`); otherwise it is aborted with
PERMISSION_DENIED and nothing of it is read. A cluster that is not (yet) a pull member is
UNAVAILABLE, and the agent retries with backoff. A second stream for the same cluster
replaces the first (an agent that reconnected before the old connection timed out).

Each accepted stream runs two halves: a reader that hands every agent message to the
state, and the response generator that yields :meth:`PullState.outgoing`. gRPC's write
awaits HTTP/2 flow control, so a slow agent slows the generator, not the hub: what waits
meanwhile is the state's one entry per object (see :mod:`federation.work.pull`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence

import grpc
import grpc.aio

from federation.work import identity, pull
from federation.work.proto import work_pb2 as pb

log = logging.getLogger("federation.work")
SERVICE = "federation.work.v1.WorkService"
METHOD = f"/{SERVICE}/Sync"
HELLO_TIMEOUT = 10.0
"""Seconds a new stream has to say who it is (a connection that never does is dropped)."""


class WorkServer:
    """The pull members' streams, served on one TLS address."""

    def __init__(self, hosts: Sequence[str] = ("127.0.0.1", "localhost"),
                 settings: pull.PullSettings | None = None) -> None:
        self.ca: identity.CA | None = None
        """The work CA, loaded from the hub Secret at :meth:`start`."""
        self.hosts = list(hosts)
        self.settings = settings or pull.PullSettings()
        self.states: dict[str, pull.PullState] = {}
        self.refused = 0
        """Streams refused for a certificate that named another cluster (a metric)."""
        self._server: grpc.aio.Server | None = None
        self.port: int | None = None
        self.listeners: list[Callable[[str, bool], None]] = []
        """Called with (cluster, connected) on every connect and disconnect."""

    def register(self, name: str) -> pull.PullState:
        state = self.states.get(name)
        if state is None:
            state = self.states[name] = pull.PullState(name, self.settings)
            state.renew = lambda csr, name=name: self._renew(csr, name)
        return state

    def _renew(self, csr: bytes, name: str) -> bytes:
        if self.ca is None:
            raise identity.IdentityError("the work server has no CA loaded")
        return identity.sign_csr(self.ca, csr, name)

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

    async def stop(self, grace: float = 1.0) -> None:
        for state in self.states.values():
            state.disconnect("the control plane is stopping")
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None

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
        cluster = first.hello.cluster_name
        names = [n.decode(errors="replace") for n in
                 context.auth_context().get("x509_common_name", [])]
        why = identity.check_peer(names, cluster)
        if why is not None:
            self.refused += 1
            log.warning("work stream for cluster %s refused: %s", cluster, why)
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, why)
            return
        state = self.states.get(cluster)
        if state is None:
            await context.abort(grpc.StatusCode.UNAVAILABLE,
                                f"cluster {cluster!r} is not a pull member of this federation")
            return
        try:
            state.connect(first.hello)
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"hello: {exc}")
            return
        stream = state.stream
        log.info("agent of %s connected (%d objects applied before)", cluster,
                 len(first.hello.applied))
        self._notify(cluster, True)
        reader = asyncio.create_task(self._read(state, stream, requests),
                                     name=f"work stream of {cluster}")
        try:
            async for message in state.outgoing(stream):
                yield message
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            if state.stream == stream and state.connected:
                state.disconnect("stream closed")
                log.warning("agent of %s disconnected", cluster)
                self._notify(cluster, False)

    async def _read(self, state: pull.PullState, stream: int,
                    requests: AsyncIterator[pb.AgentMessage]) -> None:
        why = "the agent closed the stream"
        try:
            async for message in requests:
                if state.stream != stream:
                    return
                state.receive(message)
        except ValueError as exc:
            why = f"protocol error: {exc}"
            log.warning("agent of %s: %s", state.name, why)
        except (grpc.aio.AioRpcError, grpc.RpcError, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError):
                raise
            why = "the stream broke"
        if state.stream == stream:
            state.disconnect(why)
            self._notify(state.name, False)
