"""Worker processes for work a tenant can make arbitrarily slow or large: off the loop.

A tenant's config file (the rollout controller) or a tenant's parameters to an
administrator's CUE template (the applications controller) can be made to cost any time or
memory by their author: a catastrophic regex, a crafted parser input, a huge comprehension.
Done on the event loop, one tenant froze every controller and ``/healthz``.

So the work runs in a :class:`Sandbox`: a small pool of worker processes (two by default),
started lazily at the first request and stopped with the manager. A process, not a thread:
a thread cannot be interrupted inside a C-level regex match or parser, so a runaway
request would hold its thread (and the GIL's share of the loop) for as long as it likes;
a process is killed at its deadline (:attr:`Sandbox.timeout`, from the moment the request
was sent, so time spent waiting for a free worker does not count) and replaced at the next
request. Each worker also limits itself: its address space (``RLIMIT_AS``), its priority
(``nice``: the control plane's loop wins the CPU), and an ``alarm`` that ends it even if
this process is gone. Requests and answers are JSON lines on its stdin and stdout: the
worker handles hostile input, so nothing it sends back is unpickled. What a worker runs is
a :class:`Work`: a module whose ``serve(stdin, stdout, arm)`` writes :data:`READY` and then
answers each request line with one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

import federation

JSON = dict[str, Any]

READY = b'{"ready": true}\n'
"""A worker's first line: it imported everything and waits for requests."""
TIMED_OUT = "timed out"
STOPPED = "worker stopped"
UNAVAILABLE = "unavailable"
"""No worker could answer (none would start, or the manager is stopping): not the input's
fault, so never kept and never a refusal."""


@dataclasses.dataclass(frozen=True)
class Work:
    """What a sandbox's workers run, and how its failures are worded."""

    module: str
    """The module whose ``serve`` the worker runs (``federation.rollouts.analysis``)."""
    name: str
    """Whose workers these are, for a worker that would not start (``rollout's``)."""
    doing: str = "the work"
    """What took too long: ``parsing and checking``."""
    during: str = "working"
    """What the worker was doing when it died: ``parsing``."""


# The worker: limits first, then the module's pure serve loop over stdin/stdout. sys.path[0]
# is the directory holding the federation package this process runs, so both run one code.
_BOOT = """\
import importlib, os, resource, signal, sys
root, memory, alarm, module = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
sys.path[0] = root
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
os.nice(5)
importlib.import_module(module).serve(sys.stdin.buffer, sys.stdout.buffer,
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
    async def start(cls, work: Work, memory: int, timeout: float, ready_timeout: float
                    ) -> _Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _BOOT, _ROOT, str(memory), str(math.ceil(timeout) + 2),
            work.module, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, limit=_MAX_LINE)
        worker = cls(process)
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), ready_timeout)
        except TimeoutError:
            line = b""
        if line != READY:
            await worker.kill()
            raise OSError(f"the {work.name} worker process did not start (exit status "
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
    """A pool of worker processes answering ``work``'s requests, each within
    :attr:`timeout` seconds."""

    def __init__(self, work: Work, workers: int = 2, timeout: float = 30.0,
                 memory: int = 2**30, ready_timeout: float = 60.0) -> None:
        self.work = work
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
                slot.worker = await _Worker.start(self.work, self.memory, self.timeout,
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
            return {"error": f"{self.work.doing} took longer than {self.timeout:g}s "
                             "(the limit)", "reason": TIMED_OUT}
        if not reply:
            slot.worker = None
            self._running.discard(worker)
            await worker.kill()
            if self._closed:  # killed by close(): the file did nothing wrong
                return {"error": "the control plane is stopping", "reason": UNAVAILABLE}
            return {"error": f"the worker process stopped while {self.work.during} (the "
                             f"memory limit is {self.memory // 2**20} MiB)", "reason": STOPPED}
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


