"""What the applications controller's steps read, and the narrow ports it writes through.

A step sees the fleet only through an :class:`ApplicationView`: the kit's
:class:`~federation.controllers.kit.view.View` (cached hub and member reads, the members,
the clock) plus the controller's settings and a member's resource for an object's kind.
Nothing in it can write: :class:`CacheView`, the implementation over the multi-cluster
client's caches, keeps the client private. The controller's writes go elsewhere: member,
revision and tracker writes are plan vertices for the kit's executor; the one direct write
is the Application's own status, through a :class:`StatusWriter`; Events go through a
:class:`Recorder`. Unit tests hand fakes of each (no ``type: ignore``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from federation.contexts.cache import ReadOnly
from federation.contexts.client import Resource
from federation.contexts.clusters import ClusterSet
from federation.contexts.multicluster import ListView
from federation.controllers.applications.calls import Caller, Key
from federation.controllers.applications.definitions import Evaluations, inline
from federation.controllers.applications.settings import ApplicationSettings
from federation.controllers.kit.events import EventType
from federation.controllers.kit.view import Member, View, members_of
from federation.hub import api

JSON = dict[str, Any]


class ApplicationView(View, Protocol):
    """The kit's read-only view plus what the applications steps use. No writer."""

    @property
    def settings(self) -> ApplicationSettings: ...

    async def resource(self, cluster: str, obj: JSON) -> Resource:
        """The resource ``cluster`` serves ``obj``'s kind as. Raises a
        :class:`~federation.contexts.client.ClientError` when the member cannot say
        (unavailable, kind not served)."""
        ...

    def evaluated(self, key: str) -> JSON | None:
        """The answer to a CUE evaluation request (by its key), if known."""
        ...

    async def evaluate(self, requests: Mapping[str, JSON]) -> None:
        """Evaluate these requests (key -> request) off the loop, so that
        :meth:`evaluated` knows them. Reads nothing, writes nothing."""
        ...

    def answered(self, key: Key, step_type: str) -> JSON | None:
        """An HTTP step's observation of its call ``key``, once answered
        (:mod:`.calls`)."""
        ...


class Recorder(Protocol):
    """Events on hub objects (:class:`federation.controllers.kit.events.Recorder`)."""

    async def emit(self, obj: Mapping[str, Any], kind: EventType, reason: str,
                   message: str) -> None: ...


class StatusWriter(Protocol):
    """The one direct write: the Application's own ``/status``, a merge patch (``status``
    holds what changed; a null deletes a field)."""

    async def application_status(self, namespace: str, name: str, status: JSON) -> None: ...


class ClusterPort(Protocol):
    """What the controller uses of one cluster's writer: discovery and a status patch."""

    async def resource(self, obj: JSON) -> Resource: ...

    async def patch_status(self, resource: Resource, name: str, patch: JSON, *,
                           namespace: str | None = None,
                           resource_version: str | None = None) -> JSON: ...


class Client(Protocol):
    """What :class:`CacheView` and :class:`HubStatus` use of the multi-cluster client."""

    def cluster(self, name: str) -> ClusterPort: ...

    async def view(self, resource: Resource, name: str, namespace: str | None = None, *,
                   cluster: str, allow_stale: bool = False) -> ReadOnly | None: ...

    async def list_view(self, resource: Resource, namespace: str | None = None, *,
                        clusters: Sequence[str] | None = None,
                        label_selector: str | Mapping[str, str] | None = None,
                        allow_stale: bool = False) -> ListView: ...


class CacheView:
    """:class:`ApplicationView` over the multi-cluster client's caches (kept private)."""

    def __init__(self, mc: Client, clusters: ClusterSet, settings: ApplicationSettings,
                 clock: Callable[[], float], evaluations: Evaluations | None = None,
                 caller: Caller | None = None) -> None:
        self._mc = mc
        self._clusters = clusters
        self._settings = settings
        self._clock = clock
        self._evaluations = evaluations or Evaluations(inline)
        self.caller = caller or Caller({}, clock)
        """The HTTP steps' calls: the reconciler makes them, the steps read answers."""

    @property
    def hub(self) -> str:
        return self._clusters.hub.name

    @property
    def settings(self) -> ApplicationSettings:
        return self._settings

    def now(self) -> float:
        return float(self._clock())

    def members(self) -> list[Member]:
        return members_of(self._clusters)

    async def get(self, resource: Resource, name: str, namespace: str | None,
                  cluster: str) -> ReadOnly | None:
        # The cached object itself: steps only read, and what is written is built afresh.
        return await self._mc.view(resource, name, namespace, cluster=cluster)

    async def list(self, resource: Resource, namespace: str | None = None) -> list[ReadOnly]:
        listing = await self._mc.list_view(resource, namespace, clusters=[self.hub])
        error = listing.errors.get(self.hub)
        if error is not None:
            raise error
        return list(listing.items.get(self.hub, []))

    async def resource(self, cluster: str, obj: JSON) -> Resource:
        return await self._mc.cluster(cluster).resource(obj)

    def evaluated(self, key: str) -> JSON | None:
        return self._evaluations.get(key)

    async def evaluate(self, requests: Mapping[str, JSON]) -> None:
        await self._evaluations.evaluate(requests)

    def answered(self, key: Key, step_type: str) -> JSON | None:
        return self.caller.answered(key, step_type)


class HubStatus:
    """:class:`StatusWriter` over the multi-cluster client: a merge patch of the status."""

    def __init__(self, mc: Client, hub: str) -> None:
        self._mc = mc
        self._hub = hub

    async def application_status(self, namespace: str, name: str, status: JSON) -> None:
        await self._mc.cluster(self._hub).patch_status(api.APPLICATIONS, name,
                                                       {"status": status},
                                                       namespace=namespace)
