"""Leader election with a coordination.k8s.io/v1 Lease on the hub.

The algorithm is client-go's leaderelection, reduced to what we use:

- A candidate tries every ``retry_period`` to acquire the Lease: create it if
  missing, or take it over when it is free (no holder: released) or expired.
- Expiry is judged by the **local clock**: a candidate notes when it last saw
  the Lease change (holder, renew time or transitions); if it has not changed
  for ``lease_duration``, the holder is gone. Comparing our clock to the
  holder's ``renewTime`` would make clock skew between hosts decide leadership.
- The leader renews every ``retry_period``. If it cannot renew for
  ``renew_deadline`` it stops leading (its controllers must stop) before the
  others may take over at ``lease_duration``, so two leaders never overlap as
  long as clocks run at the same rate. A leader that reads the Lease and finds
  another holder has been deposed: it stops at once.
- **Fencing.** Stopping the controllers is not enough: a reconcile in flight
  could still write, and a process frozen past its lease does not know it has
  lost until it next runs. So the elector keeps a :class:`~federation.contexts.client.Fence`
  that every hub and member client consults as each write is sent (after any
  wait for a connection or the rate limiter, on a fresh clock reading; see
  :mod:`federation.contexts.client`): it is valid until ``start of the last
  successful renewal + renew_deadline`` on the monotonic clock, and revoked on
  loss. The others take over no earlier than ``lease_duration`` after they saw
  that renewal, which is later, so the ``lease_duration - renew_deadline``
  margin (5 s) is slack between a check and its request reaching the server.
- The elector writes the Lease with a client of its own (it must renew *to*
  stay valid; this also keeps renewals out of the controllers' rate limit),
  under a permit of its own, :class:`LeaseWrites`: a candidate's attempts are
  free (the resourceVersion decides), a leader's renewal or release is not sent
  after the renew deadline it was meant to meet, and nothing is sent after a
  loss. Without it, a renewal that had read the Lease before a freeze was sent
  on resume, after the takeover: refused with a 409, but a write of a deposed
  leader all the same.
- Every write carries the resourceVersion that was read, so two candidates
  racing for a free Lease cannot both win: one gets a 409.
- On clean shutdown the leader releases: it clears ``holderIdentity`` (and sets
  a 1 s duration), so a standby takes over at its next retry instead of after
  the full lease.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from federation.contexts.client import (
    JSON,
    ApiError,
    ClientError,
    ClusterAPI,
    Fence,
    NotLeader,
    Resource,
)

log = logging.getLogger("federation.leader")

LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")


@dataclasses.dataclass(frozen=True)
class LeaderSettings:
    """Timing of leader election (controller-runtime's defaults)."""

    namespace: str = "kube-system"
    """Where the Lease lives: kube-system exists on every cluster, and only
    administrators may write there."""
    name: str = "federation-controller-manager"
    lease_duration: float = 15.0
    """Seconds a standby waits without seeing the Lease change before taking over:
    the longest a crashed leader leaves the federation without a controller."""
    renew_deadline: float = 10.0
    """Seconds the leader keeps trying to renew before it gives up leading. Shorter
    than ``lease_duration`` so it stops before anyone else may start."""
    retry_period: float = 2.0
    """Seconds between attempts to acquire or renew: five tries per deadline."""

    def __post_init__(self) -> None:
        # client-go refuses the same: with renew_deadline >= lease_duration a leader
        # could still be writing after a standby has taken over.
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                f"leader election needs 0 < retry_period ({self.retry_period}) < renew_deadline"
                f" ({self.renew_deadline}) < lease_duration ({self.lease_duration})")
        if self.lease_duration != int(self.lease_duration):
            # The Lease stores whole seconds and the others judge expiry by what it says:
            # rounding down would let them take over before our renew deadline.
            raise ValueError(f"leader election lease_duration must be whole seconds, not "
                             f"{self.lease_duration}")


def identity() -> str:
    """A unique identity: host name, pid and a random suffix (pids repeat in containers)."""
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


