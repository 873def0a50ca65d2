"""The cluster-health controller: conditions, taints and events follow the one prober."""

from __future__ import annotations

from typing import Any

from federation.contexts import client as kube
from federation.contexts.cache import Event
from federation.contexts.health import Health
from federation.controllers import health
from federation.hub import api, failover
from federation.runtime.reconcile import Request, Result
from tests.unit.contexts import probes
from tests.unit.controllers.fakes import FakeMC, FakeRecorder, cluster_set


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
    state = Health("member2")
    state.ready.value, state.reachable.value = False, True
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
    404 ends the reconcile quietly, and nothing of the member is kept."""
    mc = FakeMC(cluster_set("member1", "member2"))
    stale = member({"conditions": [{"type": "Ready", "status": "True"}]})
    controller = health.HealthController(mc.clusters, mc, FakeRecorder())
    mc.clusters.get("member2").available = False
    controller._capacity_at["member2"] = 1.0

    async def cached(*_: Any, **__: Any) -> dict[str, Any]:
        return dict(stale)

    mc.get = cached  # type: ignore[method-assign]
    assert await controller.reconcile(controller.request("member2")) is None
    assert "member2" not in controller._capacity_at


def installed(*members: str) -> tuple[FakeMC, health.HealthController, list[Request],
                                      FakeRecorder]:
    """The controller wired as `install` does, its queue a list."""
    mc = FakeMC(cluster_set(*members))
    for name in members:
        mc.put("hub", {"apiVersion": "cluster.federation.io/v1alpha1", "kind": "MemberCluster",
                       "metadata": {"name": name},
                       "status": {"conditions": [{"type": "Ready", "status": "True",
                                                  "reason": "ClusterReady",
                                                  "message": "GET /readyz: ok"},
                                                 {"type": "Reachable", "status": "True",
                                                  "reason": "ProbeAnswered",
                                                  "message": "GET /readyz: ok"}],
                                  "resourceSummary": {}}})
    recorder = FakeRecorder()
    controller = health.HealthController(mc.clusters, mc, recorder)
    queued: list[Request] = []
    controller.enqueue = queued.append
    mc.clusters.on_member_health(controller.on_health)
    return mc, controller, queued, recorder


async def test_one_prober_drives_available_conditions_taints_and_one_event() -> None:
    """member2's one prober fails three times: Cluster.available, the availability
    listeners, the health queue, the Ready/Reachable conditions, the taints and the
    Event all follow that one flip, each once; flapping before it changes nothing."""
    mc, controller, queued, recorder = installed("member1", "member2")
    member2 = mc.clusters.get("member2")
    member2.available = True
    heard: list[bool | None] = []
    mc.clusters.on_member_availability(lambda c: heard.append(c.available))
    refused = probes.result(False, "GET /readyz: connection refused")
    for outcome in (refused, probes.result(True), refused, refused, probes.result(True)):
        await probes.probe(member2, outcome)  # flapping: never three failures in a row
    assert member2.available is True and heard == [] and queued == []
    await probes.probe(member2, refused, times=3, now=1_700_000_100.0)
    assert member2.available is False and heard == [False]
    assert queued == [controller.request("member2")]
    assert await controller.reconcile(queued[0]) == Result(requeue_after=10.0)
    doc = mc.find("hub", "MemberCluster", "member2") or {}
    found = {c["type"]: (c["status"], c["reason"]) for c in doc["status"]["conditions"]}
    assert found == {"Ready": ("False", "ClusterUnreachable"),
                     "Reachable": ("False", "ProbeFailed")}
    assert [(t["effect"], t["timeAdded"]) for t in doc["spec"]["taints"]] == [
        ("NoSchedule", "2023-11-14T22:15:00Z"), ("NoExecute", "2023-11-14T22:15:00Z")]
    assert [e[1] for e in recorder.events] == ["ClusterUnreachable"]
    await probes.probe(member2, refused, times=5)  # more of the same: nothing new
    await controller.reconcile(queued[0])
    assert len(queued) == 1 and len(recorder.events) == 1 and heard == [False]
    await probes.probe(member2, probes.result(True))
    assert member2.available is False  # one answer while it restarts is not a recovery
    await probes.probe(member2, probes.result(True))
    assert member2.available is True and heard == [False, True] and len(queued) == 2
    await controller.reconcile(queued[1])
    doc = mc.find("hub", "MemberCluster", "member2") or {}
    assert doc["spec"]["taints"] == []
    assert [e[1] for e in recorder.events] == ["ClusterUnreachable", "ClusterReady"]


async def test_answering_but_not_ready_is_one_flip_of_ready_only() -> None:
    """/readyz 500 three times: Ready=False ClusterNotReady, still Reachable; the prober
    reports it once, and the written condition says why."""
    mc, controller, queued, recorder = installed("member1")
    member1 = mc.clusters.get("member1")
    member1.available = True
    sick = probes.result(False, "GET /readyz: 500 [-]etcd failed", reachable=True)
    await probes.probe(member1, sick, times=4)
    assert queued == [controller.request("member1")]
    await controller.reconcile(queued[0])
    doc = mc.find("hub", "MemberCluster", "member1") or {}
    ready = next(c for c in doc["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ClusterNotReady")
    assert ready["message"] == "GET /readyz: 500 [-]etcd failed"
    assert [e[1] for e in recorder.events] == ["ClusterNotReady"]


async def test_a_left_member_is_forgotten_through_the_leave_listener() -> None:
    """ClusterSet.leave tells the controller; its capacity clock for the member goes."""
    mc, controller, _, _ = installed("member1")
    mc.clusters.on_leave(controller.forget)
    mc.clusters.get("member1").joined = True
    controller._capacity_at["member1"] = 5.0
    await mc.clusters.leave("member1")
    assert "member1" not in controller._capacity_at and "member1" not in mc.clusters.clusters


def test_a_relisted_member_cluster_with_the_view_last_seen_requeues_nothing() -> None:
    """A first ADDED requeues; the same view ADDED again (a relist) does not; a changed one
    does, and so does an ADDED after the cluster was deleted."""
    seen = health.PlacementSeen()
    ready = member({"conditions": [{"type": "Ready", "status": "True", "message": "a"}],
                    "resourceSummary": {"allocated": {"pods": "1"}}})
    assert seen(event(ready, None))
    relisted = member({"conditions": [{"type": "Ready", "status": "True", "message": "b"}],
                       "resourceSummary": {"allocated": {"pods": "2"}}})
    assert not seen(event(relisted, None))
    labelled = {**relisted, "metadata": {"name": "member2", "labels": {"tier": "gold"}}}
    assert seen(event(labelled, None))
    stated = member({"conditions": [], "availableReplicas": 4})
    assert seen(event(stated, labelled))
    assert seen(Event("DELETED", "hub", api.MEMBER_CLUSTERS, stated, None))
    assert seen(event(stated, None))
