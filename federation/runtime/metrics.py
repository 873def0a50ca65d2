"""Prometheus metrics of one manager, in a registry of its own.

Counters and histograms are updated where things happen (a reconcile ends, a
client call returns). Gauges that describe state (queue depth, cluster and
watch state, cached objects, watch restarts) are read from the live objects at
scrape time by :class:`StateCollector`, so they can never drift from the truth.
Names follow Prometheus conventions under the ``federation_`` prefix; the full
list, with labels, is in docs/runtime.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from federation.contexts import cache, clusters

if TYPE_CHECKING:
    from federation.runtime.controller import Controller
    from federation.runtime.peers import Peers

REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
LOOP_LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                    60.0)
CLUSTER_STATES: tuple[clusters.State, ...] = (
    "unknown", "available", "unavailable", "disabled", "misconfigured")


class Metrics:
    """The manager's metrics; one instance per manager (tests run several per process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.reconcile_total = Counter(
            "federation_reconcile", "Reconciles by controller, cluster and result "
            "(success, requeue_after, error).", ["controller", "cluster", "result"],
            registry=self.registry)
        self.reconcile_errors = Counter(
            "federation_reconcile_errors", "Reconciles that raised, by controller and cluster.",
            ["controller", "cluster"], registry=self.registry)
        self.reconcile_duration = Histogram(
            "federation_reconcile_duration_seconds", "Time spent in reconcile, by controller.",
            ["controller"], buckets=RECONCILE_BUCKETS, registry=self.registry)
        self.request_duration = Histogram(
            "federation_client_request_duration_seconds",
            "API calls to each cluster: time to response headers, by verb and status code "
            "(code \"error\" when there was no answer).", ["cluster", "verb", "code"],
            buckets=REQUEST_BUCKETS, registry=self.registry)
        self.leader = Counter(
            "federation_leader_transitions", "Times this process became leader.",
            registry=self.registry)
        self.loop_lag = Histogram(
            "federation_event_loop_lag_seconds",
            "How late the event loop woke the watchdog's timer: time the loop was busy "
            "elsewhere, or the process did not run.", buckets=LOOP_LAG_BUCKETS,
            registry=self.registry)
        self.drift_reverts = Counter(
            "federation_drift_reverts",
            "Member copies rewritten because a field we wrote was changed there, by cluster "
            "and kind: one that keeps growing is a fight with a member's controller (retain "
            "the field: docs/interpreter.md).", ["cluster", "kind"], registry=self.registry)
        self.unchanged = Counter(
            "federation_propagation_unchanged",
            "Propagation reconciles that stopped on the fast path: nothing the template's "
            "last settled round read had changed (docs/runtime.md).", registry=self.registry)
        self.loop_stalls = Counter(
            "federation_event_loop_stalls",
            "Wakes of the watchdog more than its threshold (1 s) late; each is logged.",
            registry=self.registry)
        self.gc_seconds = Counter(
            "federation_gc_cpu_seconds",
            "CPU time of the cyclic garbage collector's passes, by generation (a pass runs "
            "on whatever thread allocated, the event loop's mostly).", ["generation"],
            registry=self.registry)
        # Made now: a child made inside a collection's callback would take the metric's
        # lock while allocating, and an allocation can start a collection.
        self._gc_children = [self.gc_seconds.labels(str(g)) for g in range(3)]

    def observe_collection(self, generation: int, seconds: float) -> None:
        """A :class:`federation.runtime.heap.CollectionTimer`'s observer."""
        self._gc_children[min(max(generation, 0), 2)].inc(seconds)

    def observe_request(self, cluster: str, verb: str, code: str, seconds: float) -> None:
        """A :data:`federation.contexts.client.Observer`."""
        self.request_duration.labels(cluster, verb, code).observe(seconds)


