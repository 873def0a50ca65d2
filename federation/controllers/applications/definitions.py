"""User definitions in the applications controller: the catalog, evaluations, compile rounds.

The catalog is every ComponentDefinition, TraitDefinition, PolicyDefinition and
WorkflowStepDefinition on the hub, read from the cache; only those in the system
namespaces (``fedctl run --definition-namespaces``, default ``vela-system`` and
``federation-system``) count (:func:`federation.applications.definitions.catalog`).

A compile that uses definitions needs CUE evaluations of the tenant's parameters, which
must not run on the event loop: :func:`compile_with` compiles with the answers known so
far, the pure renderer records each evaluation it lacks, those are evaluated in worker
processes (the kit's :class:`~federation.controllers.kit.sandbox.Sandbox`, :data:`WORK`:
a deadline and a memory cap on top of the evaluator's own budget), and the compile runs
again, until nothing is missing (a trait waits for its component's render, so a component
with traits takes two or three rounds the first time). :class:`Evaluations` keeps the
answers in a bounded memo keyed by the SHA-256 of the request (the template, the
parameters and the context), so a render is evaluated once, not once per reconcile, and a
request that failed or timed out is not tried again until something in it changes.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from federation.applications import compile as compile_
from federation.applications import cue_worker, definition_revisions, definitions, model
from federation.controllers.kit import sandbox

JSON = dict[str, Any]
Runner = Callable[[JSON], Awaitable[JSON]]

WORK = sandbox.Work("federation.applications.cue_worker", "applications' CUE",
                    doing="evaluating the definition's CUE template",
                    during="evaluating a CUE template")
MAX_ROUNDS = 64
"""Compiles per reconcile while evaluations are missing: each round asks every evaluation
the compile could reach, and a component's traits wait for its output and for one
another, so a component with N user traits takes N + 1 rounds the first time (a round
is one compile, milliseconds; a content already evaluated takes one)."""


class Unavailable(RuntimeError):
    """No worker could evaluate now (none would start, or the manager is stopping): the
    reconcile fails and is retried; never the Application's fault."""


class Evaluations:
    """Answers to CUE evaluation requests: a memo of at most :attr:`entries` answers over a
    runner (the sandbox's ``ask``; in unit tests, in process). An answer with
    ``retry_after`` (a chart that could not be fetched: the repository may be back) is
    kept that many seconds of ``clock`` only."""

    def __init__(self, run: Runner, entries: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.run = run
        self.entries = entries
        self.clock = clock
        self.asked = 0
        """Requests sent to the runner (the memo missed): a test's measure."""
        self._memo: collections.OrderedDict[str, JSON] = collections.OrderedDict()
        self._expires: dict[str, float] = {}

    def get(self, key: str) -> JSON | None:
        found = self._memo.get(key)
        if found is not None and self._expires.get(key, math.inf) <= self.clock():
            del self._memo[key], self._expires[key]
            return None
        if found is not None:
            self._memo.move_to_end(key)
        return found

    async def evaluate(self, requests: Mapping[str, JSON]) -> None:
        """Evaluate every request not known yet (at once: the pool bounds concurrency)."""
        missing = {k: r for k, r in requests.items() if k not in self._memo}
        self.asked += len(missing)
        found = await asyncio.gather(*(self.run(r) for r in missing.values()))
        for key, answer in zip(missing, found, strict=True):
            if answer.get("reason") == sandbox.UNAVAILABLE:
                raise Unavailable(str(answer.get("error")))
            self._memo[key] = answer
            if isinstance(answer.get("retry_after"), int | float):
                self._expires[key] = self.clock() + float(answer["retry_after"])
            while len(self._memo) > self.entries:
                self._expires.pop(self._memo.popitem(last=False)[0], None)


async def inline(request: JSON) -> JSON:
    """A runner answering in this process (unit tests; no deadline, the CUE budget only)."""
    return cue_worker.inline(request)


async def compile_with(evaluated: Callable[[str], JSON | None],
                       evaluate: Callable[[Mapping[str, JSON]], Awaitable[None]],
                       compile_args: Mapping[str, Any], catalog: definitions.Catalog,
                       info: definitions.AppInfo) -> compile_.Compiled:
    """:func:`federation.applications.compile.compile_app` with ``catalog``'s definitions,
    its evaluations answered by ``evaluated`` (the memo) and, when missing, evaluated by
    ``evaluate`` between rounds. Raises :class:`~federation.applications.model.AppError`."""
    compile_args = {**compile_args, "spec_doc": definition_revisions.resolve(
        catalog, compile_args["spec_doc"], info.annotations)}
    for _ in range(MAX_ROUNDS):
        answers = definitions.Answers(evaluated)
        rendering = definitions.Rendering(catalog, info, answers)
        try:
            compiled = compile_.compile_app(**compile_args, user=rendering)
        except model.AppError:
            if not answers.pending:
                raise
        else:
            if not answers.pending:
                return compiled
        await evaluate(answers.pending)
    raise model.AppError(f"spec.components: the definitions' evaluations took more than "
                         f"{MAX_ROUNDS} rounds (traits feeding one another)")


def app_info(app: Mapping[str, Any], spec: Mapping[str, Any], revision: int
             ) -> definitions.AppInfo:
    meta = app.get("metadata") or {}
    return definitions.AppInfo(
        str(meta.get("name") or ""), revision, _strings(meta.get("labels")),
        _strings(meta.get("annotations")),
        tuple(c for c in components if isinstance(c, dict))
        if isinstance(components := spec.get("components"), list) else ())


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}

