"""Wiring the controllers into a manager: the one list of what ``fedctl run`` registers.

:func:`setup` is that list, read top to bottom; ``fedctl run`` calls it once with the
manager and a :class:`Settings` built from its flags (nothing here is a module global a
caller overwrites, so two managers in one process, as in tests, cannot leak into each other).

- ``propagation``: templates of every kind a policy selects (see
  :mod:`federation.controllers.propagation`). Policy events start following
  the kinds they name and requeue those templates; override policy and
  MemberCluster events requeue every template. The first policy with
  ``propagateDeps`` starts following the hub's ConfigMaps, Secrets, ServiceAccounts
  and PersistentVolumeClaims: a change of one requeues the workloads that carry it,
  and its creation the workloads that name it and waited for it.
  A ReconfigurePolicy event (its status included: a cluster released) requeues the
  templates it names, before and after the change, of kinds already followed.
  A summary change of a MemberCluster retries the templates waiting for room, highest
  ``schedulePriority`` first (:mod:`federation.controllers.propagation.room`); a
  PriorityClass event requeues every template; a binding whose ``rescheduleTriggeredAt``
  changed requeues its template.
- ``policy-validation``: the ``Valid`` condition of every policy, the
  ``Denied`` condition of propagation policies that select what the deny list
  keeps on the hub (those kinds are never followed: no informer is started), and
  the ``SecretsReadable`` condition of those that select Secrets, requeued when the
  namespaces granted for Secrets change.

Before any controller, the hub's Secrets are restricted to the namespaces a RoleBinding
grants (:func:`federation.controllers.kit.secrets.restrict`): every reader of hub Secrets,
whichever controller, reads through that one cache.
- ``cleanup``: copies left behind by deleted templates (bindings with
  pending cleanup), with propagation's worker count and backoff cap; a binding
  whose template is gone (deleted while nobody watched) goes to propagation.
- ``workload-rebalancer``: Karmada's WorkloadRebalancers (see
  :mod:`federation.controllers.rebalancer`): a fresh-division trigger on each listed
  workload's binding, which propagation follows; status per workload; TTL deletion.
- ``cluster-health``: MemberCluster conditions, not-ready taints and capacity
  (see :mod:`federation.controllers.health`); MemberCluster changes requeue
  templates only when they can change a placement (not a capacity refresh).
- ``applications``: KubeVela Applications (see
  :mod:`federation.controllers.applications`): revisions, the workflow, member
  resources and their ResourceTracker.
- ``membership``: clusters joined at runtime (MemberClusters with a kubeconfig
  Secret, see :mod:`federation.controllers.membership`) are engaged and released.
- ``reconfigure`` and ``config-constraints``: configuration rollouts (see
  :mod:`federation.controllers.rollouts`): ReconfigurePolicies roll each new version
  of their ConfigMap/Secret across its clusters by writing their status, which
  propagation follows; ConfigConstraints get a ``Valid`` condition. Policy, constraint,
  hub ConfigMap/Secret and ResourceBinding events requeue the policies they concern.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from federation.contexts import client as kube
from federation.contexts import egress
from federation.contexts.cache import Event
from federation.contexts.client import ClientError
from federation.contexts.clusters import Cluster
from federation.controllers import (
    applications,
    cleanup,
    health,
    membership,
    policy_validation,
    propagation,
    rebalancer,
    rollouts,
)
from federation.controllers.kit import events, secrets
from federation.controllers.kit.interpreting import Interpreting
from federation.controllers.kit.kinds import KindTracker
from federation.controllers.propagation import propagate_deps, room
from federation.hub import api, bindings, deny, dependencies, manifests
from federation.hub import propagation_policies as policies_
from federation.hub import rollouts as hub_rollouts
from federation.runtime import controller, manager, queue
from federation.runtime.reconcile import Request, group_kind

if typing.TYPE_CHECKING:  # grpc is loaded only when a work server is configured
    from federation.work.server import WorkServer

log = logging.getLogger("federation.setup")


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the controllers take from ``fedctl run``'s flags."""

    propagation: propagation.PropagationSettings = dataclasses.field(
        default_factory=propagation.PropagationSettings)
    """Workers, backoff, clean-up wait and deny list; clean-up and policy validation use
    the same values (see :class:`~federation.controllers.propagation.PropagationSettings`)."""

    applications: applications.ApplicationSettings = dataclasses.field(
        default_factory=applications.ApplicationSettings)
    """The applications controller's settings (the member KubeVela's ``local`` names)."""

    allowed_exec: tuple[str, ...] = ()
    """Exec-plugin commands allowed in joined clusters' kubeconfigs beyond the built-in
    allowlist: none by default, because a joined cluster's kubeconfig is hub data that
    would otherwise run a program here (``--allow-exec-command``, as for ``fedctl join``)."""

    work: WorkServer | None = None
    """The work server of pull members (``fedctl run --work-bind-address``); None: a
    MemberCluster with ``mode: Pull`` is refused with that reason."""

    notification_egress: egress.EgressPolicy = dataclasses.field(
        default_factory=egress.EgressPolicy)
    """Where Application notification steps may POST (``--notification-allow``): public
    addresses only unless the operator allows more (see :mod:`federation.contexts.egress`)."""

    request_egress: egress.EgressPolicy = dataclasses.field(
        default_factory=egress.EgressPolicy)
    """Where Application request and check-metrics steps may call (``--request-allow``):
    their answers become the step's outputs and status, so this is a read path into the
    network, allowed apart from the notifications' write-only one."""

    reloader_egress: egress.EgressPolicy = dataclasses.field(
        default_factory=egress.EgressPolicy)
    """Which reloader addresses (member EndpointSlices) online steps may dial
    (``--reloader-allow``: the members' pod CIDRs in a real fleet, 127.0.0.0/8 in the local
    one)."""

    reconfigure: rollouts.ReconfigureSettings = dataclasses.field(
        default_factory=rollouts.ReconfigureSettings)
    """The rollout controller's settings; ``fedctl run`` gives it the reloader client (no
    client: online steps fail saying so, see
    :class:`~federation.controllers.rollouts.ReconfigureSettings`)."""


