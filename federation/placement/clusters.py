"""Member clusters as the placement engine sees them.

A :class:`Cluster` is a small immutable value: a name, labels, the three
topology fields Karmada's field selectors and spread constraints know about
(``provider``, ``region``, ``zone``), taints, readiness, and
``availableReplicas``: how many *more* replicas of the workload being placed
the cluster can start now. Replicas a previous decision already put there are
running and are not counted again, exactly as Karmada's replica estimators
report free capacity. ``None`` means unlimited (no estimate).

A :class:`Fleet` is the set of clusters one placement round looks at, sorted by
name and indexed. Placing thousands of workloads against the same fleet repeats
the same per-cluster work (affinity, taints, weights, bounds) for every workload
that uses the same policy, so a fleet memoises those results keyed by the
identity of the policy objects involved. The memo never changes what is
computed, only how often: the fleet and its clusters are immutable, and a
memo entry keeps a reference to its key objects so that an ``id`` cannot be
reused while the entry exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from federation.placement import counts

T = TypeVar("T")

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class Taint(_Model):
    """A cluster taint; only NoSchedule and NoExecute affect placement."""

    key: str = Field(min_length=1)
    value: str = ""
    effect: TaintEffect

    def __str__(self) -> str:
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


class Cluster(_Model):
    """One member cluster: identity, topology, taints, capacity and health."""

    name: str = Field(min_length=1)
    labels: dict[str, str] = Field(default_factory=dict)
    region: str | None = None
    zone: str | None = None
    provider: str | None = None
    taints: tuple[Taint, ...] = ()
    available_replicas: counts.Replicas | None = None
    ready: counts.Flag = True

    def field(self, name: str) -> str | None:
        """The value of a topology field (provider, region, zone) or of ``name``."""
        if name == "cluster":
            return self.name
        return cast("str | None", getattr(self, name))


def mark_failed(clusters: Iterable[Cluster], names: Iterable[str]) -> list[Cluster]:
    """Copies of ``clusters`` where the named ones are not ready (what-if failover)."""
    failed = set(names)
    return [c.model_copy(update={"ready": False}) if c.name in failed else c for c in clusters]


class Fleet:
    """An immutable, name-sorted, indexed set of clusters with a memo for derived data."""

    #: Memo entries kept before the memo is cleared. Policies are few (tens) and each
    #: needs a handful of entries; the bound only matters for callers that re-parse
    #: policies on every call, whose entries would otherwise pile up.
    memo_limit = 1024

    def __init__(self, clusters: Iterable[Cluster]) -> None:
        ordered = tuple(sorted(clusters, key=lambda c: c.name))
        self.by_name: dict[str, Cluster] = {c.name: c for c in ordered}
        if len(self.by_name) != len(ordered):
            raise ValueError(f"duplicate cluster name in {[c.name for c in ordered]}")
        self.clusters = ordered
        self._memo: dict[tuple[object, ...], tuple[tuple[object, ...], object]] = {}

    def __iter__(self) -> Iterator[Cluster]:
        return iter(self.clusters)

    def __len__(self) -> int:
        return len(self.clusters)

    def memo(self, kind: str, keys: tuple[object, ...], compute: Callable[[], T]) -> T:
        """``compute()``, remembered per ``kind`` and the identity of ``keys``."""
        slot = (kind, *map(id, keys))
        hit = self._memo.get(slot)
        if hit is not None and all(a is b for a, b in zip(hit[0], keys, strict=True)):
            return cast(T, hit[1])
        if len(self._memo) >= self.memo_limit:
            self._memo.clear()
        value = compute()
        self._memo[slot] = (keys, value)
        return value


def as_fleet(clusters: Fleet | Iterable[Cluster]) -> Fleet:
    """``clusters`` as a :class:`Fleet` (built once per call when given a plain list)."""
    return clusters if isinstance(clusters, Fleet) else Fleet(clusters)
