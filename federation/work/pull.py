"""The hub's side of a pull member: desired state out, results and mirrored state in.

A pull member is an ordinary :class:`~federation.contexts.clusters.Cluster` whose client is
a :class:`WorkClient` instead of an HTTP client (both implement
:class:`~federation.contexts.client.ClusterAPI`). Everything above the client is unchanged,
which is the point: the propagation executor writes copies through
``mc.cluster(name)`` (a :class:`~federation.contexts.multicluster.ClusterWriter`), reads
them from informers (``mc.get/list/view(..., cluster=name)``), the prober decides
readiness, and placement, overrides, status aggregation, failover and deletion cannot
tell a pull member from a push one.

- **Writes** (create, replace, delete) become :class:`Desired` entries of the cluster's
  :class:`PullState`, each with the object's next *generation*, and are streamed to the
  agent, which makes the same call on its API server with its own credentials. The writer
  awaits the agent's :class:`Result`, so a write reports what the member answered (a 409
  is a 409), never success for a write that did not happen. With no agent connected, a
  write fails at once with a retryable :class:`ClusterUnavailable`.
- **Reads**: a list or watch of a resource subscribes the agent to it; the agent streams
  every object of that resource (:class:`Mirror`), then ``Synced``. The informer lists
  and watches the mirror exactly as it would an API server (resourceVersions, 410 when
  the mirror was replaced by a new snapshot after a reconnect, bookmarks at the end of a
  watch), so its handlers see only real changes.
- **Health**: the prober's ``/readyz`` is answered from the agent's heartbeats: no
  stream, or no heartbeat for ``heartbeat_timeout``, is unreachable; a heartbeat saying
  the agent's API server is not ready is a 503.
- **Resume and flow control**: the latest desired entry per object is kept (a newer write
  of the same object replaces an unsent older one), at most ``window`` objects are in
  flight, one generation per object at a time. Memory per pull member is therefore one
  entry per object placed there plus a window, however slow its agent is. On reconnect
  the agent's ``Hello`` lists the generation it applied per object; only newer entries
  are sent, so nothing already applied is applied again.
- **An agent is not trusted with the hub's memory or loop.** Its own certificate is all a
  compromised agent needs to speak, so what it sends is bounded per stream: a ``Result`` is
  taken only for the generation in flight (anything else, a key the hub never sent
  included, is counted and dropped); a ``Hello`` replaces what the previous one said
  (``applied`` holds the keys the last Hello listed plus the keys the hub wrote, never an
  accumulation) and its generations must lie within :data:`MAX_GENERATION`; at most one
  renewal is outstanding and one granted per stream, signed off the loop, and its answer is
  the only control message the agent can cause; heartbeat details and refusal messages are
  clipped and escaped to one line before they reach a log line, condition or Event.
- **Fencing**: a write's permit (leadership) is checked when it is asked for and again
  when its Work is taken from the queue to be handed to gRPC (:meth:`PullState.next_message`,
  with nothing awaited in between), since a Work may wait there for the window across a
  freeze. A Work refused then is never sent; its writer gets the refusal.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from federation.contexts import selectors
from federation.contexts.client import (
    JSON,
    MERGE_PATCH,
    MUTATING_METHODS,
    WRITING_FOR,
    ApiError,
    ClientError,
    ClusterUnavailable,
    Resource,
    WritePermit,
    WriteRefused,
)
from federation.untrusted.text import one_line
from federation.work import identity, wire
from federation.work.proto import work_pb2 as pb
from federation.work.wire import MAX_GENERATION, Key

log = logging.getLogger("federation.work")
DETAIL_LIMIT = 300
"""Characters of an agent's heartbeat detail kept (escaped to one line): enough for an API
server's readiness failure, small enough for a condition message and an Event."""
MESSAGE_LIMIT = 1000
"""Characters of an agent's refusal message kept (the agent itself sends at most 1000)."""
Renewer = Callable[[bytes, identity.Presented], Awaitable[bytes]]
"""Signs a renewal CSR for the cluster and records the new certificate (the work server)."""


