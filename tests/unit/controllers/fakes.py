"""An in-memory fleet for reconciler tests: hub and members as dicts, writes as a server does.

:class:`FakeMC` stands in for the multi-cluster client (cached reads, per-cluster
writers). Writes behave like an API server where it matters to the controllers:
creates of existing objects are 409 AlreadyExists, stale resourceVersions are 409
Conflict, delete preconditions are checked, a cluster in :attr:`FakeMC.down` answers
every call with ClusterUnavailable. Every write is recorded in :attr:`FakeMC.writes`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from copy import deepcopy
from typing import Any, Literal, cast, overload

from federation.contexts import client as kube
from federation.contexts.cache import ReadOnly
from federation.contexts.client import ApiError, ClusterUnavailable, Resource
from federation.contexts.clusters import Cluster, ClusterSet
from federation.contexts.multicluster import ListResult, ListView
from federation.controllers import propagation
from federation.controllers.kit import kinds as kinds_
from federation.controllers.kit import view
from federation.controllers.kit.interpreting import Interpreting
from federation.hub import api, dependencies, rollouts
from federation.runtime.reconcile import Request, group_kind
from tests.unit.controllers.frozen import freeze

JSON = dict[str, Any]
WIDGETS = Resource("example.io", "v1", "widgets", "Widget")
"""A custom kind (a CRD on hub and members) that only a customization explains."""
KINDS = {r.kind: r for r in (WIDGETS, api.INTERPRETER_CUSTOMIZATIONS,
                             kube.CONFIGMAPS, kube.NAMESPACES, kube.DEPLOYMENTS,
                             api.RESOURCE_BINDINGS, api.CLUSTER_RESOURCE_BINDINGS, api.EVENTS,
                             api.PROPAGATION_POLICIES, api.CLUSTER_PROPAGATION_POLICIES,
                             api.OVERRIDE_POLICIES, api.CLUSTER_OVERRIDE_POLICIES,
                             api.MEMBER_CLUSTERS, api.CRDS, rollouts.RECONFIGURE_POLICIES,
                             api.PRIORITY_CLASSES, api.WORKLOAD_REBALANCERS,
                             *dependencies.KINDS.values())}


_UIDS = itertools.count(1)

MEMBERS = ("member1", "member2", "member3")
"""The members most tests place on."""


class FakeCluster(Cluster):
    """A cluster with no client that counts as engaged (the fake client answers for it)."""

    @property
    def engaged(self) -> bool:
        return not self.disabled and self.error is None


def cluster_set(*members: str, hub: str = "hub") -> ClusterSet:
    found = [FakeCluster(hub, is_hub=True, is_member=False)]
    found += [FakeCluster(name) for name in members]
    for cluster in found:
        cluster.available = True
    return ClusterSet(found)


class FakeMC:
    def __init__(self, clusters: ClusterSet) -> None:
        self.clusters = clusters
        self.objects: dict[tuple[str, str, str, str], JSON] = {}
        self.down: set[str] = set()
        self.writes: list[tuple[str, str, str]] = []
        """(verb, cluster, kind/name) of every write that happened."""
        self.unseen: set[tuple[str, str, str]] = set()
        """(cluster, kind, name) the caches have not seen yet (made by someone else just now)."""
        self._versions = itertools.count(1)

    # -- state -------------------------------------------------------------------------

    def put(self, cluster: str, obj: JSON) -> JSON:
        """Store ``obj`` as the server would (uid, resourceVersion), without recording."""
        stored = deepcopy(obj)
        meta = stored.setdefault("metadata", {})
        # Unique across fakes, as a real server's uids are: parsed policies are memoised by
        # (uid, resourceVersion) for the life of the process.
        meta.setdefault("uid", f"uid-{next(_UIDS)}")
        meta["resourceVersion"] = str(next(self._versions))
        self.objects[self._key(cluster, KINDS[stored["kind"]], meta.get("namespace"),
                               meta["name"])] = stored
        return deepcopy(stored)

    def hub_writes(self) -> list[tuple[str, str, str]]:
        """The recorded writes that went to the hub."""
        return [w for w in self.writes if w[1] == "hub"]

    def find(self, cluster: str, kind: str, name: str, namespace: str | None = None
             ) -> JSON | None:
        found = self.objects.get(self._key(cluster, KINDS[kind], namespace, name))
        return deepcopy(found) if found is not None else None

    def set_down(self, name: str, down: bool) -> None:
        (self.down.add if down else self.down.discard)(name)
        self.clusters.get(name).available = not down

    def _key(self, cluster: str, resource: Resource, namespace: str | None,
             name: str) -> tuple[str, str, str, str]:
        return cluster, resource.plural, (namespace or "") if resource.namespaced else "", name

    def _check(self, cluster: str) -> None:
        self.clusters.get(cluster)
        if cluster in self.down:
            raise ClusterUnavailable(cluster, "unavailable (connection refused); write not done")

    # -- the multi-cluster client's surface ----------------------------------------------

    async def get(self, resource: Resource, name: str, namespace: str | None = None, *,
                  cluster: str, allow_stale: bool = False, copy: bool = True) -> JSON | None:
        """As the cache: ``copy=False`` hands out the stored object, frozen (a change to it
        fails the test; see :mod:`.frozen`)."""
        self._check(cluster)
        if (cluster, resource.kind, name) in self.unseen:
            return None
        found = self.objects.get(self._key(cluster, resource, namespace, name))
        if found is None:
            return None
        return deepcopy(found) if copy else freeze(found)

    @overload
    async def list(self, resource: Resource, namespace: str | None = None, *,
                   clusters: Sequence[str] | None = None, copy: Literal[True] = True,
                   **_: Any) -> ListResult: ...

    @overload
    async def list(self, resource: Resource, namespace: str | None = None, *,
                   clusters: Sequence[str] | None = None, copy: Literal[False],
                   **_: Any) -> ListView: ...

    async def list(self, resource: Resource, namespace: str | None = None, *,
                   clusters: Sequence[str] | None = None, copy: bool = True,
                   **_: Any) -> ListResult | ListView:
        result = ListResult() if copy else ListView()
        for name in clusters or [c.name for c in self.clusters.members]:
            if name in self.down:
                result.errors[name] = ClusterUnavailable(name, "unavailable")
                continue
            result.items[name] = [
                deepcopy(o) if copy else freeze(o)
                for (c, plural, ns, _), o in sorted(self.objects.items())
                if c == name and plural == resource.plural
                and (namespace is None or ns == namespace) and _in_group(o, resource)]
        return result

    async def view(self, resource: Resource, name: str, namespace: str | None = None, *,
                   cluster: str, allow_stale: bool = False) -> ReadOnly | None:
        return await self.get(resource, name, namespace, cluster=cluster, copy=False)

    async def list_view(self, resource: Resource, namespace: str | None = None, *,
                        clusters: Sequence[str] | None = None, **_: Any) -> ListView:
        return await self.list(resource, namespace, clusters=clusters, copy=False)

    def cluster(self, name: str) -> FakeWriter:
        self.clusters.get(name)
        return FakeWriter(self, name)


class FakeWriter:
    """One cluster's writes (the ClusterWriter surface the controllers use)."""

    def __init__(self, mc: FakeMC, cluster: str) -> None:
        self.mc = mc
        self.name = cluster

    def _stored(self, resource: Resource, name: str, namespace: str | None) -> JSON:
        self.mc._check(self.name)
        found = self.mc.objects.get(self.mc._key(self.name, resource, namespace, name))
        if found is None:
            raise ApiError(self.name, 404, "NotFound", f"{resource.plural} {name!r} not found")
        return found

    def _record(self, verb: str, resource: Resource, name: str) -> None:
        self.mc.writes.append((verb, self.name, f"{resource.kind}/{name}"))

    async def resource(self, obj: Mapping[str, Any]) -> Resource:
        self.mc._check(self.name)
        return KINDS[str(obj.get("kind"))]

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        return deepcopy(self._stored(resource, name, namespace))

    async def list(self, resource: Resource, namespace: str | None = None, **params: Any
                   ) -> JSON:
        """A live list (the fleet's, for this cluster); a field selector's ``path=value``
        terms are matched as the API server matches them (dotted paths into each object)."""
        self.mc._check(self.name)
        terms = [t.split("=", 1) for t in str(params.get("fieldSelector") or "").split(",") if t]
        listed = await self.mc.list(resource, namespace, clusters=[self.name])
        return {"items": [o for o in listed.items[self.name]
                          if all(_field(o, path) == value for path, value in terms)]}

    def _unchanged_since(self, stored: JSON, version: str | None) -> None:
        """A write conditional on ``version`` (none: unconditional) meets the server's 409."""
        if version and version != stored["metadata"]["resourceVersion"]:
            raise ApiError(self.name, 409, "Conflict", "the object has been modified")

    async def create(self, obj: JSON, *, resource: Resource | None = None) -> JSON:
        self.mc._check(self.name)
        resource = resource or KINDS[obj["kind"]]
        meta = obj["metadata"]
        key = self.mc._key(self.name, resource, meta.get("namespace"), meta["name"])
        if key in self.mc.objects:
            raise ApiError(self.name, 409, "AlreadyExists", f"{meta['name']} already exists")
        self._record("create", resource, meta["name"])
        return self.mc.put(self.name, obj)

    async def update(self, obj: JSON, *, resource: Resource | None = None) -> JSON:
        resource = resource or KINDS[obj["kind"]]
        meta = obj["metadata"]
        stored = self._stored(resource, meta["name"], meta.get("namespace"))
        version = meta.get("resourceVersion")
        self._unchanged_since(stored, version)
        updated = deepcopy(obj)
        updated["metadata"]["uid"] = stored["metadata"]["uid"]
        if resource not in (api.RESOURCE_BINDINGS, api.CLUSTER_RESOURCE_BINDINGS):
            # A status subresource: a PUT keeps the stored status (bindings have none).
            updated["status"] = stored.get("status", updated.get("status"))
        self._record("update", resource, meta["name"])
        return self.mc.put(self.name, updated)

    async def patch(self, resource: Resource, name: str, patch: JSON, *,
                    namespace: str | None = None, resource_version: str | None = None,
                    subresource: str | None = None, **_: Any) -> JSON:
        stored = self._stored(resource, name, namespace)
        self._unchanged_since(stored, resource_version)
        updated = deepcopy(stored)
        for key, value in patch.items():
            if key != "metadata":
                updated[key] = merge_patch(updated.get(key), json.loads(json.dumps(value)))
        self._record("status" if subresource == "status" else "patch", resource, name)
        return self.mc.put(self.name, updated)

    async def patch_status(self, resource: Resource, name: str, patch: JSON, *,
                           namespace: str | None = None,
                           resource_version: str | None = None) -> JSON:
        return await self.patch(resource, name, patch, namespace=namespace,
                                resource_version=resource_version, subresource="status")

    async def apply(self, obj: JSON, *, resource: Resource | None = None, **_: Any) -> JSON:
        """Server-side apply, as far as the controllers rely on it: conditional on the
        body's resourceVersion; the fields sent replace the stored ones, the others stay
        (ownership itself is the API server's; :mod:`federation.hub.ownership` is tested
        on its own)."""
        resource = resource or KINDS[obj["kind"]]
        meta = obj["metadata"]
        stored = self._stored(resource, meta["name"], meta.get("namespace"))
        version = meta.get("resourceVersion")
        self._unchanged_since(stored, version)
        updated = {**deepcopy(stored), **deepcopy(obj)}
        updated["metadata"] = {**stored["metadata"], **deepcopy(meta)}
        self._record("apply", resource, meta["name"])
        return self.mc.put(self.name, updated)

    async def delete(self, resource: Resource, name: str, namespace: str | None = None, *,
                     resource_version: str | None = None, uid: str | None = None,
                     **_: Any) -> JSON:
        stored = self._stored(resource, name, namespace)
        meta = stored["metadata"]
        if (uid and uid != meta["uid"]) or \
                (resource_version and resource_version != meta["resourceVersion"]):
            raise ApiError(self.name, 409, "Conflict", "precondition failed")
        self._record("delete", resource, name)
        del self.mc.objects[self.mc._key(self.name, resource, namespace, name)]
        return stored


