"""One health signal per cluster: thresholds, flapping, one transition per flip, the probe
schedule on virtual time, and availability listeners."""

from __future__ import annotations

import asyncio

import pytest

from federation.contexts import clusters, health
from federation.contexts.client import ApiError, ClusterUnavailable
from tests.unit.contexts import probes


def test_threshold_needs_enough_results_in_a_row() -> None:
    """One or two failures do not flip a ready cluster; the third does; two successes
    bring it back, and a success in between resets the count."""
    tracker = health.Threshold(success_threshold=2, failure_threshold=3, value=True)
    assert not tracker.observe(False, 1) and not tracker.observe(False, 2)
    assert not tracker.observe(True, 3)  # the run is broken
    assert not tracker.observe(False, 4) and not tracker.observe(False, 5)
    assert tracker.observe(False, 6) and tracker.value is False and tracker.changed_at == 6
    assert not tracker.observe(True, 7)
    assert tracker.observe(True, 8) and tracker.value is True


def test_unknown_turns_up_at_once_and_down_only_after_a_full_run() -> None:
    """Just engaged (or just restarted): one answer is enough to be up, but one unlucky
    probe never marks a cluster down; a full run of failures does."""
    up = health.Threshold(2, 3)
    assert up.observe(True, 1) and up.value is True
    down = health.Threshold(2, 3)
    assert not down.observe(False, 1) and not down.observe(False, 2)
    assert down.value is None
    assert down.observe(False, 3) and down.value is False and down.changed_at == 3


def test_settings_refuse_nonsense() -> None:
    """A zero period or threshold is refused with the field's name."""
    with pytest.raises(ValueError, match="period"):
        health.HealthSettings(period=0)
    with pytest.raises(ValueError, match="failure_threshold"):
        health.HealthSettings(failure_threshold=0)


class FakeClient:
    name = "member2"

    def __init__(self, answers: dict[str, Exception | None]) -> None:
        self.answers = answers
        self.paths: list[str] = []

    async def request_raw(self, path: str, *, timeout: float | None = None) -> bytes:
        self.paths.append(path)
        error = self.answers.get(path)
        if error is not None:
            raise error
        return b"ok"


async def test_probe_falls_back_to_healthz() -> None:
    """/readyz 404 (or 403): /healthz decides."""
    client = FakeClient({"/readyz": ApiError("member2", 404, "NotFound", "")})
    result = await health.probe(client, 1.0)
    assert result == health.ProbeResult(True, True, "GET /healthz: ok")
    assert client.paths == ["/readyz", "/healthz"]


async def test_probe_tells_unready_from_unreachable() -> None:
    """A 500 answer is reachable but not ready; no answer is neither."""
    result = await health.probe(FakeClient({"/readyz": ApiError("member2", 500, "", "etcd")}),
                                1.0)
    assert (result.reachable, result.ready) == (True, False)
    silent = FakeClient({"/readyz": ClusterUnavailable("member2", "GET /readyz: timed out")})
    result = await health.probe(silent, 1.0)
    assert (result.reachable, result.ready) == (False, False)
    assert result.detail == "GET /readyz: timed out"  # said once, not twice


class VirtualTime:
    """A clock that moves only when the prober sleeps, or a probe takes time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


async def test_one_probe_per_period_and_one_transition_per_flip_on_virtual_time() -> None:
    """Scripted answers, a fake clock: one GET per period (a hung probe's timeout counts
    toward the period), flapping changes nothing, three failures make one transition at
    the third, two answers bring it back with one more."""
    time = VirtualTime()
    script = [True, False, True, False, False, True,   # flapping
              False, False, False, False,             # down at the third
              True, True, True]                        # back at the second
    calls: list[float] = []

    async def scripted(_: object, timeout: float) -> health.ProbeResult:
        calls.append(time.now)
        ok = script[len(calls) - 1]
        if not ok:
            time.now += timeout  # a hung server: the whole timeout passes
        if len(calls) == len(script):
            raise asyncio.CancelledError  # end of the script: stop the loop
        return probes.result(ok)

    settings = health.HealthSettings(period=2.0, timeout=1.5)
    state = health.Health("member2", settings)
    seen: list[health.Transition] = []
    loop = health.ProbeLoop(probes.Silent(), state, seen.append, probe=scripted,
                            sleep=time.sleep, clock=lambda: 1000 + time.now,
                            monotonic=lambda: time.now)
    with pytest.raises(asyncio.CancelledError):
        await loop.run()
    assert calls == [2.0 * i for i in range(len(script))]  # one probe per period, no more
    assert [(t.ready, t.ready_changed) for t in seen] == [(True, True), (False, True),
                                                          (True, True)]
    assert [t.at for t in seen] == [1000.0, 1000 + 8 * 2.0 + 1.5, 1000 + 11 * 2.0]
    assert state.probes == len(script) - 1


async def test_listeners_hear_flips_only_and_a_failing_one_does_not_stop_the_prober() -> None:
    """Availability listeners are called when ready flips, health listeners on any flip
    (reachable included), never per probe; a listener that raises is logged, not fatal."""
    hub = clusters.Cluster("hub", is_hub=True, is_member=False)
    member = clusters.Cluster("m1")
    cluster_set = clusters.ClusterSet([hub, member])
    heard: list[tuple[str, bool | None]] = []
    flips: list[tuple[bool | None, bool | None]] = []

    def broken(_: clusters.Cluster) -> None:
        raise RuntimeError("listener bug")

    member.availability_listeners.append(broken)
    cluster_set.on_member_availability(lambda c: heard.append((c.name, c.available)))
    cluster_set.on_member_health(lambda c: flips.append((c.health.ready.value,
                                                         c.health.reachable.value)))
    await probes.probe(member, probes.result(True), times=2)
    sick = probes.result(False, "GET /readyz: 500", reachable=True)
    await probes.probe(member, sick, times=3)
    await probes.probe(member, probes.result(False), times=3)  # now unreachable too
    await probes.probe(member, probes.result(True), times=2)
    assert heard == [("m1", True), ("m1", False), ("m1", True)]
    assert flips == [(True, True), (False, True), (False, False), (True, True)]
    await probes.probe(hub, probes.result(True))
    assert len(heard) == 3 and hub.available is True


async def test_available_is_the_ready_state_and_writes_fail_fast_on_it() -> None:
    """Cluster.available, its state, detail and check_writable all read the one prober."""
    member = clusters.Cluster("m1", client=None)
    assert member.available is None and str(member.state) == "unknown"
    await probes.settle(member, probes.result(False, "GET /readyz: connection refused"))
    assert member.state == "unavailable"
    assert member.detail == "unavailable: GET /readyz: connection refused"
    assert member.last_probe_error == "GET /readyz: connection refused"
    await probes.settle(member, probes.result(True))
    assert member.last_probe_error is None