class Wiring:
    """The propagation controller with its kind tracker, for tests and `fedctl run`."""

    def __init__(self, mgr: manager.Host, settings: propagation.PropagationSettings) -> None:
        self.mgr = mgr
        hub = mgr.clusters.hub.name
        self.recorder = events.Recorder(mgr.client, hub)
        self.controller = controller.Controller(
            "propagation", self._reconcile, workers=settings.workers,
            queue_settings=queue.QueueSettings(max_delay=settings.max_backoff),
            rank=self.schedule_priority)
        self.kinds = KindTracker(mgr.clusters, self.controller.queue.add,
                                 self.controller.queue.add_after, settings.deny_list)
        self.interpreting = Interpreting()
        """The manager's resource interpreter: its threads are shut down with it."""
        self.reconciler = propagation.Reconciler(
            mgr.client, mgr.clusters, self.kinds, self.recorder, settings,
            on_drift=self._drift_reverted, interpreting=self.interpreting)
        self.reconciler.on_unchanged = self._unchanged
        self.rounds = room.Rounds(self.reconciler.waiting_for_room, self.schedule_priority)
        self._tracking: set[asyncio.Task[None]] = set()
        self.dependents = propagate_deps.Dependents()
        self._following_dependencies = False

    async def _reconcile(self, request: Request) -> Any:
        try:
            return await self.reconciler.reconcile(request)
        finally:
            following = self.rounds.finished(request)
            if following is not None:
                self.controller.queue.add(following)

    def schedule_priority(self, request: Request) -> int:
        """The template's ``schedulePriority`` as its binding records it (0 without one):
        its rank in the work queue and among templates waiting for room."""
        hub = self.mgr.clusters.hub
        resource = api.RESOURCE_BINDINGS if request.namespace else api.CLUSTER_RESOURCE_BINDINGS
        informer = hub.cache.informers.get(resource) if hub.cache is not None else None
        if informer is None:
            return 0
        kind = request.kind.partition(".")[0]
        binding = informer.store.get(request.namespace or None,
                                     bindings.binding_name(request.name, kind))
        record = bindings.read(binding) if binding is not None else None
        found = record.behaviour.schedule_priority if record is not None else None
        return found or 0

    def on_trigger(self, event: Event) -> Iterable[Request]:
        """A binding's ``rescheduleTriggeredAt`` changed (a WorkloadRebalancer): its
        template, of a kind we follow."""
        if event.initial or event.old is None:
            return []
        if _triggered_at(event.obj) == _triggered_at(event.old):
            return []  # the common case, without parsing the old version (memoised: latest)
        new, old = bindings.read(event.obj), bindings.read(event.old)
        if new is None or old is None or new.behaviour.reschedule_triggered_at == \
                old.behaviour.reschedule_triggered_at:
            return []
        ref = new.resource
        group = ref.api_version.rpartition("/")[0]
        kind = f"{ref.kind}.{group}" if group else ref.kind
        if self.kinds.resource(kind) is None:
            return []
        return [Request(self.mgr.clusters.hub.name, kind, ref.namespace, ref.name)]

    def on_summary(self, event: Event) -> Iterable[Request]:
        """A member's resource summary changed: room may have appeared for a template
        waiting for it (the first of a round, :mod:`~...propagation.room`)."""
        if event.initial:
            return []
        following = self.rounds.room_appeared()
        return [following] if following is not None else []

    def _unchanged(self) -> None:
        if self.controller.metrics is not None:
            self.controller.metrics.unchanged.inc()

    def _drift_reverted(self, cluster: str, kind: str) -> None:
        """Counted on the manager's metrics (set on the controller when it is added)."""
        if self.controller.metrics is not None:
            self.controller.metrics.drift_reverts.labels(cluster, kind).inc()

    def on_policy(self, event: Event) -> Iterable[Request]:
        if (event.obj.get("spec") or {}).get("propagateDeps") is True:
            self.follow_dependencies()
        for api_version, kind in policies_.selected_kinds([event.obj]):
            if self.kinds.denied_rule(api_version, kind) is not None:
                continue  # the policy's Denied condition says so (policy-validation)
            task = asyncio.ensure_future(self._track(api_version, kind))
            self._tracking.add(task)
            task.add_done_callback(self._tracking.discard)
        return self.kinds.templates()

    async def _track(self, api_version: str, kind: str) -> None:
        try:
            await self.kinds.track(api_version, kind)
        except ClientError as exc:
            log.warning("cannot follow %s %s yet: %s", api_version, kind, exc)
        except deny.Denied as exc:
            log.info("not following %s %s: %s", api_version, kind, exc)

    def follow_dependencies(self) -> None:
        """Once: index the bindings' carried dependencies and watch the dependency kinds
        on the hub (only when some policy asks for them: a fleet that never uses
        propagateDeps caches no Secret for it)."""
        hub = self.mgr.clusters.hub
        if self._following_dependencies or hub.cache is None:
            return
        self._following_dependencies = True
        self.kinds.related = self._copied_dependency
        for resource in (api.RESOURCE_BINDINGS, api.CLUSTER_RESOURCE_BINDINGS):
            hub.cache.informer(resource).add_handler(self._binding_event)
        for resource in dependencies.KINDS.values():
            if self.kinds.denied_rule(resource.api_version, resource.kind) is None:
                hub.cache.informer(resource).add_handler(self._dependency_event)

    def _binding_event(self, event: Event) -> None:
        self.dependents.binding_changed(event.obj, deleted=event.type == "DELETED")

    def _dependency_event(self, event: Event) -> None:
        if event.initial:
            return  # the carriers reconcile at start anyway
        # Awaiting ones too: a dependency named before it existed is carried once it does.
        meta = event.obj.get("metadata") or {}
        for request in self._carriers_of(str(meta.get("namespace") or ""), event.resource.kind,
                                         str(meta.get("name")), awaiting=True):
            self.controller.queue.add(request)

    def _copied_dependency(self, event: Event) -> list[Request]:
        """A member's copy of a dependency changed or went (someone edited or deleted
        it): the templates carrying it, so it is put back now, not at their next change.
        Only our copies: a member's own object of that name is nobody's business here."""
        if event.initial or event.resource.kind not in dependencies.KINDS or \
                not manifests.is_ours(event.obj):
            return []
        meta = event.obj.get("metadata") or {}
        return self._carriers_of(str(meta.get("namespace") or ""), event.resource.kind,
                                 str(meta.get("name")))

    def _carriers_of(self, namespace: str, kind: str, name: str, awaiting: bool = False
                     ) -> list[Request]:
        """Requests for the templates carrying dependency ``kind/name`` of ``namespace``,
        and with ``awaiting`` those waiting for it to exist, of kinds we follow."""
        found = (self._carrier_request(namespace, target) for target in
                 self.dependents.carriers(namespace, kind, name, awaiting))
        return [request for request in found if request is not None]

    def on_reconfigure(self, event: Event) -> Iterable[Request]:
        """The templates a ReconfigurePolicy names (its config, its workloads, and the
        workloads carrying its config with ``propagateDeps``), as the old and the new
        version name them: a renamed reference releases what the old one held. Only kinds
        a propagation policy already made us follow: a ReconfigurePolicy never starts
        propagating anything."""
        if event.initial:
            return []  # every template reconciles at start anyway
        namespace = str((event.obj.get("metadata") or {}).get("namespace") or "")
        hub = self.mgr.clusters.hub.name
        found: set[Request] = set()
        for doc in (event.obj, event.old):
            for kind, name in _named(doc):
                group = "apps" if kind in hub_rollouts.WORKLOAD_KINDS else ""
                group_kind = f"{kind}.{group}" if group else kind
                if self.kinds.resource(group_kind) is not None:
                    found.add(Request(hub, group_kind, namespace, name))
                found.update(self._carriers_of(namespace, kind, name))
        return sorted(found, key=lambda r: (r.kind, r.name))

    def _carrier_request(self, namespace: str, target: Any) -> Request | None:
        group = str(target.get("apiVersion") or "").rpartition("/")[0]
        kind = f"{target.get('kind')}.{group}" if group else str(target.get("kind"))
        if self.kinds.resource(kind) is None:
            return None
        return Request(self.mgr.clusters.hub.name, kind, namespace, str(target.get("name")))

    def on_anything(self, event: Event) -> Iterable[Request]:
        return self.kinds.templates()

    def on_available(self, cluster: Cluster) -> None:
        """A member came back: retry every template now, not at the end of its backoff."""
        if cluster.available:
            # A backlog, not news: templates created meanwhile go first.
            for request in self.kinds.templates():
                self.controller.queue.add(request, queue.LOW_PRIORITY)

    def install(self) -> None:
        self.mgr.add_runnable("resource interpreter threads", self.interpreting.keep)
        self.mgr.clusters.on_member_availability(self.on_available)
        ctl = self.controller
        for resource in api.PROPAGATION_POLICY_RESOURCES:  # ours and Karmada's, the same
            ctl.watch(resource, clusters="hub", map=self.on_policy)
        for resource in api.OVERRIDE_POLICY_RESOURCES:
            ctl.watch(resource, clusters="hub", map=self.on_anything)
        # A customization changes what its target kind's templates mean: all re-reconcile.
        ctl.watch(api.INTERPRETER_CUSTOMIZATIONS, clusters="hub", map=self.on_anything)
        ctl.watch(api.MEMBER_CLUSTERS, clusters="hub", map=self.on_anything,
                  predicate=health.PlacementSeen())
        ctl.watch(api.MEMBER_CLUSTERS, clusters="hub", map=self.on_summary,
                  predicate=summary_changed)
        # A policy's schedulePriority names one: its value is the templates' priority.
        ctl.watch(api.PRIORITY_CLASSES, clusters="hub", map=self.on_anything)
        # A WorkloadRebalancer's trigger on a binding: its template is divided afresh.
        for resource in (api.RESOURCE_BINDINGS, api.CLUSTER_RESOURCE_BINDINGS):
            ctl.watch(resource, clusters="hub", map=self.on_trigger)
        # Also the hub cache the reconfigure transformers list the policies from.
        ctl.watch(hub_rollouts.RECONFIGURE_POLICIES, clusters="hub", map=self.on_reconfigure)
        for resource in (api.RESOURCE_BINDINGS, api.CLUSTER_RESOURCE_BINDINGS, api.CRDS):
            self.mgr.cache(resource, "hub")
        self.mgr.cache(api.CRDS, "members")
        self.mgr.cache(kube.NAMESPACES, "all")
        self.mgr.add(ctl)


