"""The set of clusters one control plane engages, built from kubeconfig contexts.

A :class:`ClusterSet` is the hub plus the members, chosen the way the flags of
``fedctl run`` say: ``--hub-context`` names the hub (default: the current
context), ``--contexts`` lists the members (default: every other context),
``--disabled-contexts`` keeps members known but switched off.

Each :class:`Cluster` is engaged on its own: its own client (connection pool,
credentials, rate limit), its own informers, its own health probe. A context
that cannot be used (missing, unreadable certificate, broken exec config) is
recorded on its cluster as one clear error naming the context and logged once;
the other clusters are engaged as usual. Only a broken hub stops the start.

A member context whose server is the hub's own API server reuses the hub's
client rather than opening a second pool to the same server; it keeps its own
name and informers, so events and requests stay keyed by the member's name.

Availability is the cluster's one health signal (:mod:`federation.contexts.health`):
a single prober per engaged cluster, whose *ready* state is :attr:`Cluster.available`.
Each flip is logged once (ERROR when the cluster goes, INFO with the outage's
length when it is back) and handed to the availability listeners (ready flips)
and the health listeners (any flip, for the MemberCluster conditions); the work
that fails meanwhile retries quietly. Writes to an unavailable, disabled or
misconfigured cluster fail at once with a retryable error (see
:meth:`Cluster.check_writable`) instead of tying a worker up in timeouts.

Everything an engaged cluster runs (client, informers, prober, tasks) belongs to
its :class:`~federation.contexts.engagement.Engagement`; :meth:`ClusterSet.leave`
stops it in one call and then tells the leave listeners, so modules that keep
per-cluster state forget it in the same step.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from federation.contexts import cache, discovery, health, kubeconfig
from federation.contexts.client import (
    ClientError,
    ClientSettings,
    ClusterAPI,
    ClusterClient,
    ClusterUnavailable,
    Observer,
)
from federation.contexts.engagement import Engagement

log = logging.getLogger("federation.clusters")

State = Literal["unknown", "available", "unavailable", "disabled", "misconfigured"]


@dataclasses.dataclass(frozen=True)
class ClusterSettings:
    """How clusters are reached and watched."""

    client: ClientSettings = dataclasses.field(default_factory=ClientSettings)
    cache: cache.CacheSettings = dataclasses.field(default_factory=cache.CacheSettings)
    health: health.HealthSettings = dataclasses.field(default_factory=health.HealthSettings)
    """The one probe of every cluster (period, timeout, thresholds); see its fields."""


class ClusterDisabled(ClusterUnavailable):
    """The cluster is disabled (--disabled-contexts). Retryable: it may be enabled again."""


class ClusterNotEngaged(ClusterUnavailable):
    """The cluster's context is unusable (its error says why). Retryable after a fix."""


class UnknownCluster(ClientError):
    """No cluster of that name in this control plane."""

    retryable = False


Listener = Callable[["Cluster"], None]


