"""The applications controller's place in the manager: what requeues an Application.

Hub Applications (not our own status writes), their trackers (a gone Application's is
finalised), member Deployments we placed (by our owner annotation), the namespace's
external Policies, the Workflows their ``workflow.ref`` names, a hub Namespace whose
grant changed, and a member becoming available
(the trackers with objects there, whose clean-up waited for it).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Mapping
from typing import Any

from federation.applications import definition_revisions, export_service, scope
from federation.applications import definitions as user_types
from federation.contexts import client as kube
from federation.contexts import egress
from federation.contexts.cache import Event
from federation.contexts.clusters import Cluster, ClusterSet
from federation.controllers.applications import (
    calls,
    charts,
    definition_reports,
    definitions,
    notifications,
)
from federation.controllers.applications.notify import notification_failed
from federation.controllers.applications.reconciler import Reconciler
from federation.controllers.applications.settings import (
    APP_ANNOTATION,
    APP_KIND,
    ApplicationSettings,
)
from federation.controllers.applications.view import CacheView, HubStatus, Recorder
from federation.controllers.kit import executor, kinds, sandbox
from federation.hub import api, deny
from federation.runtime import controller, manager, queue
from federation.runtime.reconcile import Request


def app_of(hub: str, event: Event) -> Iterable[Request]:
    """A member object's event -> its Application (by our owner annotation)."""
    annotations = (event.obj.get("metadata") or {}).get("annotations") or {}
    owner = annotations.get(APP_ANNOTATION)
    if not owner or "/" not in owner:
        return ()
    ns, _, name = owner.partition("/")
    return (Request(hub, APP_KIND, ns, name),)


def tracker_app(hub: str, event: Event) -> Iterable[Request]:
    """A tracker's event -> the Application of the same name (gone ones are finalised)."""
    meta = event.obj.get("metadata") or {}
    return (Request(hub, APP_KIND, meta.get("namespace", ""), meta.get("name", "")),)


def apps_in_namespace(clusters: ClusterSet, hub: str, event: Event) -> Iterable[Request]:
    """An external Policy changed: every Application of its namespace (a deploy step may
    name it; the revision hash says whether it does)."""
    return _apps_in(clusters, hub, (event.obj.get("metadata") or {}).get("namespace") or "")


def apps_referring(clusters: ClusterSet, hub: str, event: Event) -> Iterable[Request]:
    """A Workflow changed (created, edited, deleted): the Applications of its namespace
    whose ``spec.workflow.ref`` names it (no other namespace's: the ref is read in the
    Application's own)."""
    meta = event.obj.get("metadata") or {}
    name, namespace = meta.get("name"), str(meta.get("namespace") or "")
    cache = clusters.hub.cache
    informer = cache.informers.get(api.APPLICATIONS) if cache is not None else None
    if informer is None or not namespace:
        return []
    return [Request(hub, APP_KIND, namespace, str(app["metadata"]["name"]))
            for app in informer.store.list(namespace, None)
            if _ref_of(app) == name]


def _ref_of(app: Mapping[str, Any]) -> Any:
    workflow = (app.get("spec") or {}).get("workflow")
    return workflow.get("ref") if isinstance(workflow, Mapping) else None


def _apps_in(clusters: ClusterSet, hub: str, namespace: str) -> list[Request]:
    cache = clusters.hub.cache
    informer = cache.informers.get(api.APPLICATIONS) if cache is not None else None
    if informer is None:
        return []
    return [Request(hub, APP_KIND, namespace, str(app["metadata"]["name"]))
            for app in informer.store.list(namespace, None)]


def apps_using(clusters: ClusterSet, hub: str, namespaces: tuple[str, ...], event: Event
               ) -> Iterable[Request]:
    """A definition changed: every Application whose spec names its type (in any
    namespace for a system namespace's definition; in its own namespace for a tenant's,
    whose refusal names it). Their revision hash says whether anything they use changed."""
    meta = event.obj.get("metadata") or {}
    field = user_types.KINDS.get(str(event.obj.get("kind")), "")
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    if event.obj.get("kind") == definition_revisions.KIND:  # what name@vN it stands for
        field, name = definition_revisions.type_of(event.obj) or ("", "")
    cache = clusters.hub.cache
    informer = cache.informers.get(api.APPLICATIONS) if cache is not None else None
    if informer is None:
        return []
    where = None if namespace in namespaces else namespace
    return [Request(hub, APP_KIND, str(app["metadata"].get("namespace") or ""),
                    str(app["metadata"]["name"]))
            for app in informer.store.list(where, None)
            if (field, name) in user_types.types_named(app.get("spec") or {})]


def grant_changed(event: Event) -> bool:
    """A hub Namespace's grant annotation changed (an admin granted or withdrew)."""
    if event.type != "MODIFIED" or event.old is None:
        return False

    def value(obj: Mapping[str, Any]) -> Any:
        return ((obj.get("metadata") or {}).get("annotations") or {}).get(
            scope.TARGETS_ANNOTATION)
    return bool(value(event.old) != value(event.obj))


def apps_of_namespace(clusters: ClusterSet, hub: str, event: Event) -> Iterable[Request]:
    """A hub Namespace's grant changed: every Application in it, so a refused one is
    tried again at once and a withdrawn grant stops further writes."""
    return _apps_in(clusters, hub, (event.obj.get("metadata") or {}).get("name") or "")


