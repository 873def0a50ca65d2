"""Requests, results and the reconciler protocol.

A :class:`Request` names one object in one cluster: (cluster, kind, namespace,
name), printed ``cluster://member1/Deployment.apps/default/web``. It carries no
object and no event type: reconciles are level-triggered, so a reconciler reads
the current state (from the cache, which may be slightly stale) and makes the
world match; it must be idempotent, because the same request can arrive again
at any time.

What a reconcile returns means what it means in controller-runtime:

- ``None`` or ``Result()``: done; the key's failure count is forgotten.
- ``Result(requeue_after=s)``: done for now; reconcile again in ``s`` seconds.
- an exception: failed; logged, counted and retried with per-key backoff.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Protocol

from federation.contexts.client import Resource


@dataclasses.dataclass(frozen=True, order=True)
class Request:
    """One object to reconcile, in one cluster."""

    cluster: str
    kind: str
    """The group kind, ``Kind.group`` (``Deployment.apps``), or ``Kind`` for the core group."""
    namespace: str
    name: str

    def __str__(self) -> str:
        path = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"cluster://{self.cluster}/{self.kind}/{path}"


@dataclasses.dataclass(frozen=True)
class Result:
    requeue_after: float | None = None
    """Seconds until this request should be reconciled again, or None."""


class Reconciler(Protocol):
    async def reconcile(self, request: Request) -> Result | None: ...


ReconcileFunc = Callable[[Request], Awaitable[Result | None]]


def group_kind(resource: Resource) -> str:
    """The ``kind`` of a :class:`Request` for objects of ``resource``."""
    return f"{resource.kind}.{resource.group}" if resource.group else resource.kind
