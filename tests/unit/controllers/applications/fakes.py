"""Fakes for the applications controller's tests: a view over plain dicts, a recorder,
an outbox, a status writer, and the reconciler over the in-memory fleet.

:class:`FakeView` is an :class:`~federation.controllers.applications.ApplicationView`
over objects keyed by (cluster, kind, namespace, name), a fixed clock and the members it
is given; reads hand out frozen objects, as the caches hand out shared ones. It has no
writer. :func:`reconciler` builds the real reconciler over ``tests.unit.controllers.fakes``'
multi-cluster client for tests of a whole reconcile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, cast

from federation.contexts import client as kube
from federation.contexts.cache import ReadOnly
from federation.contexts.client import ClusterUnavailable, Resource
from federation.contexts.clusters import ClusterSet
from federation.contexts.multicluster import MultiClusterClient
from federation.controllers import applications, notifications
from federation.controllers.applications.view import CacheView, Client, HubStatus
from federation.controllers.kit import executor
from federation.controllers.kit.events import EventType
from federation.controllers.kit.view import Member
from federation.hub import api
from tests.unit.controllers.frozen import freeze

JSON = dict[str, Any]
SERVICES = Resource("", "v1", "services", "Service")
KINDS = {r.kind: r for r in (kube.CONFIGMAPS, kube.NAMESPACES, kube.DEPLOYMENTS, SERVICES,
                             api.APPLICATIONS, api.APPLICATION_REVISIONS,
                             api.RESOURCE_TRACKERS, api.OAM_POLICIES, api.MEMBER_CLUSTERS)}


class FakeView:
    """An ApplicationView over plain dicts; ``down`` members answer ClusterUnavailable."""

    def __init__(self, objects: Sequence[tuple[str, JSON]] = (),
                 members: Sequence[str] = ("member1", "member2", "member3"),
                 now: float = 1000.0,
                 settings: applications.ApplicationSettings | None = None) -> None:
        self.objects: dict[tuple[str, str, str, str], JSON] = {}
        for cluster, obj in objects:
            self.put(cluster, obj)
        self._members = [Member(m, False, True) for m in members]
        self._settings = settings or applications.ApplicationSettings()
        self.clock = now
        self.down: set[str] = set()
        self.unserved: set[str] = set()
        """Kinds no member serves (discovery fails)."""

    hub = "hub"

    def put(self, cluster: str, obj: JSON) -> JSON:
        meta = obj["metadata"]
        self.objects[(cluster, obj["kind"], meta.get("namespace") or "", meta["name"])] = obj
        return obj

    @property
    def settings(self) -> applications.ApplicationSettings:
        return self._settings

    def now(self) -> float:
        return self.clock

    def members(self) -> list[Member]:
        return list(self._members)

    def _check(self, cluster: str) -> None:
        if cluster in self.down:
            raise ClusterUnavailable(cluster, "unavailable")

    async def get(self, resource: Resource, name: str, namespace: str | None,
                  cluster: str) -> ReadOnly | None:
        self._check(cluster)
        found = self.objects.get((cluster, resource.kind, namespace or "", name))
        return cast(ReadOnly, freeze(found)) if found is not None else None

    async def list(self, resource: Resource, namespace: str | None = None) -> list[ReadOnly]:
        return [freeze(o) for (c, kind, ns, _), o in sorted(self.objects.items())
                if c == self.hub and kind == resource.kind
                and (namespace is None or ns == namespace)]

    async def resource(self, cluster: str, obj: JSON) -> Resource:
        self._check(cluster)
        if obj.get("kind") in self.unserved:
            raise kube.ApiError(cluster, 404, "NotFound", f"{obj.get('kind')} not served")
        return KINDS[str(obj.get("kind"))]


class Recorder:
    """Every Event emitted, as (type, reason, message), and on what (name)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.on: list[str] = []

    async def emit(self, obj: Mapping[str, Any], kind: EventType, reason: str,
                   message: str) -> None:
        self.events.append((kind, reason, message))
        self.on.append(str((obj.get("metadata") or {}).get("name")))


class Outbox:
    """The notification sender's stand-in: every message submitted is queued."""

    def __init__(self) -> None:
        self.messages: list[notifications.Message] = []

    def submit(self, message: notifications.Message) -> notifications.Admission:
        self.messages.append(message)
        return notifications.Admission(True)


class Fleet(Client, Protocol):
    """The in-memory fleet's client (``tests.unit.controllers.fakes``) and its members."""

    clusters: ClusterSet


def reconciler(mc: Fleet, recorder: Recorder | None = None,
               settings: applications.ApplicationSettings | None = None,
               clock: Callable[[], float] = lambda: 1000.0,
               outbox: notifications.Outbox | None = None) -> applications.Reconciler:
    """The real reconciler (cache view, kit executor, status writer) over a fake client.
    The kit's executor still takes the concrete client: the fake stands in for it."""
    settings = settings or applications.ApplicationSettings()
    writer = executor.Writer(cast(MultiClusterClient, mc), "hub", exact_deletes=True)
    return applications.Reconciler(CacheView(mc, mc.clusters, settings, clock), writer,
                                   HubStatus(mc, "hub"), recorder or Recorder(),
                                   outbox or Outbox())

