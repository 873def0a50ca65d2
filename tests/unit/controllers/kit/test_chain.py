"""The Chain runner: steps in order over one view and one build, verdicts joined, the
first STOP ends it, a Problem reaches the caller unchanged."""

from __future__ import annotations

import dataclasses

import pytest

from federation.controllers.kit import chain
from federation.controllers.kit.chain import STOP, Chain, Problem, Verdict, requeue


@dataclasses.dataclass
class Notes:
    """A build that records which steps ran."""

    ran: list[str] = dataclasses.field(default_factory=list)


async def first(view: str, build: Notes) -> Verdict | None:
    build.ran.append(f"first:{view}")
    return None


async def later(view: str, build: Notes) -> Verdict | None:
    build.ran.append("later")
    return requeue(30)


async def sooner(view: str, build: Notes) -> Verdict | None:
    build.ran.append("sooner")
    return requeue(5)


async def stop(view: str, build: Notes) -> Verdict | None:
    build.ran.append("stop")
    return STOP


async def never(view: str, build: Notes) -> Verdict | None:
    raise AssertionError("a step after STOP must not run")


async def bad_input(view: str, build: Notes) -> Verdict | None:
    raise Problem("Scheduled", "UnknownCluster", "no such cluster")


async def test_every_step_runs_in_order_and_the_soonest_look_again_wins() -> None:
    notes = Notes()
    outcome = await Chain([first, later, sooner]).run("v", notes)
    assert notes.ran == ["first:v", "later", "sooner"]
    assert outcome == chain.Outcome(stopped_by=None, requeue_after=5)


async def test_stop_ends_the_chain_and_names_the_step() -> None:
    """Steps after a STOP do not run; a look-again asked before it is kept."""
    notes = Notes()
    outcome = await Chain([later, stop, never]).run("v", notes)
    assert notes.ran == ["later", "stop"]
    assert outcome.stopped_by == "stop" and outcome.requeue_after == 30


async def test_a_problem_reaches_the_caller_with_its_condition() -> None:
    notes = Notes()
    with pytest.raises(Problem) as raised:
        await Chain([first, bad_input, never]).run("v", notes)
    assert (raised.value.condition, raised.value.reason) == ("Scheduled", "UnknownCluster")
    assert str(raised.value) == "no such cluster" and notes.ran == ["first:v"]


def test_requeue_never_asks_for_a_busy_loop() -> None:
    assert requeue(0).requeue_after == chain.MIN_REQUEUE
    assert requeue(-3).requeue_after == chain.MIN_REQUEUE
    assert requeue(7).requeue_after == 7 and not requeue(7).stop


def test_sooner_and_either_join_answers() -> None:
    assert chain.sooner(None, None) is None
    assert chain.sooner(None, 4) == 4 and chain.sooner(4, None) == 4
    assert chain.sooner(9, 4) == 4
    assert chain.either(None, None) is None
    assert chain.either(requeue(3), None) == requeue(3)
    assert chain.either(None, STOP) == STOP
    assert chain.either(requeue(3), requeue(1)) == requeue(1)
    assert chain.either(STOP, requeue(2)) == Verdict(stop=True, requeue_after=2)


def test_a_step_is_named_by_its_function() -> None:
    assert chain.step_name(first) == "first"

    class Callable:
        def __call__(self) -> None:
            return None

    assert "Callable" in chain.step_name(Callable())