def summary_changed(event: Event) -> bool:
    """A MemberCluster's ``status.resourceSummary`` changed (room may have appeared)."""
    def summary(doc: Any) -> Any:
        return ((doc or {}).get("status") or {}).get("resourceSummary")

    return event.old is not None and summary(event.obj) != summary(event.old)


def _named(doc: Any) -> list[tuple[str, str]]:
    """(kind, name) of what a ReconfigurePolicy names; nothing when its spec does not parse
    (it governs nothing: see :func:`federation.hub.rollouts.governs`)."""
    if not doc:
        return []
    try:
        spec = hub_rollouts.parsed_spec(doc)
    except ValueError:
        return []
    return [(str(spec.config_ref.kind), spec.config_ref.name),
            *((str(w.kind), w.name) for w in spec.workloads)]


def setup(mgr: manager.Manager, settings: Settings) -> None:
    """Register every controller of the product with ``mgr``: the table of contents."""
    access = secrets.restrict(mgr.clusters.hub)
    wiring = Wiring(mgr, settings.propagation)
    wiring.install()
    mgr.add(_validation(mgr, wiring.recorder, settings.propagation, access))
    mgr.add(_cleanup(mgr, wiring, settings.propagation))
    mgr.add(_rebalancer(mgr, wiring.recorder))
    health.install(mgr, wiring.recorder)
    membership.install(mgr, wiring.recorder, wiring.kinds, settings.allowed_exec,
                       settings.work)
    applications.install(mgr, wiring.recorder, settings.applications,
                         settings.propagation.deny_list, settings.notification_egress,
                         settings.request_egress)
    rollouts.install(mgr, dataclasses.replace(settings.reconfigure,
                                              egress=settings.reloader_egress))
    shard(mgr.controllers)


