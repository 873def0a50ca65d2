"""The multi-cluster client: reads from caches, writes to one named context each.

Controllers hold one :class:`MultiClusterClient` and never a bare
:class:`~federation.contexts.client.ClusterAPI`; they type it as the narrowest protocol
that says what they use (:class:`MultiCluster`, :class:`MultiClusterReader`,
:class:`MultiClusterWriter`), so a test's in-memory fleet stands in for it. As in
controller-runtime, reads and writes differ:

- **Reads** (:meth:`~MultiClusterClient.get`, :meth:`~MultiClusterClient.list`)
  come from the informer of (cluster, resource), started on first use. By
  default they return deep copies, so a reconcile may edit what it read; with
  ``copy=False`` they return the cached objects themselves, typed
  :data:`~federation.contexts.cache.ReadOnly` (a :class:`ListView` for lists),
  at no cost. The rule: **read with** ``copy=False`` **and copy only what you are
  about to change** (``copy.deepcopy`` of that one object or field, right
  before the change). Deep copies of every read were about 60% of the control
  plane's CPU. A cluster whose
  cache is not current (not synced, watch broken, probe failing) answers
  with a retryable :class:`~federation.contexts.client.ClusterUnavailable`, or,
  for a list across clusters, with an entry in :attr:`ListResult.errors`; its
  stale items are returned only when asked for (``allow_stale=True``).
- **Writes** go to API servers, always to one named context:
  :meth:`MultiClusterClient.cluster` gives a :class:`ClusterWriter` bound to it.
  There is no write "to wherever the object belongs": which clusters get what is
  the propagation plan's decision, and each of its vertices names its cluster, so
  a failure is reported per cluster by the plan's executor. A write to a
  disabled, unavailable or misconfigured cluster raises a retryable error: it is
  never reported as done. Under leader election every write also passes the
  fence of the target's client (:class:`~federation.contexts.client.Fence`),
  checked as the request is sent, after any wait for a connection: once this
  process may no longer lead, each raises
  :class:`~federation.contexts.client.NotLeader` and nothing is sent.

Optimistic concurrency is the server's: ``update`` sends the object's
``metadata.resourceVersion`` (a stale one is a 409 Conflict), ``patch`` and
``apply`` take an optional ``resource_version`` to do the same, and ``delete``
sends it (and the UID) as preconditions.

The kind of a written object is resolved through the target cluster's
discovery from its ``apiVersion`` and ``kind``, so CRDs and kinds the hub does
not serve work as well as built-ins; pass ``resource=`` to skip discovery.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from copy import deepcopy
from typing import Any, Generic, Literal, Protocol, TypeVar, cast, overload

from federation.contexts import cache, scoped, selectors
from federation.contexts.client import (
    JSON,
    MERGE_PATCH,
    ClientError,
    ClusterAPI,
    ClusterUnavailable,
    Resource,
)
from federation.contexts.clusters import Cluster, ClusterSet

READ_SYNC_TIMEOUT = 10.0
"""Seconds a read waits for an informer started by that read to list: a first
list of a few thousand objects takes well under a second; a member that needs
longer is treated as unavailable for that read."""


T = TypeVar("T", JSON, cache.ReadOnly)


@dataclasses.dataclass
class _Listing(Generic[T]):
    items: dict[str, list[T]] = dataclasses.field(default_factory=dict)
    errors: dict[str, Exception] = dataclasses.field(default_factory=dict)

    def all(self) -> list[tuple[str, T]]:
        """Every item with its cluster's name, clusters in name order."""
        return [(name, obj) for name in sorted(self.items) for obj in self.items[name]]

    def __len__(self) -> int:
        return sum(len(v) for v in self.items.values())


@dataclasses.dataclass
class ListResult(_Listing[JSON]):
    """Items per cluster (copies: the caller's own), and per cluster the error that kept
    it from answering."""


@dataclasses.dataclass
class ListView(_Listing[cache.ReadOnly]):
    """Items per cluster as cached (shared, read-only: copy before changing one), and
    per cluster the error that kept it from answering."""


