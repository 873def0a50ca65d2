"""The read-only context transformers see, and the one implementation over the caches.

A transformer is handed a :class:`TransformContext`, never the reconciler: cached gets
and lists of hub and member objects, the members as plain values, the placement
scheduler, the failover state, the clock and the deny list. Nothing in it can write: no
client, no cluster object, no queue. That is a fact of the types (mypy rejects a
transformer that reaches for a writer: ``tests/unit/controllers/propagation`` checks
it), not a convention. :class:`CacheContext` is the implementation over the
multi-cluster client; its writer-capable parts are private to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from federation.contexts.cache import ReadOnly
from federation.contexts.client import ApiError, Resource
from federation.contexts.clusters import ClusterSet
from federation.contexts.multicluster import MultiClusterReader
from federation.controllers.kit.interpreting import Interpreting
from federation.controllers.kit.kinds import Kinds
from federation.controllers.kit.view import Member, View, members_of
from federation.controllers.propagation import disruption, scheduling
from federation.controllers.propagation.settings import PropagationSettings
from federation.hub import deny
from federation.runtime.reconcile import group_kind

JSON = dict[str, Any]



class TransformContext(View, Protocol):
    """The kit's :class:`~federation.controllers.kit.view.View` plus what propagation's
    transformers use: their settings, the scheduler, the failover rules, the deny list,
    the resource interpreter, and a member copy by the template's identity. No writer."""

    @property
    def settings(self) -> PropagationSettings: ...

    @property
    def scheduler(self) -> scheduling.Scheduler: ...

    @property
    def failover(self) -> disruption.Failover: ...

    @property
    def deny_list(self) -> deny.DenyList: ...

    @property
    def interpreting(self) -> Interpreting:
        """The manager's resource interpreter: customizations and their threads."""
        ...

    async def copy(self, hub_resource: Resource, cluster: str, name: str,
                   namespace: str | None) -> ReadOnly | None:
        """The member object of the template's identity in ``cluster``, or None. Raises a
        :class:`~federation.contexts.client.ClientError` when the member cannot be read."""
        ...

    async def managed_fields(self, hub_resource: Resource, cluster: str, name: str,
                             namespace: str | None) -> Sequence[ReadOnly] | None:
        """The ``managedFields`` of that member object, read from its API server (caches
        keep none); None when the member records none (a pull member's mirror, an
        object gone). Raises a :class:`~federation.contexts.client.ClientError` when the
        member cannot be read."""
        ...


class CacheContext:
    """:class:`TransformContext` over the multi-cluster client's caches."""

    def __init__(self, mc: MultiClusterReader, clusters: ClusterSet, kinds: Kinds,
                 settings: PropagationSettings, scheduler: scheduling.Scheduler,
                 failover: disruption.Failover, interpreting: Interpreting) -> None:
        self._mc = mc
        self._interpreting = interpreting
        self._clusters = clusters
        self._kinds = kinds
        self._settings = settings
        self._scheduler = scheduler
        self._failover = failover

    @property
    def hub(self) -> str:
        return self._clusters.hub.name

    @property
    def settings(self) -> PropagationSettings:
        return self._settings

    @property
    def scheduler(self) -> scheduling.Scheduler:
        return self._scheduler

    @property
    def failover(self) -> disruption.Failover:
        return self._failover

    @property
    def deny_list(self) -> deny.DenyList:
        return self._settings.deny_list

    @property
    def interpreting(self) -> Interpreting:
        return self._interpreting

    def now(self) -> float:
        return self._failover.clock()

    def members(self) -> list[Member]:
        return members_of(self._clusters)

    async def get(self, resource: Resource, name: str, namespace: str | None,
                  cluster: str) -> ReadOnly | None:
        # No copy: transformers only read, and what is written is rendered afresh.
        return await self._mc.get(resource, name, namespace, cluster=cluster, copy=False)

    async def list(self, resource: Resource, namespace: str | None = None) -> list[ReadOnly]:
        # The cached objects themselves: policies, overrides and MemberClusters are only
        # read here (parsed or summarised), and copying them was most of our CPU.
        listing = await self._mc.list(resource, namespace, clusters=[self.hub], copy=False)
        error = listing.errors.get(self.hub)
        if error is not None:
            raise error
        return list(listing.items.get(self.hub, []))

    async def copy(self, hub_resource: Resource, cluster: str, name: str,
                   namespace: str | None) -> ReadOnly | None:
        kind = group_kind(hub_resource)
        resource = self._kinds.member_resource(cluster, kind)
        if resource is None:
            await self._kinds.track_members(hub_resource, [self._clusters.get(cluster)])
            resource = self._kinds.member_resource(cluster, kind)
        if resource is None:
            # The member does not serve this kind (yet): no copy can exist there.
            self._clusters.get(cluster).check_writable()
            return None
        return await self._mc.get(resource, name, namespace, cluster=cluster, copy=False)

    async def managed_fields(self, hub_resource: Resource, cluster: str, name: str,
                             namespace: str | None) -> Sequence[ReadOnly] | None:
        resource = self._kinds.member_resource(cluster, group_kind(hub_resource))
        if resource is None:
            return None
        try:
            live = await self._clusters.get(cluster).check_writable().get(
                resource, name, namespace)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        found = (live.get("metadata") or {}).get("managedFields")
        return list(found) if isinstance(found, list) and found else None
