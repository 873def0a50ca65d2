"""The fleet-wide disruption budget of failover: how many replicas move at once.

The rules of failover (when a NotReady cluster's replicas move, when old copies go) are
pure hub vocabulary (:mod:`federation.hub.failover`); this module is the one piece of
failover that keeps state, so it stays with the controllers.

Moving is bounded fleet-wide by a :class:`DisruptionBudget`: at most
``max_moving_replicas`` replicas in motion at once, across every template.
A template whose move does not fit waits (held, retried shortly), so a big
outage drains in waves instead of a stampede. One template larger than the
whole budget moves alone. The budget is kept in memory by the leader; a new
leader starts with an empty one (moves in flight then finish unaccounted).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

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
        self._expire()
        return sum(n for n, _ in self.moving.values())

    def _expire(self) -> None:
        now = self.clock()
        for key, (_, started) in list(self.moving.items()):
            if now - started > self.lease_timeout:
                log.warning("disruption budget: move of %s not done after %.0fs; released",
                            key, self.lease_timeout)
                del self.moving[key]

    def admit(self, key: str, replicas: int) -> bool:
        """Reserve ``replicas`` moving for ``key``; False when the budget cannot take them now."""
        used = self.in_use
        if key in self.moving:
            held, started = self.moving[key]
            if replicas <= held or used - held + replicas <= self.max_moving:
                self.moving[key] = (max(held, replicas), started)
                return True
            return False
        if used + replicas <= self.max_moving or used == 0:
            self.moving[key] = (replicas, self.clock())
            return True
        return False

    def release(self, key: str) -> None:
        self.moving.pop(key, None)


class Failover:
    """Per-process failover state: the budget and its clock. Revisiting a template later is
    a transformer's requeue verdict, not this object's business."""

    def __init__(self, settings: FailoverSettings | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings or FailoverSettings()
        self.budget = DisruptionBudget(self.settings.max_moving_replicas,
                                       self.settings.lease_timeout)
        self.clock = clock