def template_key(request: Request) -> str:
    """A template's shard key: its binding's ``namespace/name``, so the template and its
    binding (clean-up) are the same key, owned by the same replica."""
    kind = request.kind.partition(".")[0]
    return f"{request.namespace}/{bindings.binding_name(request.name, kind)}"


def object_key(request: Request) -> str:
    """``namespace/name`` of the hub object a request is about (a binding, an
    Application, a ReconfigurePolicy)."""
    return f"{request.namespace}/{request.name}"


def shard_keys() -> dict[str, Callable[[Request], str]]:
    """The controllers whose work ``fedctl run --shards`` divides, and each one's key. The
    rest are cluster-wide duties kept by the elected leader: cluster health and MemberCluster
    status (one judge per cluster, or two replicas would flip its conditions), policy,
    constraint and definition validation (cheap, and written on shared objects)."""
    return {"propagation": template_key, "cleanup": object_key,
            "applications": object_key, "reconfigure": object_key}


def runs_on_every_replica(name: str) -> bool:
    """Run on every replica when sharding: each replica must engage the clusters joined at
    runtime to write to them (membership's events and status writes pass only on the
    leader)."""
    return name == "membership"


def shard(controllers: Iterable[controller.Controller]) -> None:
    """Mark which controllers are sharded (by what key) and which run on every replica;
    nothing changes unless ``fedctl run --shards`` (the manager reads the marks)."""
    keys = shard_keys()
    for ctl in controllers:
        ctl.shard_key = keys.get(ctl.name)
        ctl.every_replica = runs_on_every_replica(ctl.name)


