r"""The fleet-wide disruption budget of failover: how many replicas move at once.

The rules of failover (when a NotReady cluster's replicas move, when old copies go) are
pure hub vocabulary (:mod:`federation.hub.failover`); this module is the one piece of
failover that keeps state, so it stays with the controllers.

Moving is bounded fleet-wide by a :class:`DisruptionBudget`: at most
``max_moving_replicas`` replicas in motion at once, across every template.
A template whose move does not fit waits (held, retried shortly), so a big
outage drains in waves instead of a stampede. One template larger than the
whole budget moves alone. The budget is kept in memory by the leader; a new
leader starts with an empty one (moves in flight then finish unaccounted).

A reconcile never changes the budget while it builds its plan: the failover transformer
only asks whether a move :meth:`~DisruptionBudget.fits` and notes a :class:`Claim` on its
build; the reconciler settles that claim after the plan ran (:meth:`~DisruptionBudget.settle`).
So a reconcile that stops early (bad input, no policy any more) takes nothing, one whose
writes failed takes nothing (its retry asks again), and a move whose template goes gives
its budget back at once. Two templates checked at the same moment may both fit and both
be taken: the budget then runs over by at most the moves in flight, and holds every
other move until it is back under.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

from federation.contexts.client import Resource
from federation.runtime.reconcile import group_kind

log = logging.getLogger("federation.failover")


@dataclasses.dataclass(frozen=True)
class FailoverSettings:
    max_moving_replicas: int = 100
    """Fleet-wide replicas in motion at once. A member of a few hundred replicas
    fails over in a few waves, each wave quick (the simulator readies a replica in
    about a second; real clusters in tens of seconds), while a fleet-wide outage
    cannot ask every survivor to start everything at once."""
    lease_timeout: float = 300.0
    """Seconds a move holds budget at most: a move whose new copies never become
    ready (no room anywhere) must not block every other move for ever."""
    budget_retry: float = 2.0
    """Seconds before a template refused by the budget asks again."""
    grace_period: float = 600.0
    """Default ``gracePeriodSeconds`` of graceful eviction (Karmada's graceful
    eviction timeout is also 10 minutes): old copies go as soon as the new ones are
    ready, this is only the bound when they never are."""



class DisruptionBudget:
    """Fleet-wide replicas in motion, by template key; see the module docstring."""

    def __init__(self, max_moving: int, lease_timeout: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_moving = max_moving
        self.lease_timeout = lease_timeout
        self.clock = clock
        self.moving: dict[str, tuple[int, float]] = {}

    @property
    def in_use(self) -> int:
        """Replicas moving now (leases past their timeout not counted)."""
        return sum(n for n, _ in self._current().values())

    def _current(self) -> dict[str, tuple[int, float]]:
        now = self.clock()
        return {key: lease for key, lease in self.moving.items()
                if now - lease[1] <= self.lease_timeout}

    def _expire(self) -> None:
        current = self._current()
        for key in set(self.moving) - set(current):
            log.warning("disruption budget: move of %s not done after %.0fs; released",
                        key, self.lease_timeout)
            del self.moving[key]

    def fits(self, key: str, replicas: int) -> bool:
        """Whether ``replicas`` moving for ``key`` fit now (changes nothing)."""
        current = self._current()
        used = sum(n for n, _ in current.values())
        if key in current:
            held = current[key][0]
            return replicas <= held or used - held + replicas <= self.max_moving
        return used + replicas <= self.max_moving or used == 0

    def take(self, key: str, replicas: int) -> None:
        """Count ``replicas`` moving for ``key`` (a move written), whether or not they fit."""
        self._expire()
        held, started = self.moving.get(key, (0, self.clock()))
        self.moving[key] = (max(held, replicas), started)

    def admit(self, key: str, replicas: int) -> bool:
        """Reserve ``replicas`` moving for ``key``; False when the budget cannot take them now."""
        self._expire()
        if not self.fits(key, replicas):
            return False
        self.take(key, replicas)
        return True

    def release(self, key: str) -> None:
        self.moving.pop(key, None)

    def reserve(self, key: str, claim: Claim) -> Reservation | None:
        """Right before a reconcile's plan runs: take the replicas its build found fitting.

        The build only asked :meth:`fits`; other reconciles ran while it awaited (the
        scheduler, member reads), so the answer may be stale. Checking again and taking
        here, with no await in between, is what keeps the budget from running over. None
        when it no longer fits: the caller writes nothing and looks again later."""
        reservation = Reservation(key, self.moving.get(key))
        if claim.moving and not self.admit(key, claim.moving):
            return None
        return reservation

    def settle(self, reservation: Reservation, claim: Claim, written: bool) -> None:
        """After the plan ran: a finished move gives its budget back; a reserved move whose
        writes failed (``written`` false) gives back what this round took."""
        if claim.done:
            self.release(reservation.key)
        elif claim.moving and not written:
            if reservation.prior is None:
                self.release(reservation.key)
            else:
                self.moving[reservation.key] = reservation.prior


@dataclasses.dataclass(frozen=True)
class Reservation:
    """What a template held in the budget before :meth:`DisruptionBudget.reserve` took more."""

    key: str
    prior: tuple[int, float] | None


@dataclasses.dataclass
class Claim:
    """What one reconcile's build asks of the budget, settled after its plan ran."""

    moving: int = 0
    """Replicas this round moves (the build found they fit); taken once written."""
    done: bool = False
    """The template's move is over (its new copies are ready): its budget goes back."""


def move_key(resource: Resource, namespace: str | None, name: str) -> str:
    """A template's key in the budget."""
    return f"{group_kind(resource)}/{namespace or ''}/{name}"


class Failover:
    """Per-process failover state: the budget and its clock. Revisiting a template later is
    a transformer's requeue verdict, not this object's business."""

    def __init__(self, settings: FailoverSettings | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings or FailoverSettings()
        self.budget = DisruptionBudget(self.settings.max_moving_replicas,
                                       self.settings.lease_timeout)
        self.clock = clock

