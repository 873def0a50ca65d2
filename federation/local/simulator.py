"""The data-plane simulator: node agents for member clusters that have no nodes.

The fleet's members are real API servers without kubelets or controllers, so
no workload would ever report ready. The simulator plays the node agents: it
registers Node objects with allocatable cpu/memory/pods and, for every
Deployment, StatefulSet and ReplicaSet, writes the status a healthy cluster
would write, through the status subresource, after ``ready_delay`` seconds.

Capacity is honoured. Each member's workloads are packed first-fit onto its
nodes in creation order (older workloads keep their places, like running pods
do), one replica at a time, using each pod template's resource requests. A
replica that fits nowhere stays unready, so a full member reports fewer ready
replicas than asked, and a workload deleted or scaled down frees room for
the others at the next pass.

It is level-triggered: every change marks the member dirty and a pass
recomputes all statuses from the watched objects, writing only those that
differ. Nodes are watched too, so shrinking a node's allocatable (tests do)
takes effect at once. A member that goes away is retried with backoff and
relisted when it returns.

Given the reloaders' certificate files (``fedctl local simulate`` makes them), it also plays
the reloader sidecar of workloads that ask for one (:mod:`federation.local.reloaders`): it
then watches ConfigMaps, Secrets and its own EndpointSlices too, and each pass ends with
that reconciliation.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import functools
import hashlib
import json
import logging
import math
import random
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from federation.contexts import client as kube
from federation.contexts import kubeconfig
from federation.local import reloaders
from federation.local.fleet import SimulatorSettings

log = logging.getLogger("federation.simulator")

SIMULATED_LABEL = "federation.io/simulated"
UNHEALTHY_ANNOTATION = "federation.io/simulate-unhealthy"
"""On a workload or its pod template, ``"true"``: no replica ever becomes ready and a
Deployment reports ``Progressing=False`` (``ProgressDeadlineExceeded``), as a release whose
pods crash would: how tests make a rollout fail. Put on one member's copy (``kubectl
--context member1 annotate deployment web federation.io/simulate-unhealthy=true``) it makes
that copy alone unhealthy while its member stays Ready: application failover's fault
(propagation leaves the extra annotation alone, it is no field of the copy it writes)."""


def unhealthy(workload: JSON) -> bool:
    """The workload is told never to become healthy (:data:`UNHEALTHY_ANNOTATION`)."""
    template = ((workload.get("spec") or {}).get("template") or {}).get("metadata") or {}
    return any((meta.get("annotations") or {}).get(UNHEALTHY_ANNOTATION) == "true"
               for meta in (workload.get("metadata") or {}, template))
WORKLOADS = (kube.DEPLOYMENTS, kube.STATEFULSETS, kube.REPLICASETS)
JSON = dict[str, Any]
Key = tuple[str, str, str]  # (plural, namespace, name)


def parse_quantity(value: Any) -> float:
    """A Kubernetes quantity as a float (cpu in cores, memory in bytes)."""
    return _parse_quantity_text(str(value).strip())


@functools.lru_cache(maxsize=4096)
def _parse_quantity_text(text: str) -> float:
    # Every pass parses every workload's requests again; they are a handful of strings.
    suffixes = {
        "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
        "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
        "P": 1e15, "E": 1e18,
    }
    for suffix in sorted(suffixes, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * suffixes[suffix]
    return float(text)


@dataclasses.dataclass
class NodeRoom:
    name: str
    cpu: float
    memory: float
    pods: float

    def take(self, cpu: float, memory: float) -> bool:
        if self.pods < 1 or self.cpu < cpu or self.memory < memory:
            return False
        self.pods -= 1
        self.cpu -= cpu
        self.memory -= memory
        return True


def node_room(node: JSON) -> NodeRoom | None:
    status = node.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or [])
    if not ready or (node.get("spec") or {}).get("unschedulable"):
        return None
    alloc = status.get("allocatable") or {}
    return NodeRoom(
        name=node["metadata"]["name"],
        cpu=parse_quantity(alloc.get("cpu", 0)),
        memory=parse_quantity(alloc.get("memory", 0)),
        pods=parse_quantity(alloc.get("pods", 0)),
    )


def pod_requests(workload: JSON) -> tuple[float, float]:
    """Summed cpu and memory requests of a workload's pod template."""
    spec = (((workload.get("spec") or {}).get("template") or {}).get("spec")) or {}
    cpu = memory = 0.0
    for container in spec.get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        cpu += parse_quantity(requests.get("cpu", 0))
        memory += parse_quantity(requests.get("memory", 0))
    return cpu, memory


