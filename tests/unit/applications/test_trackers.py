"""ResourceTracker entries naming clusters that are not members (finding 16): a tenant may
write trackers, so how many entries there are is theirs to choose. They are kept, reported
once, not retried on a timer, and cleaned when a member of that name joins; entries on a
member that is merely away are retried with a backoff."""

from __future__ import annotations

from typing import Any, cast

from federation.applications import tracker
from federation.contexts import client as kube
from federation.contexts.cache import ClusterCache
from federation.controllers import applications
from federation.hub import api, manifests
from federation.runtime import controller
from federation.runtime.reconcile import Request
from tests.unit.applications.test_controller import (
    MC,
    REQUEST,
    Clock,
    app,
    must,
    ready_everywhere,
    set_app,
)
from tests.unit.controllers import fakes
from tests.unit.controllers.applications import fakes as app_fakes


def world() -> tuple[MC, applications.Reconciler, app_fakes.Recorder, Clock]:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    clock = Clock()
    recorder = app_fakes.Recorder()
    reconciler = app_fakes.reconciler(mc, recorder, clock=clock)
    return mc, reconciler, recorder, clock


def entry(cluster: str, name: str = "web") -> tracker.Entry:
    return tracker.Entry(cluster, "apps/v1", "Deployment", "shop", name, 1, "deploy")


def forge(mc: MC, entries: list[tracker.Entry], uid: str = "forged") -> None:
    """What a tenant may write in its own namespace: a tracker with any entries."""
    mc.put("hub", {"apiVersion": "core.oam.dev/v1beta1", "kind": "ResourceTracker",
                   "metadata": {"name": "shop", "namespace": "shop"},
                   "spec": {"application": "shop", "applicationUID": uid,
                            "resources": [e.as_json() for e in entries],
                            "pendingCleanup": []}})


def ours(name: str = "web") -> dict[str, Any]:
    """A member object the Application shop/shop placed (our marks and its annotation)."""
    return manifests.mark({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": name, "namespace": "shop",
        "annotations": {applications.APP_ANNOTATION: "shop/shop"}}, "spec": {}}, "uid-app")


async def test_a_forged_tracker_naming_no_member_is_not_retried_on_a_timer() -> None:
    """Fifty entries in clusters that do not exist, no Application: before, a retry every
    5 s for ever; now no requeue, one Warning naming a few of them, the tracker kept."""
    mc, reconciler, recorder, _ = world()
    forge(mc, [entry(f"ghost-{n}") for n in range(50)])
    assert await reconciler.reconcile(REQUEST) is None
    warnings = [e for e in recorder.events if e[1] == "UnknownClusters"]
    assert len(warnings) == 1 and warnings[0][0] == "Warning"
    assert warnings[0][2].startswith("50 tracked object(s) in 50 cluster(s) that are not "
                                     "members ('ghost-0', 'ghost-1', ")
    assert warnings[0][2].endswith(", ...): kept, and deleted if a member of that name joins")
    kept = must(mc, "hub", "ResourceTracker", "shop")["spec"]
    assert len(kept["pendingCleanup"]) == 50 and kept["applicationDeleted"] is True
    writes = len(mc.writes)
    assert await reconciler.reconcile(REQUEST) is None
    assert len(mc.writes) == writes  # nothing new to write, nothing written
    assert not [w for w in mc.writes if w[1] != "hub"]


async def test_a_long_cluster_name_is_shortened_in_the_warning() -> None:
    mc, reconciler, recorder, _ = world()
    forge(mc, [entry("g" * 5000 + "\n[fake log line]")])
    await reconciler.reconcile(REQUEST)
    message = next(e[2] for e in recorder.events if e[1] == "UnknownClusters")
    assert len(message) < 300 and "\n" not in message


