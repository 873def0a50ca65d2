"""An asyncio client for one cluster, speaking plain dicts.

Objects stay the JSON the API server sent: no model classes on the hot path
(the official client's model deserialisation costs several times the parse).
One :class:`ClusterClient` owns one aiohttp session with a TLS context built
from a :class:`~federation.contexts.kubeconfig.Context`. Every call has a
timeout. There is no client-side rate limit unless one is set (``qps``): the
API servers' Priority and Fairness decides, and says so with 429 and
Retry-After (controller-runtime's default since v0.21, on SIG API Machinery's
advice); when set, the limit is the cluster's own bucket, so one busy cluster
never slows the calls to another. A 429 (or a 5xx carrying
Retry-After) is retried after the delay the server asks for, up to a bound; a
401 renews refreshable credentials (token file, exec plugin) and retries once.
Failures are sorted into kinds a caller can act on:

- :class:`ApiError`: the server answered with an error status (404, 409, 422...).
- :class:`ClusterUnavailable`: no answer (refused, reset, timed out, TLS
  failure). Always retryable; a write that raised it did not happen as far as
  we can tell, and is never reported as a success.
- :class:`WriteRefused` (:class:`NotLeader` for leadership): a write refused
  before it was sent because a :class:`WritePermit` said this process may not
  make it now. Not retryable.

**Fencing.** A client may carry a :class:`WritePermit` (``fence``): for leader
election a :class:`Fence`, permission to write that is valid until a monotonic
deadline which each successful renewal pushes forward (``renew +
renew_deadline``). Permits compose (:class:`AllOf`), so a second kind of
ownership is one more permit, not another code path: with sharding
(:class:`ShardedPermit`) a write made for a key (:data:`WRITING_FOR`) needs the key's
shard, and one made for no key the leader's fence.
Every mutating call (POST, PUT, PATCH, DELETE) consults the permit **as it is
sent**, on every attempt, and raises instead of sending when it says no. The
deadline is compared with a clock reading taken at that moment, never with a
flag a background task keeps: a process frozen (SIGSTOP, a VM pause) past its
lease resumes with its monotonic clock jumped, and refuses at once, before the
elector has even run. Reads are never fenced: caches and probes keep running on
standbys.

"As it is sent" has to be placed with care in aiohttp, because a request waits
in several places after the call begins: the rate limiter, the credentials, a
free connection of the pool (``pool_size``; watches have their own), the TCP and
TLS handshakes, and then the task that writes headers and body. A check before
those waits is what let finding 20 of issue 20 through (two writes of a leader
resumed after 25 s reached the hub 9 s after the takeover). So the permit is
consulted where nothing can wait any more:

- :class:`_FencedConnector` checks once the pool hands over a connection (new
  or reused, handshakes done). From there until the headers are written to the
  socket aiohttp does not yield to the loop, so for a request without a body
  (DELETE) this is the last moment.
- A request with a body has its headers and body written together by a task of
  their own, which the loop runs later (on Python 3.11 not eagerly): a stalled
  callback or a resumed process's backlog may run in between. Its body is a
  :class:`_FencedBody`, which checks again as that task starts writing, before
  any byte (the aiohttp we install holds the headers back to send them with the
  body; one that wrote them at once would leave the server a request without
  its body, which it cannot carry out, never a write).

aiohttp's request tracing could not do this: ``on_request_start`` fires before
the waits, ``on_connection_create_end`` only for new connections (a reused one
is the common case), ``on_request_headers_sent`` before the body task, and
``on_request_chunk_sent`` as bytes are written. What remains is the stretch of
plain Python between the clock reading and ``transport.write`` (microseconds,
no await): a freeze landing exactly there lets that one request out on resume
(issue 22 saw it once in ten frozen leaders: a create received 0.2 s after the
takeover, as the process was resumed). A client cannot close that; only a
server-side fencing token could, and Kubernetes has none for arbitrary writes. It
can say so: each write looks at its permit again once its bytes were handed to
the socket (after the body, or on the loop's next turn for a body-less one), and
a write that finds it closed then is logged as a warning, ":data:`SENT_LATE`".

**What callers ask of a cluster** is said by three protocols, each the one before plus
more: :class:`ObjectReader` (get, list, watch: an informer), :class:`ObjectClient` (and
the writes, and plain requests for discovery and health) and :class:`ClusterAPI` (and
``close`` and the :attr:`~ClusterAPI.fence`: what a cluster holds). Code takes the
narrowest that says what it uses, so another transport (a pull member's work stream, a
test's fake) is a class of its own, never a subclass of the HTTP client.

Every call carries a ``User-Agent`` (``fedctl/<version>``, plus the process's
leader-election identity when the manager sets one) so that the API server's
audit log attributes each write to the process that made it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import json
import logging
import os
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol

import aiohttp
import aiohttp.payload
from aiohttp.abc import AbstractStreamWriter
from aiohttp.connector import Connection
from aiohttp.tracing import Trace

from federation import __version__
from federation.contexts import credentials, kubeconfig, ratelimit

log = logging.getLogger("federation.client")

JSON = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
"""The HTTP methods a :class:`WritePermit` guards (every Kubernetes write verb)."""


def user_agent(identity: str | None = None) -> str:
    """``fedctl/<version>``, with ``(identity)`` when given (kubectl's form: name/version)."""
    return f"fedctl/{__version__} ({identity})" if identity else f"fedctl/{__version__}"


@dataclasses.dataclass(frozen=True)
class Resource:
    """One REST resource (a kind's plural) of one group/version."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [base]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet")
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet")


class ClientError(Exception):
    """Base of the errors a :class:`ClusterClient` raises."""

    def __init__(self, cluster: str, message: str) -> None:
        super().__init__(f"{cluster}: {message}")
        self.cluster = cluster


class ClusterUnavailable(ClientError):
    """The cluster did not answer. Retryable."""

    retryable = True


class CredentialsUnavailable(ClusterUnavailable):
    """No usable credential (an exec plugin failed, a token file is gone). Retryable."""


class WriteRefused(ClientError):
    """A write a :class:`WritePermit` refused: it was not sent.

    Not retryable: this process may not make that write (another one owns it now),
    so retrying here cannot help.
    """

    retryable = False


class NotLeader(WriteRefused):
    """A write refused by the client's :class:`Fence`: this process may no longer write.

    Retrying cannot help a process that lost its lease, and its manager is already
    shutting down. The write was not sent.
    """


class NotShardOwner(WriteRefused):
    """A write refused because this replica does not hold the shard of the key it is
    made for (never held it, or its ownership ended): another replica owns that key."""


WRITING_FOR: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "federation_writing_for", default=None)
"""The key (``namespace/name``) the current task writes for, set by a sharded controller
around each reconcile; tasks started inside inherit it (asyncio copies the context), so a
write carries its key's shard to :class:`ShardedPermit` wherever it is sent from."""


class WritePermit(Protocol):
    """Permission to send writes: leadership (:class:`Fence`), and later shard ownership.

    ``check`` is called as each write is sent (see the module docstring for where
    that is) and must decide on a clock reading it takes itself, without awaiting:
    it either returns, or raises :class:`WriteRefused` saying why.
    """

    def check(self, cluster: str, method: str, path: str) -> None: ...


class AllOf:
    """Several permits, all required (leadership and ownership of the object's shard)."""

    def __init__(self, *permits: WritePermit) -> None:
        self.permits = permits

    def check(self, cluster: str, method: str, path: str) -> None:
        for permit in self.permits:
            permit.check(cluster, method, path)


class ShardedPermit:
    """Shard ownership as a :class:`WritePermit`: a write made for a key (:data:`WRITING_FOR`)
    needs that key's shard, one made for none (a cluster-wide duty) needs ``unkeyed`` (the
    leader's :class:`Fence`).

    ``holds(key)`` returns None when the key may be written now, or why not; it reads the
    clock itself, like the fence, so a replica paused past its lease refuses on resume.
    """

    def __init__(self, holds: Callable[[str], str | None], unkeyed: WritePermit) -> None:
        self.holds = holds
        self.unkeyed = unkeyed

    def check(self, cluster: str, method: str, path: str) -> None:
        key = WRITING_FOR.get()
        if key is None:
            self.unkeyed.check(cluster, method, path)
            return
        why = self.holds(key)
        if why is not None:
            raise NotShardOwner(cluster, f"{method} {path} refused, not sent: {why}")


class Fence:
    """Leadership as a :class:`WritePermit`: valid while the monotonic clock is before
    :attr:`valid_until`.

    Closed when created; :meth:`extend` opens it up to a deadline and
    :meth:`revoke` closes it for good (a revoked fence is never extended again:
    a deposed leader exits rather than leading twice).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.valid_until = float("-inf")
        self.revoked: str | None = None
        """Why the fence was revoked, or None."""

    def extend(self, until: float) -> None:
        """Allow writes until monotonic time ``until`` (never shortens, never after revoke)."""
        if self.revoked is None:
            self.valid_until = max(self.valid_until, until)

    def revoke(self, reason: str) -> None:
        self.revoked = reason
        self.valid_until = float("-inf")

    @property
    def valid(self) -> bool:
        return self.revoked is None and self.clock() < self.valid_until

    def check(self, cluster: str, method: str, path: str) -> None:
        """Raise :class:`NotLeader` unless a write may be sent now."""
        if self.valid:
            return
        if self.revoked is not None:
            why = self.revoked
        elif self.valid_until == float("-inf"):
            why = "not elected"
        else:
            why = f"lease not renewed in time ({self.clock() - self.valid_until:.1f}s late)"
        raise NotLeader(cluster, f"{method} {path} refused, not sent: this process does "
                                 f"not hold leadership ({why})")


class ApiError(ClientError):
    """The API server answered with an error status."""

    def __init__(self, cluster: str, status: int, reason: str, message: str,
                 body: JSON | None = None) -> None:
        super().__init__(cluster, f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.body = body or {}

    @property
    def retryable(self) -> bool:
        """Throttling, server trouble, and optimistic-concurrency conflicts (re-read, retry)."""
        if self.status == 409:
            return self.reason == "Conflict"
        return self.status in (429, 500, 502, 503, 504)


@dataclasses.dataclass(frozen=True)
class ClientSettings:
    request_timeout: float = 10.0
    """Seconds for a whole non-watch call. A healthy apiserver answers in
    milliseconds; 10 s is long enough for a large list on a loaded machine and
    short enough that a frozen member is noticed before a reconcile backs up."""
    connect_timeout: float = 3.0
    """Seconds to open a connection: loopback and LAN connect in microseconds,
    so 3 s only ever fires on a dead or frozen peer."""
    pool_size: int = 32
    """Connections per cluster for calls that end (gets, lists, writes); watches, which
    hold theirs for their life, have a pool of their own without a limit."""
    qps: float | None = None
    """Sustained requests per second to one cluster, or None for no client-side limit
    (the default). API servers from 1.20 on serve API Priority and Fairness, which
    queues and sheds load by flow on the server, fairly between clients, and answers
    429 with Retry-After (honoured below) when a flow is over its share; a client
    bucket only guesses at that capacity. Measured on the local fleet
    (docs/runtime.md), the old 50 qps capped propagation at a fraction of what the
    hub accepts. controller-runtime dropped its default limit for the same reason
    (v0.21, kubernetes-sigs/controller-runtime#3119). Set it (``--kube-api-qps``)
    for an API server without APF or a hub shared with more important clients."""
    burst: int | None = None
    """Requests allowed at once above ``qps``; None with a ``qps`` means twice ``qps``
    (client-go's ratio is 2: 5/10), so a relist of a few kinds does not queue
    behind itself. Only meaningful with ``qps``."""
    max_retries: int = 5
    """Retries of a call the server throttled (429, or 5xx with Retry-After).
    client-go retries 10 times; 5 bounds the worst case near a minute with the cap below."""
    max_retry_after: float = 10.0
    """Longest Retry-After we honour, in seconds: the apiserver asks for 1 s; a
    larger value from a proxy should not stall a worker for minutes."""
    exec_allowlist: credentials.ExecAllowlist | None = None
    """Exec plugin commands this client may run. None (the CLI, on a user's own
    kubeconfig) trusts the kubeconfig as kubectl does; the control plane sets it, since
    its kubeconfigs may come from the hub (see :func:`credentials.check_exec`)."""

    def __post_init__(self) -> None:
        # Refused here, naming the flag, rather than silently ignored or failing later
        # per cluster: a limit the user set is honoured exactly or not accepted.
        if self.qps is None and self.burst is not None:
            raise ValueError("--kube-api-burst needs --kube-api-qps (without a qps there "
                             "is no client-side limit for a burst to apply to)")
        if self.qps is not None and not self.qps > 0:
            raise ValueError(f"--kube-api-qps must be > 0, got {self.qps:g} (leave it unset "
                             "for no client-side limit)")
        if self.burst is not None and self.burst < 1:
            raise ValueError(f"--kube-api-burst must be >= 1, got {self.burst}")


def rate_limit(settings: ClientSettings) -> ratelimit.TokenBucket | None:
    """The bucket ``settings`` ask for (validated by :class:`ClientSettings`), or None."""
    if settings.qps is None:
        return None
    burst = settings.burst if settings.burst is not None else max(int(settings.qps * 2), 1)
    return ratelimit.TokenBucket(settings.qps, burst)


Observer = Callable[[str, str, str, float], None]
"""Called after each call with (cluster, verb, status code or "error", seconds)."""


def ssl_context(context: kubeconfig.Context, cert: bytes | None = None,
                key: bytes | None = None) -> ssl.SSLContext:
    """Verified TLS for the context: its CA (or the system's) and its client certificate."""
    if context.ca_data:
        tls = ssl.create_default_context(cadata=context.ca_data.decode())
    else:
        tls = ssl.create_default_context()
    if context.insecure_skip_tls_verify:
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    cert = cert or context.client_cert_data
    key = key or context.client_key_data
    if cert and key:
        _load_client_certificate(tls, cert, key)
    return tls


def _load_client_certificate(tls: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # ssl only loads key material from files: use a private directory, removed at once.
    with tempfile.TemporaryDirectory(prefix="federation-tls-") as directory:
        cert_path = os.path.join(directory, "client.crt")
        key_path = os.path.join(directory, "client.key")
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        tls.load_cert_chain(cert_path, key_path)


def retry_after(headers: Mapping[str, str], cap: float) -> float:
    """Seconds a throttled call should wait: the Retry-After header (seconds), else 1, capped."""
    try:
        value = float(headers.get("Retry-After", "1"))
    except ValueError:
        value = 1.0
    return min(max(value, 0.0), cap)


Gate = Callable[[str, str], None]
"""Checks that (method, path) may be sent now; raises :class:`WriteRefused` if not."""


class _FencedConnector(aiohttp.TCPConnector):
    """The connection pool, checking a write's permit once the write holds its connection.

    Every wait of the connection's own (a free slot in the pool, DNS, TCP, TLS) is over
    when :meth:`connect` returns, and aiohttp writes a body-less request's headers
    before it yields to the loop again, so the check here is the last thing before a
    DELETE's bytes reach the socket. Requests with a body are checked once more by
    :class:`_FencedBody`.
    """

    def __init__(self, gate: Gate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._gate = gate

    async def connect(self, req: aiohttp.ClientRequest, traces: list[Trace],
                      timeout: aiohttp.ClientTimeout) -> Connection:
        connection = await super().connect(req, traces, timeout)
        try:
            self._gate(req.method, req.url.raw_path)
        except BaseException:
            connection.release()  # unused: back to the pool for the next caller
            raise
        if req.method in MUTATING_METHODS and not isinstance(req.body, _FencedBody):
            # Its headers are written before this task next yields, so a callback queued
            # now runs after they went out: the check, looked at again once sent.
            asyncio.get_running_loop().call_soon(
                _report_if_sent_late, self._gate, req.method, req.url.raw_path)
        return connection


class _FencedBody(aiohttp.payload.BytesPayload):
    """A request body that checks the write's permit before its first byte is written.

    aiohttp writes a request's body (with the headers it held back) in a task it
    schedules after taking the connection; on Python 3.11 that task starts on a later
    turn of the loop, so anything ready meanwhile runs first. A refusal here raises out
    of that task before anything is written; aiohttp then closes the connection and
    reports a connection error, which :meth:`ClusterClient._send` turns back into
    :attr:`refused`.
    """

    def __init__(self, value: bytes, gate: Gate, method: str, path: str,
                 content_type: str) -> None:
        super().__init__(value, content_type=content_type)
        self._gate = gate
        self._method, self._path = method, path
        self.refused: WriteRefused | None = None

    def _check(self) -> None:
        try:
            self._gate(self._method, self._path)
        except WriteRefused as exc:
            self.refused = exc
            raise

    async def write(self, writer: AbstractStreamWriter) -> None:
        self._check()
        await super().write(writer)
        self._recheck()

    async def write_with_length(self, writer: AbstractStreamWriter,
                                content_length: int | None) -> None:
        self._check()
        await super().write_with_length(writer, content_length)
        self._recheck()

    def _recheck(self) -> None:
        """The permit, looked at again once the body was handed to the socket."""
        _report_if_sent_late(self._gate, self._method, self._path)


SENT_LATE = "may have been sent after its write permit ended"
"""The words of the warning :func:`_report_if_sent_late` logs (tests look for them)."""


def _report_if_sent_late(gate: Gate, method: str, path: str) -> None:
    """Warn when a write that passed its last check finds the permit closed once sent.

    This is the one window a client cannot close (the module docstring's last
    paragraph): the process was paused between the clock reading and the socket write,
    and on resume the write went out, possibly after another leader took over. It is
    not refused (it is gone); it is said, so that an operator, and the e2e test that
    freezes leaders, can tell it from a fence that let a write through. A pause just
    after the socket write and before this look reads the same, hence "may".
    """
    try:
        gate(method, path)
    except WriteRefused as exc:
        log.warning("%s: %s %s %s (the process was paused after its last check, before or "
                    "after the socket write; docs/runtime.md, 'Leader election')",
                    exc.cluster, method, path, SENT_LATE)


# -- what a caller may ask of one cluster --------------------------------------------------


class ObjectReader(Protocol):
    """Reads of one cluster's objects: what an informer needs (list, then watch from there)."""

    @property
    def name(self) -> str:
        """The cluster's name, which every error this client raises starts with."""
        ...

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        ...

    async def list(self, resource: Resource, namespace: str | None = None, *,
                   request_timeout: float | None = None, silence_timeout: float | None = None,
                   **params: Any) -> JSON:
        """``params`` are the query; ``request_timeout`` (seconds, the client's own when
        None) bounds this one answer, for a list that comes whole; such an answer fails
        sooner if the server sends nothing for ``silence_timeout`` (the client's own
        bound when None), before its first byte or between two."""
        ...

    def watch(self, resource: Resource, *, namespace: str | None = None,
              resource_version: str | None = None, timeout_seconds: int = 290,
              inactivity_timeout: float | None = None,
              **params: Any) -> AsyncIterator[JSON]: ...


class ObjectClient(ObjectReader, Protocol):
    """Reads and writes of one cluster's objects, plus ``request`` and ``request_raw`` for
    paths no verb covers (discovery, health): what the pull agent, the simulator and the
    installers need."""

    async def create(self, resource: Resource, body: JSON,
                     namespace: str | None = None) -> JSON: ...

    async def replace(self, resource: Resource, body: JSON, subresource: str | None = None
                      ) -> JSON: ...

    async def patch(self, resource: Resource, name: str, patch: Any, *,
                    namespace: str | None = None, subresource: str | None = None,
                    content_type: str = MERGE_PATCH, **params: Any) -> JSON: ...

    async def apply(self, resource: Resource, body: JSON, field_manager: str, *,
                    force: bool = False, subresource: str | None = None) -> JSON: ...

    async def delete(self, resource: Resource, name: str, namespace: str | None = None,
                     **body: Any) -> JSON: ...

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      timeout: float | None = None) -> JSON: ...

    async def request_raw(self, path: str, *, params: Mapping[str, Any] | None = None,
                          timeout: float | None = None) -> bytes: ...


class ClusterAPI(ObjectClient, Protocol):
    """One engaged cluster's API, whatever carries it: what a
    :class:`~federation.contexts.clusters.Cluster` holds and everything engaged on it uses
    (informers, discovery, the prober, the multi-cluster client's writers).

    :class:`ClusterClient` speaks HTTP to an API server;
    :class:`federation.work.pull.WorkClient` relays to a pull member's agent. Either must
    check :attr:`fence` as each write is sent and raise :class:`WriteRefused` instead of
    sending when it says no, and report failures as the errors of this module (a write that
    did not happen is never a success).
    """

    fence: WritePermit | None
    """The permit every mutating call must pass (the manager sets leadership's)."""

    async def close(self) -> None: ...


class ClusterClient:
    """Calls to one cluster's API server over HTTP (a :class:`ClusterAPI`)."""

    def __init__(self, context: kubeconfig.Context, settings: ClientSettings | None = None,
                 *, observer: Observer | None = None,
                 trace_configs: Sequence[aiohttp.TraceConfig] = ()) -> None:
        self.context = context
        self.name = context.name
        self.settings = settings or ClientSettings()
        self.observer = observer
        self.trace_configs = list(trace_configs)
        """aiohttp request tracing for diagnostics (sessions made after a change use it)."""
        self.fence: WritePermit | None = None
        """When set, every mutating call must pass its ``check`` as it is sent (leader
        election's :class:`Fence`; :class:`AllOf` for more than one kind of ownership)."""
        self.user_agent = user_agent()
        self.bucket = rate_limit(self.settings)
        """The client-side limit, or None (the default: the server's APF decides)."""
        try:
            self.credentials = credentials.for_context(context,
                                                        self.settings.exec_allowlist)
        except credentials.CredentialsError as exc:
            raise kubeconfig.KubeconfigError(str(exc)) from None
        self._tls = self._make_tls(None, None)
        self._tls_identity: tuple[bytes | None, bytes | None] = (None, None)
        self._session: aiohttp.ClientSession | None = None
        self._watch_session: aiohttp.ClientSession | None = None
        self._retired: list[aiohttp.ClientSession] = []

    def _make_tls(self, cert: bytes | None, key: bytes | None) -> ssl.SSLContext:
        try:
            return ssl_context(self.context, cert, key)
        except (ssl.SSLError, ValueError) as exc:
            raise kubeconfig.KubeconfigError(
                f"context {self.context.name!r}: bad certificate or key ({exc})") from None

    @property
    def session(self) -> aiohttp.ClientSession:
        """Calls that end (gets, lists, writes): at most ``pool_size`` connections."""
        if self._session is None or self._session.closed:
            self._session = self._new_session(self.settings.pool_size)
        return self._session

    @property
    def watch_session(self) -> aiohttp.ClientSession:
        """Watches, each holding its connection for its life: a pool of their own, so
        however many kinds and namespaces are followed, a get or a write never waits for
        a connection a watch holds (one more informer than ``pool_size`` made every
        other call to the hub time out)."""
        if self._watch_session is None or self._watch_session.closed:
            self._watch_session = self._new_session(0)  # aiohttp: 0 is no limit
        return self._watch_session

    def _new_session(self, limit: int) -> aiohttp.ClientSession:
        connector = _FencedConnector(self._gate, ssl=self._tls, limit=limit)
        auth = None
        if self.context.username and self.context.password:
            auth = aiohttp.BasicAuth(self.context.username, self.context.password)
        return aiohttp.ClientSession(connector=connector, auth=auth, json_serialize=json.dumps,
                                     trace_configs=self.trace_configs or None)

    def _gate(self, method: str, path: str) -> None:
        """Raise :class:`WriteRefused` unless ``method path`` may be sent now."""
        if self.fence is not None and method in MUTATING_METHODS:
            self.fence.check(self.name, method, path)

    def _body(self, method: str, path: str, data: Any, content_type: str | None) -> Any:
        """The data to send: a write's body checks the permit again as it is written."""
        if data is None or method not in MUTATING_METHODS:
            return data
        value = data.encode() if isinstance(data, str) else data
        return _FencedBody(value, self._gate, method, path, content_type or "application/json")

    async def close(self) -> None:
        for session in [*self._retired, self._session, self._watch_session]:
            if session is not None:
                await session.close()
        self._retired.clear()

    async def _headers(self) -> dict[str, str]:
        """Headers carrying the current credential; a new client certificate renews the TLS."""
        try:
            credential = await self.credentials.get()
        except credentials.CredentialsError as exc:
            raise CredentialsUnavailable(self.name, str(exc)) from None
        identity = (credential.client_cert, credential.client_key)
        if credential.client_cert and identity != self._tls_identity:
            try:
                self._tls = self._make_tls(*identity)
            except kubeconfig.KubeconfigError as exc:
                raise CredentialsUnavailable(self.name, str(exc)) from None
            self._tls_identity = identity
            for session in (self._session, self._watch_session):
                if session is not None:
                    self._retired.append(session)  # in-flight watches keep it until close
            self._session = self._watch_session = None
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if self.context.disable_compression:
            headers["Accept-Encoding"] = "identity"  # else aiohttp's own: gzip, deflate
        if credential.token:
            headers["Authorization"] = f"Bearer {credential.token}"
        return headers

    @contextlib.asynccontextmanager
    async def _send(self, method: str, path: str, *, params: Mapping[str, Any] | None,
                    data: Any, content_type: str | None, timeout: aiohttp.ClientTimeout,
                    stream: bool = False) -> AsyncIterator[aiohttp.ClientResponse]:
        """Open one call, after the rate limit; renews credentials on 401 and waits out 429.

        The observer sees the time to the response headers, so a watch counts
        as quickly as any other call rather than for the life of its stream.
        """
        reauthenticated = False
        retries = 0
        while True:
            if self.bucket is not None:
                await self.bucket.acquire()
            headers = await self._headers()
            if content_type:
                headers["Content-Type"] = content_type
            # Refused early, no connection is opened; the checks that close the window run
            # later, as the request is sent (_FencedConnector, _FencedBody).
            self._gate(method, path)
            body = self._body(method, path, data, content_type)
            started = time.monotonic()
            try:
                session = self.watch_session if stream else self.session
                async with session.request(
                    method, self.context.server + path, params=_params(params), data=body,
                    headers=headers, timeout=timeout,
                ) as response:
                    self._observe(method, str(response.status), started)
                    if (response.status == 401 and self.credentials.refreshable
                            and not reauthenticated):
                        reauthenticated = True
                        self.credentials.invalidate()
                        continue
                    if _throttled(response) and retries < self.settings.max_retries:
                        retries += 1
                        delay = retry_after(response.headers, self.settings.max_retry_after)
                        log.info("%s: %s %s throttled (%s); retry %d in %.1fs", self.name,
                                 method, path, response.status, retries, delay)
                        await asyncio.sleep(delay)
                        continue
                    yield response
                    return
            except (aiohttp.ClientError, TimeoutError, ssl.SSLError, OSError) as exc:
                if isinstance(body, _FencedBody) and body.refused is not None:
                    raise body.refused from None  # not sent: aiohttp only saw a failed write
                self._observe(method, "error", started)
                raise ClusterUnavailable(self.name, f"{method} {path}: {_describe(exc)}"
                                         ) from None

    def _observe(self, method: str, code: str, started: float) -> None:
        if self.observer is not None:
            self.observer(self.name, method, code, time.monotonic() - started)

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      timeout: float | None = None, silence: float | None = None) -> JSON:
        """One call; the decoded JSON answer, or :class:`ApiError`/:class:`ClusterUnavailable`.
        ``timeout`` and ``silence``: :meth:`_call_timeout`."""
        data = None
        if body is not None:
            data = body if isinstance(body, (str, bytes)) else json.dumps(body)
        client_timeout = self._call_timeout(timeout, silence)
        async with self._send(method, path, params=params, data=data,
                              content_type=content_type if body is not None else None,
                              timeout=client_timeout) as response:
            try:
                raw = await response.read()
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise ClusterUnavailable(self.name, f"{method} {path}: {_describe(exc)}"
                                         ) from None
            return self._decode(response.status, raw)

    def _call_timeout(self, timeout: float | None, silence: float | None = None
                      ) -> aiohttp.ClientTimeout:
        """The client's own bound on a whole call, or ``timeout`` for one answer allowed to
        take longer (a list that comes whole). Such an answer must still keep coming: a
        peer silent for ``silence`` seconds (the client's own bound when None), before its
        first byte or between two, fails the call then, so by default a longer bound never
        makes a frozen server cost more than a short call does."""
        own = self.settings.request_timeout
        total = timeout or own
        return aiohttp.ClientTimeout(total=total, sock_connect=self.settings.connect_timeout,
                                     sock_read=(silence or own) if total > own else None)

    async def request_raw(self, path: str, *, params: Mapping[str, Any] | None = None,
                          timeout: float | None = None) -> bytes:
        """GET the undecoded body of a successful answer (benchmarks, probes)."""
        client_timeout = self._call_timeout(timeout)
        async with self._send("GET", path, params=params, data=None, content_type=None,
                              timeout=client_timeout) as response:
            raw = await response.read()
            if response.status >= 400:
                self._decode(response.status, raw)
            return raw

    def _decode(self, status: int, raw: bytes) -> JSON:
        try:
            payload = json.loads(raw) if raw else {}
        except ValueError:
            payload = {"message": raw[:200].decode(errors="replace")}
        if status >= 400:
            if not isinstance(payload, dict):
                payload = {}
            raise ApiError(self.name, status, str(payload.get("reason", "")),
                           str(payload.get("message", "")), payload)
        return payload if isinstance(payload, dict) else {"items": payload}

    # -- verbs -------------------------------------------------------------------------

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        return await self.request("GET", resource.path(namespace, name))

    async def list(self, resource: Resource, namespace: str | None = None, *,
                   request_timeout: float | None = None, silence_timeout: float | None = None,
                   **params: Any) -> JSON:
        return await self.request("GET", resource.path(namespace), params=params,
                                  timeout=request_timeout, silence=silence_timeout)

    async def create(self, resource: Resource, body: JSON,
                     namespace: str | None = None) -> JSON:
        namespace = namespace or body.get("metadata", {}).get("namespace")
        return await self.request("POST", resource.path(namespace), body=body)

    async def replace(self, resource: Resource, body: JSON, subresource: str | None = None
                      ) -> JSON:
        meta = body["metadata"]
        return await self.request("PUT", resource.path(meta.get("namespace"), meta["name"],
                                                       subresource), body=body)

    async def patch(self, resource: Resource, name: str, patch: Any, *,
                    namespace: str | None = None, subresource: str | None = None,
                    content_type: str = MERGE_PATCH, **params: Any) -> JSON:
        return await self.request("PATCH", resource.path(namespace, name, subresource),
                                  body=patch, content_type=content_type, params=params)

    async def apply(self, resource: Resource, body: JSON, field_manager: str, *,
                    force: bool = False, subresource: str | None = None) -> JSON:
        """Server-side apply of a full intent (``application/apply-patch+yaml``, JSON is YAML)."""
        meta = body["metadata"]
        return await self.patch(resource, meta["name"], body, namespace=meta.get("namespace"),
                                subresource=subresource, content_type=APPLY_PATCH,
                                fieldManager=field_manager, force="true" if force else None)

    async def delete(self, resource: Resource, name: str, namespace: str | None = None,
                     **body: Any) -> JSON:
        return await self.request("DELETE", resource.path(namespace, name), body=body or None)

    async def watch(self, resource: Resource, *, namespace: str | None = None,
                    resource_version: str | None = None, timeout_seconds: int = 290,
                    inactivity_timeout: float | None = None,
                    **params: Any) -> AsyncIterator[JSON]:
        """Watch events as dicts (``{"type", "object"}``); ends when the server closes.

        ``inactivity_timeout`` bounds the silence between two chunks: a stream that
        says nothing for that long (a frozen server, a dead NAT entry) raises
        :class:`ClusterUnavailable` instead of hanging.
        """
        query = {"watch": "1", "allowWatchBookmarks": "true",
                 "timeoutSeconds": str(timeout_seconds), **params}
        if resource_version:
            query["resourceVersion"] = resource_version
        silence = inactivity_timeout if inactivity_timeout is not None else timeout_seconds + 30
        client_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.settings.connect_timeout, sock_read=silence,
        )
        path = resource.path(namespace)
        async with self._send("GET", path, params=query, data=None, content_type=None,
                              timeout=client_timeout, stream=True) as response:
            if response.status >= 400:
                self._decode(response.status, await response.read())
            try:
                async for line in _lines(response.content):
                    yield json.loads(line)
            except (aiohttp.ClientError, TimeoutError, ssl.SSLError, OSError) as exc:
                raise ClusterUnavailable(self.name, f"watch {path}: {_describe(exc)}"
                                         ) from None
            except RuntimeError as exc:
                # aiohttp raises a bare RuntimeError("Connection closed.") when the
                # connection goes away between reads: the same as any dropped stream.
                raise ClusterUnavailable(self.name, f"watch {path}: {exc}") from None


def _throttled(response: aiohttp.ClientResponse) -> bool:
    return response.status == 429 or (response.status >= 500
                                       and "Retry-After" in response.headers)


async def _lines(stream: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """Split a stream into lines without a limit on line length (objects can be large)."""
    buffer = b""
    async for chunk in stream.iter_any():
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line, buffer = buffer[:end], buffer[end + 1:]
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


def _params(params: Mapping[str, Any] | None) -> dict[str, str] | None:
    if not params:
        return None
    return {key: str(value) for key, value in params.items() if value is not None}


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]


@contextlib.asynccontextmanager
async def connect(context: kubeconfig.Context,
                  settings: ClientSettings | None = None) -> AsyncIterator[ClusterClient]:
    client = ClusterClient(context, settings)
    try:
        yield client
    finally:
        await client.close()
