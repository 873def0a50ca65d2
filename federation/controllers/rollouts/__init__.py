"""The rollout controller of configuration rollouts (ReconfigurePolicies, issue 13).

A ReconfigurePolicy ties a ConfigMap or Secret to the workloads that mount it; this
controller rolls each new version of it across the clusters it is placed on, one cluster
(``maxUnavailableClusters``) at a time, in the shape of the propagation package:

    policy + constraints + hub config + binding (hub cache)
          |
          v
    load (pure) --refused--> status
          |
          v
    plan: per-cluster diff of the member's live copy against the hub's (pure)
          |
          v
    rollout: Pending -> Updating -> Done | Failed (pure, on a fake-able clock)
          |          ^ observations: member copy, workloads, reloader answers
          v
    one merge patch of the policy's /status: the only write

Propagation reads ``releasedVersion`` and ``restartVersion`` per cluster from that
status, holds a governed config's copy until its version is released there and stamps the
restart version on the governed workloads, so member objects keep one writer. Online
updates go to reloaders (``fedctl reloader``) found by member EndpointSlices, through an
injected :class:`~.view.OnlineUpgrade` (mutual TLS, the reloader CA). A second controller,
``config-constraints``, writes the ``Valid`` condition of ConfigConstraints.
docs/rollouts.md has the API, the algorithm and the security notes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from federation.contexts.cache import Event
from federation.controllers.rollouts import constraints
from federation.controllers.rollouts.reconciler import Reconciler
from federation.controllers.rollouts.sandbox import Analyses, Sandbox
from federation.controllers.rollouts.settings import ReconfigureSettings
from federation.controllers.rollouts.view import (
    CONFIG_RESOURCES,
    CacheView,
    CallerNotReady,
    HubStatusWriter,
    OnlineUpgrade,
    RolloutView,
    StatusWriter,
    UpgradeAnswer,
)
from federation.hub import api, bindings
from federation.hub import rollouts as hub_api
from federation.runtime import controller, manager
from federation.runtime.reconcile import Request, group_kind

__all__ = [
    "Analyses",
    "CacheView",
    "CallerNotReady",
    "HubStatusWriter",
    "OnlineUpgrade",
    "Reconciler",
    "ReconfigureSettings",
    "RolloutView",
    "Sandbox",
    "StatusWriter",
    "UpgradeAnswer",
    "Wiring",
    "install",
]

POLICY_KIND = group_kind(hub_api.RECONFIGURE_POLICIES)


class Wiring:
    """The two controllers and the event mapping: hub events to the policies they concern."""

    def __init__(self, mgr: manager.Host, settings: ReconfigureSettings) -> None:
        self.mgr = mgr
        self.hub = mgr.clusters.hub.name
        view = CacheView(mgr.client, mgr.clusters, self.hub)
        writer = HubStatusWriter(mgr.client, self.hub)
        self.sandbox = Sandbox(settings.parse_workers, settings.parse_timeout)
        self.controller = controller.Controller(
            "reconfigure", Reconciler(view, writer, settings, Analyses(self.sandbox.ask)),
            workers=settings.workers)
        self.constraints = controller.Controller("config-constraints",
                                                 constraints.Reconciler(view, writer),
                                                 workers=1)
        self._following: set[str] = set()

    def _policies(self, namespace: str | None = None) -> list[Mapping[str, Any]]:
        cache = self.mgr.clusters.hub.cache
        if cache is None:
            return []
        return list(cache.informer(hub_api.RECONFIGURE_POLICIES).store.list(namespace))

    def _request(self, policy: Mapping[str, Any]) -> Request:
        meta = policy.get("metadata") or {}
        return Request(self.hub, POLICY_KIND, str(meta.get("namespace") or ""),
                       str(meta.get("name") or ""))

    def on_policy(self, event: Event) -> Iterable[Request]:
        """Every policy of the namespace: one's change (or deletion) can end another's
        Conflict."""
        kind = ((event.obj.get("spec") or {}).get("configRef") or {}).get("kind")
        if kind in CONFIG_RESOURCES:
            self.follow(str(kind))
        namespace = str((event.obj.get("metadata") or {}).get("namespace") or "")
        found = {self._request(p) for p in self._policies(namespace)}
        found.add(controller.request_for(event))
        return sorted(found)

    def on_constraint(self, event: Event) -> Iterable[Request]:
        name = str((event.obj.get("metadata") or {}).get("name") or "")
        kind = next(k.value for k, r in hub_api.CONSTRAINT_RESOURCES.items()
                    if r == event.resource)
        default = hub_api.ConstraintKind.CONFIG_CONSTRAINT.value
        return [self._request(p) for p in self._policies()
                if any(isinstance(f, Mapping) and f.get("constraintRef") == name
                       and f.get("constraintKind", default) == kind
                       for f in (p.get("spec") or {}).get("files") or [])]

    def governing(self, namespace: str, kind: str, name: str) -> list[Request]:
        return [self._request(p) for p in self._policies(namespace)
                if hub_api.governs(p, kind, name)]

    def on_config(self, event: Event) -> Iterable[Request]:
        meta = event.obj.get("metadata") or {}
        return self.governing(str(meta.get("namespace") or ""), event.resource.kind,
                              str(meta.get("name") or ""))

    def on_binding(self, event: Event) -> Iterable[Request]:
        """A placement changed: of a governed config (its clusters) or workload."""
        namespace = (event.obj.get("metadata") or {}).get("namespace")
        if namespace and not self._policies(str(namespace)):
            # No policy here to govern it (a policy made later reconciles on its own
            # event): not parsed. Parsing every binding was a quarter of a replica's CPU
            # in a cold start at 10,000 templates without a single ReconfigurePolicy.
            return []
        record = bindings.read(event.obj)
        if record is None:
            return []  # unreadable: propagation changes nothing of its template either
        target = record.resource
        return self.governing(target.namespace, target.kind, target.name)

    def follow(self, kind: str) -> None:
        """Once per kind, when a policy first names a ConfigMap (a Secret): hub objects of
        that kind requeue the policies governing them. A fleet without policies caches
        nothing for this controller, and one whose policies name only ConfigMaps caches no
        Secret."""
        cache = self.mgr.clusters.hub.cache
        if kind in self._following or cache is None:
            return
        self._following.add(kind)
        cache.informer(CONFIG_RESOURCES[kind]).add_handler(self._config_event)

    def _config_event(self, event: Event) -> None:
        if event.initial:
            return  # the policies reconcile at start anyway
        for request in self.on_config(event):
            self.controller.queue.add(request)

    def install(self) -> None:
        ctl = self.controller
        ctl.watch(hub_api.RECONFIGURE_POLICIES, clusters="hub", map=self.on_policy)
        for resource in hub_api.CONSTRAINT_RESOURCES.values():
            ctl.watch(resource, clusters="hub", map=self.on_constraint)
        ctl.watch(api.RESOURCE_BINDINGS, clusters="hub", map=self.on_binding)
        self.constraints.watch(hub_api.CONFIG_CONSTRAINTS, clusters="hub")
        self.mgr.add(ctl)
        self.mgr.add(self.constraints)
        # The parser workers start at the first file and stop with the controllers.
        self.mgr.add_runnable("rollout parser workers", self.sandbox.keep)


def install(mgr: manager.Host, settings: ReconfigureSettings) -> Wiring:
    """Register the rollout controller and the constraint validation with ``mgr``."""
    wiring = Wiring(mgr, settings)
    wiring.install()
    return wiring
