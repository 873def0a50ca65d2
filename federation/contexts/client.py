"""An asyncio client for one cluster, speaking plain dicts.

Objects stay the JSON the API server sent: no model classes on the hot path
(the official client's model deserialisation costs several times the parse).
One :class:`ClusterClient` owns one aiohttp session with a TLS context built
from a :class:`~federation.contexts.kubeconfig.Context`; every call has a
timeout, and failures are sorted into two kinds a caller can act on:

- :class:`ApiError`: the server answered with an error status (404, 409, 422...).
- :class:`ClusterUnavailable`: no answer (refused, reset, timed out, TLS
  failure). Always retryable; a write that raised it did not happen as far as
  we can tell, and is never reported as a success.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import ssl
import tempfile
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp

from federation.contexts import kubeconfig

JSON = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


@dataclasses.dataclass(frozen=True)
class Resource:
    """One REST resource (a kind's plural) of one group/version."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [base]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet")
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet")


class ClientError(Exception):
    """Base of the errors a :class:`ClusterClient` raises."""

    def __init__(self, cluster: str, message: str) -> None:
        super().__init__(f"{cluster}: {message}")
        self.cluster = cluster


class ClusterUnavailable(ClientError):
    """The cluster did not answer. Retryable."""

    retryable = True


class ApiError(ClientError):
    """The API server answered with an error status."""

    def __init__(self, cluster: str, status: int, reason: str, message: str,
                 body: JSON | None = None) -> None:
        super().__init__(cluster, f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.body = body or {}

    @property
    def retryable(self) -> bool:
        return self.status in (429, 500, 502, 503, 504)


@dataclasses.dataclass(frozen=True)
class ClientSettings:
    request_timeout: float = 10.0
    """Seconds for a whole non-watch call. A healthy apiserver answers in
    milliseconds; 10 s is long enough for a large list on a loaded machine and
    short enough that a frozen member is noticed before a reconcile backs up."""
    connect_timeout: float = 3.0
    """Seconds to open a connection: loopback and LAN connect in microseconds,
    so 3 s only ever fires on a dead or frozen peer."""
    pool_size: int = 32
    """Connections per cluster: watches hold one each; writes share the rest."""


def ssl_context(context: kubeconfig.Context) -> ssl.SSLContext:
    """Verified TLS for the context: its CA (or the system's) and its client certificate."""
    if context.ca_data:
        tls = ssl.create_default_context(cadata=context.ca_data.decode())
    else:
        tls = ssl.create_default_context()
    if context.insecure_skip_tls_verify:
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    if context.client_cert_data and context.client_key_data:
        _load_client_certificate(tls, context.client_cert_data, context.client_key_data)
    return tls


def _load_client_certificate(tls: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # ssl only loads key material from files: use a private directory, removed at once.
    with tempfile.TemporaryDirectory(prefix="federation-tls-") as directory:
        cert_path = os.path.join(directory, "client.crt")
        key_path = os.path.join(directory, "client.key")
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        tls.load_cert_chain(cert_path, key_path)


class ClusterClient:
    """Calls to one cluster's API server."""

    def __init__(self, context: kubeconfig.Context,
                 settings: ClientSettings | None = None) -> None:
        self.context = context
        self.name = context.name
        self.settings = settings or ClientSettings()
        try:
            self._tls = ssl_context(context)
        except (ssl.SSLError, ValueError) as exc:
            raise kubeconfig.KubeconfigError(
                f"context {context.name!r}: bad certificate or key ({exc})") from None
        self._session: aiohttp.ClientSession | None = None

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        token = self.context.token
        if not token and self.context.token_file:
            token = self.context.token_file.read_text().strip()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._tls, limit=self.settings.pool_size)
            auth = None
            if self.context.username and self.context.password:
                auth = aiohttp.BasicAuth(self.context.username, self.context.password)
            self._session = aiohttp.ClientSession(
                connector=connector, auth=auth, json_serialize=json.dumps,
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      timeout: float | None = None) -> JSON:
        """One call; the decoded JSON answer, or :class:`ApiError`/:class:`ClusterUnavailable`."""
        headers = self._headers()
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = body if isinstance(body, (str, bytes)) else json.dumps(body)
        client_timeout = aiohttp.ClientTimeout(
            total=timeout or self.settings.request_timeout,
            sock_connect=self.settings.connect_timeout,
        )
        try:
            async with self.session.request(
                method, self.context.server + path, params=_params(params), data=data,
                headers=headers, timeout=client_timeout,
            ) as response:
                raw = await response.read()
                return self._decode(response.status, raw)
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError, OSError) as exc:
            raise ClusterUnavailable(self.name, f"{method} {path}: {_describe(exc)}") from None

    def _decode(self, status: int, raw: bytes) -> JSON:
        try:
            payload = json.loads(raw) if raw else {}
        except ValueError:
            payload = {"message": raw[:200].decode(errors="replace")}
        if status >= 400:
            raise ApiError(self.name, status, str(payload.get("reason", "")),
                           str(payload.get("message", "")), payload)
        return payload if isinstance(payload, dict) else {"items": payload}

    # -- verbs -------------------------------------------------------------------------

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        return await self.request("GET", resource.path(namespace, name))

    async def list(self, resource: Resource, namespace: str | None = None,
                   **params: Any) -> JSON:
        return await self.request("GET", resource.path(namespace), params=params)

    async def create(self, resource: Resource, body: JSON,
                     namespace: str | None = None) -> JSON:
        namespace = namespace or body.get("metadata", {}).get("namespace")
        return await self.request("POST", resource.path(namespace), body=body)

    async def replace(self, resource: Resource, body: JSON, subresource: str | None = None
                      ) -> JSON:
        meta = body["metadata"]
        return await self.request("PUT", resource.path(meta.get("namespace"), meta["name"],
                                                       subresource), body=body)

    async def patch(self, resource: Resource, name: str, patch: Any, *,
                    namespace: str | None = None, subresource: str | None = None,
                    content_type: str = MERGE_PATCH, **params: Any) -> JSON:
        return await self.request("PATCH", resource.path(namespace, name, subresource),
                                  body=patch, content_type=content_type, params=params)

    async def apply(self, resource: Resource, body: JSON, field_manager: str, *,
                    force: bool = False, subresource: str | None = None) -> JSON:
        """Server-side apply of a full intent (``application/apply-patch+yaml``, JSON is YAML)."""
        meta = body["metadata"]
        return await self.patch(resource, meta["name"], body, namespace=meta.get("namespace"),
                                subresource=subresource, content_type=APPLY_PATCH,
                                fieldManager=field_manager, force="true" if force else None)

    async def delete(self, resource: Resource, name: str, namespace: str | None = None,
                     **body: Any) -> JSON:
        return await self.request("DELETE", resource.path(namespace, name), body=body or None)

    async def watch(self, resource: Resource, *, namespace: str | None = None,
                    resource_version: str | None = None, timeout_seconds: int = 290,
                    **params: Any) -> AsyncIterator[JSON]:
        """Watch events as dicts (``{"type", "object"}``); ends when the server closes."""
        query = {"watch": "1", "allowWatchBookmarks": "true",
                 "timeoutSeconds": str(timeout_seconds), **params}
        if resource_version:
            query["resourceVersion"] = resource_version
        client_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.settings.connect_timeout, sock_read=timeout_seconds + 30
        )
        path = resource.path(namespace)
        try:
            async with self.session.get(self.context.server + path, params=_params(query),
                                        headers=self._headers(),
                                        timeout=client_timeout) as response:
                if response.status >= 400:
                    self._decode(response.status, await response.read())
                async for line in _lines(response.content):
                    yield json.loads(line)
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError, OSError) as exc:
            raise ClusterUnavailable(self.name, f"watch {path}: {_describe(exc)}") from None


async def _lines(stream: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """Split a stream into lines without a limit on line length (objects can be large)."""
    buffer = b""
    async for chunk in stream.iter_any():
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line, buffer = buffer[:end], buffer[end + 1:]
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


def _params(params: Mapping[str, Any] | None) -> dict[str, str] | None:
    if not params:
        return None
    return {key: str(value) for key, value in params.items() if value is not None}


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]


@contextlib.asynccontextmanager
async def connect(context: kubeconfig.Context,
                  settings: ClientSettings | None = None) -> AsyncIterator[ClusterClient]:
    client = ClusterClient(context, settings)
    try:
        yield client
    finally:
        await client.close()