def desired_replicas(workload: JSON) -> int:
    value = (workload.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def _order(workload: JSON) -> tuple[str, str, str]:
    meta = workload["metadata"]
    return (meta.get("creationTimestamp", ""), meta.get("namespace", ""), meta["name"])


def pack(workloads: Sequence[JSON], nodes: Sequence[JSON]) -> dict[str, int]:
    """How many replicas of each workload (by uid) fit on the nodes, oldest workloads first."""
    rooms = [room for node in nodes if (room := node_room(node)) is not None]
    fitted: dict[str, int] = {}
    for workload in sorted(workloads, key=_order):
        cpu, memory = pod_requests(workload)
        placed = 0
        for _ in range(desired_replicas(workload)):
            if not any(room.take(cpu, memory) for room in rooms):
                break
            placed += 1
        fitted[workload["metadata"]["uid"]] = placed
    return fitted


def workload_status(kind: str, workload: JSON, ready: int, rolling: bool = False) -> JSON:
    """The status a real cluster reports for ``workload`` with ``ready`` replicas ready;
    ``rolling``: its pod template changed and no new replica is ready yet (the old ones
    still serve: none counts as updated)."""
    replicas = desired_replicas(workload)
    failing = unhealthy(workload)
    if failing:
        ready = 0
    generation = workload["metadata"].get("generation", 1)
    status: JSON = {"observedGeneration": generation, "replicas": replicas,
                    "readyReplicas": ready}
    updated = 0 if rolling else replicas
    if kind == "Deployment":
        available = ready >= replicas  # the old replicas serve while new ones start
        status.update(updatedReplicas=updated, availableReplicas=ready,
                      unavailableReplicas=replicas - ready, conditions=[
                          _condition("Available", available,
                                     "MinimumReplicasAvailable" if available
                                     else "MinimumReplicasUnavailable"),
                          _condition("Progressing", not failing,
                                     "ProgressDeadlineExceeded" if failing else
                                     "NewReplicaSetAvailable" if available and not rolling
                                     else "ReplicaSetUpdated"),
                      ])
    elif kind == "StatefulSet":
        revision = f"{workload['metadata']['name']}-{generation}"
        status.update(currentReplicas=replicas, updatedReplicas=updated,
                      currentRevision=revision, updateRevision=revision)
    else:
        status.update(fullyLabeledReplicas=replicas, availableReplicas=ready)
    return status


def _condition(kind: str, ok: bool, reason: str) -> JSON:
    now = _timestamp(int(time.time()))
    return {"type": kind, "status": "True" if ok else "False", "reason": reason,
            "message": f"simulated: {reason}", "lastUpdateTime": now, "lastTransitionTime": now}


@functools.lru_cache(maxsize=2)
def _timestamp(second: int) -> str:
    return datetime.datetime.fromtimestamp(second, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_differs(current: JSON | None, wanted: JSON) -> bool:
    current = current or {}
    for key, value in wanted.items():
        if key == "conditions":
            have = {(c.get("type"), c.get("status"), c.get("reason"))
                    for c in current.get("conditions") or []}
            if have != {(c["type"], c["status"], c["reason"]) for c in value}:
                return True
        elif current.get(key, 0 if isinstance(value, int) else None) != value:
            return True
    return False


def simulated_node(name: str, settings: SimulatorSettings, labels: dict[str, str]) -> JSON:
    capacity = {"cpu": settings.node_cpu, "memory": settings.node_memory,
                "pods": str(settings.node_pods)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {SIMULATED_LABEL: "true",
                                              "kubernetes.io/hostname": name, **labels}},
        "spec": {},
        "status": {
            "capacity": capacity, "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "simulated kubelet is posting ready status"}],
            "nodeInfo": {"kubeletVersion": "v1.20.2-simulated", "architecture": "amd64",
                         "operatingSystem": "linux", "containerRuntimeVersion": "simulated",
                         "kernelVersion": "", "osImage": "simulated", "kubeProxyVersion": "",
                         "machineID": "", "systemUUID": "", "bootID": ""},
        },
    }


@dataclasses.dataclass(frozen=True)
class Seen:
    """A workload's generation as the simulator first saw it."""

    generation: int
    replicas: int
    since: float
    """When this generation (and replica count) was first seen: its ready delay starts."""
    template: str
    """The pod template's digest (:func:`template_digest`)."""
    rolled_at: float
    """When the pod template last changed (-inf: not since the workload appeared)."""


def template_digest(workload: JSON) -> str:
    template = json.dumps((workload.get("spec") or {}).get("template") or {}, sort_keys=True)
    return hashlib.sha256(template.encode()).hexdigest()


class MemberSimulator:
    """Plays the node agents of one member cluster."""

    def __init__(self, client: kube.ObjectClient, settings: SimulatorSettings,
                 node_labels: dict[str, str],
                 clock: Callable[[], float] = time.monotonic,
                 reloader_processes: reloaders.ReloaderProcesses | None = None) -> None:
        self.client = client
        self.clock = clock
        self.settings = settings
        self.node_labels = node_labels
        self.objects: dict[str, dict[tuple[str, str], JSON]] = {}
        self.seen: dict[str, Seen] = {}
        """Per workload uid, what the last generation looked like and when it came."""
        self.last_pass = -math.inf
        """The clock reading of the last status pass: every ready delay that ended by then
        was served by it; later ones are still due (see :meth:`_next_deadline`)."""
        self.dirty = asyncio.Event()
        self.own_writes: dict[tuple[str, str, str], str] = {}
        """(plural, namespace, name) -> the resourceVersion our last status write made: its
        watch event shows what the pass computed, so it needs no pass of its own."""
        self.settled: dict[str, tuple[Any, int, bool]] = {}
        """Per workload uid, the (resourceVersion, ready, rolling) whose status was found
        already right: the same again needs no status computed (most of a pass)."""
        self.reloaders = None if reloader_processes is None else reloaders.ReloaderSync(
            client, reloader_processes, self.dirty.set)
        self.watched: list[tuple[kube.Resource, dict[str, Any]]] = [
            (resource, {}) for resource in (kube.NODES, *WORKLOADS)]
        if self.reloaders is not None:
            self.watched += [(kube.CONFIGMAPS, {}), (reloaders.SECRETS, {}),
                             (reloaders.ENDPOINT_SLICES,
                              {"labelSelector": reloaders.MANAGED_SELECTOR})]

    async def run(self) -> None:
        delay = 0.5
        while True:
            try:
                await self._session()
            except Exception as exc:  # one member's trouble must not stop the others
                cause = _first_cause(exc)
                if isinstance(cause, kube.ClientError):
                    log.warning("%s; retrying in %.1fs", cause, delay)
                else:
                    log.error("%s: unexpected %r; retrying in %.1fs", self.client.name, cause,
                              delay, exc_info=cause)
                await asyncio.sleep(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, 5.0)
            else:
                delay = 0.5

    async def _session(self) -> None:
        await self._ensure_nodes()
        async with asyncio.TaskGroup() as group:
            for resource, params in self.watched:
                group.create_task(self._watch(resource, params),
                                  name=f"watch {resource.plural}")
            group.create_task(self._reconcile_loop(), name="status writer")

    async def _ensure_nodes(self) -> None:
        existing = await self.client.list(kube.NODES, labelSelector=f"{SIMULATED_LABEL}=true")
        if existing.get("items"):
            return
        for index in range(1, self.settings.nodes + 1):
            name = f"{self.client.name}-node-{index}"
            try:
                await self.client.create(kube.NODES,
                                         simulated_node(name, self.settings, self.node_labels))
            except kube.ApiError as exc:
                if exc.status != 409:
                    raise
        log.info("%s: registered %d simulated nodes", self.client.name, self.settings.nodes)

    async def _watch(self, resource: kube.Resource, params: dict[str, Any]) -> None:
        while True:
            listing = await self.client.list(resource, **params)
            self.objects[resource.plural] = {
                (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
                for o in listing.get("items", [])
            }
            self.dirty.set()
            version = listing["metadata"].get("resourceVersion")
            try:
                async for event in self.client.watch(resource, resource_version=version,
                                                     **params):
                    version = self._apply_event(resource, event) or version
            except kube.ApiError as exc:
                if exc.status != 410:
                    raise
            except _Expired:
                pass  # relist

    def _apply_event(self, resource: kube.Resource, event: JSON) -> str | None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Expired()
            raise kube.ApiError(self.client.name, int(obj.get("code", 500)),
                                str(obj.get("reason", "")), str(obj.get("message", "")))
        meta = obj.get("metadata") or {}
        if kind != "BOOKMARK":
            key = (meta.get("namespace", ""), meta.get("name", ""))
            bucket = self.objects.setdefault(resource.plural, {})
            if kind == "DELETED":
                bucket.pop(key, None)
            else:
                bucket[key] = obj
            written = self.own_writes.pop((resource.plural, *key), None)
            if kind != "MODIFIED" or written is None or written != meta.get("resourceVersion"):
                self.dirty.set()
        version = meta.get("resourceVersion")
        return str(version) if version else None

    async def _reconcile_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.dirty.wait(), timeout=self._next_deadline())
            rest = self._pass_floor()
            if rest > 0:  # what comes meanwhile joins this pass
                await asyncio.sleep(rest)
            self.dirty.clear()
            await self._write_statuses()
            if self.reloaders is not None and all(r.plural in self.objects
                                                  for r, _ in self.watched):
                await self.reloaders.reconcile(self.objects)

    def _pass_floor(self) -> float:
        """Seconds until a pass may run: ``pass_interval`` after the last one began."""
        return self.last_pass + self.settings.pass_interval - self.clock()

    def _next_deadline(self) -> float | None:
        # Due is what the last pass could not serve yet, judged by that pass's clock, not
        # by now: a delay that ended while the pass was still writing would otherwise be
        # "past" here and never woken for (a copy left without status until another event).
        now = self.clock()
        pending = [seen.since + self.settings.ready_delay - now
                   for seen in self.seen.values()
                   if seen.since + self.settings.ready_delay > self.last_pass]
        return max(min(pending), 0.01) if pending else None

    async def _write_statuses(self) -> None:
        workloads = [(r, o) for r in WORKLOADS for o in self.objects.get(r.plural, {}).values()
                     if not o["metadata"].get("deletionTimestamp")]
        fitted = pack([o for _, o in workloads], list(self.objects.get("nodes", {}).values()))
        now = self.last_pass = self.clock()
        live = {o["metadata"]["uid"] for _, o in workloads}
        self.seen = {uid: seen for uid, seen in self.seen.items() if uid in live}
        self.settled = {uid: key for uid, key in self.settled.items() if uid in live}
        if len(self.own_writes) > 2 * len(workloads):  # echoes a relist skipped
            names = {(r.plural, o["metadata"].get("namespace", ""), o["metadata"]["name"])
                     for r, o in workloads}
            self.own_writes = {k: v for k, v in self.own_writes.items() if k in names}
        for resource, workload in workloads:
            ready = self._ready_now(workload, fitted.get(workload["metadata"]["uid"], 0), now)
            if not workload.get("status") and self._in_ready_delay(workload, now):
                # A new workload's first status would say "0 ready" and be replaced a second
                # later: it is written once, when its ready delay ends (the loop wakes then).
                # No status reads as not ready all the same, and the members' API servers,
                # which share the machine with everything else, take one write, not two.
                continue
            rolling = self._rolling(workload, now)
            version = workload["metadata"].get("resourceVersion")
            uid = workload["metadata"]["uid"]
            if version is not None and self.settled.get(uid) == (version, ready, rolling):
                continue  # this version already shows what we would write
            wanted = workload_status(resource.kind, workload, ready, rolling)
            if not status_differs(workload.get("status"), wanted):
                if version is not None:
                    self.settled[uid] = (version, ready, rolling)
            else:
                meta = workload["metadata"]
                try:
                    answer = await self.client.patch(resource, meta["name"],
                                                     {"status": wanted},
                                                     namespace=meta.get("namespace"),
                                                     subresource="status")
                    written = (answer.get("metadata") or {}).get("resourceVersion")
                    if written:
                        self.own_writes[(resource.plural, meta.get("namespace", ""),
                                         meta["name"])] = str(written)
                except kube.ApiError as exc:
                    if exc.status != 404:
                        log.warning("%s: status of %s/%s: %s", self.client.name,
                                    meta.get("namespace"), meta["name"], exc)

    def _in_ready_delay(self, workload: JSON, now: float) -> bool:
        seen = self.seen.get(workload["metadata"]["uid"])
        return seen is not None and now < seen.since + self.settings.ready_delay

    def _ready_now(self, workload: JSON, fit: int, now: float) -> int:
        """Replicas ready now: new replicas become ready ``ready_delay`` after they appear."""
        uid = workload["metadata"]["uid"]
        generation = int(workload["metadata"].get("generation", 1))
        replicas = desired_replicas(workload)
        previous_ready = int((workload.get("status") or {}).get("readyReplicas") or 0)
        seen = self.seen.get(uid)
        if seen is None or (seen.generation, seen.replicas) != (generation, replicas):
            # At a new generation: when the pod template itself changed (not only the
            # replica count), a rollout starts now (see :meth:`_rolling`).
            template = template_digest(workload)
            rolled_at = now if seen is not None and seen.template != template else -math.inf
            self.seen[uid] = seen = Seen(generation, replicas, now, template, rolled_at)
        if now >= seen.since + self.settings.ready_delay:
            return fit
        return min(previous_ready, fit, replicas)

    def _rolling(self, workload: JSON, now: float) -> bool:
        """Its pod template changed less than ``ready_delay`` ago: the new replicas are not
        ready, so none counts as updated (what a rollout waits for, as ``kubectl rollout
        status`` does, is then a real wait here too)."""
        seen = self.seen.get(workload["metadata"]["uid"])
        return seen is not None and now < seen.rolled_at + self.settings.ready_delay


def _first_cause(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class _Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): relist."""


@dataclasses.dataclass(frozen=True)
class ReloaderSetup:
    """Where simulated reloaders keep their files, and their certificate files."""

    root: Path
    """``<state-dir>/reloaders``: one directory per cluster, namespace and workload."""
    tls: reloaders.TLSFiles


async def simulate(kubeconfig_path: Path, members: Sequence[tuple[str, dict[str, str]]],
                   settings: SimulatorSettings,
                   reloader_setup: ReloaderSetup | None = None) -> None:
    config = kubeconfig.load(kubeconfig_path)
    clients = [kube.ClusterClient(config.context(name)) for name, _ in members]
    simulators = [
        MemberSimulator(client, settings, labels, reloader_processes=None
                        if reloader_setup is None else reloaders.ReloaderProcesses(
                            reloader_setup.root / client.name, reloader_setup.tls))
        for client, (_, labels) in zip(clients, members, strict=True)]
    task = asyncio.current_task()
    if task is not None:  # SIGTERM (``local down``) unwinds, so the reloaders stop too
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        async with asyncio.TaskGroup() as group:
            for simulator in simulators:
                group.create_task(simulator.run(),
                                  name=f"simulated node agents of {simulator.client.name}")
    except asyncio.CancelledError:
        log.info("simulator stopping")
    finally:
        for simulator in simulators:
            if simulator.reloaders is not None:
                await asyncio.to_thread(simulator.reloaders.close)
        for client in clients:
            await client.close()


def run(kubeconfig_path: Path, members: Sequence[tuple[str, dict[str, str]]],
        settings: SimulatorSettings, reloader_setup: ReloaderSetup | None = None) -> None:
    logging.basicConfig(level=logging.INFO, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log.info("simulating node agents for %s", ", ".join(name for name, _ in members))
    asyncio.run(simulate(kubeconfig_path, members, settings, reloader_setup))
