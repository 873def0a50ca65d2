"""Member cluster health: probes with thresholds, Ready/Reachable conditions, taints, capacity.

Two pieces, as controller-runtime would split them:

- **Probers** (one named task per member, "health probe of member2"): every
  ``period`` seconds, GET ``/readyz`` (``/healthz`` when the server answers
  404 or 403 for it, as Karmada does for older or locked-down servers), with
  ``timeout``. Two :class:`Threshold` trackers turn the stream of results into
  states: *reachable* (any HTTP answer) and *ready* (a 200). A state flips
  only after ``failure_threshold`` results against it in a row (or
  ``success_threshold`` to come back), so one lost probe is not an outage.
  A flip queues the MemberCluster for the reconciler.
- **The reconciler** (controller ``cluster-health``, one MemberCluster per
  request, also every ``capacity_interval`` seconds): writes what the
  trackers say: conditions ``Ready`` and ``Reachable``; the taints
  ``cluster.federation.io/not-ready`` ``NoSchedule`` and ``NoExecute``, both
  with ``timeAdded`` = when the cluster turned NotReady, added when it does
  and removed when it is Ready again (spec, with the resourceVersion read, so
  a user's concurrent taint edit is a conflict and a retry, never lost); and
  ``status.resourceSummary`` (:mod:`federation.controllers.capacity`) from
  the member's cached Nodes and workloads. It writes only what changed.

Turning Ready again also waits until the control plane's own informers of the
member are synced and out of backoff: templates requeued by that change must
find current caches, not fail once more and back off for minutes.

Order of writes: turning NotReady, the condition goes first and the taints
second; turning Ready, the taints go first. Readers that look at either see a
cluster that is at least as unhealthy as it really is.

Events ``ClusterNotReady`` / ``ClusterReady`` are recorded on the
MemberCluster when Ready flips. Probe errors are the client's messages, which
never carry credentials.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from federation.contexts import client as kube
from federation.contexts.cache import Event, ReadOnly
from federation.contexts.client import ApiError, ClientError, ClusterClient
from federation.contexts.clusters import Cluster, ClusterSet
from federation.contexts.multicluster import MultiClusterClient
from federation.controllers import api, capacity, events, failover, status
from federation.runtime.reconcile import Request, Result, group_kind

log = logging.getLogger("federation.health")
JSON = dict[str, Any]
WORKLOADS = (kube.DEPLOYMENTS, kube.STATEFULSETS, kube.REPLICASETS)
CONDITIONS = ("Ready", "Reachable")


@dataclasses.dataclass(frozen=True)
class HealthSettings:
    period: float = 2.0
    """Seconds between probes of one member. With the thresholds below, a dead API
    server is NotReady 6 s after its last answer (8 s when it hangs instead of
    refusing), at one tiny GET per 2 s per member."""
    timeout: float = 2.0
    """A local or LAN /readyz answers in milliseconds; 2 s without an answer is a
    frozen or overloaded server, and counts as one failure."""
    failure_threshold: int = 3
    """Failures in a row before Ready=False. Two would flip on one GC pause plus one
    slow answer on a loaded 2-core machine; three (6 s) are not chance. Karmada
    waits 30 s by default; clusters here are a loopback away, not a WAN."""
    success_threshold: int = 2
    """Successes in a row before Ready=True again: a server that answers once while
    it restarts does not get work back and lose it again."""
    capacity_interval: float = 10.0
    """Seconds between capacity updates. Capacity feeds new placements only (sticky
    modes do not move running replicas for it), so it may lag a little; writing it
    on every workload status change would be a hub write storm."""


class Threshold:
    """A boolean that flips only after enough results in a row say otherwise."""

    def __init__(self, success_threshold: int, failure_threshold: int,
                 value: bool | None = None) -> None:
        self.success_threshold = success_threshold
        self.failure_threshold = failure_threshold
        self.value = value
        self.changed_at: float | None = None
        """Epoch seconds of the last flip (None until the first)."""
        self._against = 0

    def observe(self, ok: bool, now: float) -> bool:
        """Record one result; True when the value flipped."""
        if self.value is None:
            self.value, self.changed_at = ok, now
            return True
        if ok == self.value:
            self._against = 0
            return False
        self._against += 1
        needed = self.success_threshold if ok else self.failure_threshold
        if self._against < needed:
            return False
        self.value, self.changed_at, self._against = ok, now, 0
        return True


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    reachable: bool
    ready: bool
    detail: str


async def probe(client: ClusterClient, timeout: float) -> ProbeResult:
    """One health probe: /readyz, or /healthz when /readyz is not served or not allowed."""
    for path in ("/readyz", "/healthz"):
        try:
            await client.request_raw(path, timeout=timeout)
        except ApiError as exc:
            if exc.status in (403, 404) and path == "/readyz":
                continue
            return ProbeResult(True, False, f"GET {path}: {exc.status} "
                                            f"{_short(exc, client.name)}")
        except ClientError as exc:
            return ProbeResult(False, False, f"GET {path}: {_short(exc, client.name)}")
        return ProbeResult(True, True, f"GET {path}: ok")
    return ProbeResult(True, False, "no health endpoint")  # pragma: no cover


def _short(exc: Exception, name: str) -> str:
    return str(exc).removeprefix(f"{name}: ")[:300]


class MemberHealth:
    """What the probes of one member have established."""

    def __init__(self, settings: HealthSettings, ready: bool | None = None,
                 reachable: bool | None = None) -> None:
        self.ready = Threshold(settings.success_threshold, settings.failure_threshold, ready)
        self.reachable = Threshold(settings.success_threshold, settings.failure_threshold,
                                   reachable)
        self.detail = "not probed yet"
        self.probes = 0

    def observe(self, result: ProbeResult, now: float) -> bool:
        self.probes += 1
        self.detail = result.detail
        flipped_reach = self.reachable.observe(result.reachable, now)
        flipped_ready = self.ready.observe(result.ready, now)
        return flipped_reach or flipped_ready


def conditions(health: MemberHealth, previous: Sequence[Mapping[str, Any]]) -> list[JSON]:
    ready, reachable = bool(health.ready.value), bool(health.reachable.value)
    if ready:
        ready_reason = "ClusterReady"
    else:
        ready_reason = "ClusterNotReady" if reachable else "ClusterUnreachable"
    return [
        status.condition("Ready", ready, ready_reason, health.detail, previous),
        status.condition("Reachable", reachable,
                         "ProbeAnswered" if reachable else "ProbeFailed", health.detail,
                         previous),
    ]


def wanted_taints(taints: Sequence[Mapping[str, Any]], ready: bool, since: float | None
                  ) -> list[JSON]:
    """``taints`` with our not-ready pair added (NotReady) or removed (Ready); others kept."""
    kept = [dict(t) for t in taints if t.get("key") != failover.NOT_READY_TAINT]
    if ready:
        return kept
    ours = {t.get("effect"): dict(t) for t in taints
            if t.get("key") == failover.NOT_READY_TAINT}
    stamp = failover.format_time(since if since is not None else time.time())
    for effect in ("NoSchedule", "NoExecute"):
        kept.append(ours.get(effect) or {"key": failover.NOT_READY_TAINT, "effect": effect,
                                         "timeAdded": stamp})
    return kept


def same_conditions(old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> bool:
    def key(items: Sequence[Mapping[str, Any]]) -> set[tuple[Any, ...]]:
        return {(c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
                for c in items if c.get("type") in CONDITIONS}

    return key(old) == key(new)


class HealthController:
    """Probers and the MemberCluster reconciler; see the module docstring."""

    def __init__(self, clusters: ClusterSet, mc: MultiClusterClient, recorder: events.Recorder,
                 settings: HealthSettings | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.clusters = clusters
        self.mc = mc
        self.recorder = recorder
        self.settings = settings or HealthSettings()
        self.clock = clock
        self.hub = clusters.hub.name
        self.health: dict[str, MemberHealth] = {}
        self.enqueue: Callable[[Request], None] = lambda _: None
        self._probers: dict[str, asyncio.Task[None]] = {}
        self._capacity_at: dict[str, float] = {}

    def request(self, name: str) -> Request:
        return Request(self.hub, group_kind(api.MEMBER_CLUSTERS), "", name)

    # -- probers -------------------------------------------------------------------------

    async def run_probers(self) -> None:
        """Keep one prober per engaged member (members engaged later get one too)."""
        try:
            while True:
                members = {c.name: c for c in self.clusters.members
                           if not c.is_hub and c.engaged}
                for name in list(self._probers):
                    if name not in members:
                        self._probers.pop(name).cancel()
                        self.health.pop(name, None)
                for name, cluster in members.items():
                    if name not in self._probers or self._probers[name].done():
                        task = asyncio.create_task(self._probe_loop(cluster),
                                                   name=f"health probe of {name}")
                        self._probers[name] = task
                await asyncio.sleep(self.settings.period)
        finally:
            for task in self._probers.values():
                task.cancel()
            await asyncio.gather(*self._probers.values(), return_exceptions=True)
            self._probers.clear()

    async def _probe_loop(self, cluster: Cluster) -> None:
        assert cluster.client is not None
        health = self.health.setdefault(cluster.name, await self._initial(cluster.name))
        while self.clusters.clusters.get(cluster.name) is cluster:  # ends when it left
            started = time.monotonic()
            result = await probe(cluster.client, self.settings.timeout)
            if health.observe(result, self.clock()):
                log.info("cluster %s: ready=%s reachable=%s (%s)", cluster.name,
                         health.ready.value, health.reachable.value, result.detail)
                self.enqueue(self.request(cluster.name))
            await asyncio.sleep(max(self.settings.period - (time.monotonic() - started), 0))

    async def _initial(self, name: str) -> MemberHealth:
        """Start from what the MemberCluster says, so a restart of ours flips nothing."""
        try:
            doc = await self.mc.get(api.MEMBER_CLUSTERS, name, cluster=self.hub, copy=False)
        except ClientError:
            doc = None
        found = {c.get("type"): c.get("status")
                 for c in ((doc or {}).get("status") or {}).get("conditions") or []}
        health = MemberHealth(self.settings, _bool(found.get("Ready")),
                              _bool(found.get("Reachable")))
        since = failover.not_ready_since(((doc or {}).get("spec") or {}).get("taints") or [])
        if health.ready.value is False and since is not None:
            health.ready.changed_at = since
        return health

    # -- the reconciler ------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        doc = await self.mc.get(api.MEMBER_CLUSTERS, request.name, cluster=self.hub,
                                copy=False)
        if doc is None or doc["metadata"].get("deletionTimestamp"):
            self._forget(request.name)
            return None
        try:
            return await self._reconcile(request.name, doc)
        except ApiError as exc:
            if exc.status != 404:
                raise
            # Deleted since our cache saw it (`fedctl unjoin`): nothing left to report on.
            log.info("cluster %s: MemberCluster gone (%s); health no longer written",
                     request.name, exc)
            self._forget(request.name)
            return None

    def _forget(self, name: str) -> None:
        """Drop what we know of a member that left (its prober goes with the next sweep)."""
        self._capacity_at.pop(name, None)
        if name not in self.clusters.clusters:
            self.health.pop(name, None)

    async def _reconcile(self, name: str, doc: ReadOnly) -> Result | None:
        health = self.health.get(name)
        if health is None or health.ready.value is None:
            await self._not_probed(doc)
            return Result(requeue_after=self.settings.period)
        ready = bool(health.ready.value)
        previous = list((doc.get("status") or {}).get("conditions") or [])
        was = {c.get("type"): c.get("status") for c in previous}.get("Ready")
        if ready and was == "False" and not self._caches_current(name):
            return Result(requeue_after=1.0)  # Ready once our caches of it caught up
        new_conditions = conditions(health, previous)
        taints = list((doc.get("spec") or {}).get("taints") or [])
        new_taints = wanted_taints(taints, ready, health.ready.changed_at)
        summary = await self._summary(name, doc)
        if ready and new_taints != taints:
            doc = await self._write_taints(doc, new_taints)
        changed = not same_conditions(previous, new_conditions)
        if changed or (summary is not None
                       and summary != (doc.get("status") or {}).get("resourceSummary")):
            doc = await self._write_status(doc, new_conditions, summary)
        if not ready and new_taints != taints:
            await self._write_taints(doc, new_taints)
        if changed:
            await self._event(doc, previous, new_conditions)
        return Result(requeue_after=self.settings.capacity_interval)

    def _caches_current(self, name: str) -> bool:
        """Every informer of the member is synced and watching (after an outage the
        relists take a few seconds; work requeued on Ready must not meet stale caches)."""
        cluster = self.clusters.clusters.get(name)
        if cluster is None or cluster.cache is None:
            return True
        return all(i.synced.is_set() and i.state == "watching"
                   for i in cluster.cache.informers.values())

    async def _not_probed(self, doc: ReadOnly) -> None:
        name = doc["metadata"]["name"]
        cluster = self.clusters.clusters.get(name)
        if cluster is not None and cluster.engaged:
            return  # its prober answers soon
        why = cluster.detail if cluster is not None else "no context or kubeconfig Secret " \
                                                          "engaged for it"
        previous = list((doc.get("status") or {}).get("conditions") or [])
        unknown = [{**status.condition(kind, False, "NotEngaged", why, previous),
                    "status": "Unknown"} for kind in CONDITIONS]
        if not same_conditions(previous, unknown):
            await self._write_status(doc, unknown, None)

    async def _summary(self, name: str, doc: ReadOnly) -> JSON | None:
        """A fresh resource summary when due (and the member's caches can say), else None."""
        now = time.monotonic()
        have = (doc.get("status") or {}).get("resourceSummary")
        if have is not None and now - self._capacity_at.get(name, 0.0) \
                < self.settings.capacity_interval * 0.9:
            return None
        try:
            nodes = await self.mc.list(kube.NODES, clusters=[name], copy=False)
            workloads = [await self.mc.list(r, clusters=[name], copy=False)
                         for r in WORKLOADS]
        except ClientError:
            return None
        if nodes.errors or any(w.errors for w in workloads):
            return None
        self._capacity_at[name] = now
        items = [dict(o, kind=r.kind) for r, w in zip(WORKLOADS, workloads, strict=True)
                 for o in w.items.get(name, [])]
        return capacity.summary(nodes.items.get(name, []), items)

    async def _write_taints(self, doc: ReadOnly, taints: list[JSON]) -> JSON:
        # A new top level and spec: ``doc`` is the cache's own (copy what you change).
        body = {**doc, "spec": {**(doc.get("spec") or {}), "taints": taints}}
        log.info("cluster %s: taints now %s", doc["metadata"]["name"],
                 ", ".join(f"{t['key']}:{t['effect']}" for t in taints) or "none")
        written: JSON = await self.mc.cluster(self.hub).update(body,
                                                               resource=api.MEMBER_CLUSTERS)
        return written

    async def _write_status(self, doc: ReadOnly, new_conditions: list[JSON],
                            summary: JSON | None) -> JSON:
        """Merge-patch our status fields; the object as written (its new resourceVersion)."""
        previous = list((doc.get("status") or {}).get("conditions") or [])
        body: JSON = {"conditions": status.merge_conditions(previous, new_conditions)}
        if summary is not None:
            body["resourceSummary"] = summary
        written: JSON = await self.mc.cluster(self.hub).patch_status(
            api.MEMBER_CLUSTERS, doc["metadata"]["name"], {"status": body})
        return written

    async def _event(self, doc: ReadOnly, previous: Sequence[Mapping[str, Any]],
                     new: Sequence[JSON]) -> None:
        before = {c.get("type"): c.get("status") for c in previous}
        ready = next(c for c in new if c["type"] == "Ready")
        if before.get("Ready") == ready["status"]:
            return
        if ready["status"] == "True":
            await self.recorder.emit(doc, "Normal", "ClusterReady", ready["message"])
        else:
            await self.recorder.emit(doc, "Warning", ready["reason"], ready["message"])


def _bool(value: Any) -> bool | None:
    return {"True": True, "False": False}.get(str(value))


def install(mgr: Any, recorder: events.Recorder,
            settings: HealthSettings | None = None) -> HealthController:
    """Add the ``cluster-health`` controller and its probers to a manager."""
    from federation.runtime import controller

    health = HealthController(mgr.clusters, mgr.client, recorder, settings)
    ctl = controller.Controller("cluster-health", health, workers=2)
    ctl.watch(api.MEMBER_CLUSTERS, clusters="hub")
    health.enqueue = ctl.queue.add
    mgr.add(ctl)
    mgr.add_runnable("cluster health probes", health.run_probers)
    return health


def affects_placement(event: Event) -> bool:
    """A MemberCluster event that can change placements (a capacity refresh alone cannot)."""
    if event.old is None:
        return True

    def view(doc: Mapping[str, Any]) -> tuple[Any, ...]:
        found = frozenset((c.get("type"), c.get("status"))
                          for c in (doc.get("status") or {}).get("conditions") or [])
        return ((doc.get("metadata") or {}).get("labels"), doc.get("spec"), found,
                (doc.get("metadata") or {}).get("deletionTimestamp"))

    return view(event.obj) != view(event.old)
