"""Which kinds are propagated, and the informers that follow them.

Templates are the user's own objects of any kind, so the set of kinds to
watch is not known at start: it is the set of kinds the policies select. When
a policy names a kind for the first time, the tracker resolves it through the
hub's discovery, starts a hub informer for it (every template of that kind
then reaches the queue: handlers replay the cache) and informers in every
engaged member (their events reconcile the template of the same name: that
is how drift and member status come back). A member that does not serve the
kind yet (its CRD is propagated later) is retried on every reconcile.

A kind the deny list denies as a whole (:mod:`federation.hub.deny`:
our own API, Events, Leases...) is never followed, whatever a policy says:
no informer means none of its objects ever reaches a reconcile, which is what
keeps bindings from propagating themselves (bindings of bindings) and the
hub's Events from flooding the queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from federation.contexts.cache import Event
from federation.contexts.client import ClientError, Resource
from federation.contexts.clusters import Cluster, ClusterSet
from federation.controllers.kit import plan
from federation.hub import deny
from federation.runtime import controller, queue, reconcile

log = logging.getLogger("federation.kinds")

Enqueue = Callable[[reconcile.Request, int], None]
"""Queue a request with a priority (``WorkQueue.add``)."""
EnqueueAfter = Callable[[reconcile.Request, float, int], None]
"""Queue a request after a delay, with a priority (``WorkQueue.add_after``)."""

COPY_EVENT_PRIORITY = queue.LOW_PRIORITY
"""Member events queue their template at the low priority of a start's backlog. They
mostly bring status (a copy progressing, then ready) and go after new and changed
templates, so a burst's first propagation is not queued behind the status rounds of the
copies it already made (a 500-template burst: every template's first write before any
status write); a key queued for both runs once, at the higher priority. Drift in a member
is reverted after that queue, not before it."""

MEMBER_EVENT_DELAY = 0.5
"""Seconds a member event waits before it reconciles its template. A new copy's status
changes several times within a second (created, progressing, ready) in every member;
waiting half a second lets the queue fold those into one reconcile and one status write
instead of one each, while drift is still reverted well within a second. Not for the
events of a first list (the state found at start, not a change): they are queued at
once, and a template queued already (the hub's own first list queues every template)
takes none of them (a start of 10,000 templates on 3 members armed 30,000 timers)."""


OWN_WRITES_LIMIT = 50_000
"""Member writes of ours whose watch event has not come back yet, at most: an entry is
dropped when its event comes, so only events a relist skipped linger; a few MB at most."""

_BOOKKEEPING = ("resourceVersion", "managedFields")


class OwnWrites:
    """Member objects exactly as our last write left them, so that the watch event of
    that write is not taken for news.

    A copy we create or update comes back through the member's watch a moment later;
    reconciling its template for that event would find what the write already recorded
    (the binding is written from the write's answer) and cost a whole reconcile per
    template in a burst. The event is recognised by its resourceVersion: the server's
    answer to our write names it, and an event carrying exactly that version shows
    exactly the state we wrote. Any other version (drift, the data plane's status, a
    delete) is someone else's change and reconciles as before. Keyed as plan vertices are
    (cluster, API group, kind, namespace, name); bounded by :data:`OWN_WRITES_LIMIT`, oldest
    first."""

    def __init__(self, limit: int = OWN_WRITES_LIMIT) -> None:
        self.limit = limit
        self._versions: dict[str, str] = {}
        """:func:`~federation.controllers.kit.plan.vertex_key` -> resourceVersion: the identity
        the plan wrote the object under."""

    def wrote(self, cluster: str, obj: Mapping[str, Any]) -> None:
        """``obj`` is the server's answer to our write in ``cluster``."""
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if not version:
            return
        key = plan.vertex_key(cluster, obj)
        self._versions.pop(key, None)
        while len(self._versions) >= self.limit:
            del self._versions[next(iter(self._versions))]
        self._versions[key] = str(version)

    def echo(self, event: Event) -> bool:
        """``event`` shows one of our own writes coming back (and forgets it)."""
        if event.type not in ("ADDED", "MODIFIED"):
            return False
        key = plan.vertex_key(event.cluster, event.obj)
        version = (event.obj.get("metadata") or {}).get("resourceVersion")
        if version is None or self._versions.get(key) != str(version):
            return False
        del self._versions[key]
        return True


def status_only(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """True when a template changed in its status only (and the server's bookkeeping)."""
    if {k: v for k, v in old.items() if k not in ("status", "metadata")} != \
            {k: v for k, v in new.items() if k not in ("status", "metadata")}:
        return False
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    return {k: v for k, v in old_meta.items() if k not in _BOOKKEEPING} == \
        {k: v for k, v in new_meta.items() if k not in _BOOKKEEPING}


class Kinds(Protocol):
    """What a controller asks of the :class:`KindTracker`: the hub's and a member's
    resource for a group kind, tracking a kind in members, and our own writes' record."""

    @property
    def own_writes(self) -> OwnWrites: ...

    def resource(self, group_kind: str) -> Resource | None: ...

    def member_resource(self, cluster: str, group_kind: str) -> Resource | None: ...

    async def track_members(self, hub_resource: Resource,
                            only: Iterable[Cluster] | None = None) -> None: ...


class KindTracker:
    """Hub and member informers for every propagated kind (the :class:`Kinds`)."""

    def __init__(self, clusters: ClusterSet, enqueue: Enqueue,
                 enqueue_after: EnqueueAfter | None = None,
                 denied: deny.DenyList | None = None) -> None:
        self.clusters = clusters
        self.denied = denied if denied is not None else deny.DenyList()
        self.enqueue = enqueue
        self.enqueue_after = enqueue_after
        self.hub_resources: dict[str, Resource] = {}
        """group kind (``Deployment.apps``) -> the hub's resource for it."""
        self.member_resources: dict[tuple[str, str], Resource] = {}
        """(cluster, group kind) -> that member's resource."""
        self.own_writes = OwnWrites()
        """Our member writes not seen back yet: their events reconcile nothing."""
        self.related: Callable[[Event], Iterable[reconcile.Request]] | None = None
        """Further templates a member event concerns (set by the wiring: the carriers of a
        ``propagateDeps`` dependency's copy)."""

    def resource(self, group_kind: str) -> Resource | None:
        return self.hub_resources.get(group_kind)

    def member_resource(self, cluster: str, group_kind: str) -> Resource | None:
        return self.member_resources.get((cluster, group_kind))

    def denied_rule(self, api_version: str, kind: str) -> deny.Rule | None:
        """The deny rule that keeps ``kind`` from being followed at all, if any."""
        return self.denied.kind_rule(deny.group_of(api_version), kind)

    async def track(self, api_version: str, kind: str) -> Resource:
        """Follow ``kind`` on the hub and in the members (idempotent); a denied kind raises
        :class:`~federation.hub.deny.Denied`."""
        hub = self.clusters.hub
        assert hub.discovery is not None and hub.cache is not None
        rule = self.denied_rule(api_version, kind)
        if rule is not None:
            raise deny.Denied(f"{kind} ({api_version}) is on the propagation deny list "
                              f"({rule})")
        resource = await hub.discovery.resolve(api_version, kind)
        rule = self.denied.kind_rule(resource.group, resource.kind)
        if rule is not None:  # the same kind under another name
            raise deny.Denied(f"{resource.kind} ({api_version}) is on the propagation deny "
                              f"list ({rule})")
        group_kind = reconcile.group_kind(resource)
        if group_kind not in self.hub_resources:
            self.hub_resources[group_kind] = resource
            log.info("propagating kind %s", group_kind)
            hub.cache.informer(resource).add_handler(self._template_event)
        await self.track_members(resource)
        return resource

    async def track_members(self, hub_resource: Resource,
                            only: Iterable[Cluster] | None = None) -> None:
        group_kind = reconcile.group_kind(hub_resource)
        for cluster in only if only is not None else self.clusters.members:
            if cluster.is_hub or not cluster.engaged or cluster.cache is None:
                continue
            if (cluster.name, group_kind) in self.member_resources:
                continue
            assert cluster.discovery is not None
            try:
                resource = await cluster.discovery.resolve(hub_resource.api_version,
                                                           hub_resource.kind)
            except ClientError as exc:
                log.info("%s does not serve %s yet: %s", cluster.name, group_kind, exc)
                continue
            self.member_resources[(cluster.name, group_kind)] = resource
            cluster.cache.informer(resource).add_handler(self._copy_event)

    def _template_event(self, event: Event) -> None:
        if event.type == "MODIFIED" and event.old is not None and \
                status_only(event.old, event.obj):
            # Our own status write (the only status writer of a hub template): reconciling
            # it again would race our binding write against a stale cache, for nothing.
            return
        meta = event.obj.get("metadata") or {}
        self.enqueue(reconcile.Request(self.clusters.hub.name,
                                       reconcile.group_kind(event.resource),
                                       str(meta.get("namespace") or ""), str(meta["name"])),
                     controller.priority_of(event))

    def _copy_event(self, event: Event) -> None:
        """A member object changed: reconcile the hub template of the same identity, at
        :data:`COPY_EVENT_PRIORITY`, after :data:`MEMBER_EVENT_DELAY` unless the event is
        part of a first list; our own write coming back reconciles nothing."""
        if self.own_writes.echo(event):
            return
        meta = event.obj.get("metadata") or {}
        request = reconcile.Request(self.clusters.hub.name, reconcile.group_kind(event.resource),
                                    str(meta.get("namespace") or ""), str(meta["name"]))
        priority = COPY_EVENT_PRIORITY
        for each in (request, *(self.related(event) if self.related is not None else ())):
            if self.enqueue_after is not None and not event.initial:
                self.enqueue_after(each, MEMBER_EVENT_DELAY, priority)
            else:
                self.enqueue(each, priority)

    def templates(self, group_kind: str | None = None) -> list[reconcile.Request]:
        """Requests for every cached template (of one kind, or of all tracked kinds)."""
        hub = self.clusters.hub
        assert hub.cache is not None
        found = []
        for name, resource in self.hub_resources.items():
            if group_kind is not None and name != group_kind:
                continue
            informer = hub.cache.informers.get(resource)
            if informer is None:
                continue
            for obj in informer.store.list(None, None):
                meta = obj.get("metadata") or {}
                found.append(reconcile.Request(hub.name, name, str(meta.get("namespace") or ""),
                                               str(meta["name"])))
        return found