class Cluster:
    """One engaged (or deliberately not engaged) cluster."""

    def __init__(self, name: str, *, is_hub: bool = False, is_member: bool = True,
                 context: kubeconfig.Context | None = None, client: ClusterAPI | None = None,
                 disabled: bool = False, error: str | None = None,
                 settings: ClusterSettings | None = None, shares_client_of: str | None = None
                 ) -> None:
        self.name = name
        self.is_hub = is_hub
        self.is_member = is_member
        self.context = context
        self.client = client
        self.disabled = disabled
        self.error = error
        self.settings = settings or ClusterSettings()
        self.shares_client_of = shares_client_of
        cache_settings = self.settings.cache.for_hub() if is_hub else self.settings.cache
        self.cache = cache.ClusterCache(client, cache_settings, cluster=name) if client \
            else None
        self.discovery = discovery.Discovery(client) if client else None
        self.health = health.Health(name, self.settings.health)
        """The one health signal of this cluster (see :mod:`federation.contexts.health`)."""
        self.engagement: Engagement | None = None
        """Its client, caches, prober and tasks under one cancel scope (None when there is
        no client to engage)."""
        if client is not None and self.cache is not None:
            self.engagement = Engagement(
                name, client, self.cache,
                health.ProbeLoop(client, self.health, self.on_transition),
                owns_client=shares_client_of is None)
        self.availability_listeners: list[Listener] = []
        """Called (synchronously, in the loop) whenever :attr:`available` changes: work
        that failed because the cluster was away can be retried at once."""
        self.health_listeners: list[Listener] = []
        """Called whenever *ready* or *reachable* flips (the MemberCluster conditions)."""
        self.changed_at = time.monotonic()
        self._was_down = False
        self.joined = False
        """Added at runtime (:meth:`ClusterSet.join`), not from the static contexts."""

    def __repr__(self) -> str:
        return f"<Cluster {self.name} {self.state}>"

    @property
    def available(self) -> bool | None:
        """Whether the cluster is ready now, by its prober (None: not decided yet)."""
        return self.health.ready.value

    @available.setter
    def available(self, value: bool | None) -> None:
        """Set the state without a probe or listeners (fakes and tests)."""
        self.health.assume(value)

    @property
    def last_probe_error(self) -> str | None:
        """Why the cluster is not available (the last probe's outcome), else None."""
        return None if self.available else self.health.detail

    @property
    def engaged(self) -> bool:
        return self.client is not None and not self.disabled

    @property
    def state(self) -> State:
        if self.error:
            return "misconfigured"
        if self.disabled:
            return "disabled"
        if self.available is None:
            return "unknown"
        return "available" if self.available else "unavailable"

    @property
    def detail(self) -> str:
        """One line on the cluster's state, for /readyz and logs (never a secret)."""
        if self.error:
            return self.error
        if self.disabled:
            return "disabled by --disabled-contexts"
        if self.available is False:
            return f"unavailable: {self.last_probe_error}"
        if self.cache and not self.cache.synced:
            return "caches not synced"
        return "ok"

    def check_writable(self) -> ClusterAPI:
        """The client to write with, or a retryable error saying why there is none."""
        if self.disabled:
            raise ClusterDisabled(self.name, "disabled by --disabled-contexts; write not done")
        if self.error or self.client is None:
            raise ClusterNotEngaged(self.name, f"not engaged: {self.error or 'no client'}")
        if self.available is False:
            raise ClusterUnavailable(self.name, f"unavailable ({self.last_probe_error}); "
                                                "write not done")
        return self.client

    def on_transition(self, transition: health.Transition) -> None:
        """The prober saw a flip: log it once, wake the informers, tell the listeners."""
        if transition.ready_changed:
            now = time.monotonic()
            away_for, self.changed_at = now - self.changed_at, now
            if transition.ready:
                log.info("cluster %s is available%s", self.name,
                         f" again after {away_for:.0f}s" if self._was_down else "")
                for informer in self.cache.informers.values() if self.cache else ():
                    informer.wake()
            else:
                # The one ERROR of an outage: every reconcile that fails because of it
                # retries at DEBUG (runtime.controller), and this line says why.
                log.error("cluster %s is unavailable: %s", self.name, transition.detail)
            self._was_down = not transition.ready
            _call(self.availability_listeners, self)
        _call(self.health_listeners, self)


def _call(listeners: list[Listener], cluster: Cluster) -> None:
    """Call each listener; one that raises is logged and must not stop the prober."""
    for listener in list(listeners):
        try:
            listener(cluster)
        except Exception:
            log.exception("listener %r of cluster %s failed", listener, cluster.name)


