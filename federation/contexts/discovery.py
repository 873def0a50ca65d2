"""API discovery: from a kind (and optionally its apiVersion) to a :class:`Resource`.

Built-in kinds could be a table, but the control plane propagates arbitrary
kinds, CRDs included, to members that may serve different versions. So each
cluster's :class:`Discovery` asks the server, lazily and with a cache:

- ``resolve(api_version, kind)`` reads one group version's resource list
  (``/api/v1`` or ``/apis/GROUP/VERSION``): one small call per group version;
- ``find(kind)`` (no version given) reads ``/api`` and ``/apis`` to learn each
  group's preferred version, then those groups' lists, and picks the kind from
  the core group first, then from groups in the server's order.

A miss refreshes once (a CRD may have been created since the last read) and
then raises :class:`UnknownKind`; entries expire after :data:`TTL` seconds so
an upgraded CRD's new version is seen without a restart.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from federation.contexts.client import ApiError, ClientError, ObjectClient, Resource

TTL = 300.0
"""Seconds a group version's resource list is trusted. kubectl caches discovery
for 10 minutes on disk; 5 minutes is cheap (one small call per group version)
and picks up CRD changes within the time an operator would expect."""


class UnknownKind(ClientError):
    """The cluster serves no resource of this kind (or group version)."""

    retryable = False


def split_api_version(api_version: str) -> tuple[str, str]:
    """``apps/v1`` -> (``apps``, ``v1``); ``v1`` -> (``""``, ``v1``)."""
    group, _, version = api_version.rpartition("/")
    return group, version


def group_version_path(group: str, version: str) -> str:
    return f"/apis/{group}/{version}" if group else f"/api/{version}"


def parse_resource_list(group: str, version: str, document: dict[str, Any]
                        ) -> dict[str, Resource]:
    """kind -> Resource from an APIResourceList, leaving out subresources."""
    found: dict[str, Resource] = {}
    for item in document.get("resources") or []:
        plural = str(item.get("name") or "")
        if not plural or "/" in plural:
            continue
        kind = str(item.get("kind") or "")
        found.setdefault(kind, Resource(group, version, plural, kind,
                                        namespaced=bool(item.get("namespaced"))))
    return found


class Discovery:
    """What one cluster serves, read on demand and cached."""

    def __init__(self, client: ObjectClient, ttl: float = TTL) -> None:
        self.client = client
        self.ttl = ttl
        self._lists: dict[tuple[str, str], tuple[float, dict[str, Resource]]] = {}
        self._preferred: tuple[float, list[tuple[str, str]]] | None = None
        self._lock = asyncio.Lock()

    async def resolve(self, api_version: str, kind: str) -> Resource:
        """The resource serving ``kind`` in ``api_version``; refreshes once on a miss."""
        group, version = split_api_version(api_version)
        for refresh in (False, True):
            kinds = await self._resource_list(group, version, refresh)
            if kind in kinds:
                return kinds[kind]
        raise UnknownKind(self.client.name, f"no kind {kind!r} in {api_version}")

    async def find(self, kind: str) -> Resource:
        """The resource serving ``kind`` in its group's preferred version."""
        for refresh in (False, True):
            for group, version in await self._preferred_versions(refresh):
                kinds = await self._resource_list(group, version, refresh)
                if kind in kinds:
                    return kinds[kind]
        raise UnknownKind(self.client.name, f"no kind {kind!r} served")

    async def _resource_list(self, group: str, version: str, refresh: bool
                             ) -> dict[str, Resource]:
        cached = self._lists.get((group, version))
        if cached and not refresh and time.monotonic() - cached[0] < self.ttl:
            return cached[1]
        try:
            document = await self.client.request("GET", group_version_path(group, version))
        except ApiError as exc:
            if exc.status != 404:
                raise
            document = {}
        kinds = parse_resource_list(group, version, document)
        self._lists[(group, version)] = (time.monotonic(), kinds)
        return kinds

    async def _preferred_versions(self, refresh: bool) -> list[tuple[str, str]]:
        async with self._lock:
            if (self._preferred and not refresh
                    and time.monotonic() - self._preferred[0] < self.ttl):
                return self._preferred[1]
            core = await self.client.request("GET", "/api")
            groups = await self.client.request("GET", "/apis")
            versions = [("", str(v)) for v in core.get("versions") or []][:1]
            for group in groups.get("groups") or []:
                preferred = (group.get("preferredVersion") or {}).get("version")
                if preferred:
                    versions.append((str(group["name"]), str(preferred)))
            self._preferred = (time.monotonic(), versions)
            return versions
