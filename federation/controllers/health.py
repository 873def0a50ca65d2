"""Member cluster health on the hub: Ready/Reachable conditions, not-ready taints, capacity.

The health signal itself is not made here: each engaged member has one prober
(:mod:`federation.contexts.health`, started with its engagement), the same one
whose *ready* state is ``Cluster.available`` for the rest of the control plane.
This controller writes what that prober has established, so the fleet-visible
verdict and the process's own never disagree. Each flip of a member's *ready*
or *reachable* state (``ClusterSet.on_member_health``, once per flip) queues
its MemberCluster.

The reconciler (controller ``cluster-health``, one MemberCluster per request,
also every ``capacity_interval`` seconds) writes conditions ``Ready`` and
``Reachable``; the taints ``cluster.federation.io/not-ready`` ``NoSchedule``
and ``NoExecute``, both with ``timeAdded`` = when the cluster turned NotReady,
added when it does and removed when it is Ready again (spec, with the
resourceVersion read, so a user's concurrent taint edit is a conflict and a
retry, never lost); and ``status.resourceSummary``
(:mod:`federation.hub.capacity`) from the member's cached Nodes and
workloads. It writes only what changed.

Turning Ready again also waits until the control plane's own informers of the
member are synced and out of backoff: templates requeued by that change must
find current caches, not fail once more and back off for minutes.

Order of writes: turning NotReady, the condition goes first and the taints
second; turning Ready, the taints go first. Readers that look at either see a
cluster that is at least as unhealthy as it really is.

Events ``ClusterNotReady`` / ``ClusterUnreachable`` / ``ClusterReady`` are
recorded on the MemberCluster when the written Ready condition flips: one event
per transition, none per probe. A restart of ours flips nothing: a prober's
unknown state turns down only after a full run of failures, and taints already
on the MemberCluster keep their ``timeAdded``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from federation.contexts import client as kube
from federation.contexts.cache import Event, ReadOnly
from federation.contexts.client import ApiError, ClientError
from federation.contexts.clusters import Cluster, ClusterSet
from federation.contexts.health import Health
from federation.contexts.multicluster import MultiCluster
from federation.controllers.kit import events
from federation.hub import api, capacity, failover, status
from federation.runtime import manager
from federation.runtime.reconcile import Request, Result, group_kind

log = logging.getLogger("federation.health")
JSON = dict[str, Any]
WORKLOADS = (kube.DEPLOYMENTS, kube.STATEFULSETS, kube.REPLICASETS)
CONDITIONS = ("Ready", "Reachable")


@dataclasses.dataclass(frozen=True)
class HealthSettings:
    """What the ``cluster-health`` controller writes and how often (the probe's own
    period, timeout and thresholds are ``contexts.health.HealthSettings``, shared by
    every reader of a cluster's health)."""

    not_probed_requeue: float = 2.0
    """Seconds before a MemberCluster whose engaged member has no verdict yet is looked
    at again: a prober decides within its first answer, or within a few periods."""
    capacity_interval: float = 10.0
    """Seconds between capacity updates. Capacity feeds new placements only (sticky
    modes do not move running replicas for it), so it may lag a little; writing it
    on every workload status change would be a hub write storm."""


def conditions(health: Health, previous: Sequence[Mapping[str, Any]]) -> list[JSON]:
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
    """The MemberCluster reconciler over the members' probers; see the module docstring."""

    def __init__(self, clusters: ClusterSet, mc: MultiCluster, recorder: events.EventSink,
                 settings: HealthSettings | None = None) -> None:
        self.clusters = clusters
        self.mc = mc
        self.recorder = recorder
        self.settings = settings or HealthSettings()
        self.hub = clusters.hub.name
        self.enqueue: Callable[[Request], None] = lambda _: None
        self._capacity_at: dict[str, float] = {}
        self._allocations: dict[str, capacity.Allocations] = {}
        """Each member's workload shares, kept between its summaries."""

    def request(self, name: str) -> Request:
        return Request(self.hub, group_kind(api.MEMBER_CLUSTERS), "", name)

    def on_health(self, cluster: Cluster) -> None:
        """A member's prober saw a flip: write it (one request per flip)."""
        self.enqueue(self.request(cluster.name))

    def forget(self, name: str) -> None:
        """A member left: nothing of it is kept here (its health went with its Cluster)."""
        self._capacity_at.pop(name, None)
        self._allocations.pop(name, None)

    # -- the reconciler ------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        doc = await self.mc.get(api.MEMBER_CLUSTERS, request.name, cluster=self.hub,
                                copy=False)
        if doc is None or doc["metadata"].get("deletionTimestamp"):
            self.forget(request.name)
            return None
        try:
            return await self._reconcile(request.name, doc)
        except ApiError as exc:
            if exc.status != 404:
                raise
            # Deleted since our cache saw it (`fedctl unjoin`): nothing left to report on.
            log.info("cluster %s: MemberCluster gone (%s); health no longer written",
                     request.name, exc)
            self.forget(request.name)
            return None

    async def _reconcile(self, name: str, doc: ReadOnly) -> Result | None:
        cluster = self.clusters.clusters.get(name)
        health = cluster.health if cluster is not None and cluster.engaged else None
        if health is None or health.ready.value is None:
            await self._not_probed(doc)
            return Result(requeue_after=self.settings.not_probed_requeue)
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
        pairs = ((r.kind, o) for r, w in zip(WORKLOADS, workloads, strict=True)
                 for o in w.items.get(name, []))
        return capacity.member_summary(nodes.items.get(name, []), pairs,
                                       self._allocations.setdefault(name,
                                                                    capacity.Allocations()))

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


