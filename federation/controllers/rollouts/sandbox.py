"""Where the rollout controller parses, diffs and validates tenants' files: off its loop.

A config file is tenant data, and the work on it (:mod:`federation.rollouts.analysis`)
can be made arbitrarily slow by its author: a catastrophic ``pattern`` in Python's
backtracking regex engine, configparser on a crafted line, a deep or aliased YAML document.
Done on the event loop, one tenant's ConfigMap froze every controller and ``/healthz``.

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

import asyncio
import collections
import contextlib
import json
import logging
import math
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import federation
from federation.rollouts import analysis, formats
from federation.rollouts.constraint import ConfigConstraintSpec

log = logging.getLogger("federation.rollouts")
JSON = dict[str, Any]
Runner = Callable[[JSON], Awaitable[JSON]]

TIMED_OUT = "timed out"
STOPPED = "worker stopped"
UNAVAILABLE = "unavailable"
"""No worker could answer (none would start, or the manager is stopping): not the file's
fault, so never kept and never a refusal (:class:`Unavailable` is raised instead)."""


class Unavailable(RuntimeError):
    """No worker could analyse the file now; the reconcile fails and is retried."""

# The worker: limits first, then the pure analysis loop over stdin/stdout. sys.path[0] is
# the directory holding the federation package this process runs, so both run one code.
_BOOT = """\
import os, resource, signal, sys
root, memory, alarm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.path[0] = root
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
os.nice(5)
from federation.rollouts import analysis
analysis.serve(sys.stdin.buffer, sys.stdout.buffer,
               arm=lambda on: signal.alarm(alarm if on else 0))
"""
_ROOT = str(Path(federation.__file__).resolve().parent.parent)
_MAX_LINE = 256 * 2**20
"""Bytes of one answer line (names of every parameter of the largest file fit)."""


class _Worker:
    """One worker process and its pipes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, memory: int, timeout: float, ready_timeout: float) -> _Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _BOOT, _ROOT, str(memory), str(math.ceil(timeout) + 2),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, limit=_MAX_LINE)
        worker = cls(process)
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), ready_timeout)
        except TimeoutError:
            line = b""
        if line != analysis.READY:
            await worker.kill()
            raise OSError(f"the rollout's worker process did not start (exit status "
                          f"{process.returncode})")
        return worker

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def ask(self, line: bytes, timeout: float) -> bytes:
        """The answer line to ``line``; TimeoutError past ``timeout``; b"" if it died."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line)
        with contextlib.suppress(ConnectionError):
            await self.process.stdin.drain()
        return await asyncio.wait_for(self.process.stdout.readline(), timeout)

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        await self.process.wait()


class _Slot:
    worker: _Worker | None = None


class Sandbox:
    """A pool of worker processes answering :mod:`~federation.rollouts.analysis`
    requests, each within :attr:`timeout` seconds."""

    def __init__(self, workers: int = 2, timeout: float = 30.0, memory: int = 2**30,
                 ready_timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.memory = memory
        self.ready_timeout = ready_timeout
        self.killed = 0
        """Workers killed at their deadline (a metric for tests and logs)."""
        self._size = workers
        self._idle: asyncio.Queue[_Slot] | None = None
        self._running: set[_Worker] = set()
        """Every live worker, busy or idle: :meth:`close` kills them all."""
        self._closed = False

    def _slots(self) -> asyncio.Queue[_Slot]:
        if self._idle is None:  # created in the running loop, at first use
            self._idle = asyncio.Queue()
            for _ in range(self._size):
                self._idle.put_nowait(_Slot())
        return self._idle

    async def ask(self, request: JSON) -> JSON:
        """The worker's answer, or a failure answer (timed out, worker stopped)."""
        if self._closed:
            return {"error": "the control plane is stopping", "reason": UNAVAILABLE}
        line = json.dumps(request, ensure_ascii=True).encode() + b"\n"
        idle = self._slots()
        slot = await idle.get()
        try:
            return await self._ask(slot, line)
        finally:
            idle.put_nowait(slot)

    async def _ask(self, slot: _Slot, line: bytes) -> JSON:
        if slot.worker is None or not slot.worker.alive:
            try:
                slot.worker = await _Worker.start(self.memory, self.timeout,
                                                  self.ready_timeout)
                self._running.add(slot.worker)
            except OSError as exc:
                slot.worker = None
                return {"error": str(exc), "reason": UNAVAILABLE}
        worker = slot.worker
        try:
            reply = await worker.ask(line, self.timeout)
        except TimeoutError:
            self.killed += 1
            slot.worker = None
            self._running.discard(worker)
            await worker.kill()
            return {"error": f"parsing and checking took longer than {self.timeout:g}s "
                             "(the limit)", "reason": TIMED_OUT}
        if not reply:
            slot.worker = None
            self._running.discard(worker)
            await worker.kill()
            if self._closed:  # killed by close(): the file did nothing wrong
                return {"error": "the control plane is stopping", "reason": UNAVAILABLE}
            return {"error": "the worker process stopped while parsing (the memory limit "
                             f"is {self.memory // 2**20} MiB)", "reason": STOPPED}
        found = json.loads(reply)
        return found if isinstance(found, dict) else {"error": "no answer", "reason": STOPPED}

    async def close(self) -> None:
        """Kill every worker; later requests are answered with a failure."""
        self._closed = True
        running, self._running = self._running, set()
        for worker in running:  # busy ones too: their callers get "stopping"
            await worker.kill()

    async def keep(self) -> None:
        """A manager runnable: waits until cancelled (the manager stopping or losing the
        lead) and then kills the workers."""
        try:
            await asyncio.Event().wait()
        finally:
            await self.close()
            self._closed = False  # a new leadership term may use it again


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
                     names: Sequence[str]) -> dict[str, str] | analysis.Failure:
        if self._too_large(content):
            return self._large(constraint, "new")
        return analysis.read_online(await self._ask(
            analysis.online_request(constraint, content, names)))

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
