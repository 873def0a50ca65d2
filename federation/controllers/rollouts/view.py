"""What the rollout controller reads, how it writes, and how it calls reloaders.

The reconciler sees the fleet only through a :class:`RolloutView`: cached gets of hub and
member objects, the reloader addresses of a workload in a member, and the clock. Nothing in
it can write. Its one writer is a :class:`StatusWriter`, which can only merge-patch the
``/status`` of a ReconfigurePolicy or a ConfigConstraint on the hub, and its one remote call
is an :class:`OnlineUpgrade` (the shape of ``federation.reloader.client.online_upgrade``
with the TLS material bound: controllers may not import the reloader package, so ``fedctl
run`` injects it). Unit tests give fakes of all three; :class:`CacheView` and
:class:`HubStatusWriter` are the implementations over the multi-cluster client.

Every name a view is asked for comes with the policy's namespace: a policy has no field
that names another namespace, so nothing it says can make the controller read (or call
the reloaders of) another namespace's objects.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from federation.contexts import client as kube
from federation.contexts.cache import ReadOnly
from federation.contexts.client import Resource
from federation.contexts.clusters import ClusterSet
from federation.contexts.multicluster import MultiClusterReader, MultiClusterWriter
from federation.hub import api, bindings
from federation.hub import rollouts as hub_api

JSON = dict[str, Any]
SECRETS = Resource("", "v1", "secrets", "Secret")
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1beta1", "endpointslices", "EndpointSlice")
"""v1beta1: the members run Kubernetes 1.20, where discovery.k8s.io/v1 is not served."""
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
CONFIG_RESOURCES = {"ConfigMap": kube.CONFIGMAPS, "Secret": SECRETS}
WORKLOAD_RESOURCES = {"Deployment": kube.DEPLOYMENTS, "StatefulSet": kube.STATEFULSETS}


class CallerNotReady(RuntimeError):
    """The reloader client cannot call anyone (no client certificate): an operator's
    problem, shown as it is, unlike a failed call to an address (see the reconciler)."""


class UpgradeAnswer(Protocol):
    """What a reloader answered (``federation.reloader.client.UpgradeResult``)."""

    @property
    def ok(self) -> bool: ...

    @property
    def message(self) -> str: ...

    @property
    def config_version(self) -> str: ...


class OnlineUpgrade(Protocol):
    """One ``Reconfigure.OnlineUpgradeParams`` call to the reloader at ``address``
    (``host:port``), mutual TLS already bound, for a workload of ``namespace`` (the
    reloader refuses a call meant for another namespace than its own). Raises on a
    transport or handshake failure (its message names the address, never a value)."""

    async def __call__(self, address: str, *, namespace: str, config_spec: str,
                       config_file: str, params: Mapping[str, str], timeout: float
                       ) -> UpgradeAnswer: ...


class RolloutView(Protocol):
    """Read-only: the hub's and members' cached objects, reloader addresses, the clock."""

    def now(self) -> datetime.datetime: ...

    def member_names(self) -> Sequence[str]:
        """Every member cluster the control plane knows (a ``clusterOrder`` typo check)."""
        ...

    async def policy(self, namespace: str, name: str) -> ReadOnly | None: ...

    async def policies(self, namespace: str) -> Sequence[ReadOnly]: ...

    async def constraint(self, kind: str, name: str) -> ReadOnly | None:
        """The constraint ``name`` of ``kind`` (a :class:`hub_api.ConstraintKind` value)."""
        ...

    async def config(self, kind: str, namespace: str, name: str,
                     cluster: str | None = None) -> ReadOnly | None:
        """The ConfigMap/Secret on the hub (``cluster`` None) or its copy in a member."""
        ...

    async def placement(self, kind: str, namespace: str, name: str) -> Sequence[str]:
        """The clusters the hub template ``kind``/``name`` is placed on (its binding)."""
        ...

    async def workload(self, kind: str, namespace: str, name: str,
                       cluster: str) -> ReadOnly | None: ...

    async def reloaders(self, cluster: str, namespace: str, service: str) -> list[str]:
        """``host:port`` of every ready endpoint of the service's EndpointSlices."""
        ...


class StatusWriter(Protocol):
    """The controller's only writes: merge patches of ``/status`` on the hub."""

    async def policy_status(self, namespace: str, name: str, patch: JSON,
                            resource_version: str | None) -> None:
        """Conditional on ``resource_version`` (the status the patch was computed from): a
        patch computed from a stale cache fails with 409 instead of undoing progress."""
        ...

    async def constraint_status(self, name: str, patch: JSON) -> None: ...


