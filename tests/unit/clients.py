"""Bases for test fakes of the clients: they serve nothing until told to.

Code takes a client as a protocol (one cluster's: :class:`~federation.contexts.client.
ObjectReader`, ``ObjectClient``, ``ClusterAPI``; the multi-cluster client's:
:class:`~federation.contexts.multicluster.MultiCluster` and its parts), so a fake must
have every method of it. A fake subclasses :class:`Unserved` (one cluster) or
:class:`UnservedFleet` / :class:`UnservedWrites` (the multi-cluster client, one cluster's
writer) and overrides only the calls its test serves; any other call fails with a 405
naming it (as a pull member's client refuses a verb it does not serve), never a silent
success. mypy checks each override against the protocol's signature.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal, overload

from federation.contexts.cache import ReadOnly
from federation.contexts.client import JSON, MERGE_PATCH, ApiError, Resource, WritePermit
from federation.contexts.multicluster import ClusterWrites, ListResult, ListView


def refused(cluster: str, call: str) -> ApiError:
    return ApiError(cluster, 405, "MethodNotAllowed", f"{call} is not served by this fake")


class Unserved:
    """A :class:`~federation.contexts.client.ClusterAPI` whose every call is refused."""

    name = "fake"
    fence: WritePermit | None = None

    def _refuse(self, call: str) -> ApiError:
        return refused(self.name, call)

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        raise self._refuse(f"get {resource.plural}")

    async def list(self, resource: Resource, namespace: str | None = None,
                   **params: Any) -> JSON:
        raise self._refuse(f"list {resource.plural}")

    async def watch(self, resource: Resource, *, namespace: str | None = None,
                    resource_version: str | None = None, timeout_seconds: int = 290,
                    inactivity_timeout: float | None = None,
                    **params: Any) -> AsyncIterator[JSON]:
        for _ in ():  # an async generator, as the real watch is
            yield {}
        raise self._refuse(f"watch {resource.plural}")

    async def create(self, resource: Resource, body: JSON,
                     namespace: str | None = None) -> JSON:
        raise self._refuse(f"create {resource.plural}")

    async def replace(self, resource: Resource, body: JSON, subresource: str | None = None
                      ) -> JSON:
        raise self._refuse(f"replace {resource.plural}")

    async def patch(self, resource: Resource, name: str, patch: Any, *,
                    namespace: str | None = None, subresource: str | None = None,
                    content_type: str = MERGE_PATCH, **params: Any) -> JSON:
        raise self._refuse(f"patch {resource.plural}")

    async def apply(self, resource: Resource, body: JSON, field_manager: str, *,
                    force: bool = False, subresource: str | None = None) -> JSON:
        raise self._refuse(f"apply {resource.plural}")

    async def delete(self, resource: Resource, name: str, namespace: str | None = None,
                     **body: Any) -> JSON:
        raise self._refuse(f"delete {resource.plural}")

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      timeout: float | None = None) -> JSON:
        raise self._refuse(f"{method} {path}")

    async def request_raw(self, path: str, *, params: Mapping[str, Any] | None = None,
                          timeout: float | None = None) -> bytes:
        raise self._refuse(f"GET {path}")

    async def close(self) -> None:
        return None


class UnservedWrites:
    """A :class:`~federation.contexts.multicluster.ClusterWrites` refusing every call."""

    name = "fake"

    async def resource(self, obj: Mapping[str, Any]) -> Resource:
        raise refused(self.name, f"discovery of {obj.get('kind')}")

    async def get(self, resource: Resource, name: str, namespace: str | None = None
                  ) -> JSON:
        raise refused(self.name, f"live get {resource.plural}")

    async def list(self, resource: Resource, namespace: str | None = None, **params: Any
                   ) -> JSON:
        raise refused(self.name, f"live list {resource.plural}")

    async def create(self, obj: JSON, *, resource: Resource | None = None) -> JSON:
        raise refused(self.name, f"create {obj.get('kind')}")

    async def update(self, obj: JSON, *, resource: Resource | None = None) -> JSON:
        raise refused(self.name, f"update {obj.get('kind')}")

    async def patch(self, resource: Resource, name: str, patch: JSON, *,
                    namespace: str | None = None, resource_version: str | None = None,
                    content_type: str = MERGE_PATCH, subresource: str | None = None
                    ) -> JSON:
        raise refused(self.name, f"patch {resource.plural}")

    async def patch_status(self, resource: Resource, name: str, patch: JSON, *,
                           namespace: str | None = None,
                           resource_version: str | None = None) -> JSON:
        raise refused(self.name, f"patch {resource.plural}/status")

    async def apply(self, obj: JSON, *, resource: Resource | None = None, force: bool = True,
                    resource_version: str | None = None, subresource: str | None = None
                    ) -> JSON:
        raise refused(self.name, f"apply {obj.get('kind')}")

    async def delete(self, resource: Resource, name: str, namespace: str | None = None, *,
                     resource_version: str | None = None, uid: str | None = None,
                     propagation_policy: str | None = "Background") -> JSON:
        raise refused(self.name, f"delete {resource.plural}")


class UnservedFleet:
    """A :class:`~federation.contexts.multicluster.MultiCluster` refusing every read; its
    writers are :class:`UnservedWrites`. A fake serving lists overrides :meth:`items`."""

    def items(self, resource: Resource, namespace: str | None,
              clusters: Sequence[str] | None) -> dict[str, list[JSON]]:
        """The objects a cached list finds, per cluster."""
        raise refused(",".join(clusters or ["members"]), f"cached list {resource.plural}")

    async def get(self, resource: Resource, name: str, namespace: str | None = None, *,
                  cluster: str, allow_stale: bool = False, copy: bool = True) -> JSON | None:
        raise refused(cluster, f"cached get {resource.plural}")

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

    async def list(self, resource: Resource, namespace: str | None = None, *,
                   clusters: Sequence[str] | None = None,
                   label_selector: str | Mapping[str, str] | None = None,
                   allow_stale: bool = False, copy: bool = True) -> ListResult | ListView:
        found = self.items(resource, namespace, clusters)
        if copy:
            return ListResult(found)
        return ListView({name: [obj for obj in objs] for name, objs in found.items()})

    async def view(self, resource: Resource, name: str, namespace: str | None = None, *,
                   cluster: str, allow_stale: bool = False) -> ReadOnly | None:
        return await self.get(resource, name, namespace, cluster=cluster,
                              allow_stale=allow_stale, copy=False)

    async def list_view(self, resource: Resource, namespace: str | None = None, *,
                        clusters: Sequence[str] | None = None,
                        label_selector: str | Mapping[str, str] | None = None,
                        allow_stale: bool = False) -> ListView:
        return await self.list(resource, namespace, clusters=clusters,
                               label_selector=label_selector, allow_stale=allow_stale,
                               copy=False)

    def cluster(self, name: str) -> ClusterWrites:
        return UnservedWrites()
