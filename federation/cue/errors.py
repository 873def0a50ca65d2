"""The one error of the CUE evaluator and the budget every evaluation runs under.

Messages are one line and name the template, the CUE path and a ``line:col``; they never
quote a value (a parameter's value is tenant data), only field names and kinds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


class CueError(ValueError):
    """A template that does not parse or evaluate, or a fill that conflicts with it."""


@dataclass(frozen=True)
class Budget:
    """Caps on one evaluation, so neither a template nor a parameter can hang or flood us."""

    steps: int = 1_000_000
    """Evaluation steps (expressions, declarations, comprehension clauses, field and element
    visits, regex and string work units): KubeVela's webservice with a typical parameter
    takes about 1,100; a million is 2 to 3 s of CPU at worst (a hostile comprehension)."""
    depth: int = 200
    """Nesting of values and of evaluation (Python's own stack stays well below its limit)."""
    output_values: int = 100_000
    """Values in one result (a Deployment is a few hundred)."""
    source_bytes: int = 1_000_000
    """Size of a template or expression text (KubeVela's own largest is about 30 kB)."""
    string_bytes: int = 1_000_000
    """Length of any one string or list built during evaluation."""


class Meter:
    """The spending side of a :class:`Budget` for one evaluation."""

    __slots__ = ("budget", "steps")

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.steps = 0

    def tick(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > self.budget.steps:
            raise CueError(f"evaluation step budget of {self.budget.steps} exceeded")

    def items(self, n: int) -> None:
        """A list or struct of ``n`` entries is about to be built."""
        if n > self.budget.output_values:
            raise CueError(f"value count budget of {self.budget.output_values} exceeded")
        self.tick(1 + n // 16)

    def size(self, n: int) -> None:
        if n > self.budget.string_bytes:
            raise CueError(f"value size budget of {self.budget.string_bytes} exceeded")
        self.tick(1 + n // 64)

    @contextmanager
    def active(self) -> Iterator[Meter]:
        """Makes this the meter of work that has no evaluator at hand (regex matching in a
        bound check); a context variable, so concurrent evaluations keep their own."""
        token = CURRENT.set(self)
        try:
            yield self
        finally:
            CURRENT.reset(token)


CURRENT: ContextVar[Meter | None] = ContextVar("federation.cue.meter", default=None)


def active_meter() -> Meter:
    """The active evaluation's meter, or a fresh default budget outside one."""
    meter = CURRENT.get()
    return meter if meter is not None else Meter(Budget())
