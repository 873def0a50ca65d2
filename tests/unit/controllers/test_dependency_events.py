"""A member's copy of a ``propagateDeps`` dependency edited or deleted there requeues the
templates carrying it (they put it back at once), through the propagation wiring and the
kind tracker's member handler; a member's own object of that name requeues nothing."""

from __future__ import annotations

from typing import Any

from federation.contexts import client as kube
from federation.contexts.cache import ClusterCache, Event
from federation.controllers import setup
from federation.hub import manifests
from federation.runtime.reconcile import Request
from tests.unit.clients import Unserved
from tests.unit.controllers.test_outages import RecordingManager

CARRIER = {"metadata": {"name": "web-deployment", "namespace": "shop"},
           "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "dependencies": ["ConfigMap/app-config"]}}


def wired() -> tuple[setup.Wiring, list[tuple[Request, float]]]:
    """The propagation wiring following dependencies, its queue recorded."""
    mgr = RecordingManager()
    mgr.clusters.hub.cache = ClusterCache(Unserved(), cluster="hub")
    wiring = setup.Wiring(mgr, setup.Settings().propagation)
    wiring.kinds.hub_resources["Deployment.apps"] = kube.DEPLOYMENTS
    queued: list[tuple[Request, float]] = []
    wiring.kinds.enqueue_after = lambda request, delay, _priority: queued.append(
        (request, delay))
    wiring.follow_dependencies()
    wiring.dependents.binding_changed(CARRIER, deleted=False)
    return wiring, queued


def member_copy(ours: bool, name: str = "app-config") -> dict[str, Any]:
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "shop", "resourceVersion": "9"},
           "data": {"k": "edited"}}
    return manifests.mark(obj, "uid-1") if ours else obj


def requested(queued: list[tuple[Request, float]]) -> list[tuple[str, str]]:
    return sorted((r.kind, r.name) for r, _ in queued)


def test_an_edited_dependency_copy_requeues_its_carrier() -> None:
    wiring, queued = wired()
    wiring.kinds._copy_event(Event("MODIFIED", "member1", kube.CONFIGMAPS, member_copy(True)))
    assert requested(queued) == [("ConfigMap", "app-config"), ("Deployment.apps", "web")]


def test_a_deleted_dependency_copy_requeues_its_carrier() -> None:
    wiring, queued = wired()
    wiring.kinds._copy_event(Event("DELETED", "member2", kube.CONFIGMAPS, member_copy(True)))
    assert ("Deployment.apps", "web") in requested(queued)


def test_a_members_own_object_and_other_names_requeue_no_carrier() -> None:
    wiring, queued = wired()
    wiring.kinds._copy_event(Event("MODIFIED", "member1", kube.CONFIGMAPS,
                                   member_copy(False)))
    wiring.kinds._copy_event(Event("MODIFIED", "member1", kube.CONFIGMAPS,
                                   member_copy(True, name="other")))
    assert ("Deployment.apps", "web") not in requested(queued)


def test_the_initial_list_requeues_no_carrier() -> None:
    """At start every template reconciles anyway."""
    wiring, queued = wired()
    wiring.kinds._copy_event(Event("ADDED", "member1", kube.CONFIGMAPS, member_copy(True),
                                   initial=True))
    assert ("Deployment.apps", "web") not in requested(queued)


AWAITING: dict[str, Any] = {"metadata": {"name": "api-deployment", "namespace": "shop"},
                             "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment",
                                                   "name": "api"},
                                      "awaitedDependencies": ["ConfigMap/later"]}}


def hub_requests(wiring: setup.Wiring) -> list[Request]:
    queued: list[Request] = []
    wiring.controller.queue.add = lambda request, *_: queued.append(request)  # type: ignore[method-assign]
    return queued


def test_a_missing_dependency_that_appears_on_the_hub_requeues_its_workload() -> None:
    """The binding names ConfigMap/later as awaited (the pod template names it, the hub
    had none): its creation requeues api, so it is carried without another change."""
    wiring, _ = wired()
    wiring.dependents.binding_changed(AWAITING, deleted=False)
    queued = hub_requests(wiring)
    later = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "later", "namespace": "shop"}}
    wiring._dependency_event(Event("ADDED", "hub", kube.CONFIGMAPS, later))
    assert [(r.kind, r.name) for r in queued] == [("Deployment.apps", "api")]
    # Another namespace's ConfigMap of that name, or another name, requeues nothing.
    wiring._dependency_event(Event("ADDED", "hub", kube.CONFIGMAPS,
                                   {**later, "metadata": {"name": "later", "namespace": "bank"}}))
    wiring._dependency_event(Event("ADDED", "hub", kube.CONFIGMAPS,
                                   {**later, "metadata": {"name": "other", "namespace": "shop"}}))
    assert len(queued) == 1


def test_an_awaited_name_is_no_carrier_of_member_copies() -> None:
    """api never copied ConfigMap/later: a member's copy of that name (ours, another
    workload's) changing requeues nothing for api; once carried, the awaited entry goes."""
    wiring, queued = wired()
    wiring.dependents.binding_changed(AWAITING, deleted=False)
    wiring.kinds._copy_event(Event("MODIFIED", "member1", kube.CONFIGMAPS,
                                   member_copy(True, name="later")))
    assert ("Deployment.apps", "api") not in requested(queued)
    carried = {**AWAITING, "spec": {**AWAITING["spec"], "awaitedDependencies": None,
                                    "dependencies": ["ConfigMap/later"]}}
    wiring.dependents.binding_changed(carried, deleted=False)
    assert [t["name"] for t in wiring.dependents.carriers("shop", "ConfigMap", "later")] == \
        ["api"]