class FakeKinds:
    """Every kind in :data:`KINDS` is tracked, on the hub and in every member."""

    def __init__(self) -> None:
        self.own_writes = kinds_.OwnWrites()

    def resource(self, kind: str) -> Resource | None:
        return next((r for r in KINDS.values() if group_kind(r) == kind), None)

    def member_resource(self, cluster: str, kind: str) -> Resource | None:
        return self.resource(kind)

    async def track_members(self, resource: Resource, only: Any = None) -> None:
        return None


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    async def emit(self, obj: Mapping[str, Any], kind: str, reason: str, message: str
                   ) -> None:
        self.events.append((kind, reason, message))

    def forget(self, obj: Mapping[str, Any]) -> None:
        return None


def reconciler(mc: FakeMC, settings: propagation.PropagationSettings | None = None
               ) -> propagation.Reconciler:
    return propagation.Reconciler(mc, mc.clusters, FakeKinds(), FakeRecorder(), settings)


def request_for(obj: JSON) -> Request:
    meta = obj["metadata"]
    return Request("hub", group_kind(KINDS[obj["kind"]]), meta.get("namespace") or "",
                   meta["name"])


def config_map(name: str, namespace: str = "shop", **data: str) -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": data or {"k": "v"}}


def duplicated_policy(name: str, clusters: Sequence[str], namespace: str = "shop") -> JSON:
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap",
                                            "name": name}],
                     "placement": {"clusterAffinity": {"clusterNames": list(clusters)},
                                   "replicaScheduling": {
                                       "replicaSchedulingType": "Duplicated"}}}}


