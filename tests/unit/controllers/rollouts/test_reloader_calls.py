"""Issue 20, findings 10, 18 and 19: how the rollout controller calls reloaders.

- 10: an EndpointSlice is tenant data; every address in it goes through the outbound
  policy (resolved, refused unless allowed) and a failed call says only "refused" or
  "unreachable", whatever the transport said;
- 18: a cluster's ``[startedAt, finishedAt]`` holds every reloader call made for it;
- 19: a reconcile that reads a cache behind the controller's own last status write (the
  cluster still Updating there) does not call the reloaders a second time.
"""

from __future__ import annotations

import copy
import ssl
from collections.abc import Mapping
from typing import Any

import pytest

from federation.contexts import egress
from federation.controllers.rollouts import OnlineUpgrade, Reconciler, rollout
from federation.controllers.rollouts.view import CallerNotReady
from tests.unit.controllers.rollouts.fakes import (
    INI_V1,
    NS,
    Answer,
    Caller,
    Fleet,
    change,
    reconcile,
    reconciler,
    standard,
)

DYNAMIC = INI_V1.replace("100", "500")


async def released(fleet: Fleet, caller: OnlineUpgrade, **settings: Any) -> Reconciler:
    """A one-member fleet whose dynamic change is released and copied: the next reconcile
    calls the reloaders."""
    rec = reconciler(fleet, caller, **settings)
    await reconcile(rec)
    change(fleet, DYNAMIC)
    await reconcile(rec)
    fleet.propagate()
    return rec


# -- finding 10: the outbound policy -----------------------------------------------------


@pytest.mark.parametrize("address", [
    "127.0.0.1", "169.254.169.254", "10.0.0.9", "localhost", "0.0.0.0",
])
async def test_a_reloader_address_the_policy_refuses_is_never_dialled(address: str) -> None:
    fleet = Fleet(("member1",))
    standard(fleet)
    fleet.endpoints("member1", address)
    caller = Caller()
    rec = await released(fleet, caller, egress=egress.EgressPolicy())  # no --reloader-allow
    await reconcile(rec)
    assert caller.calls == []
    assert fleet.states() == {"member1": "Failed"}
    assert fleet.status()["clusters"][0]["message"] == (
        f"ReloaderFailed: Deployment db reloader {address}:9901 (my.ini): {egress.REFUSED}")


async def test_a_permitted_name_is_dialled_at_the_address_it_resolved_to() -> None:
    """The caller gets the IP the policy checked, never the name again (no rebinding)."""
    fleet = Fleet(("member1",))
    standard(fleet)
    fleet.endpoints("member1", "localhost")
    caller = Caller()
    allowed = egress.EgressPolicy(egress.parse_networks(["127.0.0.0/8", "::1/128"]))
    rec = await released(fleet, caller, egress=allowed)
    await reconcile(rec)
    assert [c["address"] for c in caller.calls] in (["127.0.0.1:9901"], ["[::1]:9901"])
    assert fleet.states() == {"member1": "Done"}


class Raising(Caller):
    """A reloader address where the transport fails with ``error``."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def __call__(self, address: str, *, namespace: str, config_spec: str,
                       config_file: str, params: Mapping[str, str], timeout: float) -> Answer:
        await super().__call__(address, namespace=namespace, config_spec=config_spec,
                               config_file=config_file, params=params, timeout=timeout)
        raise self.error


async def test_transport_failures_all_read_the_same() -> None:
    """No port-scanning oracle: refused, a TLS alert and a bad signature are one message."""
    messages = set()
    for error in (ConnectionRefusedError(111, "Connection refused"),
                  ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number"),
                  RuntimeError("certificate verify failed: bad signature"),
                  TimeoutError("no answer within 10s")):
        fleet = Fleet(("member1",))
        standard(fleet)
        fleet.endpoints("member1", "10.0.0.9")
        caller = Raising(error)
        rec = await released(fleet, caller)
        await reconcile(rec)
        assert len(caller.calls) == 1
        messages.add(fleet.status()["clusters"][0]["message"])
    assert messages == {f"ReloaderFailed: Deployment db reloader 10.0.0.9:9901 (my.ini): "
                        f"{egress.UNREACHABLE}"}


async def test_a_caller_without_a_certificate_says_so() -> None:
    """An operator's problem (no reloader CA) is no network detail: shown as it is."""
    fleet = Fleet(("member1",))
    standard(fleet)
    fleet.endpoints("member1", "10.0.0.9")
    rec = await released(fleet, Raising(CallerNotReady("no usable reloader CA")))
    await reconcile(rec)
    assert fleet.status()["clusters"][0]["message"].endswith("(my.ini): no usable reloader CA")


