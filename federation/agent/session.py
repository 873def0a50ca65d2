"""The agent's side of one work stream, without the transport (tests drive it directly).

:class:`Worker` lives as long as the agent: its informers on the agent's own cluster (one
per resource the hub subscribed to) keep watching while the hub is away, and the applied
generations survive in :class:`~federation.agent.applied.Applied`. Each stream gets a
fresh :class:`Session` (its outbox) from :meth:`Worker.session`.

- ``Work``: a generation at or below the applied one is a duplicate (a redelivery after a
  reconnect): answered at once, nothing written. Otherwise the same call push mode would
  make (POST, PUT with the member's resourceVersion, DELETE with the UID precondition) is
  made with the agent's credentials; the answer, success or the API server's refusal, is
  the ``Result``, and its generation is recorded. A member API server that does not answer
  is a 503 and is *not* recorded: the hub's retry is a new generation.
- ``Subscribe``: the informer's objects (once listed) are sent as ``Observed ADDED``, then
  ``Synced``, then every change. The snapshot is taken in one step after the list, so no
  change falls between it and the live events.
- Heartbeats every ``heartbeat_interval`` carry the agent's own probe of its API server.
- A sharded control plane (``fedctl run --shards``) has the agent stream to each replica:
  a :class:`Session` per stream, each subscribed, snapshotted and heartbeated on its own;
  each replica's Work is compared with that replica's generations (the ``Welcome`` names
  it). The informers are shared: one watch per resource however many streams.
- While no stream is open (the hub is away), a change to an object the agent keeps (one
  it created or updated last) that takes it away from the last desired manifest, or its
  deletion, is undone (:meth:`Worker.reassert`): the cluster stays at the last desired
  state. With a stream open this is the control plane's job, as for push members. A
  Secret kept only as a digest (the agent restarted meanwhile: its data is never on disk)
  is reported, not restored.
- When the hub says this cluster is no member (NOT_FOUND: its MemberCluster was deleted
  or left pull mode), the hub is not "away": the agent keeps nothing any more
  (:meth:`Worker.leave`), so the member's admin may delete or change any copy.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable
from typing import Any

from federation.agent import applied as applied_
from federation.agent.applied import Applied
from federation.contexts import cache, health
from federation.contexts.client import JSON, ApiError, ClientError, ObjectClient, Resource
from federation.hub import manifests
from federation.work import wire
from federation.work.proto import work_pb2 as pb
from federation.work.wire import Key

log = logging.getLogger("federation.agent")
APPLY_CONCURRENCY = 8
"""Writes the agent makes at once: enough to keep a member API server busy, few enough
that the agent never floods it (the hub's window is the bound on what waits)."""


class Stats:
    """Counters for /metrics and tests."""

    def __init__(self) -> None:
        self.writes: dict[str, int] = {}
        self.duplicates = 0
        self.refused = 0

    def wrote(self, verb: str) -> None:
        self.writes[verb] = self.writes.get(verb, 0) + 1


class Session:
    """One stream's outbox; closed when the stream ends."""

    def __init__(self) -> None:
        self.outbox: asyncio.Queue[pb.AgentMessage | None] = asyncio.Queue()
        self.closed = False
        self.synced: set[Resource] = set()
        self.heartbeat_interval = 2.0
        self.renewing = False
        """A renewal was asked for on this stream and not answered yet (one at a time)."""
        self.renews_elsewhere = False
        """This stream's replica said another one records this cluster's renewals."""
        self.replica = ""
        """The control-plane replica this stream reached (its Welcome says; "" without
        shards): the generations of its Work are compared with that replica's."""

    def send(self, message: pb.AgentMessage) -> None:
        if not self.closed:
            self.outbox.put_nowait(message)

    def close(self) -> None:
        self.closed = True
        self.outbox.put_nowait(None)


class Worker:
    """Applies work to the agent's cluster and mirrors subscribed resources back."""

    def __init__(self, cluster: str, client: ObjectClient, applied: Applied,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cluster = cluster
        self.client = client
        self.applied = applied
        self.clock = clock
        self.informers: dict[Resource, cache.Informer] = {}
        self.stats = Stats()
        self.sessions: list[Session] = []
        """The open streams' sessions: one, or with a sharded control plane one per replica
        (each replica's writes, mirrors and heartbeats travel on its own)."""
        self.cluster_ready = False
        self.cluster_detail = "not probed yet"
        self.renewal: Callable[[Session, pb.RenewAnswer], None] | None = None
        self.left: str | None = None
        """Why the hub said this cluster is no member (None: it did not, or accepted a
        stream since)."""
        self._limit = asyncio.Semaphore(APPLY_CONCURRENCY)
        self._tasks: set[asyncio.Task[Any]] = set()

    def hello(self) -> pb.AgentMessage:
        return pb.AgentMessage(hello=pb.Hello(
            cluster_name=self.cluster, agent_version="federation-agent/1",
            applied=[pb.Applied(key=wire.key_to_pb(k), generation=g, replica=replica)
                     for replica, table in (("", self.applied.generations),
                                            *self.applied.replicas.items())
                     for k, g in table.items()]))

    @property
    def session_(self) -> Session | None:
        """The first open session (None: the hub is away)."""
        return self.sessions[0] if self.sessions else None

    @session_.setter
    def session_(self, session: Session | None) -> None:
        self.sessions = [session] if session is not None else []

    def session(self) -> Session:
        """A new stream's session, beside the others (one per control-plane replica)."""
        session = Session()
        self.sessions.append(session)
        return session

    def end_session(self, session: Session | None = None) -> None:
        """Close ``session`` (None: every one)."""
        for ended in [s for s in self.sessions if session is None or s is session]:
            ended.close()
            self.sessions.remove(ended)

    def _spawn(self, coroutine: Any, name: str) -> None:
        task = asyncio.create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for informer in self.informers.values():
            informer.handlers.clear()

    # -- hub messages --------------------------------------------------------------------

    def handle(self, session: Session, message: pb.HubMessage) -> None:
        body = message.WhichOneof("body")
        if body == "work":
            self._spawn(self._work(session, message.work), "apply")
        elif body == "subscribe":
            self._subscribe(session, wire.resource_from_pb(message.subscribe.resource))
        elif body == "welcome":
            session.heartbeat_interval = message.welcome.heartbeat_interval or 2.0
            session.replica = message.welcome.replica
            self.applied.reached(session.replica)
        elif body == "discovery":
            self._spawn(self._discover(session, message.discovery), "discovery")
        elif body == "renew":
            if self.renewal is not None:
                self.renewal(session, message.renew)
        else:
            raise ValueError(f"unexpected hub message {body!r}")

    async def _work(self, session: Session, work: pb.Work) -> None:
        result = await self.apply(work, session.replica)
        session.send(pb.AgentMessage(result=result))

    async def apply(self, work: pb.Work, replica: str = "") -> pb.Result:
        """One Work message of ``replica`` applied (or recognised as a duplicate of that
        replica's: the generations are each replica's own): its Result."""
        key = wire.key_from_pb(work.key)
        answer = pb.Result(key=work.key, generation=work.generation)
        if work.generation <= self.applied.get(key, replica):
            self.stats.duplicates += 1
            answer.ok = answer.duplicate = True
            live = self._live(key)
            if live is not None and work.op != pb.DELETE:
                answer.object = wire.encode(live)
            return answer
        try:
            async with self._limit:
                written = await self._write(key, work)
        except ApiError as exc:
            self.stats.refused += 1
            answer.status, answer.reason = exc.status, exc.reason
            answer.message = str(exc).removeprefix(f"{self.client.name}: ")[:1000]
            self.applied.set(key, work.generation,  # answered: the hub's retry is newer
                             replica=replica)
            return answer
        except (ClientError, ValueError) as exc:
            answer.status, answer.reason = 503, "ServiceUnavailable"
            answer.message = f"the agent could not write: {exc}"[:1000]
            return answer
        self.applied.set(key, work.generation,
                         manifest=wire.decode(work.manifest) if work.op != pb.DELETE else None,
                         deleted=work.op == pb.DELETE, replica=replica)
        answer.ok = True
        answer.object = wire.encode(cache.strip(written))
        return answer

    def _live(self, key: Key) -> JSON | None:
        informer = self.informers.get(key.resource)
        return informer.store.get(key.namespace, key.name) if informer else None

    async def _write(self, key: Key, work: pb.Work) -> JSON:
        resource = key.resource
        if work.op == pb.DELETE:
            body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1",
                                    "propagationPolicy": "Background"}
            if work.uid:
                body["preconditions"] = {"uid": work.uid}
            self.stats.wrote("delete")
            return await self.client.delete(resource, key.name, key.namespace or None, **body)
        manifest = wire.decode(work.manifest)
        meta = manifest.get("metadata") or {}
        if meta.get("name") != key.name or (meta.get("namespace") or "") != key.namespace:
            raise ValueError(f"work for {key} carries a manifest of another object")
        if work.op == pb.CREATE:
            self.stats.wrote("create")
            return await self.client.create(resource, manifest, key.namespace or None)
        if work.op != pb.UPDATE:
            raise ValueError(f"work op {work.op} is not CREATE, UPDATE or DELETE")
        if not meta.get("resourceVersion"):  # an apply: create or replace what is there
            live = self._live(key)
            if live is None:  # not subscribed (yet): ask the server
                try:
                    live = await self.client.get(resource, key.name, key.namespace or None)
                except ApiError as exc:
                    if exc.status != 404:
                        raise
            if live is None:
                self.stats.wrote("create")
                return await self.client.create(resource, manifest, key.namespace or None)
            manifest["metadata"] = {**meta, "resourceVersion":
                                    (live.get("metadata") or {}).get("resourceVersion")}
        self.stats.wrote("update")
        return await self.client.replace(resource, manifest)

    async def _discover(self, session: Session, request: pb.DiscoveryRequest) -> None:
        answer = pb.DiscoveryAnswer(id=request.id)
        parts = [p for p in request.path.split("/") if p]
        if not parts or parts[0] not in ("api", "apis") or \
                len(parts) > (2 if parts[0] == "api" else 3):
            answer.status = 403  # only discovery documents are served to the hub
        else:
            try:
                answer.body = wire.encode(await self.client.request("GET", request.path))
                answer.status = 200
            except ApiError as exc:
                answer.status = exc.status
            except ClientError:
                answer.status = 503
        session.send(pb.AgentMessage(discovery=answer))

    # -- subscriptions -------------------------------------------------------------------

    def _subscribe(self, session: Session, resource: Resource) -> None:
        informer = self.informers.get(resource)
        if informer is None:
            informer = cache.Informer(self.client, resource, cluster=self.cluster)
            informer.add_handler(lambda event: self._changed(event))
            self.informers[resource] = informer
            self._spawn(informer.run(), f"informer {resource.plural}")
        self._spawn(self._snapshot(session, informer), f"snapshot {resource.plural}")

    async def _snapshot(self, session: Session, informer: cache.Informer) -> None:
        await informer.synced.wait()
        if session.closed:
            return
        ref = wire.resource_to_pb(informer.resource)
        # No await from here on: the snapshot and the start of live events are one step.
        for obj in list(informer.store.objects.values()):
            session.send(pb.AgentMessage(observed=pb.Observed(
                resource=ref, type="ADDED", object=wire.encode(obj))))
        session.send(pb.AgentMessage(synced=pb.Synced(resource=ref)))
        session.synced.add(informer.resource)

    def leave(self, why: str) -> None:
        """The hub says this cluster is no member: keep (and so put back) nothing more."""
        if self.left is None:
            log.warning("the hub says %s is not a member (%s): its objects are no longer "
                        "kept or restored here", self.cluster, why)
        self.left = why
        self.applied.forget()

    def _changed(self, event: cache.Event) -> None:
        if not self.sessions:
            key = wire.key_of(event.resource, event.obj)
            if key in self.applied.manifests:
                self._spawn(self.reassert(key), f"reassert {key}")
            elif key in self.applied.withheld:
                self._withheld(key)
            return
        observed: pb.AgentMessage | None = None
        for session in self.sessions:
            if event.resource not in session.synced:
                continue  # that stream's next snapshot carries it
            observed = observed or pb.AgentMessage(observed=pb.Observed(
                resource=wire.resource_to_pb(event.resource), type=event.type,
                object=wire.encode(event.obj)))
            session.send(observed)

    def _withheld(self, key: Key) -> None:
        """A Secret kept as a digest only drifted: say so (its data is not here to restore)."""
        live = self._live(key)
        if live is not None and applied_.data_digest(live) == self.applied.withheld.get(key):
            return
        log.warning("hub away: %s %s in the member and is not restored (its data is not "
                    "kept on disk; the hub restores it when it is back)", key,
                    "changed" if live is not None else "was deleted")

    async def reassert(self, key: Key) -> str | None:
        """Put ``key`` back to its last desired manifest if it drifted or was deleted while
        the hub is away; what was done (None: nothing was needed or the hub is back)."""
        desired = self.applied.manifests.get(key)
        if desired is None or self.sessions:
            return None
        live = self._live(key)
        try:
            async with self._limit:
                if live is None:
                    self.stats.wrote("reassert")
                    await self.client.create(key.resource, copy.deepcopy(desired),
                                             key.namespace or None)
                    log.info("hub away: recreated %s (deleted in the member)", key)
                    return "created"
                why = manifests.needs_write(desired, live)
                if why is None or not manifests.is_ours(live):
                    return None
                self.stats.wrote("reassert")
                await self.client.replace(key.resource, manifests.retain(desired, live))
                log.info("hub away: restored %s (%s)", key, why)
                return "updated"
        except ClientError as exc:  # the next change, or the hub, tries again
            log.warning("hub away: could not restore %s: %s", key, exc)
            return None

    # -- heartbeats ----------------------------------------------------------------------

    async def heartbeats(self, session: Session,
                         sleep: Callable[[float], Any] = asyncio.sleep) -> None:
        """Probe the agent's API server and tell the hub, every heartbeat interval."""
        while not session.closed:
            result = await health.probe(self.client, min(session.heartbeat_interval, 2.0))
            self.cluster_ready, self.cluster_detail = result.ready, result.detail
            session.send(pb.AgentMessage(heartbeat=pb.Heartbeat(
                cluster_ready=result.ready, detail=result.detail)))
            await sleep(session.heartbeat_interval)