def install(mgr: manager.Host, recorder: events.EventSink,
            settings: HealthSettings | None = None) -> HealthController:
    """Add the ``cluster-health`` controller to a manager, fed by the members' probers."""
    from federation.runtime import controller

    health = HealthController(mgr.clusters, mgr.client, recorder, settings)
    ctl = controller.Controller("cluster-health", health, workers=2)
    ctl.watch(api.MEMBER_CLUSTERS, clusters="hub")
    health.enqueue = ctl.queue.add
    mgr.clusters.on_member_health(health.on_health)
    mgr.clusters.on_leave(health.forget)
    mgr.add(ctl)
    return health


def placement_view(doc: Mapping[str, Any]) -> str:
    """What placement reads of a MemberCluster besides its capacity, as one string: its
    labels and spec, its conditions' types and statuses (not their messages or times),
    the replicas it states it has room for, its deletion."""
    meta = doc.get("metadata") or {}
    state = doc.get("status") or {}
    conditions = sorted((str(c.get("type")), str(c.get("status")))
                        for c in state.get("conditions") or [] if isinstance(c, dict))
    return json.dumps([meta.get("uid"), meta.get("labels"), doc.get("spec"), conditions,
                       state.get("availableReplicas"), meta.get("deletionTimestamp")],
                      sort_keys=True, default=str)


def affects_placement(event: Event) -> bool:
    """A MemberCluster event that can change placements (a capacity refresh alone cannot)."""
    if event.old is None:
        return True
    return placement_view(event.obj) != placement_view(event.old)


class PlacementSeen:
    """:func:`affects_placement` with a memory of each MemberCluster's last view: an ADDED
    event (a first list, a relist after a watch expired, a handler added late) showing
    the view last seen of that cluster requeues nothing. Without it, each member's
    ADDED requeued every template (30,000 queue adds for 10,000 templates on 3 members),
    and a relist at any time made every template reconcile again."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def __call__(self, event: Event) -> bool:
        name = str((event.obj.get("metadata") or {}).get("name"))
        if event.type == "DELETED":
            self._seen.pop(name, None)
            return True
        view = placement_view(event.obj)
        before = self._seen.get(name) if event.old is None else placement_view(event.old)
        self._seen[name] = view
        return before != view
