"""Active-active replicas: shard Leases on the hub, the live set, and who may write which key.

``fedctl run --shards N`` makes N shard Leases (``<leader-election-id>-shard-0`` ..
``-shard-<N-1>``, in the leader-election namespace) that replicas hold the way a leader
holds its Lease (:mod:`federation.runtime.leader`: local-clock expiry, resourceVersion on
every write, renew every ``retry_period``, give up after ``renew_deadline``). A replica
holds at most one; one with none is a warm standby that takes a shard over when its Lease
is released or expires. The hub is the only store: every replica reads every shard Lease
each round and computes the **live set** (shards held and not expired by its own clock)
and, from it, the owner of each key with :mod:`federation.runtime.shards` keyed with a
secret seed kept in one more Lease (``<id>-shard-seed``, an annotation).

**No two writers.** A replica may write for a key only while (:meth:`Peers.holds`):

- it holds a shard, and the clock is before *start of its last successful round +
  renew_deadline* (a round renews its own Lease and reads the others; a round that
  fails leaves that deadline where it was, so a replica that cannot see the hub stops
  writing 10 s after it last could, as the leader's fence does);
- the key is its shard's by the live set of that round;
- ``lease_duration`` has passed since it took its shard (**the claim wait**).

Writes ask :meth:`Peers.permit` (the queues ask :meth:`Peers.owns`, which grants
nothing). A replica whose shard lapses or is taken *before any write was permitted*
(it is still in its claim wait, or its controllers have not started) has nothing to
fence: it drops the shard and takes one again (its own Lease first) with a new claim
wait, instead of exiting. That lets a replica take its shard while its caches first
list: three replicas listing 10,000 templates each on two cores starve their shard
rounds for seconds, and a round that misses its renew deadline then costs a new claim
wait, not the replica.

The claim wait is the handover. Keys move to a shard only when the live set changes: a
shard taken (its keys come from shards whose holders computed ownership without it) or a
shard gone (expired: its holder stopped writing ``lease_duration - renew_deadline``
before anyone judged it gone; released: its holder revoked its permit first). A holder's
view without the new shard was read before the new shard's Lease was written, so its
permit for the moving keys ends within ``renew_deadline`` of that write, earlier than the
new holder's claim wait. Keys that move are unwritten meanwhile (at most the lease
duration), never written twice. A replica whose shard lapses or is taken after a write
was permitted exits, as a deposed leader does, and comes back as a new candidate.

It must not decide anything else: which controllers are sharded and what a key is are
the controllers' business (:attr:`federation.runtime.controller.Controller.shard_key`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from federation.contexts.client import JSON, ApiError, ClientError, ClusterAPI
from federation.runtime import leader, shards

log = logging.getLogger("federation.peers")

SEED_ANNOTATION = "federation.io/shard-seed"
MAX_SHARDS = 16
"""Shard Leases are named, so RBAC can name each one (``resourceNames``) rather than
grant every Lease of the namespace; 16 is the most the shipped RBAC names."""


def shard_names(election_id: str, count: int = MAX_SHARDS) -> tuple[str, ...]:
    """The shard Leases' names, in order."""
    return tuple(f"{election_id}-shard-{index}" for index in range(count))


def seed_name(election_id: str) -> str:
    return f"{election_id}-shard-seed"


@dataclasses.dataclass(frozen=True)
class View:
    """One round's reading: the live shards and until when it may be acted on."""

    live: tuple[str, ...] = ()
    valid_until: float = -math.inf


