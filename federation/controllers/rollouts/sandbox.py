"""Where the rollout controller parses, diffs and validates tenants' files: off its loop.

A config file is tenant data, and the work on it (:mod:`federation.rollouts.analysis`)
can be made arbitrarily slow by its author: a catastrophic ``pattern`` in Python's
backtracking regex engine, configparser on a crafted line, a deep or aliased YAML document.
Done on the event loop, one tenant's ConfigMap froze every controller and ``/healthz``.
The work runs in the kit's :class:`~federation.controllers.kit.sandbox.Sandbox` (worker
processes with a deadline and a memory cap; the applications controller's CUE
evaluations use it too), which the module's own words below describe:

So the work runs in a :class:`Sandbox`: a small pool of worker processes (two by default),
started lazily at the first request and stopped with the manager. A process, not a thread:
a thread cannot be interrupted inside a C-level regex match or parser, so a runaway
request would hold its thread (and the GIL's share of the loop) for as long as it likes;
a process is killed at its deadline (:attr:`Sandbox.timeout`, from the moment the request
was sent, so time spent waiting for a free worker does not count) and replaced at the next
request. Each worker also limits itself: its address space (``RLIMIT_AS``), its priority
(``nice``: the control plane's loop wins the CPU), and an ``alarm`` that ends it even if
this process is gone. Requests and answers are JSON lines on its stdin and stdout: the
worker handles hostile input, so nothing it sends back is unpickled.

:class:`Analyses` is what the reconciler uses: a bounded memo of answers keyed by the
SHA-256 of the request (constraint, format, contents), so a content is analysed once, not
once per cluster and per reconcile, and a file that timed out is not tried again until its
content or constraint changes (or the process restarts). Unit tests run the same requests
in process (:func:`inline`).
"""

from __future__ import annotations

import collections
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from federation.controllers.kit import sandbox
from federation.controllers.kit.sandbox import STOPPED, TIMED_OUT, UNAVAILABLE
from federation.rollouts import analysis, formats
from federation.rollouts.constraint import ConfigConstraintSpec, ParameterClass

log = logging.getLogger("federation.rollouts")
JSON = dict[str, Any]
Runner = Callable[[JSON], Awaitable[JSON]]

__all__ = ["STOPPED", "TIMED_OUT", "UNAVAILABLE", "Analyses", "Sandbox", "Unavailable",
           "inline"]


class Unavailable(RuntimeError):
    """No worker could analyse the file now (:data:`UNAVAILABLE`); the reconcile fails and
    is retried."""


WORK = sandbox.Work("federation.rollouts.analysis", "rollout's",
                    doing="parsing and checking", during="parsing")
"""The rollout's analyses, run by the kit's sandbox."""


class Sandbox(sandbox.Sandbox):
    """The kit's sandbox running :mod:`~federation.rollouts.analysis`."""

    def __init__(self, workers: int = 2, timeout: float = 30.0, memory: int = 2**30,
                 ready_timeout: float = 60.0) -> None:
        super().__init__(WORK, workers, timeout, memory, ready_timeout)


async def inline(request: JSON) -> JSON:
    """The same requests answered in this process, without limits on time (unit tests):
    through JSON both ways, as the worker's pipes carry them."""
    answered = analysis.answer(json.loads(json.dumps(request)))
    found: JSON = json.loads(json.dumps(answered))
    return found


class Analyses:
    """Diffs and online parameters of config files, each request answered once (a memo of
    at most :attr:`entries` answers and :attr:`weight` characters of names)."""

    def __init__(self, run: Runner, entries: int = 1024, weight: int = 16 * 2**20,
                 limits: formats.Limits = formats.LIMITS) -> None:
        self.run = run
        self.entries = entries
        self.weight = weight
        self.limits = limits
        self.asked = 0
        """Requests sent to the runner (the memo missed): a test's measure of re-parsing."""
        self._memo: collections.OrderedDict[str, tuple[int, JSON]] = \
            collections.OrderedDict()
        self._weight = 0

    async def diff(self, constraint: ConfigConstraintSpec, old: str,
                   new: str) -> analysis.FileDiff | analysis.Failure:
        for side, content in (("new", new), ("old", old)):
            if self._too_large(content):
                return self._large(constraint, side)
        return analysis.read_diff(await self._ask(analysis.diff_request(constraint, old, new)))

    async def online(self, constraint: ConfigConstraintSpec, content: str,
                     names: Sequence[str],
                     classes: Iterable[ParameterClass] = (ParameterClass.DYNAMIC,)
                     ) -> dict[str, str] | analysis.Failure:
        if self._too_large(content):
            return self._large(constraint, "new")
        return analysis.read_online(await self._ask(
            analysis.online_request(constraint, content, names, classes)))

    def _too_large(self, content: str) -> bool:
        # Checked here too, so an oversized file costs no pipe copy and no worker.
        return len(content) > self.limits.max_bytes

    def _large(self, constraint: ConfigConstraintSpec, side: str) -> analysis.Failure:
        return analysis.Failure(formats.Reason.TOO_LARGE.value, f"{constraint.file_format}: "
                                f"larger than the limit of {self.limits.max_bytes} bytes", side)

    async def _ask(self, request: JSON) -> JSON:
        key = analysis.request_key(request)
        kept = self._memo.get(key)
        if kept is not None:
            self._memo.move_to_end(key)
            return kept[1]
        self.asked += 1
        found = await self.run(request)
        if found.get("reason") == UNAVAILABLE:
            raise Unavailable(str(found.get("error")))
        weight = 64 + sum(len(str(c[0])) for c in found.get("changes") or [])
        self._memo[key] = (weight, found)
        self._weight += weight
        while len(self._memo) > 1 and (len(self._memo) > self.entries
                                       or self._weight > self.weight):
            _, (dropped, _) = self._memo.popitem(last=False)
            self._weight -= dropped
        return found
