"""What requeues an Application, and the controller's registration with the manager."""

from __future__ import annotations

from typing import Any, cast

from federation.contexts import client as kube
from federation.contexts.cache import ClusterCache, Event
from federation.controllers import applications
from federation.hub import api
from federation.runtime import manager
from tests.unit.controllers import fakes
from tests.unit.controllers.applications.fakes import Recorder


def event(obj: dict[str, Any], resource: kube.Resource = kube.DEPLOYMENTS) -> Event:
    return Event("MODIFIED", "member1", resource, obj)


def test_a_member_object_requeues_the_application_its_annotation_names() -> None:
    placed = {"metadata": {"annotations": {applications.APP_ANNOTATION: "shop/web"}}}
    [request] = applications.app_of("hub", event(placed))
    assert (request.cluster, request.namespace, request.name) == ("hub", "shop", "web")
    assert request.kind == applications.APP_KIND
    assert applications.app_of("hub", event({"metadata": {}})) == ()
    malformed = {"metadata": {"annotations": {applications.APP_ANNOTATION: "web"}}}
    assert applications.app_of("hub", event(malformed)) == ()


def test_a_tracker_requeues_the_application_of_its_name() -> None:
    [request] = applications.tracker_app("hub", event(
        {"metadata": {"name": "web", "namespace": "shop"}}, api.RESOURCE_TRACKERS))
    assert (request.namespace, request.name) == ("shop", "web")


def test_a_grant_change_requeues_the_namespaces_applications() -> None:
    clusters = fakes.cluster_set("member1")
    assert applications.apps_of_namespace(clusters, "hub", event(
        {"metadata": {"name": "shop"}}, kube.NAMESPACES)) == []  # no cache yet
    clusters.hub.cache = ClusterCache(cast(kube.ClusterClient, object()), cluster="hub")
    store = clusters.hub.cache.informer(api.APPLICATIONS).store
    store.put({"metadata": {"name": "a", "namespace": "shop"}})
    store.put({"metadata": {"name": "b", "namespace": "bank"}})
    found = applications.apps_of_namespace(clusters, "hub", event(
        {"metadata": {"name": "shop"}}, kube.NAMESPACES))
    assert [(r.namespace, r.name) for r in found] == [("shop", "a")]


def test_trackers_with_objects_in_a_cluster_are_found_pending_ones_too() -> None:
    clusters = fakes.cluster_set("member1")
    assert applications.trackers_in(clusters, "hub", "member1") == []  # no cache yet
    clusters.hub.cache = ClusterCache(cast(kube.ClusterClient, object()), cluster="hub")
    store = clusters.hub.cache.informer(api.RESOURCE_TRACKERS).store
    store.put({"metadata": {"name": "a", "namespace": "shop"},
               "spec": {"resources": [{"cluster": "member1"}]}})
    store.put({"metadata": {"name": "b", "namespace": "shop"},
               "spec": {"pendingCleanup": [{"cluster": "member1"}, "not an entry"]}})
    store.put({"metadata": {"name": "c", "namespace": "shop"},
               "spec": {"resources": [{"cluster": "member2"}]}})
    found = applications.trackers_in(clusters, "hub", "member1")
    assert sorted(r.name for r in found) == ["a", "b"]


def test_install_registers_the_controller_its_watches_and_the_sender() -> None:
    mgr = manager.Manager(fakes.cluster_set("member1"))
    applications.install(mgr, Recorder(), applications.ApplicationSettings(workers=3))
    ctl, reports = mgr.controllers
    assert (ctl.name, reports.name) == ("applications", "definition reports")
    watched = {(w.resource.kind, w.clusters) for w in ctl.watches}
    definitions = {("ComponentDefinition", "hub"), ("TraitDefinition", "hub"),
                   ("PolicyDefinition", "hub"), ("WorkflowStepDefinition", "hub")}
    assert watched == {("Application", "hub"), ("ResourceTracker", "hub"),
                       ("Deployment", "members"), ("Policy", "hub"), ("Workflow", "hub"),
                       ("Namespace", "hub"), ("DefinitionRevision", "hub"), *definitions}
    assert {(w.resource.kind, w.clusters) for w in reports.watches} == definitions
    assert [name for name, _ in mgr.runnables] == ["notification sender", "request sender",
                                                   "definition evaluation workers",
                                                   "helm render workers"]
    assert {"ApplicationRevision", "DefinitionRevision"} <= {w.resource.kind
                                                             for w in mgr.cached}
    status_only = next(w for w in ctl.watches if w.resource.kind == "Application")
    assert status_only.predicate is not None
    old = {"spec": {"a": 1}, "metadata": {}, "status": {"x": 1}}
    assert not status_only.predicate(Event("MODIFIED", "hub", api.APPLICATIONS,
                                           {**old, "status": {"x": 2}}, old))
    assert status_only.predicate(Event("MODIFIED", "hub", api.APPLICATIONS,
                                       {**old, "spec": {"a": 2}}, old))
