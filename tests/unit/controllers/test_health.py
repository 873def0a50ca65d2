"""Health: thresholds, the /readyz-then-/healthz probe, taints, what requeues templates."""

from __future__ import annotations

from typing import Any

from federation.contexts import client as kube
from federation.contexts.cache import Event
from federation.contexts.client import ApiError, ClusterUnavailable
from federation.controllers import api, failover, health


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


def test_first_result_decides_an_unknown_state() -> None:
    """Nothing known yet: the first probe sets the state (there is nothing to protect)."""
    tracker = health.Threshold(2, 3)
    assert tracker.observe(False, 1) and tracker.value is False


class FakeClient:
    name = "member2"

    def __init__(self, answers: dict[str, Exception | None]) -> None:
        self.answers = answers
        self.paths: list[str] = []

    async def request_raw(self, path: str, timeout: float | None = None) -> bytes:
        self.paths.append(path)
        error = self.answers.get(path)
        if error is not None:
            raise error
        return b"ok"


async def test_probe_falls_back_to_healthz() -> None:
    """/readyz 404 (or 403): /healthz decides."""
    client = FakeClient({"/readyz": ApiError("member2", 404, "NotFound", "")})
    result = await health.probe(client, 1.0)  # type: ignore[arg-type]
    assert result == health.ProbeResult(True, True, "GET /healthz: ok")
    assert client.paths == ["/readyz", "/healthz"]


async def test_probe_tells_unready_from_unreachable() -> None:
    """A 500 answer is reachable but not ready; no answer is neither."""
    failing = FakeClient({"/readyz": ApiError("member2", 500, "", "[-]etcd failed")})
    result = await health.probe(failing, 1.0)  # type: ignore[arg-type]
    assert (result.reachable, result.ready) == (True, False)
    silent = FakeClient({"/readyz": ClusterUnavailable("member2", "GET /readyz: timed out")})
    result = await health.probe(silent, 1.0)  # type: ignore[arg-type]
    assert (result.reachable, result.ready) == (False, False)
    assert result.detail == "GET /readyz: GET /readyz: timed out"


def test_taints_added_with_time_added_and_removed_keeping_others() -> None:
    """NotReady adds both not-ready taints (timeAdded = when it turned); Ready removes only
    ours; an existing timeAdded is kept."""
    user = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    added = health.wanted_taints([user], False, 1_700_000_000.0)
    assert added[0] == user
    assert [(t["key"], t["effect"], t["timeAdded"]) for t in added[1:]] == [
        (failover.NOT_READY_TAINT, "NoSchedule", "2023-11-14T22:13:20Z"),
        (failover.NOT_READY_TAINT, "NoExecute", "2023-11-14T22:13:20Z")]
    assert health.wanted_taints(added, False, 1_800_000_000.0) == added
    assert health.wanted_taints(added, True, None) == [user]


def test_conditions_say_why() -> None:
    """Ready and Reachable with reasons: unreachable vs answering-but-not-ready."""
    state = health.MemberHealth(health.HealthSettings(), ready=False, reachable=True)
    state.detail = "GET /readyz: 500"
    found = {c["type"]: c for c in health.conditions(state, [])}
    assert (found["Ready"]["status"], found["Ready"]["reason"]) == ("False", "ClusterNotReady")
    assert (found["Reachable"]["status"], found["Reachable"]["reason"]) == ("True",
                                                                           "ProbeAnswered")


def member(status: dict[str, Any], spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "member2", "labels": {}}, "spec": spec or {}, "status": status}


def event(new: dict[str, Any], old: dict[str, Any] | None) -> Event:
    return Event("MODIFIED" if old else "ADDED", "hub", api.MEMBER_CLUSTERS, new, old)


def test_capacity_refresh_does_not_requeue_templates() -> None:
    """Only spec, labels, condition statuses or deletion changes matter to placement."""
    ready = {"conditions": [{"type": "Ready", "status": "True", "message": "a"}]}
    refreshed = {**ready, "resourceSummary": {"allocated": {"pods": "3"}}}
    assert not health.affects_placement(event(member(refreshed), member(ready)))
    reworded = {"conditions": [{"type": "Ready", "status": "True", "message": "b"}]}
    assert not health.affects_placement(event(member(reworded), member(ready)))
    down = {"conditions": [{"type": "Ready", "status": "False"}]}
    assert health.affects_placement(event(member(down), member(ready)))
    tainted = member(ready, {"taints": [{"key": "x", "effect": "NoSchedule"}]})
    assert health.affects_placement(event(tainted, member(ready)))
    assert health.affects_placement(event(member(ready), None))


def test_workloads_watched_for_capacity() -> None:
    """Capacity reads the three workload kinds the simulator makes ready."""
    assert health.WORKLOADS == (kube.DEPLOYMENTS, kube.STATEFULSETS, kube.REPLICASETS)


async def test_member_cluster_deleted_under_the_reconcile_is_done_not_a_traceback() -> None:
    """`fedctl unjoin` deleted the MemberCluster after our cache read it: the status write's
    404 ends the reconcile quietly, and the left cluster's health state is dropped."""
    from tests.unit.controllers.fakes import FakeMC, FakeRecorder, cluster_set

    mc = FakeMC(cluster_set("member1"))
    stale = member({"conditions": [{"type": "Ready", "status": "True"}]})
    controller = health.HealthController(mc.clusters, mc, FakeRecorder(),  # type: ignore[arg-type]
                                         clock=lambda: 1_700_000_000.0)
    controller.health["member2"] = health.MemberHealth(health.HealthSettings(), ready=False,
                                                       reachable=False)

    async def cached(*_: Any, **__: Any) -> dict[str, Any]:
        return dict(stale)

    mc.get = cached  # type: ignore[method-assign]
    assert await controller.reconcile(controller.request("member2")) is None
    assert "member2" not in controller.health