class ClusterWriter:
    """Writes to one cluster, each checked against the cluster's state first."""

    def __init__(self, cluster: Cluster, field_manager: str) -> None:
        self.cluster = cluster
        self.field_manager = field_manager

    @property
    def client(self) -> ClusterAPI:
        return self.cluster.check_writable()

    async def resource(self, obj: Mapping[str, Any]) -> Resource:
        """The resource of ``obj`` (by apiVersion and kind) on this cluster."""
        self.cluster.check_writable()
        assert self.cluster.discovery is not None
        return await self.cluster.discovery.resolve(str(obj.get("apiVersion") or ""),
                                                    str(obj.get("kind") or ""))

    async def _resource(self, obj: Mapping[str, Any], resource: Resource | None) -> Resource:
        return resource if resource is not None else await self.resource(obj)

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        """A live read from the server (use the multi-cluster client's cached reads first)."""
        return cache.strip(await self.client.get(resource, name, namespace))

    async def list(self, resource: Resource, namespace: str | None = None, **params: Any
                   ) -> JSON:
        """A live list from the server, with the API's own parameters (a field selector):
        for reads no informer keeps, such as the events the recorder looks up once."""
        return await self.client.list(resource, namespace, **params)

    async def create(self, obj: JSON, *, resource: Resource | None = None) -> JSON:
        resource = await self._resource(obj, resource)
        return await self.client.create(resource, obj)

    async def update(self, obj: JSON, *, resource: Resource | None = None) -> JSON:
        """PUT; the object's ``metadata.resourceVersion`` makes it fail (409) if stale."""
        resource = await self._resource(obj, resource)
        return await self.client.replace(resource, obj)

    async def update_status(self, obj: JSON, *, resource: Resource | None = None) -> JSON:
        resource = await self._resource(obj, resource)
        return await self.client.replace(resource, obj, subresource="status")

    async def patch(self, resource: Resource, name: str, patch: JSON, *,
                    namespace: str | None = None, resource_version: str | None = None,
                    content_type: str = MERGE_PATCH, subresource: str | None = None) -> JSON:
        """A merge patch (by default); ``resource_version`` makes it conditional."""
        if resource_version is not None:
            patch = {**patch, "metadata": {**(patch.get("metadata") or {}),
                                           "resourceVersion": resource_version}}
        return await self.client.patch(resource, name, patch, namespace=namespace,
                                       subresource=subresource, content_type=content_type)

    async def patch_status(self, resource: Resource, name: str, patch: JSON, *,
                           namespace: str | None = None,
                           resource_version: str | None = None) -> JSON:
        return await self.patch(resource, name, patch, namespace=namespace,
                                resource_version=resource_version, subresource="status")

    async def apply(self, obj: JSON, *, resource: Resource | None = None, force: bool = True,
                    resource_version: str | None = None, subresource: str | None = None
                    ) -> JSON:
        """Server-side apply as this client's field manager (forcing ownership by default:
        the control plane is the source of truth for what it propagates)."""
        resource = await self._resource(obj, resource)
        body = obj
        if resource_version is not None:
            body = {**obj, "metadata": {**obj["metadata"], "resourceVersion": resource_version}}
        return await self.client.apply(resource, body, self.field_manager, force=force,
                                       subresource=subresource)

    async def delete(self, resource: Resource, name: str, namespace: str | None = None, *,
                     resource_version: str | None = None, uid: str | None = None,
                     propagation_policy: str | None = "Background") -> JSON:
        """Delete, with resourceVersion/UID preconditions when given."""
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        preconditions = {k: v for k, v in (("resourceVersion", resource_version),
                                           ("uid", uid)) if v}
        if preconditions:
            body["preconditions"] = preconditions
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        return await self.client.delete(resource, name, namespace, **body)


# -- what controllers ask of the multi-cluster client --------------------------------------
# Controllers and the kit type against these, not against MultiClusterClient, so that a test
# passes an in-memory fleet of its own (mypy checks it structurally).


class ClusterWrites(Protocol):
    """Writes to one named cluster (:class:`ClusterWriter`'s surface)."""

    async def resource(self, obj: Mapping[str, Any]) -> Resource: ...

    async def get(self, resource: Resource, name: str, namespace: str | None = None
                  ) -> JSON: ...

    async def list(self, resource: Resource, namespace: str | None = None, **params: Any
                   ) -> JSON: ...

    async def create(self, obj: JSON, *, resource: Resource | None = None) -> JSON: ...

    async def update(self, obj: JSON, *, resource: Resource | None = None) -> JSON: ...

    async def patch(self, resource: Resource, name: str, patch: JSON, *,
                    namespace: str | None = None, resource_version: str | None = None,
                    content_type: str = MERGE_PATCH, subresource: str | None = None
                    ) -> JSON: ...

    async def patch_status(self, resource: Resource, name: str, patch: JSON, *,
                           namespace: str | None = None,
                           resource_version: str | None = None) -> JSON: ...

    async def apply(self, obj: JSON, *, resource: Resource | None = None, force: bool = True,
                    resource_version: str | None = None, subresource: str | None = None
                    ) -> JSON: ...

    async def delete(self, resource: Resource, name: str, namespace: str | None = None, *,
                     resource_version: str | None = None, uid: str | None = None,
                     propagation_policy: str | None = "Background") -> JSON: ...


