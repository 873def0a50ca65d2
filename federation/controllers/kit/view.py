"""The one read-only view a controller's steps are handed.

A step (see :mod:`.chain`) reads the world through a :class:`View` and nothing else:
cached gets and lists of hub and member objects, the member clusters as plain values,
the clock. Nothing in it can write: no client, no cluster object, no queue. Controllers
extend it with pure services of their own (propagation adds the scheduler and the
failover rules) and keep the writer-capable parts private to the implementation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from federation.contexts.cache import ReadOnly
from federation.contexts.client import Resource
from federation.contexts.clusters import ClusterSet
from federation.hub import clusters as hub_clusters
from federation.placement import clusters as clusters_


@dataclasses.dataclass(frozen=True)
class Member:
    """What a step needs to know of one cluster of the ClusterSet."""

    name: str
    is_hub: bool
    reachable: bool
    """Engaged and answering (its probe has not failed)."""
    joined: bool = False
    """Joined at runtime from its MemberCluster (not a static context): it exists only
    while that MemberCluster does."""


def members_of(clusters: ClusterSet) -> list[Member]:
    """The ClusterSet's members as values (engaged and answering: reachable)."""
    return [Member(c.name, c.is_hub, c.engaged and c.available is not False, c.joined)
            for c in clusters.members]


def placement_clusters(registered: Sequence[Mapping[str, Any]], members: Sequence[Member]
                       ) -> list[clusters_.Cluster]:
    """The members of the ClusterSet, each described by its MemberCluster when it has one.

    The ClusterSet is the one source of truth for which clusters exist: the static
    members (``fedctl run --contexts``) and those joined from a MemberCluster's Secret
    alike. A MemberCluster adds what placement reads (labels, location, taints,
    conditions, capacity) to the member of its name; one naming no member of the set is
    no placement target (nothing here can reach it). A static member without one is placed
    on bare. A joined member whose MemberCluster is gone or being deleted is no target:
    it is leaving (membership has not yet seen the delete), and placing it bare would
    drop the taints it was leaving under (``fedctl unjoin``) and divide replicas back to
    it. A member is ready when it is engaged, answers, and its MemberCluster (if any)
    does not say Ready=False; a disabled or misconfigured member is known but not ready.
    """
    docs = {str(doc["metadata"]["name"]): doc for doc in registered}
    found = []
    for member in members:
        if member.is_hub and member.name not in docs:
            continue
        doc = docs.get(member.name)
        if member.joined and hub_clusters.leaving(doc):
            continue
        found.append(hub_clusters.member_cluster(doc, member.reachable) if doc is not None
                     else clusters_.Cluster(name=member.name, ready=member.reachable))
    return found



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