class LeaseWrites:
    """The elector's own :class:`~federation.contexts.client.WritePermit` on its Lease client.

    Open (``until`` infinite) while a candidate tries to acquire; a leader's writes are
    allowed until its current renew deadline, on a clock reading taken as each is sent;
    closed for good after a loss or a release.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.until = math.inf

    def check(self, cluster: str, method: str, path: str) -> None:
        late = self.clock() - self.until
        if late < 0:
            return
        why = "leadership ended" if self.until == -math.inf else \
            f"{late:.1f}s past the renew deadline"
        raise NotLeader(cluster, f"{method} {path} refused, not sent: {why}")


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquires and holds the Lease; :attr:`is_leader` says whether we hold it now.

    ``client`` must be a client of the hub used for nothing else: the elector gives it
    its own permit (:class:`LeaseWrites`); :attr:`fence` is the one the manager hands
    to every other client.
    ``clock`` and ``sleep`` are the monotonic clock and the sleep to use (tests
    drive them).
    """

    def __init__(self, client: ClusterAPI, settings: LeaderSettings | None = None,
                 identity_: str | None = None, *, fence: Fence | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.client = client
        self.settings = settings or LeaderSettings()
        self.identity = identity_ or identity()
        self.fence = fence or Fence(clock)
        self.lease_writes = LeaseWrites(clock)
        self.client.fence = self.lease_writes
        self.clock = clock
        self.sleep = sleep
        self.is_leader = False
        self.elected = asyncio.Event()
        self.lost = asyncio.Event()
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self.holder = ""
        """The Lease's holder as last read ("" none), for whom it may concern (the work
        server with shards counts the replicas serving agents); never used to decide."""
        self._lease: JSON | None = None
        self._deposed_by: str | None = None

    async def run(self) -> None:
        """Acquire, then renew until renewal fails for ``renew_deadline`` or someone else
        holds the Lease (then sets :attr:`lost` and revokes the fence)."""
        s = self.settings
        while True:
            started = self.clock()
            if await self._try():
                break
            await self.sleep(s.retry_period)
        self._extend(started + s.renew_deadline)
        self.is_leader = True
        self.elected.set()
        log.info("%s: became leader (lease %s/%s)", self.identity, s.namespace, s.name)
        last_renewal = started
        while True:
            deadline = last_renewal + s.renew_deadline
            await self.sleep(max(min(s.retry_period, deadline - self.clock()), 0.0))
            started = self.clock()
            if started >= deadline:  # checked first: a process resumed after a freeze
                self._lose(f"could not renew the lease for {s.renew_deadline:.0f}s")
                return
            if await self._renew(deadline - started):
                last_renewal = started
                self._extend(started + s.renew_deadline)
            elif self._deposed_by is not None:
                self._lose(f"the lease is held by {self._deposed_by}")
                return

    async def _renew(self, budget: float) -> bool:
        """One renewal, abandoned when the renew deadline arrives."""
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a
            # cancellation that arrives as the call completes, and the elector must stop.
            async with asyncio.timeout(budget):
                return await self._try()
        except TimeoutError:
            log.warning("%s: renewing the lease timed out", self.identity)
            return False

    def _extend(self, until: float) -> None:
        """Writes may go on until ``until``: the controllers' and the elector's own."""
        self.fence.extend(until)
        self.lease_writes.until = until

    def _lose(self, why: str) -> None:
        self.is_leader = False
        self.fence.revoke(f"leadership lost: {why}")
        self.lease_writes.until = -math.inf
        self.lost.set()
        log.error("%s: %s; leadership lost", self.identity, why)

    async def _try(self) -> bool:
        """One attempt to acquire or renew; True when we hold the Lease afterwards."""
        s = self.settings
        try:
            lease = await self.client.get(LEASES, s.name, s.namespace)
        except ApiError as exc:
            if exc.status != 404:
                log.warning("%s: reading the lease: %s", self.identity, exc)
                return False
            return await self._write(None)
        except ClientError as exc:
            log.warning("%s: reading the lease: %s", self.identity, exc)
            return False
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"),
                  spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        holder = self.holder = str(spec.get("holderIdentity") or "")
        duration = float(spec.get("leaseDurationSeconds") or s.lease_duration)
        expired = self.clock() - self._observed_at > duration
        if self.is_leader and holder != self.identity:
            # We were deposed (or released by someone else): never take it back.
            self._deposed_by = repr(holder) if holder else "nobody (released)"
            return False
        if holder and holder != self.identity and not expired:
            return False
        return await self._write(lease)

    async def _write(self, lease: JSON | None) -> bool:
        s = self.settings
        now = now_rfc3339()
        spec: dict[str, Any] = {"holderIdentity": self.identity,
                                "leaseDurationSeconds": int(s.lease_duration),
                                "renewTime": now}
        try:
            if lease is None:
                spec.update(acquireTime=now, leaseTransitions=0)
                self._lease = await self.client.create(LEASES, {
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": s.name, "namespace": s.namespace}, "spec": spec})
            else:
                old = lease.get("spec") or {}
                if old.get("holderIdentity") != self.identity:
                    spec["acquireTime"] = now
                    spec["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + 1
                else:
                    spec["acquireTime"] = old.get("acquireTime") or now
                    spec["leaseTransitions"] = int(old.get("leaseTransitions") or 0)
                self._lease = await self.client.replace(LEASES, {**lease, "spec": spec})
        except ClientError as exc:
            log.info("%s: could not write the lease: %s", self.identity, exc)
            return False
        return True

    async def release(self) -> None:
        """Give the Lease up (clean shutdown) so a standby takes over at once."""
        if not self.is_leader or self._lease is None or not self.fence.valid:
            return  # a lapsed fence means the lease may be someone else's by now
        self.is_leader = False
        self.fence.revoke("released the lease")  # first: no controller write after it
        try:
            await self._release(self._lease)
        finally:
            self.lease_writes.until = -math.inf

    async def _release(self, lease: JSON) -> None:
        """Clear the holder (within the renew deadline, as any write of ours)."""
        for _ in range(2):
            spec = {**(lease.get("spec") or {}), "holderIdentity": "",
                    "leaseDurationSeconds": 1, "renewTime": now_rfc3339()}
            try:
                await self.client.replace(LEASES, {**lease, "spec": spec})
                log.info("%s: released the lease", self.identity)
                return
            except ApiError as exc:
                # A renewal in flight when the release began moved the resourceVersion on:
                # re-read, and give the Lease up if it is still ours.
                if exc.status != 409:
                    log.warning("%s: could not release the lease: %s", self.identity, exc)
                    return
                fresh = await self._fresh_lease()
                if fresh is None or (fresh.get("spec") or {}).get("holderIdentity") != \
                        self.identity:
                    return
                lease = fresh
            except ClientError as exc:
                log.warning("%s: could not release the lease: %s", self.identity, exc)
                return
        log.warning("%s: could not release the lease: it kept changing", self.identity)

    async def _fresh_lease(self) -> JSON | None:
        s = self.settings
        try:
            return await self.client.get(LEASES, s.name, s.namespace)
        except ClientError:
            return None