class MultiClusterWriter(Protocol):
    """Writes, each through one named cluster's :class:`ClusterWrites` (the event recorder
    needs no more)."""

    def cluster(self, name: str) -> ClusterWrites: ...


class MultiClusterReader(Protocol):
    """Cached reads across clusters (:class:`MultiClusterClient`'s, documented there)."""

    @overload
    async def get(self, resource: Resource, name: str, namespace: str | None = None, *,
                  cluster: str, allow_stale: bool = False,
                  copy: Literal[True] = True) -> JSON | None: ...

    @overload
    async def get(self, resource: Resource, name: str, namespace: str | None = None, *,
                  cluster: str, allow_stale: bool = False,
                  copy: Literal[False]) -> cache.ReadOnly | None: ...

    @overload
    async def list(self, resource: Resource, namespace: str | None = None, *,
                   clusters: Sequence[str] | None = None,
                   label_selector: str | Mapping[str, str] | None = None,
                   allow_stale: bool = False, copy: Literal[True] = True) -> ListResult: ...

    @overload
    async def list(self, resource: Resource, namespace: str | None = None, *,
                   clusters: Sequence[str] | None = None,
                   label_selector: str | Mapping[str, str] | None = None,
                   allow_stale: bool = False, copy: Literal[False]) -> ListView: ...

    async def view(self, resource: Resource, name: str, namespace: str | None = None, *,
                   cluster: str, allow_stale: bool = False) -> cache.ReadOnly | None: ...

    async def list_view(self, resource: Resource, namespace: str | None = None, *,
                        clusters: Sequence[str] | None = None,
                        label_selector: str | Mapping[str, str] | None = None,
                        allow_stale: bool = False) -> ListView: ...


class MultiCluster(MultiClusterReader, MultiClusterWriter, Protocol):
    """Cached reads and per-cluster writes: what a controller holds."""


