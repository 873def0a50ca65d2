"""Leader election and its fence, on virtual time with an in-memory Lease.

The clock and the elector's sleeps are driven by the test, so a freeze of 20 s
(a SIGSTOP, a paused VM) is one assignment, and nothing waits on the wall clock.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest

from federation.contexts import client as kube
from federation.runtime import leader
from tests.unit.clients import Unserved

pytestmark = pytest.mark.timeout(30)

SETTINGS = leader.LeaderSettings(name="lease", namespace="ns")


class VirtualTime:
    """A monotonic clock and a sleep that returns only when the test advances time."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._wake: asyncio.Future[None] | None = None
        self._asleep = asyncio.Event()

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self._wake = asyncio.get_running_loop().create_future()
        self._asleep.set()
        await self._wake

    async def asleep(self) -> None:
        """Wait until the elector sleeps (it has done everything it can do now)."""
        await self._asleep.wait()

    async def advance(self, seconds: float) -> None:
        """Move the clock, wake the elector and wait until it sleeps (or ends) again."""
        self.now += seconds
        assert self._wake is not None and not self._wake.done()
        self._asleep.clear()
        self._wake.set_result(None)
        for _ in range(1000):  # loop iterations, not time: the elector ends or sleeps
            await asyncio.sleep(0)
            if self._asleep.is_set():
                break
        self._asleep.clear()


class Leases(Unserved):
    """The hub's Lease API in memory, with resourceVersion conflicts; counts writes."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.writes = 0
        self.reads = 0
        self.down = False
        self.name = "hub"
        self.fence: kube.WritePermit | None = None
        """The permit the elector gives its client, consulted as a write is sent."""
        self.after_read: Callable[[], None] = lambda: None
        """Runs between a read and the next write (a freeze, a long wait for a connection)."""

    def _check(self) -> None:
        if self.down:
            raise kube.ClusterUnavailable("hub", "connection refused")

    def _send(self, method: str) -> None:
        if self.fence is not None:
            self.fence.check(self.name, method, "/apis/coordination.k8s.io/v1/leases")

    async def get(self, resource: kube.Resource, name: str, namespace: str | None = None
                  ) -> dict[str, Any]:
        self._check()
        self.reads += 1
        self.after_read()
        if self.lease is None:
            raise kube.ApiError("hub", 404, "NotFound", "not found")
        return copy.deepcopy(self.lease)

    async def create(self, resource: kube.Resource, body: dict[str, Any],
                     namespace: str | None = None) -> dict[str, Any]:
        self._check()
        self._send("POST")
        if self.lease is not None:
            raise kube.ApiError("hub", 409, "AlreadyExists", "exists")
        return self._store(body)

    async def replace(self, resource: kube.Resource, body: dict[str, Any],
                      subresource: str | None = None) -> dict[str, Any]:
        self._check()
        self._send("PUT")
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise kube.ApiError("hub", 409, "Conflict", "stale")
        return self._store(body)

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)

    def take_over(self, holder: str) -> None:
        """Another candidate writes the Lease (a takeover, as a rival would after expiry)."""
        assert self.lease is not None
        self.lease["spec"]["holderIdentity"] = holder
        self.version += 1
        self.lease["metadata"]["resourceVersion"] = str(self.version)


async def elected(leases: Leases, time: VirtualTime
                  ) -> tuple[leader.LeaderElector, asyncio.Task[None]]:
    elector = leader.LeaderElector(leases, SETTINGS, "me",
                                   clock=time.clock, sleep=time.sleep)
    task = asyncio.create_task(elector.run())
    await time.asleep()
    assert elector.is_leader and elector.elected.is_set()
    return elector, task


def test_settings_refuse_a_renew_deadline_not_shorter_than_the_lease() -> None:
    """renew_deadline >= lease_duration would let a leader write after a takeover."""
    with pytest.raises(ValueError, match="renew_deadline"):
        leader.LeaderSettings(lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="retry_period"):
        leader.LeaderSettings(retry_period=12)
    defaults = leader.LeaderSettings()
    assert defaults.retry_period < defaults.renew_deadline < defaults.lease_duration


async def test_fence_opens_on_election_and_each_renewal_extends_it() -> None:
    """The fence is valid until the start of the last renewal plus the renew deadline."""
    time, leases = VirtualTime(), Leases()
    elector, task = await elected(leases, time)
    assert elector.fence.valid_until == 1000.0 + SETTINGS.renew_deadline
    await time.advance(SETTINGS.retry_period)
    assert elector.fence.valid_until == 1002.0 + SETTINGS.renew_deadline
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == "me"
    task.cancel()


async def test_a_frozen_leader_refuses_writes_on_resume_before_it_learns_anything() -> None:
    """SIGSTOP past the lease: on resume the fence has lapsed (no request needed to know),
    and the elector declares the loss without reading or writing the Lease."""
    time, leases = VirtualTime(), Leases()
    elector, task = await elected(leases, time)
    reads, writes = leases.reads, leases.writes
    time.now += 20.0  # frozen: nothing ran meanwhile
    assert not elector.fence.valid
    with pytest.raises(kube.NotLeader, match="not renewed in time"):
        elector.fence.check("hub", "PATCH", "/api/v1/namespaces/x")
    await time.advance(0)
    assert task.done() and elector.lost.is_set() and not elector.is_leader
    assert (leases.reads, leases.writes) == (reads, writes)
    with pytest.raises(kube.NotLeader, match="leadership lost"):
        elector.fence.check("hub", "POST", "/x")


async def test_a_deposed_leader_stops_at_its_next_renewal_and_never_writes_the_lease() -> None:
    """Someone else holds the Lease: lost at once (not after the renew deadline)."""
    time, leases = VirtualTime(), Leases()
    elector, task = await elected(leases, time)
    leases.take_over("rival")
    writes = leases.writes
    await time.advance(SETTINGS.retry_period)
    assert task.done() and elector.lost.is_set()
    assert elector.fence.revoked is not None and "rival" in elector.fence.revoked
    assert leases.writes == writes
    elector.fence.extend(time.now + 100)  # a revoked fence stays revoked
    assert not elector.fence.valid
    await elector.release()  # and a lost leader does not release someone else's Lease
    assert leases.writes == writes and leases.lease is not None
    assert leases.lease["spec"]["holderIdentity"] == "rival"


async def test_renewals_failing_for_the_deadline_lose_leadership_when_the_fence_lapses() -> None:
    """A hub that stops answering: the fence lapses at renew + deadline, and the elector
    gives up no later than that."""
    time, leases = VirtualTime(), Leases()
    elector, task = await elected(leases, time)
    leases.down = True
    for _ in range(4):
        await time.advance(SETTINGS.retry_period)
        assert elector.fence.valid and not elector.lost.is_set()
    await time.advance(SETTINGS.retry_period)  # t = 1010: renew + deadline
    assert not elector.fence.valid
    assert task.done() and elector.lost.is_set()


async def test_release_survives_a_version_moved_on_by_an_inflight_renewal() -> None:
    """The Lease changed since we last read it (a renewal landed): the release re-reads it
    and, still ours, hands it back; someone else's Lease is never released."""
    time, leases = VirtualTime(), Leases()
    elector, task = await elected(leases, time)
    task.cancel()
    assert leases.lease is not None
    leases.version += 1  # our own renewal, written after the elector's last read
    leases.lease["metadata"]["resourceVersion"] = str(leases.version)
    await elector.release()
    assert leases.lease["spec"]["holderIdentity"] == ""

    time, leases = VirtualTime(), Leases()
    elector, task = await elected(leases, time)
    task.cancel()
    leases.take_over("rival")
    await elector.release()
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == "rival"