@dataclasses.dataclass(frozen=True)
class PullSettings:
    """How the hub serves one pull member."""

    window: int = 64
    """Objects in flight to one agent at most. A member API server takes a few ms per
    write, so 64 keeps an agent busy across a 100 ms WAN round trip while the unanswered
    work the hub holds per agent stays small."""
    heartbeat_interval: float = 2.0
    """Seconds between an agent's heartbeats (sent to it in ``Welcome``): the same period
    as the probes of push members, so both are judged on one schedule."""
    heartbeat_timeout: float = 6.0
    """Three missed heartbeats: a live stream with a hung agent counts as unreachable."""
    write_timeout: float = 30.0
    """Seconds a write waits for the agent's answer before failing (retryably) with the
    work still queued: the propagation worker is freed, and its retry supersedes it."""
    sync_timeout: float = 10.0
    """Seconds a list waits for the agent's snapshot of a newly subscribed resource (the
    multi-cluster client's own read wait is the same)."""

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"work window must be >= 1, not {self.window!r}")
        for name in ("heartbeat_interval", "heartbeat_timeout", "write_timeout",
                     "sync_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"work {name} must be > 0, not {getattr(self, name)!r}")


@dataclasses.dataclass
class Desired:
    """The latest write asked of one object."""

    key: Key
    generation: int
    op: pb.Op.ValueType
    manifest: JSON | None
    uid: str = ""
    gate: Callable[[], None] | None = None
    """The write's permit check, run again as the Work is sent (raises WriteRefused)."""

    def refused(self) -> WriteRefused | None:
        """Why this write may not be sent now, or None."""
        try:
            if self.gate is not None:
                self.gate()
        except WriteRefused as exc:
            return exc
        return None

    def message(self) -> pb.HubMessage:
        return pb.HubMessage(work=pb.Work(
            key=wire.key_to_pb(self.key), generation=self.generation, op=self.op,
            manifest=wire.encode(self.manifest) if self.manifest is not None else b"",
            uid=self.uid))


class Mirror:
    """One resource of the member as the agent reports it: a store with a resourceVersion."""

    def __init__(self, resource: Resource) -> None:
        self.resource = resource
        self.objects: dict[tuple[str, str], JSON] = {}
        self.incoming: dict[tuple[str, str], JSON] | None = {}
        """The snapshot being received (None once synced)."""
        self.epoch = 0
        self.version = 0
        self.synced = asyncio.Event()
        self.watchers: set[asyncio.Queue[JSON | None]] = set()

    @property
    def resource_version(self) -> str:
        return f"{self.epoch}.{self.version}"

    def restart(self) -> None:
        """A new stream: its snapshot replaces what we have once complete."""
        self.incoming = {}
        self.synced.clear()
        self.close_watches()

    def close_watches(self) -> None:
        for queue in self.watchers:
            queue.put_nowait(None)  # the watcher ends and raises ClusterUnavailable

    def observe(self, kind: str, obj: JSON) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        obj.setdefault("kind", self.resource.kind)
        obj.setdefault("apiVersion", self.resource.api_version)
        if self.incoming is not None:
            if kind == "DELETED":
                self.incoming.pop(key, None)
            else:
                self.incoming[key] = obj
            return
        self.version += 1
        if kind == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        event = {"type": kind, "object": obj}
        for queue in self.watchers:
            queue.put_nowait(event)

    def complete(self) -> None:
        if self.incoming is None:
            return
        self.objects, self.incoming = self.incoming, None
        self.epoch += 1
        self.version = 0
        self.synced.set()


class AgentGone(Exception):
    """The agent's stream ended."""


class PullState:
    """Everything the hub keeps for one pull member; see the module docstring."""

    def __init__(self, name: str, settings: PullSettings | None = None,
                 clock: Callable[[], float] = time.monotonic, replica: str = "",
                 replicas: int = 0) -> None:
        self.name = name
        self.settings = settings or PullSettings()
        self.replicas = replicas
        """How many replicas the agent should stream to (the shard count; 0 without)."""
        self.replica = replica
        """This control-plane replica's identity with shards ("" without): its generations
        are its own, and of a Hello it takes only the entries naming it."""
        self.clock = clock
        self.desired: dict[Key, Desired] = {}
        self.applied: dict[Key, int] = {}
        """The generation the agent reported applied (or answered) per object: what the
        last Hello listed, plus what it answered since for keys the hub sent."""
        self.pending: OrderedDict[Key, None] = OrderedDict()
        self.inflight: dict[Key, int] = {}
        self.waiters: dict[tuple[Key, int], asyncio.Future[pb.Result]] = {}
        self.mirrors: dict[Resource, Mirror] = {}
        self.control: deque[pb.HubMessage] = deque()
        """Sent before any work: the hub's own requests (subscriptions, discovery), and at
        most one renewal answer (the only one an agent's message causes)."""
        self.connected = False
        self.stream = 0
        """Number of the current stream (one more per connection)."""
        self.certificate = identity.CertificateRecord()
        """The serials a stream may present (the MemberCluster's record, kept by the
        membership controller and the work server's renewals)."""
        self.peer: identity.Presented | None = None
        """The certificate the current stream presented."""
        self.last_heartbeat: float | None = None
        self.agent_ready = False
        self.agent_detail = "agent never connected"
        self.disconnected_at: float | None = None
        self._wake = asyncio.Event()
        self._requests = itertools.count(1)
        self._discoveries: dict[int, asyncio.Future[pb.DiscoveryAnswer]] = {}
        self._renewal: str = ""
        """This stream's renewal: "" none yet, "asked" until its answer is sent, "granted"
        once a certificate was (one per stream: the agent reconnects with it)."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._ignored_logged = 0
        """The last stream whose first ignored answer was logged (one line per stream)."""
        self.writes_sent = 0
        self.ignored = 0
        """Results dropped: for a key or generation not in flight (the first of a stream is
        logged; an agent that sends one is broken or hostile)."""
        self.renew: Renewer | None = None
        """Signs a renewal CSR for this cluster (set by the server; None: refused)."""

    # -- the stream ----------------------------------------------------------------------

    def busy(self) -> str | None:
        """Why a new stream may not replace the current one (None: it may). A live stream
        (a heartbeat within ``heartbeat_timeout``) is never displaced: the holder of a copy
        of the agent's key could otherwise take its work; a silent one is (an agent that
        reconnected before its old connection timed out)."""
        if not self.connected or self.last_heartbeat is None:
            return None
        silent = self.clock() - self.last_heartbeat
        if silent > self.settings.heartbeat_timeout:
            return None
        return (f"cluster {self.name!r} already has a live agent stream (last heartbeat "
                f"{silent:.0f}s ago): a second one is refused while it lives")

    def connect(self, hello: pb.Hello, peer: identity.Presented | None = None) -> None:
        """A new stream from the agent: resume from what it says it applied. A Hello that
        cannot be used (ValueError) changes nothing."""
        reported = _applied(hello, self.replica)
        if self.connected:
            self.disconnect("replaced by a new stream")
        self.stream += 1
        self.connected = True
        self.peer = peer
        self._renewal = ""
        self.last_heartbeat = self.clock()
        self.agent_ready = True
        self.agent_detail = "agent connected"
        for key in self.desired:  # the hub's own keys keep what it learnt of them
            reported[key] = max(reported.get(key, 0), self.applied.get(key, 0))
        self.applied = reported
        self.pending.clear()
        self.inflight.clear()
        for key, desired in self.desired.items():
            if desired.generation > self.applied.get(key, 0):
                self.pending[key] = None
        self.control = deque([pb.HubMessage(welcome=pb.Welcome(
            window=self.settings.window,
            heartbeat_interval=self.settings.heartbeat_interval, replica=self.replica,
            replicas=self.replicas))])
        for resource, mirror in self.mirrors.items():
            mirror.restart()
            self.control.append(pb.HubMessage(subscribe=pb.Subscribe(
                resource=wire.resource_to_pb(resource))))
        self._wake.set()

    def disconnect(self, why: str, stream: int | None = None) -> None:
        """End the current stream (only if it is still ``stream``, when given)."""
        if not self.connected or (stream is not None and stream != self.stream):
            return
        self.connected = False
        self.disconnected_at = self.clock()
        self.agent_detail = f"agent disconnected: {why}"
        for mirror in self.mirrors.values():
            mirror.close_watches()
        _fail_waiting(self._discoveries, why)
        self._wake.set()

    def abandon(self, why: str) -> int:
        """The control plane is stopping: with no agent connected, nothing awaited will
        be answered before it exits, so every writer waiting is told now (a retryable
        :class:`ClusterUnavailable`, as when ``write_timeout`` passes: the Work stays queued
        and fenced). With an agent connected, answers come: nothing changes. The number of
        writers told."""
        if self.connected:
            return 0
        return _fail_waiting(self.waiters, why)

    def track(self, record: identity.CertificateRecord) -> None:
        """Accept the serials of ``record`` from now on; a live stream whose certificate it
        no longer accepts ends at once (a re-join revokes)."""
        self.certificate = record
        if self.connected and self.peer is not None and not record.accepts(self.peer.serial):
            self.disconnect("its certificate was revoked")

    async def outgoing(self, stream: int) -> AsyncIterator[pb.HubMessage]:
        """What to send on stream ``stream``, in order: control messages first, then work
        within the window. Ends when that stream is no longer the current one."""
        while self.connected and self.stream == stream:
            message = self.next_message()
            if message is not None:
                yield message
                continue
            self._wake.clear()
            await self._wake.wait()

    def next_message(self) -> pb.HubMessage | None:
        if self.control:
            message = self.control.popleft()
            if message.WhichOneof("body") == "renew" and self._renewal == "asked":
                self._renewal = "granted" if message.renew.cert_pem else ""
            return message
        while self.pending and len(self.inflight) < self.settings.window:
            key = next(iter(self.pending))
            if key in self.inflight:  # one generation per object in flight
                self.pending.move_to_end(key)
                if all(k in self.inflight for k in self.pending):
                    return None
                continue
            del self.pending[key]
            desired = self.desired.get(key)
            if desired is None or desired.generation <= self.applied.get(key, 0):
                continue
            refused = desired.refused()  # the last thing before gRPC takes the Work
            if refused is not None:
                self._refuse(desired, refused)
                continue
            self.inflight[key] = desired.generation
            self.writes_sent += 1
            return desired.message()
        return None

    def _refuse(self, desired: Desired, why: WriteRefused) -> None:
        """A write refused as it was to be sent: dropped unsent, its writer told why."""
        del self.desired[desired.key]
        future = self.waiters.pop((desired.key, desired.generation), None)
        if future is not None and not future.done():
            future.set_exception(why)

    def receive(self, message: pb.AgentMessage) -> None:
        """One message from the agent on the current stream."""
        body = message.WhichOneof("body")
        if body == "result":
            self._result(message.result)
        elif body == "observed":
            mirror = self.mirrors.get(wire.resource_from_pb(message.observed.resource))
            if mirror is None:
                raise ValueError("observed an object of a resource not subscribed")
            if message.observed.type not in ("ADDED", "MODIFIED", "DELETED"):
                raise ValueError("observed.type is not ADDED, MODIFIED or DELETED")
            mirror.observe(message.observed.type, wire.decode(message.observed.object))
        elif body == "synced":
            mirror = self.mirrors.get(wire.resource_from_pb(message.synced.resource))
            if mirror is not None:
                mirror.complete()
        elif body == "heartbeat":
            self.last_heartbeat = self.clock()
            self.agent_ready = message.heartbeat.cluster_ready
            self.agent_detail = one_line(message.heartbeat.detail, DETAIL_LIMIT) or \
                "agent connected"
        elif body == "discovery":
            future = self._discoveries.pop(message.discovery.id, None)
            if future is not None and not future.done():
                future.set_result(message.discovery)
        elif body == "renew":
            self._renew(message.renew.csr_pem)
        elif body == "hello":
            raise ValueError("hello sent twice on one stream")
        else:
            raise ValueError("empty agent message")

    def _result(self, result: pb.Result) -> None:
        key = wire.key_from_pb(result.key)
        if self.inflight.get(key) != result.generation:
            # Not what the hub sent on this stream (a key it never sent, a generation not
            # in flight): kept nowhere, so an agent cannot grow the hub with answers.
            if self._ignored_logged != self.stream:
                log.warning("agent of %s answered work the hub did not send (%s generation "
                            "%d): ignored, as is every such answer on this stream", self.name,
                            one_line(str(key), 200), result.generation)
                self._ignored_logged = self.stream
            self.ignored += 1
            return
        del self.inflight[key]
        self.applied[key] = max(self.applied.get(key, 0), result.generation)
        desired = self.desired.get(key)
        if desired is not None and desired.generation > result.generation:
            self.pending[key] = None  # a newer write waited for this one
        elif desired is not None and desired.op == pb.DELETE and result.ok:
            del self.desired[key]  # gone; applied[key] keeps generations increasing
        future = self.waiters.pop((key, result.generation), None)
        if future is not None and not future.done():
            future.set_result(result)
        self._wake.set()

    def _renew(self, csr: bytes) -> None:
        if self._renewal:
            raise ValueError("a renewal request while one is outstanding or after one was "
                             "granted on this stream")
        self._renewal = "asked"
        if self.renew is None or self.peer is None:
            self._answer_renewal(self.stream, pb.RenewAnswer(
                error="renewal is not enabled on this hub"))
            return
        task = asyncio.create_task(self._sign(self.stream, self.renew, csr, self.peer),
                                   name=f"renewal for {self.name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _sign(self, stream: int, renew: Renewer, csr: bytes,
                    peer: identity.Presented) -> None:
        try:
            answer = pb.RenewAnswer(cert_pem=await renew(csr, peer))
        except identity.IdentityError as exc:
            answer = pb.RenewAnswer(error=str(exc))
        except ClientError as exc:
            log.warning("renewal for %s not recorded on the hub: %s", self.name, exc)
            answer = pb.RenewAnswer(error="renewal: the new certificate could not be "
                                          "recorded on the hub; ask again later")
        self._answer_renewal(stream, answer)

    def _answer_renewal(self, stream: int, answer: pb.RenewAnswer) -> None:
        if stream != self.stream or not self.connected:
            return  # that stream is gone; the agent asks again on its next one
        self.control.append(pb.HubMessage(renew=answer))
        self._wake.set()

    # -- what the WorkClient asks ----------------------------------------------------------

    def health(self) -> tuple[bool, bool, str]:
        """(reachable, ready, detail) by the stream and its heartbeats."""
        if not self.connected:
            return False, False, self.agent_detail
        assert self.last_heartbeat is not None
        silent = self.clock() - self.last_heartbeat
        if silent > self.settings.heartbeat_timeout:
            return False, False, f"no heartbeat from the agent for {silent:.0f}s"
        return True, self.agent_ready, self.agent_detail

    def submit(self, key: Key, op: pb.Op.ValueType, manifest: JSON | None, uid: str = "",
               gate: Callable[[], None] | None = None) -> asyncio.Future[pb.Result]:
        """Record a write as the object's next generation; its result arrives in the future."""
        if not self.connected:
            raise ClusterUnavailable(self.name, f"{self.agent_detail}; write not done")
        previous = self.desired.get(key)
        if previous is not None and (previous.op, previous.manifest, previous.uid) == \
                (op, manifest, uid):
            pending = self.waiters.get((key, previous.generation))
            if pending is not None and not pending.done():
                # The very same write is queued or in flight (templates sharing a Namespace
                # each create it): its outcome is this one's too, and it is made once.
                return pending
        generation = max(previous.generation if previous else 0,
                         self.applied.get(key, 0)) + 1
        if generation > MAX_GENERATION + 1:  # cannot happen: Hellos are checked (MAX_GENERATION)
            raise ApiError(self.name, 500, "InternalError", f"{key}: generation out of range")
        if previous is not None and self.inflight.get(key) != previous.generation:
            stale = self.waiters.pop((key, previous.generation), None)
            if stale is not None and not stale.done():  # never sent: superseded, not done
                stale.set_exception(ApiError(self.name, 409, "Conflict",
                                             f"{key}: superseded by a newer write"))
        self.desired[key] = Desired(key, generation, op, manifest, uid, gate)
        self.pending[key] = None
        future: asyncio.Future[pb.Result] = asyncio.get_running_loop().create_future()
        # Its answer may come after the writer gave up waiting: retrieved here, not warned of.
        future.add_done_callback(lambda f: f.cancelled() or f.exception())
        self.waiters[(key, generation)] = future
        self._wake.set()
        return future

    def mirror(self, resource: Resource) -> Mirror:
        mirror = self.mirrors.get(resource)
        if mirror is None:
            mirror = self.mirrors[resource] = Mirror(resource)
            if self.connected:
                self.control.append(pb.HubMessage(subscribe=pb.Subscribe(
                    resource=wire.resource_to_pb(resource))))
                self._wake.set()
        return mirror

    def discover(self, path: str) -> asyncio.Future[pb.DiscoveryAnswer]:
        if not self.connected:
            raise ClusterUnavailable(self.name, f"GET {path}: {self.agent_detail}")
        ident = next(self._requests)
        future: asyncio.Future[pb.DiscoveryAnswer] = \
            asyncio.get_running_loop().create_future()
        self._discoveries[ident] = future
        self.control.append(pb.HubMessage(discovery=pb.DiscoveryRequest(id=ident, path=path)))
        self._wake.set()
        return future


