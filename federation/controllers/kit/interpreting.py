"""The resource interpreter for controllers: the hub's customizations, run off the loop.

One :class:`Interpreting` per manager (``fedctl run``'s wiring makes it, hands it to the
controllers that ask and registers :meth:`Interpreting.keep`, so its threads are shut
down with the manager), never a module global: two managers in one process, as in tests,
share no parsed customization and no thread.

Controllers ask :class:`Interpreting` what a customization says about an object (its
Retain, ReviseReplica, InterpretReplica...). The ``ResourceInterpreterCustomization``
objects are read from the hub's cache at each question and parsed once per
resourceVersion; one that does not parse is left out and named in every answer for its
target (:class:`InterpretError`), never half-used. Scripts run in a small thread pool, not
on the event loop: lupa releases the GIL while Lua runs, each call is held to its
instruction and memory budgets (:mod:`federation.interpreter.lua`), and a call that still
outlives :attr:`Interpreting.timeout` of wall-clock time is abandoned with an error naming
the customization and the operation. So a bad script costs the reconcile of the objects it
targets a condition, and the control plane (its other reconciles, ``/healthz``) nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from federation.interpreter import customizations, declarative, engine, lua
from federation.interpreter.customizations import Operation

JSON = dict[str, Any]
Lister = Callable[[], Awaitable[list[Mapping[str, Any]]]]


class InterpretError(Exception):
    """A customization could not answer: it failed, ran out of budget, or does not parse.
    The message names the customization and the operation."""


class InterpretTimeout(InterpretError):
    """No answer within the wall-clock timeout. Unlike a script error or a spent budget
    (the same inputs fail the same way), this may pass on its own: the script ran inside
    its budgets but the machine was busy, so asking again later can answer."""


@dataclasses.dataclass
class Interpreting:
    """The customizations in force and the pool their scripts run in."""

    timeout: float = 2.0
    """Wall-clock seconds per call: eight times the instruction budget's quarter second,
    so only a call stuck in C (beyond the pattern guard) ever reaches it."""
    workers: int = 2
    """Threads running scripts: a stuck call holds one; the loop never waits for it."""
    budget: lua.Budget = dataclasses.field(default_factory=lua.Budget)
    _parsed: dict[tuple[str, str, str], customizations.Customization | str] = \
        dataclasses.field(default_factory=dict)
    """By (name, uid, resourceVersion): one deleted and made again is parsed again."""
    _pool: concurrent.futures.ThreadPoolExecutor | None = None
    _last: tuple[tuple[tuple[str, str, str], ...],
                 tuple[customizations.Registry, dict[str, str]]] | None = None
    """The registry last built, with the versions it was built from: every interpreter
    question of every reconcile asks for it (several per template), and the
    customizations in force seldom change, so it is built again only when they do."""

    def registry(self, objects: list[Mapping[str, Any]]) -> tuple[customizations.Registry,
                                                                  dict[str, str]]:
        """The valid customizations of ``objects`` and, by target, why others were refused.
        Answered from :attr:`_last` when ``objects`` are the same versions, in the same
        order; callers only read what they get."""
        versions = tuple(_version(obj) for obj in objects)
        if self._last is not None and self._last[0] == versions:
            return self._last[1]
        built = self._build(objects, versions)
        self._last = (versions, built)
        return built

    def _build(self, objects: list[Mapping[str, Any]],
               versions: tuple[tuple[str, str, str], ...]
               ) -> tuple[customizations.Registry, dict[str, str]]:
        valid, refused = [], {}
        seen = set()
        for obj, key in zip(objects, versions, strict=True):
            seen.add(key)
            if key not in self._parsed:
                try:
                    self._parsed[key] = customizations.parse(obj)
                except customizations.CustomizationError as exc:
                    self._parsed[key] = str(exc)
            found = self._parsed[key]
            if isinstance(found, str):
                target = (obj.get("spec") or {}).get("target") or {}
                refused[f"{target.get('kind')}.{target.get('apiVersion')}"] = found
            else:
                valid.append(found)
        for stale in set(self._parsed) - seen:
            del self._parsed[stale]
        return customizations.Registry(valid), refused

    async def run(self, objects: list[Mapping[str, Any]], operation: Operation,
                  args: declarative.Arguments, subject: Mapping[str, Any]) -> dict[str, Any] | None:
        """``operation`` of the customization for ``subject``'s kind; None when none scripts
        it (the built-in interpreter decides)."""
        registry, refused = self.registry(objects)
        problem = refused.get(f"{subject.get('kind')}.{subject.get('apiVersion')}")
        if problem is not None:
            raise InterpretError(f"ResourceInterpreterCustomization refused: {problem}")
        scripts = registry.choose_all(subject, operation)
        if not scripts:
            return None
        call = _Call(registry, operation, args, self.budget)
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor(), call)
        names = ", ".join(chosen.customization for chosen in scripts)
        try:
            return dict(await asyncio.wait_for(future, self.timeout))
        except TimeoutError:
            raise InterpretTimeout(f"customization {names}, {operation.value}: no answer within "
                                 f"{self.timeout:g} s (abandoned)") from None
        except lua.ScriptError as exc:
            raise InterpretError(str(exc)) from None

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                self.workers, thread_name_prefix="resource interpreter")
        return self._pool

    @property
    def pool_open(self) -> bool:
        """Whether threads exist (made at the first script, gone at :meth:`close`)."""
        return self._pool is not None

    def close(self) -> None:
        """Shut the pool down: queued calls are cancelled, a running one is left to end at
        its instruction budget (a thread cannot be killed). A later call makes a new pool."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    async def keep(self) -> None:
        """A manager runnable: the pool lives while the manager runs (and leads); it is
        shut down when the manager stops or loses the lead."""
        try:
            await asyncio.Event().wait()
        finally:
            self.close()


def _version(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(name, uid, resourceVersion): one version of one customization object."""
    meta = obj.get("metadata") or {}
    return str(meta.get("name")), str(meta.get("uid")), str(meta.get("resourceVersion"))


@dataclasses.dataclass(frozen=True)
class _Call:
    registry: customizations.Registry
    operation: Operation
    args: declarative.Arguments
    budget: lua.Budget

    def __call__(self) -> declarative.Results:
        return engine.execute(self.registry, self.operation, self.args, self.budget)
