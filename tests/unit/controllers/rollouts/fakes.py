"""A fake fleet for the rollout controller: a view over dicts, a virtual clock, a writer
that merge-patches like the API server (resourceVersion preconditions included), a
recording reloader caller, and a stand-in for propagation (what rc-prop's side does with
``releasedVersion``/``restartVersion``) and for the simulator (readiness)."""

from __future__ import annotations

import base64
import copy
import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from federation.contexts import egress
from federation.contexts.cache import ReadOnly
from federation.contexts.client import ApiError, ClusterUnavailable
from federation.controllers.rollouts import OnlineUpgrade, Reconciler, ReconfigureSettings
from federation.controllers.rollouts import rollout as rollout_
from federation.controllers.rollouts.sandbox import Analyses, inline
from federation.controllers.rollouts.view import reloader_addresses
from federation.hub import rollouts as hub_api
from federation.runtime.reconcile import Request, Result

JSON = dict[str, Any]
NS = "shop"
MEMBERS = ("member1", "member2", "member3")
START = datetime.datetime(2026, 11, 23, 5, 30, tzinfo=datetime.UTC)

INI_V1 = "[mysqld]\nmax_connections = 100\ninnodb_buffer_pool_size = 128M\nserver_id = 1\n"

CONSTRAINT: JSON = {
    "apiVersion": "config.federation.io/v1alpha1", "kind": "ConfigConstraint",
    "metadata": {"name": "mysql"},
    "spec": {"fileFormatConfig": {"format": "ini"},
             "dynamicParameters": ["mysqld.max_connections", "mysqld.password"],
             "staticParameters": ["mysqld.innodb_*"],
             "immutableParameters": ["mysqld.server_id"],
             "parametersSchema": {"mysqld.max_connections": {"type": "int", "minimum": 1}}},
}