async def test_release_on_clean_shutdown_clears_the_holder_and_closes_the_fence() -> None:
    """SIGTERM: the Lease is handed back at once, and nothing is written after it."""
    time, leases = VirtualTime(), Leases()
    elector, task = await elected(leases, time)
    task.cancel()
    await elector.release()
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == ""
    assert not elector.fence.valid


async def test_a_renewal_held_up_past_its_deadline_is_not_sent() -> None:
    """A renewal that read the Lease and was then held up (frozen, or waiting for a
    connection) until past its renew deadline is refused by the elector's own permit, not
    sent: on resume it would reach the hub after a takeover. The elector then gives up."""
    time, leases = VirtualTime(), Leases()
    elector, task = await elected(leases, time)
    assert leases.fence is elector.lease_writes
    writes = leases.writes

    def freeze() -> None:
        time.now += 30.0

    leases.after_read = freeze
    await time.advance(SETTINGS.retry_period)
    assert leases.writes == writes, "a renewal was sent after its renew deadline"
    assert not elector.fence.valid
    leases.after_read = lambda: None
    await time.advance(0)
    assert task.done() and elector.lost.is_set()
    with pytest.raises(kube.NotLeader, match="leadership ended"):
        elector.lease_writes.check("hub", "PUT", "/lease")


async def test_a_candidate_may_always_try_and_a_released_lease_is_never_written_again() -> None:
    """Before election the elector's permit is open (the resourceVersion decides); after a
    release it is closed for good."""
    time, leases = VirtualTime(), Leases()
    elector = leader.LeaderElector(leases, SETTINGS, "me",
                                   clock=time.clock, sleep=time.sleep)
    time.now += 1e9
    elector.lease_writes.check("hub", "POST", "/lease")
    elector, task = await elected(leases, time)
    task.cancel()
    await elector.release()
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == ""
    with pytest.raises(kube.NotLeader):
        elector.lease_writes.check("hub", "PUT", "/lease")
