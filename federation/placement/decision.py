"""What the engine answers: a :class:`Decision` and its explanation.

A decision is plain data so that controllers can store it, compare it and feed
it back as the *previous* decision of the next round. ``clusters`` maps every
target cluster to its replicas, sorted by name; it includes clusters with 0
replicas when the resource has none to divide (a ConfigMap still goes to every
selected cluster). ``error`` is set when nothing may be applied: no feasible
cluster, a bound that cannot be honoured, or not enough room (then
``unschedulable`` is the shortfall). In partial mode a lack of room is not an
error: what fits is placed and ``pending`` counts the rest.

The explanation is a list of short sentences, one fact each, in the order the
engine worked: the affinity term used, the clusters filtered out grouped by
reason (not ready, affinity, taint, spread, capacity, weight), the spread
choice, the mode, the weights and bounds used, the division and the ties it
broke. Long cluster lists are abbreviated so that a decision over a thousand
clusters stays readable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: Names listed in one explanation line before "... and N more".
NAMES_SHOWN = 12


@dataclass(frozen=True)
class Decision:
    """Where a resource's replicas go, and why."""

    replicas: int
    """The replicas the resource asked for."""
    clusters: Mapping[str, int] = field(default_factory=dict)
    """Target cluster -> replicas, sorted by name (empty when ``error`` is set)."""
    pending: int = 0
    """Partial mode: replicas that did not fit and wait for room."""
    unschedulable: int = 0
    """With an unschedulable error: how many replicas did not fit."""
    explanation: tuple[str, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def placed(self) -> int:
        return sum(self.clusters.values())

    def nonzero(self) -> dict[str, int]:
        """Clusters that get at least one replica (the ``fedctl plan`` JSON view)."""
        return {name: n for name, n in self.clusters.items() if n > 0}


def names_text(names: Sequence[str]) -> str:
    """``a, b, c`` abbreviated after :data:`NAMES_SHOWN` names."""
    hidden = len(names) - NAMES_SHOWN
    shown = ", ".join(names[:NAMES_SHOWN])
    return f"{shown} ... and {hidden} more" if hidden > 0 else shown


def pairs_text(pairs: Sequence[tuple[str, int]]) -> str:
    """``a=7, b=5`` in the given order, abbreviated like :func:`names_text`."""
    hidden = len(pairs) - NAMES_SHOWN
    shown = ", ".join(f"{name}={n}" for name, n in pairs[:NAMES_SHOWN])
    return f"{shown} ... and {hidden} more" if hidden > 0 else shown


def counts_text(counts: Mapping[str, int]) -> str:
    """``a=7, b=5`` in name order, abbreviated like :func:`names_text`."""
    return pairs_text(sorted(counts.items()))