def merge(target: JSON, patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


@dataclasses.dataclass
class Answer:
    ok: bool
    message: str = ""
    config_version: str = "dirhash"


class Caller:
    """Records every OnlineUpgradeParams call; ``fail``/``raise_for`` by address."""

    def __init__(self) -> None:
        self.calls: list[JSON] = []
        self.fail: dict[str, str] = {}
        self.raise_for: dict[str, str] = {}

    async def __call__(self, address: str, *, namespace: str, config_spec: str,
                       config_file: str, params: Mapping[str, str], timeout: float) -> Answer:
        self.calls.append({"address": address, "namespace": namespace,
                           "config_spec": config_spec, "config_file": config_file,
                           "params": dict(params), "timeout": timeout})
        if address in self.raise_for:
            raise ConnectionError(self.raise_for[address])
        if address in self.fail:
            return Answer(False, self.fail[address])
        return Answer(True)


class Fleet:
    """Hub and members as dicts; implements RolloutView and StatusWriter."""

    def __init__(self, members: Sequence[str] = MEMBERS) -> None:
        self.clock = START
        self.members = list(members)
        self.hub: dict[tuple[str, str, str], JSON] = {}
        self.copies: dict[str, dict[tuple[str, str, str], JSON]] = {m: {} for m in members}
        self.placements: dict[tuple[str, str, str], list[str]] = {}
        self.slices: dict[str, list[JSON]] = {m: [] for m in members}
        self.writes: list[JSON] = []
        self.constraint_writes: list[tuple[str, JSON]] = []
        self.stale = False
        self.away: set[str] = set()
        """Members whose reads raise ClusterUnavailable (down, or their cache stale)."""
        self.lagging: dict[tuple[str, str], JSON] = {}
        """(namespace, name) -> the policy a cache behind the last status write still shows
        (writes still go to, and are checked against, the current object)."""
        self._rv = 100

    # -- the clock ---------------------------------------------------------------------
    def now(self) -> datetime.datetime:
        return self.clock

    def advance(self, seconds: float) -> None:
        self.clock += datetime.timedelta(seconds=seconds)

    # -- RolloutView -------------------------------------------------------------------
    def member_names(self) -> list[str]:
        return list(self.members)

    async def policy(self, namespace: str, name: str) -> ReadOnly | None:
        if (namespace, name) in self.lagging:
            return self.lagging[(namespace, name)]
        return self.hub.get(("ReconfigurePolicy", namespace, name))

    async def policies(self, namespace: str) -> Sequence[ReadOnly]:
        return [d for (k, ns, _), d in self.hub.items()
                if k == "ReconfigurePolicy" and ns == namespace]

    async def constraint(self, kind: str, name: str) -> ReadOnly | None:
        return self.hub.get((kind, "", name))

    async def config(self, kind: str, namespace: str, name: str,
                     cluster: str | None = None) -> ReadOnly | None:
        if cluster in self.away:
            raise ClusterUnavailable(cluster, "connection refused")
        store = self.hub if cluster is None else self.copies[cluster]
        return store.get((kind, namespace, name))

    async def placement(self, kind: str, namespace: str, name: str) -> Sequence[str]:
        return sorted(self.placements.get((kind, namespace, name), []))

    async def workload(self, kind: str, namespace: str, name: str,
                       cluster: str) -> ReadOnly | None:
        return self.copies[cluster].get((kind, namespace, name))

    async def reloaders(self, cluster: str, namespace: str, service: str) -> list[str]:
        return reloader_addresses([
            s for s in self.slices[cluster]
            if s["metadata"]["namespace"] == namespace
            and s["metadata"]["labels"].get("kubernetes.io/service-name") == service])

    # -- StatusWriter ------------------------------------------------------------------
    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    async def policy_status(self, namespace: str, name: str, patch: JSON,
                            resource_version: str | None) -> None:
        doc = self.hub[("ReconfigurePolicy", namespace, name)]
        if self.stale or (resource_version is not None
                          and resource_version != doc["metadata"]["resourceVersion"]):
            raise ApiError("hub", 409, "Conflict", "the object has been modified")
        self.writes.append(copy.deepcopy(patch))
        doc.setdefault("status", {})
        merge(doc, patch)
        doc["metadata"]["resourceVersion"] = self._next_rv()

    async def constraint_status(self, name: str, patch: JSON) -> None:
        self.constraint_writes.append((name, copy.deepcopy(patch)))
        merge(self.hub[("ConfigConstraint", "", name)], patch)

    # -- building the fleet ------------------------------------------------------------
    def put(self, doc: JSON) -> JSON:
        meta = doc.setdefault("metadata", {})
        meta.setdefault("resourceVersion", self._next_rv())
        meta.setdefault("generation", 1)
        meta.setdefault("creationTimestamp", "2026-11-23T05:00:00Z")
        self.hub[(doc["kind"], meta.get("namespace", ""), meta["name"])] = doc
        return doc

    def config_map(self, content: str, name: str = "db-config", namespace: str = NS,
                   key: str = "my.ini", extra: Mapping[str, str] | None = None) -> JSON:
        data = {key: content, **(extra or {})}
        return self.put({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": name, "namespace": namespace}, "data": data})

    def secret(self, content: str, name: str = "db-secret", namespace: str = NS,
               key: str = "my.ini") -> JSON:
        return self.put({"apiVersion": "v1", "kind": "Secret",
                         "metadata": {"name": name, "namespace": namespace},
                         "data": {key: base64.b64encode(content.encode()).decode()}})

    def add_policy(self, name: str = "db", namespace: str = NS, **spec: Any) -> JSON:
        body: JSON = {"configRef": {"kind": "ConfigMap", "name": "db-config"},
                      "files": [{"key": "my.ini", "constraintRef": "mysql"}],
                      "workloads": [{"kind": "Deployment", "name": "db"}]}
        body.update(spec)
        return self.put({"apiVersion": "config.federation.io/v1alpha1",
                         "kind": "ReconfigurePolicy",
                         "metadata": {"name": name, "namespace": namespace}, "spec": body})

    def place(self, kind: str, name: str, clusters: Sequence[str] | None = None,
              namespace: str = NS) -> None:
        self.placements[(kind, namespace, name)] = list(clusters or self.members)

    def deployment(self, name: str = "db", namespace: str = NS, replicas: int = 2) -> None:
        """The workload on the hub, placed on every member with a ready copy."""
        self.place("Deployment", name, namespace=namespace)
        for cluster in self.members:
            self.copies[cluster][("Deployment", namespace, name)] = {
                "kind": "Deployment", "metadata": {"name": name, "namespace": namespace,
                                                   "generation": 1},
                "spec": {"replicas": replicas, "template": {"metadata": {}}},
                "status": {"observedGeneration": 1, "replicas": replicas,
                           "readyReplicas": replicas, "updatedReplicas": replicas}}

    def endpoints(self, cluster: str, address: str, service: str = "db-reloader",
                  namespace: str = NS, port: int = 9901) -> None:
        self.slices[cluster].append({
            "metadata": {"namespace": namespace, "name": f"{service}-{len(self.slices[cluster])}",
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "ports": [{"name": "reloader", "port": port}],
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}]})

    def copy_everywhere(self, kind: str = "ConfigMap", name: str = "db-config",
                        namespace: str = NS) -> None:
        """Propagation's first copies: the hub's content in every member."""
        self.place(kind, name, namespace=namespace)
        for cluster in self.members:
            self.copies[cluster][(kind, namespace, name)] = copy.deepcopy(
                self.hub[(kind, namespace, name)])

    # -- what propagation and the simulator would do -----------------------------------
    def propagate(self, policy: str = "db", namespace: str = NS) -> None:
        """rc-prop's side: copies written where released; restart stamps where set (the
        stamp bumps the generation; the new generation is not ready yet)."""
        doc = self.hub[("ReconfigurePolicy", namespace, policy)]
        ref = doc["spec"]["configRef"]
        hub_obj = self.hub[(ref["kind"], namespace, ref["name"])]
        version = hub_api.config_version(hub_obj)
        for cluster in self.members:
            if hub_api.released_version(doc, cluster) == version:
                self.copies[cluster][(ref["kind"], namespace, ref["name"])] = \
                    copy.deepcopy(hub_obj)
            stamp = hub_api.restart_version(doc, cluster)
            for workload in doc["spec"]["workloads"]:
                live = self.copies[cluster].get((workload["kind"], namespace, workload["name"]))
                if live is None or stamp is None:
                    continue
                annotations = live["spec"]["template"]["metadata"].setdefault("annotations", {})
                if annotations.get(hub_api.CONFIG_VERSION_ANNOTATION) != stamp:
                    annotations[hub_api.CONFIG_VERSION_ANNOTATION] = stamp
                    live["metadata"]["generation"] += 1
                    live["status"]["updatedReplicas"] = 0

    def make_ready(self, cluster: str, name: str = "db", namespace: str = NS) -> None:
        live = self.copies[cluster][("Deployment", namespace, name)]
        replicas = live["spec"]["replicas"]
        live["status"].update(observedGeneration=live["metadata"]["generation"],
                              readyReplicas=replicas, updatedReplicas=replicas)

    def status(self, policy: str = "db", namespace: str = NS) -> JSON:
        return self.hub[("ReconfigurePolicy", namespace, policy)].get("status") or {}

    def states(self, policy: str = "db") -> dict[str, str]:
        return {c["name"]: c["state"] for c in self.status(policy).get("clusters") or []}

    def condition(self, kind: str, policy: str = "db") -> JSON:
        return next(c for c in self.status(policy)["conditions"] if c["type"] == kind)


POD_NETWORKS = egress.EgressPolicy(egress.parse_networks(["127.0.0.0/8", "10.0.0.0/8"]))
"""The fakes' reloaders: on loopback as in the local fleet, or on a pod network of 10/8
(``--reloader-allow``)."""


def reconciler(fleet: Fleet, caller: OnlineUpgrade | None = None,
               analyses: Analyses | None = None, **settings: Any) -> Reconciler:
    """The reconciler over ``fleet``; files analysed in process unless ``analyses`` says
    otherwise (the worker processes have tests of their own)."""
    settings.setdefault("egress", POD_NETWORKS)
    return Reconciler(fleet, fleet, ReconfigureSettings(caller=caller, **settings),
                      analyses or Analyses(inline))


async def reconcile(rec: Reconciler, name: str = "db", namespace: str = NS) -> Result | None:
    return await rec.reconcile(Request("hub", "ReconfigurePolicy.config.federation.io",
                                       namespace, name))


def intervals(status: Mapping[str, Any]) -> list[tuple[datetime.datetime, datetime.datetime]]:
    found = []
    for entry in status.get("clusters") or []:
        started = rollout_.parse_stamp(entry.get("startedAt"))
        finished = rollout_.parse_stamp(entry.get("finishedAt"))
        if started is not None and finished is not None and started != finished:
            found.append((started, finished))
    return sorted(found)


def standard(fleet: Fleet, content: str = INI_V1, **spec: Any) -> None:
    """A constraint, a ConfigMap copied to every member, a ready Deployment, a policy."""
    fleet.put(copy.deepcopy(CONSTRAINT))
    fleet.config_map(content)
    fleet.copy_everywhere()
    fleet.deployment()
    fleet.add_policy(**spec)


def change(fleet: Fleet, content: str, name: str = "db-config", namespace: str = NS) -> None:
    doc = fleet.hub[("ConfigMap", namespace, name)]
    doc["data"]["my.ini"] = content
