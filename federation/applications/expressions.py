"""The workflow's expressions: ``if`` conditions and ``valueFrom``, KubeVela's CUE.

Evaluated by :func:`federation.cue.evaluate_expression` over a scope the state machine
builds from one Application's own workflow: ``status`` of its steps, ``inputs`` of the
step, ``context`` (the Application's name, namespace, revision, the step's name),
``parameter`` (the step's properties) and, for a step that applied an object, ``output``
(that object as read back). Nothing else is in reach: no other Application, namespace or
cluster, no function of the process (the evaluator is pure, :mod:`federation.cue`). Each
evaluation is budgeted (a tenant writes the expression and the data it walks).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.untrusted.text import one_line

STEPS = 200_000
"""Evaluation steps per expression: a condition or a field lookup takes a few hundred;
the data it walks (an applied object) a few thousand values."""


class ExpressionError(ValueError):
    """An expression with no value: why, on one line, quoting no value."""


def evaluate(expression: str, scope: Mapping[str, Any]) -> Any:
    """``expression``'s value over ``scope`` (:class:`ExpressionError` when it has none)."""
    # imported here: `fedctl app dry-run` evaluates none, and starts faster without it
    from federation import cue

    budget = cue.Budget(steps=STEPS, depth=64, output_values=20_000, source_bytes=1000)
    try:
        return cue.evaluate_expression(expression, scope, budget)
    except cue.CueError as exc:
        raise ExpressionError(one_line(str(exc), 300)) from None
    except Exception:  # a tenant's text must never stop the controller
        # the evaluator promises CueError only; should a bug in it raise anything else,
        # the step fails with this, and the reconcile goes on
        raise ExpressionError("the expression could not be evaluated") from None