def _validation(mgr: manager.Fleet, recorder: events.EventSink,
                settings: propagation.PropagationSettings,
                access: secrets.SecretAccess | None = None) -> controller.Controller:
    validation = controller.Controller(
        "policy-validation",
        policy_validation.Reconciler(mgr.client, mgr.clusters.hub.name, recorder,
                                     settings.deny_list, access),
        workers=1)
    for resource in policy_validation.BY_KIND.values():
        validation.watch(resource, clusters="hub")
    if access is not None:
        access.on_change(lambda _: _requeue_secret_policies(mgr, validation))
    return validation


def _requeue_secret_policies(mgr: manager.Fleet, validation: controller.Controller) -> None:
    """The granted namespaces changed: every propagation policy selecting Secrets is
    validated again (its ``SecretsReadable`` condition)."""
    hub = mgr.clusters.hub
    for resource in api.PROPAGATION_POLICY_RESOURCES:
        informer = hub.cache.informers.get(resource) if hub.cache is not None else None
        for doc in informer.store.list() if informer is not None else ():
            if secrets.selected_namespaces(doc):
                meta = doc["metadata"]
                validation.queue.add(Request(hub.name, group_kind(resource),
                                             str(meta.get("namespace") or ""),
                                             str(meta["name"])))


def _rebalancer(mgr: manager.Fleet, recorder: events.EventSink) -> controller.Controller:
    rebalancing = controller.Controller(
        "workload-rebalancer",
        rebalancer.Reconciler(mgr.client, mgr.clusters.hub.name, recorder), workers=1)
    rebalancing.watch(api.WORKLOAD_REBALANCERS, clusters="hub")
    return rebalancing


def _cleanup(mgr: manager.Fleet, wiring: Wiring,
             settings: propagation.PropagationSettings) -> controller.Controller:
    # As many workers as propagation: after an outage there are as many leftovers to finish
    # as there are templates to fix, and each waits on a member's API server.
    leftovers = controller.Controller(
        "cleanup",
        cleanup.Reconciler(mgr.client, mgr.clusters.hub.name, wiring.recorder,
                           settings.retry_pending, settings.cleanup_wait,
                           gone=wiring.controller.queue.add, denied=settings.deny_list),
        workers=settings.workers,
        queue_settings=queue.QueueSettings(max_delay=settings.max_backoff))
    leftovers.watch(api.RESOURCE_BINDINGS, clusters="hub")
    leftovers.watch(api.CLUSTER_RESOURCE_BINDINGS, clusters="hub")
    return leftovers


def _triggered_at(binding: Mapping[str, Any]) -> Any:
    """The raw ``spec.rescheduleTriggeredAt`` (the parsed record says the same or fails)."""
    spec = binding.get("spec")
    return spec.get("rescheduleTriggeredAt") if isinstance(spec, Mapping) else None