class FakeContext:
    """A :class:`~federation.controllers.propagation.TransformContext` over plain lists:
    hub objects by kind, member copies by cluster, a fixed clock. It has no writer."""

    def __init__(self, lists: dict[str, list[JSON]] | None = None,
                 members: Sequence[str] = ("member1", "member2", "member3"),
                 copies: dict[str, JSON | None] | None = None,
                 failover: Any = None, now: float = 0.0,
                 settings: propagation.PropagationSettings | None = None) -> None:
        from federation.controllers.propagation import disruption, scheduling

        self.lists = lists or {}
        self.copies = copies or {}
        self.down: set[str] = set()
        self.ownership_reads = 0
        self._members = [view.Member(m, False, True) for m in members]
        self._settings = settings or propagation.PropagationSettings()
        self._failover = failover or disruption.Failover(clock=lambda: now)
        self._scheduler = scheduling.Scheduler(5.0, 1)
        self._interpreting = Interpreting()
        self._now = now

    hub = "hub"

    @property
    def settings(self) -> propagation.PropagationSettings:
        return self._settings

    @property
    def scheduler(self) -> Any:
        return self._scheduler

    @property
    def failover(self) -> Any:
        return self._failover

    @property
    def deny_list(self) -> Any:
        return self._settings.deny_list

    @property
    def interpreting(self) -> Interpreting:
        return self._interpreting

    def now(self) -> float:
        return self._now

    def members(self) -> list[view.Member]:
        return list(self._members)

    # Reads hand out frozen copies, as the caches hand out shared objects (see .frozen).

    async def get(self, resource: Resource, name: str, namespace: str | None,
                  cluster: str) -> ReadOnly | None:
        if cluster in self.down:
            raise ClusterUnavailable(cluster, "unavailable")
        for obj in self.lists.get(resource.kind, []):
            meta = obj["metadata"]
            if meta["name"] == name and meta.get("namespace") == namespace:
                return cast(ReadOnly, freeze(obj))
        return None

    async def list(self, resource: Resource, namespace: str | None = None) -> list[ReadOnly]:
        return [freeze(o) for o in self.lists.get(resource.kind, [])
                if (namespace is None or o["metadata"].get("namespace") == namespace)
                and _in_group(o, resource)]

    async def copy(self, hub_resource: Resource, cluster: str, name: str,
                   namespace: str | None) -> ReadOnly | None:
        if cluster in self.down:
            raise ClusterUnavailable(cluster, "unavailable")
        found = self.copies.get(cluster)
        return cast(ReadOnly, freeze(found)) if found is not None else None

    async def managed_fields(self, hub_resource: Resource, cluster: str, name: str,
                             namespace: str | None) -> Sequence[ReadOnly] | None:
        """The copy's ``metadata.managedFields`` (the caches strip them; the API server
        answers them), or None as for a member that records none."""
        if cluster in self.down:
            raise ClusterUnavailable(cluster, "unavailable")
        self.ownership_reads += 1
        found = ((self.copies.get(cluster) or {}).get("metadata") or {}).get("managedFields")
        return [freeze(entry) for entry in found] if found else None


def merge_patch(stored: Any, patch: Any) -> Any:
    """RFC 7386 as the API server applies a merge patch (sent as JSON): maps merged key by
    key, a null deletes, anything else replaces; a null field of what replaces is no
    field (in arrays' objects too)."""
    if not isinstance(patch, dict):
        return _no_nulls(patch)
    merged = dict(stored) if isinstance(stored, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _no_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


def _in_group(obj: JSON, resource: Resource) -> bool:
    """Objects listed under a kind belong to the resource of their apiVersion's group (ours
    when they name none), so Karmada's policy kinds and ours do not see each other's."""
    api_version = str(obj.get("apiVersion") or "")
    if not api_version:
        return resource.group != "policy.karmada.io"
    return api_version.rpartition("/")[0] == resource.group


def _field(obj: JSON, path: str) -> str:
    found: Any = obj
    for part in path.split("."):
        found = found.get(part) if isinstance(found, dict) else None
    return "" if found is None else str(found)