class Peers:
    """This replica's shard, the live set, and :meth:`holds` (the per-key write permit).

    ``client`` must be a hub client used for nothing else: its writes get a permit of
    their own (a :class:`~federation.runtime.leader.LeaseWrites`).
    """

    def __init__(self, client: ClusterAPI, settings: leader.LeaderSettings, count: int,
                 identity: str, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if not 1 <= count <= MAX_SHARDS:
            raise ValueError(f"shards must be between 1 and {MAX_SHARDS}, not {count}")
        self.client = client
        self.settings = settings
        self.names = shard_names(settings.name, count)
        self.identity = identity
        self.clock, self.sleep = clock, sleep
        self.lease_writes = leader.LeaseWrites(clock)
        self.client.fence = self.lease_writes
        self.seed: bytes | None = None
        self.shard: str | None = None
        self.claim_from = math.inf
        self.view = View()
        self.revoked: str | None = None
        self.handovers = 0
        self.lost = asyncio.Event()
        self.listeners: list[Callable[[], None]] = []
        """Called when the keys this replica holds may have changed (a handover)."""
        self._observed: dict[str, tuple[tuple[Any, ...], float]] = {}
        self._leases: dict[str, JSON] = {}
        self._owners: dict[str, str | None] = {}
        self._claiming = False
        self.permitted = False
        """A write was permitted under the shard held now: losing it must end the replica."""
        self.first_round = asyncio.Event()
        """Set once the first round has ended (a shard taken, a standby, or a failure)."""
        self._dropped: str | None = None
        """The shard given up unclaimed (its Lease still names us): taken again first."""

    # -- the permit ------------------------------------------------------------------------

    def holds(self, key: str) -> str | None:
        """None when this replica may write for ``key`` now, else why not (one line)."""
        now = self.clock()
        if self.revoked is not None:
            return f"shard ownership ended ({self.revoked})"
        if self.shard is None or self.seed is None:
            return "this replica holds no shard (a standby)"
        if now >= self.view.valid_until:
            return f"shard lease {self.shard} not renewed in time"
        if now < self.claim_from:
            return f"shard {self.shard} claims its keys in {self.claim_from - now:.1f}s"
        if self._owner(key) != self.shard:
            return f"the key is shard {self._owner(key)}'s, not {self.shard}'s"
        return None

    def permit(self, key: str) -> str | None:
        """:meth:`holds` for a write about to be sent: a yes is remembered (from then on a
        lapse ends the replica, since that write may be in flight)."""
        why = self.holds(key)
        if why is None:
            self.permitted = True
        return why

    def owns(self, key: str) -> bool:
        """Whether ``key`` is this replica's now (a queue's question: permits no write)."""
        return self.holds(key) is None

    def _owner(self, key: str) -> str | None:
        if key not in self._owners:
            assert self.seed is not None
            self._owners[key] = shards.owner(self.seed, self.view.live, key)
        return self._owners[key]

    # -- the rounds ------------------------------------------------------------------------

    async def run(self) -> None:
        """Load the seed, take a shard (or stand by), then hold it until it lapses
        (then sets :attr:`lost`)."""
        while self.seed is None:
            self.seed = await self._load_seed()
            if self.seed is None:
                self.first_round.set()  # unreadable: nobody should wait on it
                await self.sleep(self.settings.retry_period)
        last = -math.inf
        while True:
            started = self.clock()
            lapsed = self.shard is not None and started >= last + self.settings.renew_deadline
            if lapsed and self._lose_or_drop(f"could not renew {self.shard} for "
                                             f"{self.settings.renew_deadline:.0f}s"):
                return
            succeeded = await self._round(started)
            self.first_round.set()
            if succeeded:
                last = started
            elif self.revoked is not None:
                return
            wait = self.settings.retry_period
            if self.shard is not None:
                wait = min(wait, last + self.settings.renew_deadline - self.clock())
                if not self._claiming:  # the round that claims comes as the wait ends
                    wait = min(wait, self.claim_from - self.clock())
            await self.sleep(max(wait, 0.0))

    async def _round(self, started: float) -> bool:
        """Renew (or take) a shard and read every shard Lease; True when it all succeeded."""
        try:
            async with asyncio.timeout(self.settings.renew_deadline):
                if self.shard is not None and not await self._renew(self.shard):
                    return False
                await self._read_all()
                if self.shard is None:
                    await self._take()
        except (ClientError, TimeoutError) as exc:
            log.warning("%s: shard round failed: %s", self.identity,
                        exc or f"no answer within {self.settings.renew_deadline:.0f}s")
            return False
        if self.shard is None:
            self._publish(started, ())
            return True
        self._publish(started, self._live())
        return True

    def _publish(self, started: float, live: tuple[str, ...]) -> None:
        """A successful round: its view may be acted on until ``started + renew_deadline``."""
        until = started + self.settings.renew_deadline
        changed = live != self.view.live
        # A round that ended after the last view's deadline (a slow hub, a starved loop):
        # keys refused meanwhile were parked; they are this replica's again now.
        lapsed = self._claiming and self.clock() >= self.view.valid_until
        self.view = View(live, until if self.shard is not None else -math.inf)
        self.lease_writes.until = until if self.shard is not None else math.inf
        claiming = self.shard is not None and self.clock() >= self.claim_from
        if changed:
            self._owners.clear()
        if changed or claiming != self._claiming:
            self._claiming = claiming
            if self.shard is not None:
                self.handovers += 1
                log.info("%s: shard %s, live shards %s%s", self.identity, self.shard,
                         ", ".join(live), "" if claiming else " (waiting to claim)")
            for listener in self.listeners:
                listener()
        elif lapsed and claiming:
            log.info("%s: shard %s renewed after its permit lapsed; queueing what waited",
                     self.identity, self.shard)
            for listener in self.listeners:
                listener()

    async def _read_all(self) -> None:
        for name in self.names:
            try:
                lease = await self.client.get(leader.LEASES, name, self.settings.namespace)
            except ApiError as exc:
                if exc.status != 404:
                    raise
                self._leases.pop(name, None)
                self._observed.pop(name, None)
                continue
            self._observe(name, lease)

    def _observe(self, name: str, lease: JSON) -> None:
        self._leases[name] = lease
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"),
                  spec.get("leaseTransitions"))
        seen = self._observed.get(name)
        if seen is None or seen[0] != record:
            self._observed[name] = (record, self.clock())

    def _free(self, name: str) -> bool:
        """Nobody holds shard ``name``: no Lease, released, or expired by our clock."""
        lease = self._leases.get(name)
        if lease is None:
            return True
        spec = lease.get("spec") or {}
        if not spec.get("holderIdentity"):
            return True
        duration = float(spec.get("leaseDurationSeconds") or self.settings.lease_duration)
        return self.clock() - self._observed[name][1] > duration

    def _holder(self, name: str) -> str:
        return str((self._leases.get(name, {}).get("spec") or {}).get("holderIdentity") or "")

    def holders(self) -> set[str]:
        """The identities holding the live shards by the last round (the work server tells
        a pull member's agent how many replicas to stream to)."""
        return {self._holder(name) for name in self.view.live} - {""}

    def _live(self) -> tuple[str, ...]:
        return tuple(name for name in self.names if name == self.shard or not self._free(name))

    async def _take(self) -> None:
        dropped = self._dropped
        # A shard dropped unclaimed still names us: take it again first, or its keys would
        # wait for its expiry while no one holds it.
        order = sorted(self.names, key=lambda name: name != dropped)
        for name in order:
            ours = name == dropped and self._holder(name) == self.identity
            if (ours or self._free(name)) and await self._write(name, self._leases.get(name)):
                self.shard, self._dropped, self.permitted = name, None, False
                # Holders that computed ownership without this shard read its Lease before
                # our write landed; their permits for the keys moving here end within their
                # renew deadline of that. Claiming a lease duration after the write's answer
                # (a clock reading taken after it landed) leaves the same margin as a takeover.
                self.claim_from = self.clock() + self.settings.lease_duration
                log.info("%s: took shard %s; claiming its keys in %.0fs", self.identity,
                         name, self.settings.lease_duration)
                return

    async def _renew(self, name: str) -> bool:
        lease = await self.client.get(leader.LEASES, name, self.settings.namespace)
        holder = (lease.get("spec") or {}).get("holderIdentity")
        if holder != self.identity:
            self._lose_or_drop(f"shard {name} is held by {holder or 'nobody'} now")
            return False
        return await self._write(name, lease)

    async def _write(self, name: str, lease: JSON | None) -> bool:
        s = self.settings
        now = leader.now_rfc3339()
        spec: dict[str, Any] = {"holderIdentity": self.identity,
                                "leaseDurationSeconds": int(s.lease_duration), "renewTime": now}
        try:
            if lease is None:
                spec.update(acquireTime=now, leaseTransitions=0)
                written = await self.client.create(leader.LEASES, {
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": name, "namespace": s.namespace}, "spec": spec})
            else:
                old = lease.get("spec") or {}
                mine = old.get("holderIdentity") == self.identity
                spec["acquireTime"] = old.get("acquireTime") if mine else now
                spec["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + \
                    (0 if mine else 1)
                written = await self.client.replace(leader.LEASES, {**lease, "spec": spec})
        except ApiError as exc:
            if exc.status != 409:
                raise
            return False  # another replica wrote it first
        self._observe(name, written)
        return True

    def _lose_or_drop(self, why: str) -> bool:
        """The shard is not ours for sure any more: exit if a write was permitted under it
        (True), else drop it and take one again at the next round (False)."""
        if self.permitted:
            self._lose(why)
            return True
        log.warning("%s: %s before any write was permitted; taking a shard again",
                    self.identity, why)
        self._dropped, self.shard = self.shard, None
        self.claim_from = math.inf
        self.view = View()
        self.lease_writes.until = math.inf
        if self._claiming:  # queues that unparked keys park them again as workers reach them
            self._claiming = False
            for listener in self.listeners:
                listener()
        return False

    def _lose(self, why: str) -> None:
        self.revoked = why
        self.view = View(self.view.live, -math.inf)
        self.lease_writes.until = -math.inf
        self.lost.set()
        log.error("%s: %s; this replica stops writing and exits", self.identity, why)

    async def release(self) -> None:
        """Give the shard up (clean shutdown): no write of ours after this begins, then
        the Lease is cleared so its keys move at the others' next round."""
        name, lease = self.shard, self._leases.get(self.shard or "")
        if self.revoked is not None or name is None or lease is None or \
                self.clock() >= self.view.valid_until:
            # Lapsed: the shard may be someone else's by now; it expires on its own.
            log.info("%s: not releasing shard %s (%s)", self.identity, name,
                     self.revoked or "not held" if name is None or self.revoked else
                     f"{self.clock() - self.view.valid_until:.1f}s past its renew deadline")
            return
        self.revoked = "released the shard"
        self.view = View(self.view.live, -math.inf)
        try:
            spec = {**(lease.get("spec") or {}), "holderIdentity": "",
                    "leaseDurationSeconds": 1, "renewTime": leader.now_rfc3339()}
            await self.client.replace(leader.LEASES, {**lease, "spec": spec})
            log.info("%s: released shard %s", self.identity, name)
        except ClientError as exc:
            log.warning("%s: could not release shard %s: %s", self.identity, name, exc)
        finally:
            self.lease_writes.until = -math.inf

    # -- the seed --------------------------------------------------------------------------

    async def _load_seed(self) -> bytes | None:
        """The fleet's seed: read, or made by the first replica (a 409 means another made
        it first: read it). None (logged) when the hub cannot be read or it is unusable."""
        name, namespace = seed_name(self.settings.name), self.settings.namespace
        try:
            try:
                lease = await self.client.get(leader.LEASES, name, namespace)
            except ApiError as exc:
                if exc.status != 404:
                    raise
                lease = await self._make_seed(name, namespace)
        except ClientError as exc:
            log.warning("%s: reading the shard seed: %s", self.identity, exc)
            return None
        value = ((lease.get("metadata") or {}).get("annotations") or {}).get(SEED_ANNOTATION)
        try:
            seed = bytes.fromhex(str(value))
        except ValueError:
            seed = b""
        if len(seed) != shards.SEED_BYTES:
            log.error("%s: Lease %s/%s: annotation %s is not %d hex-encoded bytes; delete "
                      "the Lease to make a new seed", self.identity, namespace, name,
                      SEED_ANNOTATION, shards.SEED_BYTES)
            return None
        return seed

    async def _make_seed(self, name: str, namespace: str) -> JSON:
        try:
            return await self.client.create(leader.LEASES, {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace, "annotations": {
                    SEED_ANNOTATION: os.urandom(shards.SEED_BYTES).hex()}},
                "spec": {}})
        except ApiError as exc:
            if exc.status != 409:
                raise
            return await self.client.get(leader.LEASES, name, namespace)