class StateCollector(Collector):
    """Gauges read from clusters, informers and queues at scrape time.

    :meth:`register` adds it to a registry as three collectors (clusters, watches, queues
    and leadership), each describing its families: a scrape restricted by name
    (``/metrics?name[]=...``, what the bench polls several times a second while it waits
    for quiet) then reads only the part it asks for, not every informer of every cluster."""

    def __init__(self, cluster_set: clusters.ClusterSet,
                 controllers: Callable[[], list[Controller]],
                 is_leader: Callable[[], bool]) -> None:
        self.cluster_set = cluster_set
        self.controllers = controllers
        self.is_leader = is_leader

    def register(self, registry: CollectorRegistry) -> None:
        for part in (self._clusters, self._watches, self._queues_and_leader):
            registry.register(_Part(part))

    def collect(self) -> Iterator[Metric]:
        yield from self._clusters()
        yield from self._watches()
        yield from self._queues_and_leader()

    def _queues_and_leader(self) -> Iterator[Metric]:
        yield from self._queues()
        leader = GaugeMetricFamily("federation_leader", "1 while this process leads.")
        leader.add_metric([], 1.0 if self.is_leader() else 0.0)
        yield leader

    def _clusters(self) -> Iterator[Metric]:
        available = GaugeMetricFamily(
            "federation_cluster_available", "1 when the cluster's /readyz probe passes.",
            labels=["cluster"])
        state = GaugeMetricFamily(
            "federation_cluster_state", "1 for the cluster's current state.",
            labels=["cluster", "state"])
        for cluster in self.cluster_set.clusters.values():
            available.add_metric([cluster.name], 1.0 if cluster.available else 0.0)
            for name in CLUSTER_STATES:
                state.add_metric([cluster.name, name], 1.0 if cluster.state == name else 0.0)
        yield available
        yield state

    def _watches(self) -> Iterator[Metric]:
        labels = ["cluster", "resource"]
        state = GaugeMetricFamily("federation_watch_state",
                                  "1 for each informer's current state.",
                                  labels=[*labels, "state"])
        objects = GaugeMetricFamily("federation_cache_objects", "Objects in each informer.",
                                    labels=labels)
        relists = CounterMetricFamily("federation_watch_relists",
                                      "Full relists after the first list (410 Gone).",
                                      labels=labels)
        restarts = CounterMetricFamily("federation_watch_restarts",
                                       "Watches reopened after a failure.", labels=labels)
        events = CounterMetricFamily("federation_watch_events",
                                     "Watch events applied to the cache.", labels=labels)
        for cluster in self.cluster_set.clusters.values():
            if cluster.cache is None:
                continue
            for informer in list(cluster.cache.informers.values()):
                key = [cluster.name, _resource_label(informer)]
                for name in cache.WATCH_STATES:
                    state.add_metric([*key, name], 1.0 if informer.state == name else 0.0)
                objects.add_metric(key, float(len(informer.store)))
                relists.add_metric(key, float(informer.relists))
                restarts.add_metric(key, float(informer.restarts))
                events.add_metric(key, float(informer.events))
        yield from (state, objects, relists, restarts, events)

    def _queues(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("federation_workqueue_depth",
                                  "Keys waiting for a worker.", labels=["controller"])
        waiting = GaugeMetricFamily("federation_workqueue_waiting",
                                    "Keys scheduled for later (requeue-after, backoff).",
                                    labels=["controller"])
        busy = GaugeMetricFamily("federation_workqueue_processing",
                                 "Keys held by workers.", labels=["controller"])
        adds = CounterMetricFamily("federation_workqueue_adds", "Keys added.",
                                   labels=["controller"])
        retries = CounterMetricFamily("federation_workqueue_retries",
                                      "Keys re-added after a failed reconcile.",
                                      labels=["controller"])
        by_priority = GaugeMetricFamily("federation_workqueue_depth_by_priority",
                                        "Keys waiting for a worker, by priority (0 changes, "
                                        "-100 the state found at start).",
                                        labels=["controller", "priority"])
        for controller in self.controllers():
            queue = controller.queue
            depth.add_metric([controller.name], float(len(queue)))
            for priority, count in sorted(queue.depth_by_priority().items()):
                by_priority.add_metric([controller.name, str(priority)], float(count))
            waiting.add_metric([controller.name], float(queue.waiting))
            busy.add_metric([controller.name], float(queue.processing))
            adds.add_metric([controller.name], float(queue.adds))
            retries.add_metric([controller.name], float(queue.retries))
        yield from (depth, by_priority, waiting, busy, adds, retries)


class _Part(Collector):
    """One part of :class:`StateCollector`, described by the families it yields (read once,
    when registered: the families are yielded whatever the state, only their samples vary)."""

    def __init__(self, collect: Callable[[], Iterator[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterator[Metric]:
        return self._collect()

    def describe(self) -> list[Metric]:
        return list(self._collect())


def _resource_label(informer: cache.CachedResource) -> str:
    group = informer.resource.group
    return f"{informer.resource.plural}.{group}" if group else informer.resource.plural


class ShardCollector(Collector):
    """With shards: this replica's shard, the live shards, keys held per sharded controller
    and handovers (reconciles per replica are ``federation_reconcile_total``)."""

    def __init__(self, peers: Callable[[], Peers | None],
                 controllers: Callable[[], list[Controller]]) -> None:
        self.peers = peers
        self.controllers = controllers

    def collect(self) -> Iterator[Metric]:
        peers = self.peers()
        if peers is None:
            return
        held = GaugeMetricFamily("federation_shard_keys_held",
                                 "Keys seen by a sharded controller that this replica owns now.",
                                 labels=["controller"])
        for controller in self.controllers():
            if controller.owns is not None:
                held.add_metric([controller.name], float(controller.keys_held()))
        shard = GaugeMetricFamily("federation_shard_held",
                                  "1 for the shard this replica holds (none: a standby).",
                                  labels=["shard"])
        if peers.shard is not None:
            shard.add_metric([peers.shard], 1.0)
        live = GaugeMetricFamily("federation_shard_live", "Shards alive by this replica's "
                                 "last reading of the hub.")
        live.add_metric([], float(len(peers.view.live)))
        handovers = CounterMetricFamily("federation_shard_handovers",
                                        "Changes of the live shards (or of this replica's "
                                        "claim) that moved keys to or from it.")
        handovers.add_metric([], float(peers.handovers))
        yield from (held, shard, live, handovers)