class ClusterSet:
    """The hub and the members, by name."""

    def __init__(self, clusters: Sequence[Cluster]) -> None:
        self.clusters = {c.name: c for c in clusters}
        hubs = [c for c in clusters if c.is_hub]
        if len(hubs) != 1:
            raise ValueError("a cluster set needs exactly one hub")
        self.hub = hubs[0]
        self.member_availability_listeners: list[Listener] = []
        self.member_health_listeners: list[Listener] = []
        self.leave_listeners: list[Callable[[str], None]] = []

    @property
    def members(self) -> list[Cluster]:
        return [c for c in self.clusters.values() if c.is_member]

    @property
    def engaged(self) -> list[Cluster]:
        return [c for c in self.clusters.values() if c.engaged]

    @property
    def errors(self) -> dict[str, str]:
        return {c.name: c.error for c in self.clusters.values() if c.error}

    def get(self, name: str) -> Cluster:
        try:
            return self.clusters[name]
        except KeyError:
            raise UnknownCluster(name, f"no such cluster (have: "
                                       f"{', '.join(sorted(self.clusters))})") from None

    def __iter__(self) -> Iterable[Cluster]:
        return iter(self.clusters.values())

    def on_member_availability(self, listener: Listener) -> None:
        """Call ``listener`` when any member's availability changes, joined ones included."""
        self.member_availability_listeners.append(listener)
        for cluster in self.members:
            cluster.availability_listeners.append(listener)

    def on_member_health(self, listener: Listener) -> None:
        """Call ``listener`` when any member's *ready* or *reachable* state flips (once per
        flip, from its one prober), joined ones included."""
        self.member_health_listeners.append(listener)
        for cluster in self.members:
            cluster.health_listeners.append(listener)

    def on_leave(self, listener: Callable[[str], None]) -> None:
        """Call ``listener`` with a member's name once it has left (:meth:`leave`): state
        kept per cluster elsewhere is forgotten in the same step as its engagement stops."""
        self.leave_listeners.append(listener)

    def join(self, name: str, config: kubeconfig.KubeConfig,
             observer: Observer | None = None) -> Cluster:
        """Add member ``name`` at runtime from a kubeconfig holding a context of that name
        (``fedctl join``'s Secret); the caller engages it (``Manager.engage``)."""
        if name in self.clusters:
            raise ValueError(f"cluster {name!r} is already in the set")
        cluster = _member(config, name, False, self.hub, self.hub.settings, observer)
        cluster.joined = True
        cluster.availability_listeners.extend(self.member_availability_listeners)
        cluster.health_listeners.extend(self.member_health_listeners)
        self.clusters[name] = cluster
        return cluster

    def adopt(self, cluster: Cluster) -> Cluster:
        """Add a member built elsewhere at runtime (a pull member, whose client is a work
        stream rather than a kubeconfig); like :meth:`join`, the caller engages it."""
        if cluster.name in self.clusters:
            raise ValueError(f"cluster {cluster.name!r} is already in the set")
        cluster.joined = True
        cluster.availability_listeners.extend(self.member_availability_listeners)
        cluster.health_listeners.extend(self.member_health_listeners)
        self.clusters[cluster.name] = cluster
        return cluster

    def refuse(self, name: str, error: str) -> Cluster:
        """Record member ``name`` whose runtime join was refused (its kubeconfig Secret is
        missing or breaks a rule): known but never engaged, its error shown where a
        misconfigured static context's is (``/readyz``, the health condition)."""
        if name in self.clusters:
            raise ValueError(f"cluster {name!r} is already in the set")
        cluster = Cluster(name, error=error, settings=self.hub.settings)
        cluster.joined = True
        self.clusters[name] = cluster
        return cluster

    async def leave(self, name: str) -> None:
        """Remove a member added by :meth:`join` (or :meth:`refuse`): its engagement stops in
        one call (prober, informers, tasks, connections), then the leave listeners hear it."""
        cluster = self.clusters.get(name)
        if cluster is None or not cluster.joined:
            return
        del self.clusters[name]
        if cluster.engagement is not None:
            await cluster.engagement.stop()
        for listener in list(self.leave_listeners):
            try:
                listener(name)
            except Exception:
                log.exception("leave listener %r failed for cluster %s", listener, name)

    async def close(self) -> None:
        """Stop every engagement; clients shared with the hub's are closed last, by the hub's."""
        engagements = [c.engagement for c in self.clusters.values() if c.engagement]
        for engagement in sorted(engagements, key=lambda e: e.owns_client):
            await engagement.stop()

    @classmethod
    def from_kubeconfig(cls, config: kubeconfig.KubeConfig, *, hub_context: str | None = None,
                        contexts: Sequence[str] | None = None, disabled: Iterable[str] = (),
                        settings: ClusterSettings | None = None,
                        observer: Observer | None = None) -> ClusterSet:
        """Engage the hub and the selected members; raises only when the hub is unusable."""
        settings = settings or ClusterSettings()
        hub_name = hub_context or config.current_context
        if not hub_name:
            raise kubeconfig.KubeconfigError("no --hub-context given and the kubeconfig has "
                                             "no current-context")
        disabled = set(disabled)
        if hub_name in disabled:
            raise kubeconfig.KubeconfigError(f"the hub context {hub_name!r} cannot be disabled")
        hub_ctx = config.context(hub_name)
        hub_client = ClusterClient(hub_ctx, settings.client, observer=observer)
        names = list(contexts) if contexts is not None else [
            n for n in config.context_names if n != hub_name]
        for name in sorted(disabled - set(names)):
            log.warning("--disabled-contexts names %r, which is not a selected member", name)
        hub = Cluster(hub_name, is_hub=True, is_member=hub_name in names, context=hub_ctx,
                      client=hub_client, settings=settings)
        clusters = [hub]
        for name in names:
            if name != hub_name:
                clusters.append(_member(config, name, name in disabled, hub, settings,
                                        observer))
        return cls(clusters)


def _member(config: kubeconfig.KubeConfig, name: str, disabled: bool, hub: Cluster,
            settings: ClusterSettings, observer: Observer | None) -> Cluster:
    try:
        context = config.context(name)
    except kubeconfig.KubeconfigError as exc:
        log.error("%s; cluster %s is not engaged", exc, name)
        return Cluster(name, disabled=disabled, error=str(exc), settings=settings)
    if disabled:
        return Cluster(name, context=context, disabled=True, settings=settings)
    if hub.context is not None and context.server == hub.context.server:
        log.info("context %s points at the hub's API server; reusing the hub's client", name)
        return Cluster(name, context=context, client=hub.client, settings=settings,
                       shares_client_of=hub.name)
    try:
        client = ClusterClient(context, settings.client, observer=observer)
    except kubeconfig.KubeconfigError as exc:
        log.error("%s; cluster %s is not engaged", exc, name)
        return Cluster(name, context=context, error=str(exc), settings=settings)
    return Cluster(name, context=context, client=client, settings=settings)
