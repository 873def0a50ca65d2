"""A chain of read-only steps: each reads a view and adds to a build, then answers.

A step is an async function ``(view, build) -> Verdict | None``. It reads through the
view, adds facts and plan vertices to the build, and answers: go on (``None``), stop the
chain (nothing more to decide), or go on and look again after some seconds. Bad input
raises :class:`Problem` (a condition and an event, retried only when inputs change). No
step writes; the controller hands the build's plan to the executor after the chain.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A step's answer: stop the chain, and/or look again after some seconds."""

    stop: bool = False
    requeue_after: float | None = None


STOP = Verdict(stop=True)

MIN_REQUEUE = 0.05
"""The shortest look-again a step may ask for (no busy loop on a zero or negative delay)."""


def requeue(after: float) -> Verdict:
    """Go on, and look again after ``after`` seconds."""
    return Verdict(requeue_after=max(after, MIN_REQUEUE))


class Problem(Exception):
    """Bad input: shown as a condition and an event, retried only when inputs change."""

    def __init__(self, condition: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.condition = condition
        self.reason = reason


def sooner(current: float | None, other: float | None) -> float | None:
    """The sooner of two optional look-agains."""
    if current is None:
        return other
    return current if other is None else min(current, other)


def either(first: Verdict | None, second: Verdict | None) -> Verdict | None:
    """Both answers in one, for a step that reaches several: stop if either stops, look
    again at the sooner of their look-agains."""
    if first is None or second is None:
        return first if second is None else second
    return Verdict(stop=first.stop or second.stop,
                   requeue_after=sooner(first.requeue_after, second.requeue_after))


ViewT = TypeVar("ViewT", contravariant=True)
BuildT = TypeVar("BuildT")

Step = Callable[[ViewT, BuildT], Awaitable[Verdict | None]]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a run of the chain ended."""

    stopped_by: str | None
    """The step that stopped the chain, or None when every step ran."""
    requeue_after: float | None
    """The soonest look-again any step asked for."""


class Chain(Generic[ViewT, BuildT]):
    """Runs steps in order over one view and one build; stops at the first STOP."""

    def __init__(self, steps: Sequence[Step[ViewT, BuildT]]) -> None:
        self.steps = tuple(steps)

    async def run(self, view: ViewT, build: BuildT) -> Outcome:
        """Run the steps; a :class:`Problem` propagates to the caller unchanged."""
        requeue_after: float | None = None
        for step in self.steps:
            verdict = await step(view, build)
            if verdict is None:
                continue
            requeue_after = sooner(requeue_after, verdict.requeue_after)
            if verdict.stop:
                return Outcome(step_name(step), requeue_after)
        return Outcome(None, requeue_after)


def step_name(step: Callable[..., object]) -> str:
    """A step's name for logs and tests: its function's qualified name."""
    return getattr(step, "__qualname__", None) or repr(step)
