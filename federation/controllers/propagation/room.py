"""Templates waiting for room, retried highest scheduling priority first when room appears.

A template the engine finds unschedulable (its candidates' room cannot hold its replicas)
is not retried on a timer: nothing would have changed. It waits (the reconciler's
``waiting_for_room``) until a member's resource summary changes. Then the waiting templates
are retried one at a time, in the order Karmada's scheduling queue takes them: highest
``schedulePriority`` first, then the one waiting longest. The next is retried only when
the previous one was reconciled and is still waiting; the first one placed ends the round.
Why one at a time: a member's summary counts the replicas that run, so the room a template
was just given is still shown free until its replicas start; a second template retried in
the same round would be placed on the same room, and the data plane (which starts the
oldest workloads first) could then give it to the lower priority. The next summary change
(the placed replicas running) starts the next round, from the top.

So a template of higher priority created after one of lower priority gets the room first;
a template of any priority whose replicas do not fit does not hold back smaller ones
behind it in the same round.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class Rounds(Generic[K]):
    """Which waiting template to retry next; ``waiting`` maps each to its arrival number."""

    def __init__(self, waiting: Mapping[K, int], rank: Callable[[K], int]) -> None:
        self.waiting = waiting
        self.rank = rank
        self.current: K | None = None
        """The template retried now (None: no round runs)."""
        self._order: list[K] = []
        self._again = False

    def room_appeared(self) -> K | None:
        """A summary changed: the first template of a new round, or None (a round runs:
        a new one follows it; nothing waits)."""
        if self.current is not None:
            self._again = True
            return None
        self._order = sorted(self.waiting, key=lambda k: (-self.rank(k), self.waiting[k]))
        return self._advance()

    def finished(self, key: K) -> K | None:
        """``key`` was reconciled: the next template to retry, or None."""
        if key != self.current:
            return None
        if key in self.waiting:
            return self._advance()
        self.current, self._order = None, []  # placed (or gone): the round ends
        return self._restart()

    def _advance(self) -> K | None:
        while self._order:
            key = self._order.pop(0)
            if key in self.waiting:
                self.current = key
                return key
        self.current = None
        return self._restart()

    def _restart(self) -> K | None:
        if not self._again:
            return None
        self._again = False
        return self.room_appeared()