def trackers_in(clusters: ClusterSet, hub: str, cluster: str) -> list[Request]:
    """The Applications (live or gone) whose tracker lists an object in ``cluster``."""
    cache = clusters.hub.cache
    informer = cache.informers.get(api.RESOURCE_TRACKERS) if cache is not None else None
    if informer is None:
        return []
    found = []
    for rt in informer.store.list(None, None):
        spec = rt.get("spec") or {}
        entries = [*(spec.get("resources") or []), *(spec.get("pendingCleanup") or [])]
        if any(isinstance(e, Mapping) and e.get("cluster") == cluster for e in entries):
            meta = rt.get("metadata") or {}
            found.append(Request(hub, APP_KIND, str(meta.get("namespace") or ""),
                                 str(meta.get("name") or "")))
    return found


def on_member_available(clusters: ClusterSet, hub: str, ctl: controller.Controller,
                        cluster: Cluster) -> None:
    """A member became available (back, or joined for the first time): the trackers with
    objects there are retried now (their clean-up waited for it, some with no timer)."""
    if cluster.available:
        for request in trackers_in(clusters, hub, cluster.name):
            ctl.queue.add(request, queue.LOW_PRIORITY)


def install(mgr: manager.Manager, recorder: Recorder, settings: ApplicationSettings,
            denied: deny.DenyList | None = None,
            policy: egress.EgressPolicy | None = None,
            request_policy: egress.EgressPolicy | None = None) -> None:
    """Register the applications controller and its senders with ``mgr``; ``policy``:
    where notifications and webhook steps may be sent (``fedctl run
    --notification-allow``); ``request_policy``: where request and check-metrics steps
    may call, whose answers the tenant reads (``--request-allow``)."""
    hub = mgr.clusters.hub.name
    failed = functools.partial(notification_failed, recorder)
    sender = notifications.Sender(policy or egress.EgressPolicy(), failed, settings.sender)
    requests = notifications.Sender(request_policy or egress.EgressPolicy(), failed,
                                    settings.sender)
    caller = calls.Caller({"notification": sender, "request": requests}, time.time)
    workers = sandbox.Sandbox(definitions.WORK, settings.cue_workers, settings.cue_timeout,
                              settings.cue_memory)
    renders = sandbox.Sandbox(charts.WORK, settings.charts.workers,
                              settings.charts.render_timeout + 5, settings.charts.memory)
    evaluations = definitions.Evaluations(charts.route(
        workers.ask, charts.Renderer(settings.charts, renders.ask)))
    reconciler = Reconciler(CacheView(mgr.client, mgr.clusters, settings, time.time,
                                      evaluations, caller),
                            executor.Writer(mgr.client, hub, denied, vouched=functools.partial(
                                export_service.writable, allow=settings.export_allow)),
                            HubStatus(mgr.client, hub), recorder, sender, caller)
    ctl = controller.Controller("applications", reconciler.reconcile, workers=settings.workers)
    caller.wake = lambda namespace, name: ctl.queue.add(Request(hub, APP_KIND, namespace,
                                                                name))
    mgr.add_runnable("notification sender", sender.run)
    mgr.add_runnable("request sender", requests.run)
    mgr.clusters.on_member_availability(
        functools.partial(on_member_available, mgr.clusters, hub, ctl))
    _watch(ctl, mgr, hub, settings)
    mgr.cache(api.APPLICATION_REVISIONS, "hub")
    mgr.cache(api.DEFINITION_REVISIONS, "hub")
    mgr.add(ctl)
    mgr.add_runnable("definition evaluation workers", workers.keep)
    mgr.add_runnable("helm render workers", renders.keep)
    reports = controller.Controller("definition reports", functools.partial(
        definition_reports.report, reconciler.view, recorder, reconciler.execute), workers=1)
    for resource in api.DEFINITIONS:
        reports.watch(resource, clusters="hub")
    mgr.add(reports)


def _watch(ctl: controller.Controller, mgr: manager.Manager, hub: str,
           settings: ApplicationSettings) -> None:
    """What makes an Application reconcile: itself, its trackers, its Deployments in the
    members, the Policies, Workflows, namespace grants and definitions it may use."""
    # Our own status writes are not a reason to reconcile again (the workflow requeues
    # itself while it waits); spec, annotation (user requests) and delete events are.
    ctl.watch(api.APPLICATIONS, clusters="hub",
              predicate=lambda e: not (e.type == "MODIFIED" and e.old is not None and
                                       kinds.status_only(e.old, e.obj)))
    ctl.watch(api.RESOURCE_TRACKERS, clusters="hub", map=functools.partial(tracker_app, hub))
    ctl.watch(kube.DEPLOYMENTS, clusters="members", map=functools.partial(app_of, hub))
    ctl.watch(api.OAM_POLICIES, clusters="hub",
              map=functools.partial(apps_in_namespace, mgr.clusters, hub))
    ctl.watch(api.OAM_WORKFLOWS, clusters="hub",
              map=functools.partial(apps_referring, mgr.clusters, hub))
    ctl.watch(kube.NAMESPACES, clusters="hub", predicate=grant_changed,
              map=functools.partial(apps_of_namespace, mgr.clusters, hub))
    for resource in (*api.DEFINITIONS, api.DEFINITION_REVISIONS):
        ctl.watch(resource, clusters="hub", predicate=lambda e: not (
                      e.type == "MODIFIED" and e.old is not None and
                      kinds.status_only(e.old, e.obj)),
                  map=functools.partial(apps_using, mgr.clusters, hub,
                                        settings.definition_namespaces))
