"""``fedctl get KIND -w``: the objects across the members, then every change as it happens.

Like ``kubectl get -w --output-watch-events``: one line per object listed (``ADDED``) and
then one per watch event, each saying which cluster it came from. Every member is
followed on its own: a member that cannot be reached gets an ``error:`` line on stderr
and is tried again with a growing pause (at most :data:`MAX_PAUSE` seconds) while the
others go on; a watch the server ends is resumed from the last version seen, and one
whose version expired (410) starts over with a fresh list.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from federation.contexts import client as kube
from federation.contexts import discovery, kubeconfig
from federation.hub import manifests

JSON = dict[str, Any]
MAX_PAUSE = 30.0
COLUMNS = ("EVENT", "CLUSTER", "NAMESPACE", "NAME", "READY", "MANAGED", "AGE")
WIDTHS = (9, 12, 18, 34, 8, 8)


class Watcher(Protocol):
    """What following one member needs of its client."""

    name: str

    async def list(self, resource: kube.Resource, namespace: str | None = None,
                   **params: Any) -> JSON: ...

    def watch(self, resource: kube.Resource, *, namespace: str | None = None,
              resource_version: str | None = None, **params: Any) -> AsyncIterator[JSON]: ...


Connect = Callable[[kubeconfig.Context], contextlib.AbstractAsyncContextManager[Any]]
Emit = Callable[[str, str, JSON], None]
Report = Callable[[str, str], None]
Sleep = Callable[[float], Awaitable[None]]


def header() -> str:
    return line(COLUMNS)


def line(cells: tuple[str, ...]) -> str:
    padded = [cell.ljust(width) for cell, width in zip(cells, WIDTHS, strict=False)]
    return " ".join([*padded, *cells[len(WIDTHS):]]).rstrip()


def row(event: str, cluster: str, obj: JSON, ready: str, age: str) -> str:
    meta = obj.get("metadata") or {}
    return line((event, cluster, str(meta.get("namespace", "")), str(meta.get("name", "")),
                 ready, "yes" if manifests.is_ours(obj) else "no", age))


class _Expired(Exception):
    """The watch's resourceVersion is too old (410): list again."""


async def follow(context: kubeconfig.Context, kind: str, name: str | None,
                 namespace: str | None, emit: Emit, report: Report, *,
                 connect: Connect = kube.connect, sleep: Sleep = asyncio.sleep) -> None:
    """Follow one member until cancelled: list, then watch, then resume or start over."""
    pauses = Pauses()
    while True:
        try:
            async with connect(context) as client:
                resource = await discovery.Discovery(client).find(kind)
                await _list_and_watch(client, resource, name, namespace, emit, pauses.reset)
        except kube.ClientError as exc:
            report(context.name, str(exc).removeprefix(f"{context.name}: "))
            await sleep(pauses.next())


class Pauses:
    """1 s, 2 s, 4 s... up to :data:`MAX_PAUSE`; back to 1 s once a list succeeds."""

    def __init__(self) -> None:
        self.pause = 1.0

    def next(self) -> float:
        pause, self.pause = self.pause, min(self.pause * 2, MAX_PAUSE)
        return pause

    def reset(self) -> None:
        self.pause = 1.0


async def _list_and_watch(client: Watcher, resource: kube.Resource, name: str | None,
                          namespace: str | None, emit: Emit,
                          listed: Callable[[], None]) -> None:
    scope = namespace if resource.namespaced else None
    selector = {"fieldSelector": f"metadata.name={name}"} if name else {}
    while True:
        listing = await client.list(resource, scope, **selector)
        listed()
        for item in listing.get("items") or []:
            item.setdefault("kind", resource.kind)
            emit("ADDED", client.name, item)
        version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
        with contextlib.suppress(_Expired):
            while True:
                version = await _watch_once(client, resource, scope, version, selector, emit)


async def _watch_once(client: Watcher, resource: kube.Resource, scope: str | None,
                      version: str, selector: dict[str, str], emit: Emit) -> str:
    """One watch request, to its end; the last resourceVersion seen."""
    async for event in client.watch(resource, namespace=scope, resource_version=version,
                                    **selector):
        kind, obj = str(event.get("type") or ""), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Expired
            raise kube.ApiError(client.name, int(obj.get("code") or 500),
                                str(obj.get("reason") or ""), str(obj.get("message") or ""))
        version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
        if kind != "BOOKMARK":
            obj.setdefault("kind", resource.kind)
            emit(kind, client.name, obj)
    return version