# -- finding 18: intervals hold every call -----------------------------------------------


class Slow(Caller):
    """Each call takes 0.25 s of the fleet's virtual clock; the time of each is recorded."""

    def __init__(self, fleet: Fleet) -> None:
        super().__init__()
        self.fleet = fleet
        self.times: list[tuple[str, object]] = []

    async def __call__(self, address: str, *, namespace: str, config_spec: str,
                       config_file: str, params: Mapping[str, str], timeout: float) -> Answer:
        self.fleet.advance(0.25)
        self.times.append((address, self.fleet.now()))
        return await super().__call__(address, namespace=namespace, config_spec=config_spec,
                                      config_file=config_file, params=params, timeout=timeout)


async def test_a_clusters_interval_holds_every_call_made_for_it() -> None:
    fleet = Fleet()
    standard(fleet)
    for cluster in fleet.members:
        fleet.endpoints(cluster, "10.0.0.1")
        fleet.endpoints(cluster, "10.0.0.2")
    caller = Slow(fleet)
    rec = reconciler(fleet, caller)
    await reconcile(rec)
    change(fleet, DYNAMIC)
    for _ in range(12):
        await reconcile(rec)
        fleet.propagate()
        fleet.advance(1)
    assert fleet.status()["phase"] == "Complete"
    assert len(caller.times) == 6
    clusters = fleet.status()["clusters"]
    for index, entry in enumerate(clusters):
        started = rollout.parse_stamp(entry["startedAt"])
        finished = rollout.parse_stamp(entry["finishedAt"])
        assert started is not None and finished is not None
        calls = caller.times[2 * index:2 * index + 2]
        for _, at in calls:
            assert started <= at <= finished, (entry, calls)  # type: ignore[operator]


# -- finding 19: once per version ----------------------------------------------------------


async def test_a_cache_behind_our_own_write_does_not_call_again() -> None:
    fleet = Fleet(("member1",))
    standard(fleet)
    fleet.endpoints("member1", "10.0.0.1")
    fleet.endpoints("member1", "10.0.0.2")
    caller = Caller()
    rec = await released(fleet, caller)
    updating = copy.deepcopy(fleet.hub[("ReconfigurePolicy", NS, "db")])
    await reconcile(rec)
    assert len(caller.calls) == 2 and fleet.states() == {"member1": "Done"}
    writes = len(fleet.writes)
    fleet.lagging[(NS, "db")] = updating  # the cache still shows the cluster Updating
    for _ in range(3):
        result = await reconcile(rec)
        assert result is not None  # the stale write got 409: read again shortly
    assert len(caller.calls) == 2, caller.calls  # each reloader once for this version
    assert len(fleet.writes) == writes and fleet.states() == {"member1": "Done"}
    fleet.lagging.clear()
    assert await reconcile(rec) is None


async def test_a_failed_call_is_made_again_for_a_new_version() -> None:
    """Once per version unless a call failed: the next version calls again."""
    fleet = Fleet(("member1",))
    standard(fleet)
    fleet.endpoints("member1", "10.0.0.1")
    caller = Caller()
    caller.fail["10.0.0.1:9901"] = "reload failed"
    rec = await released(fleet, caller)
    await reconcile(rec)
    assert fleet.states() == {"member1": "Failed"} and len(caller.calls) == 1
    caller.fail.clear()
    change(fleet, INI_V1.replace("100", "600"))
    for _ in range(3):
        await reconcile(rec)
        fleet.propagate()
    assert fleet.states() == {"member1": "Done"} and len(caller.calls) == 2