def reloader_addresses(slices: Sequence[ReadOnly]) -> list[str]:
    """``host:port`` of the ready endpoints of EndpointSlices, on their port named
    ``reloader`` (sorted, each once). An address that is neither an IP nor a DNS name is
    skipped: it could not be dialled anyway."""
    found: set[str] = set()
    for item in slices:
        port = next((p.get("port") for p in item.get("ports") or []
                     if isinstance(p, Mapping) and p.get("name") == hub_api.RELOADER_PORT_NAME),
                    None)
        if not isinstance(port, int) or not 0 < port < 65536:
            continue
        for endpoint in item.get("endpoints") or []:
            if not isinstance(endpoint, Mapping):
                continue
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            for address in endpoint.get("addresses") or []:
                host = _host(address)
                if host is not None:
                    found.add(f"{host}:{port}")
    return sorted(found)


def _host(address: object) -> str | None:
    if not isinstance(address, str) or not address or len(address) > 253:
        return None
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        labels = address.split(".")
        if all(label and len(label) <= 63 and label.replace("-", "").isalnum()
               and label.isascii() for label in labels):
            return address
        return None
    return f"[{ip}]" if ip.version == 6 else str(ip)


class CacheView:
    """:class:`RolloutView` over the multi-cluster client's caches (no copies: read only)."""

    def __init__(self, mc: MultiClusterReader, clusters: ClusterSet, hub: str,
                 clock: Callable[[], datetime.datetime] | None = None) -> None:
        self._mc = mc
        self._clusters = clusters
        self._hub = hub
        self._clock = clock or (lambda: datetime.datetime.now(datetime.UTC))

    def now(self) -> datetime.datetime:
        return self._clock()

    def member_names(self) -> list[str]:
        return [cluster.name for cluster in self._clusters.members]

    async def policy(self, namespace: str, name: str) -> ReadOnly | None:
        return await self._mc.get(hub_api.RECONFIGURE_POLICIES, name, namespace,
                                  cluster=self._hub, copy=False)

    async def policies(self, namespace: str) -> Sequence[ReadOnly]:
        return await self._hub_list(hub_api.RECONFIGURE_POLICIES, namespace)

    async def constraint(self, kind: str, name: str) -> ReadOnly | None:
        resource = hub_api.CONSTRAINT_RESOURCES[hub_api.ConstraintKind(kind)]
        return await self._mc.get(resource, name, None, cluster=self._hub, copy=False)

    async def config(self, kind: str, namespace: str, name: str,
                     cluster: str | None = None) -> ReadOnly | None:
        return await self._mc.get(CONFIG_RESOURCES[kind], name, namespace,
                                  cluster=cluster or self._hub, copy=False)

    async def placement(self, kind: str, namespace: str, name: str) -> Sequence[str]:
        binding = await self._mc.get(api.RESOURCE_BINDINGS, bindings.binding_name(name, kind),
                                     namespace, cluster=self._hub, copy=False)
        # Unreadable: propagation changes nothing of the workload (BindingUnreadable), and
        # no rollout step acts on it either.
        record = bindings.read(binding) if binding is not None else None
        if record is None or not record.records(kind, name):
            return []
        return sorted(record.placements())

    async def workload(self, kind: str, namespace: str, name: str,
                       cluster: str) -> ReadOnly | None:
        return await self._mc.get(WORKLOAD_RESOURCES[kind], name, namespace, cluster=cluster,
                                  copy=False)

    async def reloaders(self, cluster: str, namespace: str, service: str) -> list[str]:
        listing = await self._mc.list(ENDPOINT_SLICES, namespace, clusters=[cluster],
                                      label_selector={SERVICE_NAME_LABEL: service}, copy=False)
        error = listing.errors.get(cluster)
        if error is not None:
            raise error
        return reloader_addresses(listing.items.get(cluster, []))

    async def _hub_list(self, resource: Resource, namespace: str | None) -> list[ReadOnly]:
        listing = await self._mc.list(resource, namespace, clusters=[self._hub], copy=False)
        error = listing.errors.get(self._hub)
        if error is not None:
            raise error
        return list(listing.items.get(self._hub, []))


class HubStatusWriter:
    """:class:`StatusWriter` through the multi-cluster client's hub writer."""

    def __init__(self, mc: MultiClusterWriter, hub: str) -> None:
        self._mc = mc
        self._hub = hub

    async def policy_status(self, namespace: str, name: str, patch: JSON,
                            resource_version: str | None) -> None:
        await self._mc.cluster(self._hub).patch_status(
            hub_api.RECONFIGURE_POLICIES, name, patch, namespace=namespace,
            resource_version=resource_version)

    async def constraint_status(self, name: str, patch: JSON) -> None:
        await self._mc.cluster(self._hub).patch_status(hub_api.CONFIG_CONSTRAINTS, name, patch)