def _applied(hello: pb.Hello, replica: str = "") -> dict[Key, int]:
    """The generations a Hello reports for ``replica``, each within [0, MAX_GENERATION]
    (else ValueError). Another replica's entries are its own numbering, not ours: skipped
    (one generation per object across replicas would let a handover's first write be taken
    for a duplicate; docs/runtime.md, "Pull members with shards")."""
    reported: dict[Key, int] = {}
    for item in hello.applied:
        if item.replica != replica:
            continue
        key = wire.key_from_pb(item.key)
        if not 0 <= item.generation <= MAX_GENERATION:
            raise ValueError(f"applied generation {item.generation} of "
                             f"{one_line(str(key), 200)} is outside 0..{MAX_GENERATION}")
        reported[key] = max(reported.get(key, 0), item.generation)
    return reported


def _answer(cluster: str, result: pb.Result) -> JSON:
    if not result.ok:
        # The agent's words (its API server's, or a compromised agent's) reach conditions
        # and Events: one clipped line. A status outside HTTP's range is a 500.
        status = result.status if 400 <= result.status <= 599 else 500
        raise ApiError(cluster, status, one_line(result.reason, 100),
                       one_line(result.message, MESSAGE_LIMIT))
    return wire.decode(result.object)


class WorkClient:
    """A :class:`~federation.contexts.client.ClusterAPI` whose server is the agent at the
    other end of a work stream.

    It implements the protocol a :class:`~federation.contexts.clusters.Cluster`, its
    informers, discovery, prober and writers use, so they take it unchanged; it holds no
    kubeconfig context, credentials or connection pool (the stream belongs to the work
    server). Verbs a pull member does not serve (patches, subresource writes) are refused
    with a 405 naming the verb, never dropped.
    """

    def __init__(self, state: PullState) -> None:
        self.name = state.name
        self.state = state
        self.fence: WritePermit | None = None
        """Checked when a write is asked for and again as its Work is sent (see
        :meth:`_check_fence`), like the HTTP client's as it sends."""

    async def close(self) -> None:
        """Nothing to close: the stream belongs to the work server."""

    def _check_fence(self, method: str, path: str) -> Callable[[], None]:
        """Check the permit now, and return the check to run again as the Work is sent.

        The second check runs in the stream's task, not the writer's, so it is made for the
        key the write was made for (:data:`~federation.contexts.client.WRITING_FOR`, read
        now): with shards a Work must leave only while this replica owns that key, whether
        or not it leads; checked in the stream's context it would ask the leader's fence
        instead, and a leader would send a key it no longer owns.
        """
        writing_for = WRITING_FOR.get()

        def check() -> None:
            if self.fence is None or method not in MUTATING_METHODS:
                return
            token = WRITING_FOR.set(writing_for)
            try:
                self.fence.check(self.name, method, path)
            finally:
                WRITING_FOR.reset(token)

        check()
        return check

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      timeout: float | None = None) -> JSON:
        """Only discovery GETs are forwarded (to the agent); anything else is refused."""
        if method != "GET" or not _discovery_path(path):
            raise ApiError(self.name, 405, "MethodNotAllowed",
                           f"{method} {path} is not served for a pull member")
        answer = await self._wait(self.state.discover(path), timeout, f"GET {path}")
        if answer.status >= 400:
            raise ApiError(self.name, answer.status, "", f"GET {path} on the member")
        return wire.decode(answer.body)

    async def request_raw(self, path: str, *, params: Mapping[str, Any] | None = None,
                          timeout: float | None = None) -> bytes:
        """The prober's /readyz and /healthz, answered from the agent's heartbeats."""
        if path not in ("/readyz", "/healthz", "/livez"):
            raise ApiError(self.name, 405, "MethodNotAllowed",
                           f"GET {path} is not served for a pull member")
        reachable, ready, detail = self.state.health()
        if not reachable:
            raise ClusterUnavailable(self.name, f"GET {path}: {detail}")
        if not ready:
            raise ApiError(self.name, 503, "ServiceUnavailable", detail)
        return b"ok"

    async def _wait(self, future: asyncio.Future[Any], timeout: float | None, what: str
                    ) -> Any:
        limit = timeout or self.state.settings.write_timeout
        try:
            return await asyncio.wait_for(asyncio.shield(future), limit)
        except TimeoutError:
            raise ClusterUnavailable(self.name, f"{what}: no answer from the agent in "
                                                f"{limit:.0f}s") from None
        except AgentGone as exc:
            raise ClusterUnavailable(self.name, f"{what}: agent disconnected ({exc})"
                                     ) from None

    async def _mirror(self, resource: Resource) -> Mirror:
        mirror = self.state.mirror(resource)
        if not self.state.connected:
            raise ClusterUnavailable(self.name, f"list {resource.plural}: "
                                                f"{self.state.agent_detail}")
        if not mirror.synced.is_set():
            try:
                await asyncio.wait_for(mirror.synced.wait(), self.state.settings.sync_timeout)
            except TimeoutError:
                raise ClusterUnavailable(self.name, f"list {resource.plural}: the agent "
                                                    "sent no snapshot in time") from None
        return mirror

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        mirror = await self._mirror(resource)
        found = mirror.objects.get((namespace or "", name))
        if found is None:
            raise ApiError(self.name, 404, "NotFound", f"{resource.plural} {name} not found")
        return dict(found)

    async def list(self, resource: Resource, namespace: str | None = None,
                   **params: Any) -> JSON:
        mirror = await self._mirror(resource)
        selector = selectors.parse(params.get("labelSelector"))
        items = [o for (ns, _), o in mirror.objects.items()
                 if (not namespace or ns == namespace) and
                 (selector.empty or selector.matches((o.get("metadata") or {}).get("labels")))]
        return {"items": items, "metadata": {"resourceVersion": mirror.resource_version}}

    async def watch(self, resource: Resource, *, namespace: str | None = None,
                    resource_version: str | None = None, timeout_seconds: int = 290,
                    inactivity_timeout: float | None = None,
                    **params: Any) -> AsyncIterator[JSON]:
        mirror = await self._mirror(resource)
        if resource_version != mirror.resource_version:
            # Not the version we are at: a new snapshot replaced it, or changes came since
            # (none are kept to replay): 410, and the informer relists (a cheap local copy).
            raise ApiError(self.name, 410, "Expired", "resourceVersion too old")
        selector = selectors.parse(params.get("labelSelector"))
        queue: asyncio.Queue[JSON | None] = asyncio.Queue()
        mirror.watchers.add(queue)
        deadline = asyncio.get_running_loop().time() + timeout_seconds
        try:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        event = await queue.get()
                except TimeoutError:
                    break
                if event is None:
                    raise ClusterUnavailable(self.name, f"watch {resource.plural}: "
                                                        f"{self.state.agent_detail}")
                obj = event["object"]
                meta = obj.get("metadata") or {}
                if namespace and meta.get("namespace") != namespace:
                    continue
                if not selector.empty and not selector.matches(meta.get("labels")):
                    continue
                yield {"type": event["type"], "object": obj}
            # The objects carry the member's resourceVersions (for optimistic PUTs); the
            # bookmark gives the informer back the mirror's, to watch from next time.
            yield {"type": "BOOKMARK", "object": {"metadata": {
                "resourceVersion": mirror.resource_version}}}
        finally:
            mirror.watchers.discard(queue)

    async def create(self, resource: Resource, body: JSON,
                     namespace: str | None = None) -> JSON:
        namespace = namespace or (body.get("metadata") or {}).get("namespace") or ""
        gate = self._check_fence("POST", resource.path(namespace))
        key = wire.key_of(resource, body)._replace(namespace=namespace or "")
        return await self._write(key, pb.CREATE, body, "", gate)

    async def replace(self, resource: Resource, body: JSON, subresource: str | None = None
                      ) -> JSON:
        if subresource is not None:
            raise ApiError(self.name, 405, "MethodNotAllowed",
                           f"PUT {resource.plural}/{subresource} is not served for a pull "
                           "member (its status comes from the member)")
        key = wire.key_of(resource, body)
        gate = self._check_fence("PUT", resource.path(key.namespace, key.name))
        return await self._write(key, pb.UPDATE, body, "", gate)

    async def apply(self, resource: Resource, body: JSON, field_manager: str, *,
                    force: bool = False, subresource: str | None = None) -> JSON:
        """An update without a resourceVersion: the agent creates or replaces."""
        if subresource is not None:
            raise ApiError(self.name, 405, "MethodNotAllowed",
                           f"apply of {resource.plural}/{subresource} is not served for a "
                           "pull member")
        body = {**body, "metadata": {k: v for k, v in (body.get("metadata") or {}).items()
                                     if k != "resourceVersion"}}
        key = wire.key_of(resource, body)
        gate = self._check_fence("PATCH", resource.path(key.namespace, key.name))
        return await self._write(key, pb.UPDATE, body, "", gate)

    async def patch(self, resource: Resource, name: str, patch: Any, *,
                    namespace: str | None = None, subresource: str | None = None,
                    content_type: str = MERGE_PATCH, **params: Any) -> JSON:
        raise ApiError(self.name, 405, "MethodNotAllowed",
                       f"PATCH {resource.plural} {name} is not served for a pull member; "
                       "write the whole object")

    async def delete(self, resource: Resource, name: str, namespace: str | None = None,
                     **body: Any) -> JSON:
        key = Key(resource, namespace or "", name)
        gate = self._check_fence("DELETE", resource.path(namespace, name))
        uid = str((body.get("preconditions") or {}).get("uid") or "")
        return await self._write(key, pb.DELETE, None, uid, gate)

    async def _write(self, key: Key, op: pb.Op.ValueType, manifest: JSON | None, uid: str,
                     gate: Callable[[], None]) -> JSON:
        future = self.state.submit(key, op, manifest, uid, gate)
        result: pb.Result = await self._wait(future, None, f"write of {key}")
        return _answer(self.name, result)


def _discovery_path(path: str) -> bool:
    parts = [p for p in path.split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return False
    return len(parts) <= (2 if parts[0] == "api" else 3)


def _fail_waiting(futures: dict[Any, asyncio.Future[Any]], why: str) -> int:
    """Fail every future of ``futures`` still waiting with :class:`AgentGone` and forget
    them all; the number failed."""
    failed = 0
    for future in futures.values():
        if not future.done():
            future.set_exception(AgentGone(why))
            failed += 1
    futures.clear()
    return failed
