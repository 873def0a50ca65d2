"""One health signal per cluster: a prober, two threshold trackers, one transition per flip.

Every engaged cluster (the hub included) has exactly one :class:`Prober`: every
``period`` seconds it GETs ``/readyz`` (``/healthz`` when the server answers 404
or 403 for it, as Karmada does for older or locked-down servers) with
``timeout``. Its :class:`Health` turns the stream of results into two states:
*reachable* (any HTTP answer) and *ready* (a 200). Everything that asks whether
a cluster is there reads this one state: :attr:`Cluster.available
<federation.contexts.clusters.Cluster.available>` (writes fail fast, reads
refuse stale caches), the availability listeners (work retried when a member
returns), the MemberCluster conditions and taints the health controller
writes, and the control plane's own ``/readyz``. Before there was one probe
per layer with thresholds of its own, and the two flipped seconds apart.

A state flips only after ``failure_threshold`` results against it in a row (or
``success_threshold`` to come back), so one lost probe is not an outage and
one answer during a restart is not a recovery. An unknown state (just
engaged, or the control plane just restarted) becomes *up* at the first
success but *down* only after ``failure_threshold`` failures: a restart of
ours never flips a member on one unlucky probe. Each flip is one
:class:`Transition`, handed to one callback; nothing is reported per probe.

Probe errors are the client's messages, which never carry credentials.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from federation.contexts.client import ApiError, ClientError


@dataclasses.dataclass(frozen=True)
class HealthSettings:
    """How every cluster is probed (the hub and members alike)."""

    period: float = 2.0
    """Seconds between probes of one cluster. With the thresholds below, a dead API
    server is down 4-6 s after its last answer (6-8 s when it hangs instead of
    refusing), at one tiny GET per 2 s per cluster."""
    timeout: float = 2.0
    """A local or LAN /readyz answers in milliseconds; 2 s without an answer is a
    frozen or overloaded server, and counts as one failure."""
    failure_threshold: int = 3
    """Failures in a row before a cluster is down. Two would flip on one GC pause plus
    one slow answer on a loaded 2-core machine; three are not chance. Karmada waits
    30 s by default; clusters here are a loopback or a LAN away, not a WAN."""
    success_threshold: int = 2
    """Successes in a row before a down cluster is up again: a server that answers
    once while it restarts does not get work back only to lose it again."""

    def __post_init__(self) -> None:
        for name in ("period", "timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"health {name} must be > 0, not {getattr(self, name)!r}")
        for name in ("failure_threshold", "success_threshold"):
            if getattr(self, name) < 1:
                raise ValueError(f"health {name} must be >= 1, not {getattr(self, name)!r}")


class Threshold:
    """A boolean that flips only after enough results in a row say otherwise."""

    def __init__(self, success_threshold: int, failure_threshold: int,
                 value: bool | None = None) -> None:
        self.success_threshold = success_threshold
        self.failure_threshold = failure_threshold
        self.value = value
        self.changed_at: float | None = None
        """Epoch seconds of the last flip (None until the first)."""
        self._against = 0

    def observe(self, ok: bool, now: float) -> bool:
        """Record one result; True when the value flipped."""
        if ok == self.value:
            self._against = 0
            return False
        self._against += 1
        # Unknown: one success is enough (nothing to protect), a failure needs the full run.
        needed = (1 if self.value is None else self.success_threshold) if ok \
            else self.failure_threshold
        if self._against < needed:
            return False
        self.value, self.changed_at, self._against = ok, now, 0
        return True


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    reachable: bool
    ready: bool
    detail: str


@dataclasses.dataclass(frozen=True)
class Transition:
    """One flip of a cluster's health: what it is now, and why."""

    cluster: str
    ready: bool | None
    reachable: bool | None
    ready_changed: bool
    """Whether *ready* flipped (availability listeners care only about this one)."""
    detail: str
    at: float
    """Epoch seconds of the flip."""


class Prober(Protocol):
    """What :func:`probe` needs of a client."""

    @property
    def name(self) -> str: ...

    async def request_raw(self, path: str, *, timeout: float | None = None) -> bytes: ...


async def probe(client: Prober, timeout: float) -> ProbeResult:
    """One health probe: /readyz, or /healthz when /readyz is not served or not allowed."""
    for path in ("/readyz", "/healthz"):
        try:
            await client.request_raw(path, timeout=timeout)
        except ApiError as exc:
            if exc.status in (403, 404) and path == "/readyz":
                continue
            return ProbeResult(True, False, f"GET {path}: {exc.status} "
                                            f"{_short(exc, client.name)}")
        except ClientError as exc:
            message = _short(exc, client.name)  # the client's own says "GET /readyz: ..."
            return ProbeResult(False, False, message if message.startswith(f"GET {path}")
                               else f"GET {path}: {message}")
        return ProbeResult(True, True, f"GET {path}: ok")
    return ProbeResult(True, False, "no health endpoint")  # pragma: no cover


def _short(exc: Exception, name: str) -> str:
    return str(exc).removeprefix(f"{name}: ")[:300]


class Health:
    """What the probes of one cluster have established: the one truth about it."""

    def __init__(self, name: str, settings: HealthSettings | None = None) -> None:
        self.name = name
        self.settings = settings or HealthSettings()
        self.ready = Threshold(self.settings.success_threshold, self.settings.failure_threshold)
        self.reachable = Threshold(self.settings.success_threshold,
                                   self.settings.failure_threshold)
        self.detail = "not probed yet"
        self.probes = 0

    def observe(self, result: ProbeResult, now: float) -> Transition | None:
        """Record one probe; the transition when either state flipped, else None."""
        self.probes += 1
        self.detail = result.detail
        flipped_reach = self.reachable.observe(result.reachable, now)
        flipped_ready = self.ready.observe(result.ready, now)
        if not (flipped_reach or flipped_ready):
            return None
        return Transition(self.name, self.ready.value, self.reachable.value, flipped_ready,
                          result.detail, now)

    def assume(self, ready: bool | None, detail: str | None = None) -> None:
        """Set the state without a probe and without a transition (fakes and tests)."""
        self.ready.value = self.reachable.value = ready
        if detail is not None:
            self.detail = detail


Sleep = Callable[[float], Awaitable[None]]


class ProbeLoop:
    """Probe one cluster every ``period`` seconds until cancelled; report each flip once.

    ``probe``, ``sleep``, ``clock`` (epoch, for transition times) and ``monotonic``
    (for the period) are parameters so tests run it on virtual time.
    """

    def __init__(self, client: Prober, health: Health,
                 on_transition: Callable[[Transition], None], *,
                 probe: Callable[[Prober, float], Awaitable[ProbeResult]] = probe,
                 sleep: Sleep = asyncio.sleep, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.health = health
        self.on_transition = on_transition
        self._probe = probe
        self._sleep = sleep
        self._clock = clock
        self._monotonic = monotonic

    async def once(self) -> Transition | None:
        result = await self._probe(self.client, self.health.settings.timeout)
        transition = self.health.observe(result, self._clock())
        if transition is not None:
            self.on_transition(transition)
        return transition

    async def run(self) -> None:
        period = self.health.settings.period
        while True:
            started = self._monotonic()
            await self.once()
            # A probe that took the whole timeout is not followed by a full period more:
            # a hung server is judged on the same schedule as one that refuses.
            await self._sleep(max(period - (self._monotonic() - started), 0.0))
