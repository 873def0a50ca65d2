"""One CUE evaluation of a definition's template, as a JSON request and answer.

A request (:func:`federation.applications.definitions.request`) carries the template, the
``parameter`` (the tenant's properties), the ``context`` and the fields to export; the
answer is ``{"values": {...}, "directives": [[path, name, value], ...]}`` or ``{"error":
one line}``. Evaluation is bounded by a :class:`federation.cue.Budget` (steps, values,
depth): a template and parameters that would build a huge value stop with a
:class:`~federation.cue.CueError`, which becomes the answer's error line. The controller
runs :func:`serve` in worker processes (a deadline and a memory cap on top,
``federation.controllers.kit.sandbox``); ``fedctl app dry-run`` and unit tests call
:func:`answer` in process. Nothing here does I/O but the two streams it is given.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import IO, Any

from federation.rollouts import analysis
from federation.untrusted.text import one_line

JSON = dict[str, Any]

READY = analysis.READY
"""The worker's first line: it imported everything and waits for requests (the line
protocol is the rollouts workers', :func:`serve`)."""
INTERNAL = analysis.INTERNAL
REFUSED = "refused"

STEPS = 100_000
"""Evaluation steps of one request: the evaluator's measure of webservice with a typical
parameter is a few thousand steps, so this is some twenty times a real render, and
about a second of CPU (the evaluator's own default, a million, is several: the controller's
worker deadline would end such a request first, the CLI would wait)."""
OUTPUT_VALUES = 20_000
"""Values in one request's result: a Deployment is a few hundred, a render's objects are at
most :data:`federation.applications.model.MAX_RENDERED`."""

_PARSED: dict[str, Any] = {}
"""Templates parsed in this process, by their text (a worker answers many requests of
one definition); bounded by :data:`_MAX_PARSED`."""
_MAX_PARSED = 256


def _template(text: str, name: str) -> Any:
    from federation import cue  # the evaluator is loaded by the first evaluation
    found = _PARSED.get(text)
    if found is None:
        found = cue.parse(text, name=name)
        if len(_PARSED) >= _MAX_PARSED:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[text] = found
    return found


def _budget() -> Any:
    from federation import cue
    return cue.Budget(steps=STEPS, output_values=OUTPUT_VALUES)


def answer(request: Mapping[str, Any], budget: Any = None) -> JSON:
    """The answer to one request; every failure is an answer, never raised. ``budget``: a
    :class:`federation.cue.Budget` (default: the evaluator's)."""
    from federation import cue
    try:
        template = _template(str(request["template"]), str(request.get("name") or ""))
        exported = cue.export(template, {"parameter": request.get("parameter") or {},
                                         "context": request.get("context") or {}},
                              [str(f) for f in request.get("fields") or []],
                              budget or _budget())
        directives = _patch_directives(template, request, exported, budget or _budget())
    except cue.CueError as exc:
        return {"error": one_line(str(exc), 300), "reason": REFUSED}
    except (KeyError, TypeError, ValueError, RecursionError, MemoryError) as exc:
        return {"error": f"the evaluation failed ({type(exc).__name__})", "reason": INTERNAL}
    return {"values": dict(exported.values), "directives": directives}


def _patch_directives(template: Any, request: Mapping[str, Any], exported: Any,
                      budget: Any) -> list[list[Any]]:
    """``patch``'s ``// +patchKey`` / ``+patchStrategy`` comments, each as [["patch",
    *path], name, value]. The evaluator gives a directive's path below its exported field
    without the field, so when other fields were exported too and carried directives,
    ``patch`` is exported alone to know which are its own (rare: only traits with
    directives pay a second evaluation)."""
    from federation import cue
    if "patch" not in exported.values or not exported.directives:
        return []
    own = exported.directives
    if len(exported.values) > 1:
        own = cue.export(template, {"parameter": request.get("parameter") or {},
                                    "context": request.get("context") or {}},
                         ["patch"], budget).directives
    return [[["patch", *d.path], d.name, d.value] for d in own]


def serve(requests: IO[bytes], answers: IO[bytes],
          arm: Callable[[bool], object] = lambda on: None) -> None:
    """The worker process's loop over its stdin and stdout, the rollouts workers' line
    protocol (:func:`federation.rollouts.analysis.serve`) answering with :func:`answer`;
    the evaluator is loaded before the :data:`READY` line, not within a deadline."""
    from federation import cue  # noqa: F401

    analysis.serve(requests, answers, arm, answer_with=answer)


def inline(request: JSON) -> JSON:
    """:func:`answer` through JSON both ways, as the worker's pipes carry it (the CLI and
    unit tests)."""
    found: JSON = json.loads(json.dumps(answer(json.loads(json.dumps(request)))))
    return found