class MultiClusterClient:
    """Cached reads across clusters; writes through one named cluster's writer."""

    def __init__(self, clusters: ClusterSet, field_manager: str = "federation") -> None:
        self.clusters = clusters
        self.field_manager = field_manager

    def cluster(self, name: str) -> ClusterWriter:
        """Writes to the cluster of context ``name`` (unknown names raise at once)."""
        return ClusterWriter(self.clusters.get(name), self.field_manager)

    # -- reads ---------------------------------------------------------------------------

    async def _informer(self, cluster: Cluster, resource: Resource, allow_stale: bool,
                        namespace: str | None = None) -> cache.CachedResource:
        if cluster.cache is None or not cluster.engaged:
            cluster.check_writable()  # raises the reason
            raise ClusterUnavailable(cluster.name, "not engaged")
        informer = cluster.cache.informer(resource)
        cluster.cache.start()  # no-op when running; outside a manager, reads start caches
        if isinstance(informer, scoped.ScopedInformer) and namespace:
            # Cached only where granted: that namespace's own informer (NotGranted if none).
            informer = await informer.namespace(namespace, READ_SYNC_TIMEOUT)
        if not informer.synced.is_set() and not await informer.wait_synced(READ_SYNC_TIMEOUT):
            raise ClusterUnavailable(cluster.name, f"cache of {resource.plural} not synced"
                                     f"{_because(informer)}")
        if not allow_stale and (cluster.available is False or informer.state == "backoff"):
            reason = cluster.last_probe_error if cluster.available is False \
                else informer.last_error
            raise ClusterUnavailable(cluster.name, f"cache of {resource.plural} is stale "
                                                   f"({reason})")
        return informer

    @overload
    async def get(self, resource: Resource, name: str, namespace: str | None = None, *,
                  cluster: str, allow_stale: bool = False,
                  copy: Literal[True] = True) -> JSON | None: ...

    @overload
    async def get(self, resource: Resource, name: str, namespace: str | None = None, *,
                  cluster: str, allow_stale: bool = False,
                  copy: Literal[False]) -> cache.ReadOnly | None: ...

    @overload
    async def get(self, resource: Resource, name: str, namespace: str | None = None, *,
                  cluster: str, allow_stale: bool = False,
                  copy: bool) -> JSON | cache.ReadOnly | None: ...

    async def get(self, resource: Resource, name: str, namespace: str | None = None, *,
                  cluster: str, allow_stale: bool = False,
                  copy: bool = True) -> JSON | cache.ReadOnly | None:
        """The cached object (a deep copy unless ``copy=False``), or None when the cache
        has no such object."""
        informer = await self._informer(self.clusters.get(cluster), resource, allow_stale,
                                        namespace)
        found = informer.store.get(namespace, name)
        if found is None or not copy:
            return found
        return deepcopy(found)

    @overload
    async def list(self, resource: Resource, namespace: str | None = None, *,
                   clusters: Sequence[str] | None = None,
                   label_selector: str | Mapping[str, str] | None = None,
                   allow_stale: bool = False, copy: Literal[True] = True) -> ListResult: ...

    @overload
    async def list(self, resource: Resource, namespace: str | None = None, *,
                   clusters: Sequence[str] | None = None,
                   label_selector: str | Mapping[str, str] | None = None,
                   allow_stale: bool = False, copy: Literal[False]) -> ListView: ...

    @overload
    async def list(self, resource: Resource, namespace: str | None = None, *,
                   clusters: Sequence[str] | None = None,
                   label_selector: str | Mapping[str, str] | None = None,
                   allow_stale: bool = False, copy: bool) -> ListResult | ListView: ...

    async def list(self, resource: Resource, namespace: str | None = None, *,
                   clusters: Sequence[str] | None = None,
                   label_selector: str | Mapping[str, str] | None = None,
                   allow_stale: bool = False, copy: bool = True) -> ListResult | ListView:
        """The cached objects in each cluster (default: every member): deep copies in a
        :class:`ListResult`, or with ``copy=False`` the cached objects in a
        :class:`ListView`."""
        names = list(clusters) if clusters is not None else [
            c.name for c in self.clusters.members]
        selector = selectors.parse(label_selector)
        view = ListView()

        async def one(name: str) -> None:
            try:
                informer = await self._informer(self.clusters.get(name), resource, allow_stale,
                                                namespace)
            except ClientError as exc:
                view.errors[name] = exc
                if not (allow_stale and isinstance(exc, ClusterUnavailable)):
                    return
                cluster = self.clusters.get(name)
                if cluster.cache is None or resource not in cluster.cache.informers:
                    return
                informer = cluster.cache.informers[resource]
            view.items[name] = list(informer.store.list(namespace, selector))

        if len(names) == 1:
            # The common read (a controller's own hub cache): awaited in place. A task per
            # cluster (gather) cost more than the read itself, on every cached list.
            await one(names[0])
        else:
            await asyncio.gather(*(one(n) for n in names))
        if not copy:
            return view
        return ListResult({name: [_copy(o) for o in items]
                           for name, items in view.items.items()}, view.errors)

    async def view(self, resource: Resource, name: str, namespace: str | None = None, *,
                   cluster: str, allow_stale: bool = False) -> cache.ReadOnly | None:
        """``get(..., copy=False)``: the cached object itself, read-only."""
        return await self.get(resource, name, namespace, cluster=cluster,
                              allow_stale=allow_stale, copy=False)

    async def list_view(self, resource: Resource, namespace: str | None = None, *,
                        clusters: Sequence[str] | None = None,
                        label_selector: str | Mapping[str, str] | None = None,
                        allow_stale: bool = False) -> ListView:
        """``list(..., copy=False)``: the cached objects themselves, read-only."""
        return await self.list(resource, namespace, clusters=clusters,
                               label_selector=label_selector, allow_stale=allow_stale,
                               copy=False)


def _copy(obj: cache.ReadOnly) -> JSON:
    """A deep copy of a cached object: the caller's own, to change."""
    return cast(JSON, deepcopy(obj))


def _because(informer: cache.CachedResource) -> str:
    return f" ({informer.last_error})" if informer.last_error else ""
