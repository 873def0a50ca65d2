"""The one read-only view a controller's steps are handed.

A step (see :mod:`.chain`) reads the world through a :class:`View` and nothing else:
cached gets and lists of hub and member objects, the member clusters as plain values,
the clock. Nothing in it can write: no client, no cluster object, no queue. Controllers
extend it with pure services of their own (propagation adds the scheduler and the
failover rules) and keep the writer-capable parts private to the implementation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

from federation.contexts.cache import ReadOnly
from federation.contexts.client import Resource
from federation.contexts.clusters import ClusterSet


@dataclasses.dataclass(frozen=True)
class Member:
    """What a step needs to know of one cluster of the ClusterSet."""

    name: str
    is_hub: bool
    reachable: bool
    """Engaged and answering (its probe has not failed)."""


def members_of(clusters: ClusterSet) -> list[Member]:
    """The ClusterSet's members as values (engaged and answering: reachable)."""
    return [Member(c.name, c.is_hub, c.engaged and c.available is not False)
            for c in clusters.members]


class View(Protocol):
    """What a step may use: cached reads, the members, the clock. No writer."""

    @property
    def hub(self) -> str:
        """The hub cluster's name."""
        ...

    def now(self) -> float:
        """The controller's clock (monotonic seconds; a fake one in unit tests)."""
        ...

    def members(self) -> Sequence[Member]:
        """The member clusters, as values."""
        ...

    async def get(self, resource: Resource, name: str, namespace: str | None,
                  cluster: str) -> ReadOnly | None:
        """One object from ``cluster``'s cache, read-only (shared with the cache)."""
        ...

    async def list(self, resource: Resource, namespace: str | None = None) -> list[ReadOnly]:
        """Hub objects of ``resource`` (from the hub's cache), read-only."""
        ...