async def test_an_away_member_is_retried_with_a_backoff() -> None:
    """member2 away, a ghost beside it: retried for member2 only, 5 s at first, then a
    quarter of how long it has been pending, at most a minute."""
    mc, reconciler, _, clock = world()
    mc.put("member2", ours())
    forge(mc, [entry("member2"), entry("ghost")])
    mc.set_down("member2", True)
    waits = []
    for step in (0, 100, 200, 1000, 100_000):
        clock.now = 1000.0 + step
        result = await reconciler.reconcile(REQUEST)
        assert result is not None
        waits.append(result.requeue_after)
    assert waits == [5.0, 25.0, 50.0, 60.0, 60.0]
    mc.set_down("member2", False)
    assert await reconciler.reconcile(REQUEST) is None  # member2 cleaned; the ghost waits
    assert mc.find("member2", "Deployment", "web", "shop") is None
    left = must(mc, "hub", "ResourceTracker", "shop")["spec"]["pendingCleanup"]
    assert [e["cluster"] for e in left] == ["ghost"]


class Queue:
    def __init__(self) -> None:
        self.added: list[Request] = []

    def add(self, request: Request, priority: int = 0) -> None:
        self.added.append(request)


class Controller:
    def __init__(self) -> None:
        self.queue = Queue()


async def test_the_entries_are_cleaned_when_a_member_of_that_name_joins() -> None:
    """A member named like the unknown cluster joins later: its availability requeues the
    tracker, and our object there is deleted with the tracker."""
    mc, reconciler, _, _ = world()
    forge(mc, [entry("late")])
    assert await reconciler.reconcile(REQUEST) is None
    clusters = mc.clusters
    clusters.hub.cache = ClusterCache(cast(kube.ClusterClient, object()), cluster="hub")
    store = clusters.hub.cache.informer(api.RESOURCE_TRACKERS).store
    store.put(must(mc, "hub", "ResourceTracker", "shop"))
    late = fakes.FakeCluster("late")
    clusters.adopt(late)
    mc.put("late", ours())
    ctl = Controller()
    late.available = True
    applications.on_member_available(clusters, "hub", cast(controller.Controller, ctl), late)
    assert ctl.queue.added == [REQUEST]
    assert await reconciler.reconcile(REQUEST) is None
    assert mc.find("late", "Deployment", "web", "shop") is None
    assert mc.find("hub", "ResourceTracker", "shop", "shop") is None


async def test_an_unavailable_member_requeues_nothing() -> None:
    clusters = fakes.cluster_set("member1")
    clusters.hub.cache = ClusterCache(cast(kube.ClusterClient, object()), cluster="hub")
    clusters.hub.cache.informer(api.RESOURCE_TRACKERS).store.put(
        {"metadata": {"name": "shop", "namespace": "shop", "resourceVersion": "1"},
         "spec": {"resources": [entry("member1").as_json()]}})
    ctl = Controller()
    member = clusters.get("member1")
    member.available = False
    applications.on_member_available(clusters, "hub", cast(controller.Controller, ctl), member)
    assert ctl.queue.added == []
    member.available = True
    applications.on_member_available(clusters, "hub", cast(controller.Controller, ctl), member)
    assert ctl.queue.added == [REQUEST]


async def test_a_live_application_reports_unknown_clusters_in_a_condition() -> None:
    """An entry of a live Application's tracker in a cluster that is no member: the
    Application finishes, says so in an UnknownClusters condition and one Warning, and is
    not requeued for it."""
    mc, reconciler, recorder, clock = world()
    body = app()
    body["spec"]["workflow"] = {"steps": [{"name": "all", "type": "deploy",
                                           "properties": {"policies": ["canary", "rest"]}}]}
    set_app(mc, body)
    for _ in range(3):
        ready_everywhere(mc)
        await reconciler.reconcile(REQUEST)
        clock.now += 10
    rt = must(mc, "hub", "ResourceTracker", "shop")
    rt["spec"]["resources"].append(entry("ghost", "old").as_json())
    mc.put("hub", rt)
    ready_everywhere(mc)
    assert await reconciler.reconcile(REQUEST) is None
    status = must(mc, "hub", "Application", "shop")["status"]
    condition = next(c for c in status["conditions"] if c["type"] == "UnknownClusters")
    assert condition["status"] == "True" and "('ghost')" in condition["message"]
    assert [e[1] for e in recorder.events].count("UnknownClusters") == 1
