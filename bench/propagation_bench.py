"""Propagation on the local fleet, measured against the issue's targets in one run.

Scenarios (``--scenarios``, all by default, in this order):

- ``burst``: first a raw baseline, the same copies written straight to the members by
  the bench's own unthrottled client (``--concurrency`` writers per member, no
  client-side rate limit), before any control plane runs, timed until the same member
  watches that time ours have seen the last copy; then ``--templates``
  Deployments created on the hub at once, duplicated (or divided) to ``--members``
  members by ``fedctl run``. Ours is copies/s from the first hub create to the last
  copy seen by the bench's member watches; the ratio ours/raw is the headline. CPU
  seconds by owner (hub, members, simulator, control plane) are printed for both
  windows: where the cost lands. ``--data-plane paused`` stops the fleet's data-plane
  simulator (the members' stand-in for kubelets and controllers: one status write per
  copy, when its ready delay ends) in both windows, to compare the write paths alone;
  readiness is still awaited after it resumes.
- ``paced``: ``--paced-templates`` created at ``--paced-rate``/s (20/s: the Kubernetes
  scalability SLO's churn), open loop (each create at its scheduled time, whatever
  the previous one is doing).
- ``restart``: tops the hub up to ``--restart-templates`` propagated templates, waits
  until they are ready and the control plane is idle, stops it and starts it again;
  reports the hub and member writes the restart made and the time until /readyz
  answers 200 and until the control plane is idle.
- ``wide``: a fresh fleet of ``--wide-members`` members, ``--wide-templates``
  duplicated templates at ``--wide-rate``/s.

Every latency is from the moment a template's POST is sent to the hub to the moment
the last of its copies is seen on the members. Hub writes per template come from the
hub API server's own ``apiserver_request_total`` (verbs POST, PUT, PATCH, APPLY,
DELETE), counted from before the first create until the copies are ready and the
control plane has gone quiet, minus the bench's own creates. The control plane runs at
its default flags (``--control-plane-arg`` adds some, for experiments, and the table
says so). CPU seconds are read from ``/proc/<pid>/stat``.

Targets are printed with PASS/FAIL beside each number; the bench exits 0 whatever
they say (it measures, tests assert). Run: ``.venv/bin/python bench/propagation_bench.py``
(quick: ``--scenarios burst,paced --templates 50 --paced-templates 40``). It starts its
own fleet in ``.fleet-bench`` (or uses ``--state-dir``) and removes what it started.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import functools
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from federation.contexts import client as kube  # noqa: E402
from federation.contexts import kubeconfig  # noqa: E402
from federation.local import fleet as fleet_lib  # noqa: E402
from federation.local import processes  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
import cpu_profile  # noqa: E402

JSON = dict[str, Any]
POLICIES = kube.Resource("policy.federation.io", "v1alpha1", "propagationpolicies",
                         "PropagationPolicy")
MUTATING_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"})
SCENARIOS = ("burst", "paced", "restart", "wide")
UNTHROTTLED = kube.ClientSettings(qps=1e9, burst=10**9, pool_size=64, request_timeout=60.0)
"""The bench's own clients: no client-side limit, so the raw baseline is bounded by the
API servers alone (a limit here would flatter the ratio), and the bench's creates on the
hub are never the bottleneck of the pipeline it measures."""
SIMULATOR = fleet_lib.SimulatorSettings(nodes=3, node_pods=5000, node_cpu="1000",
                                        node_memory="4Ti")
"""Room for every copy the bench writes (the default 3 x 110 pods would leave copies
beyond the 330th unready forever)."""


def log(message: str) -> None:
    print(f"  {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


# -- numbers --------------------------------------------------------------------------


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


@dataclasses.dataclass
class Row:
    scenario: str
    measure: str
    value: str
    target: str = ""
    verdict: str = ""


def judged(scenario: str, measure: str, value: float, fmt: str, target: str,
           ok: Callable[[float], bool]) -> Row:
    if math.isnan(value):
        return Row(scenario, measure, "n/a", target, "FAIL")
    return Row(scenario, measure, format(value, fmt), target, "PASS" if ok(value) else "FAIL")


def info(scenario: str, measure: str, value: float | str, fmt: str = ".2f") -> Row:
    if isinstance(value, str):
        return Row(scenario, measure, value)
    return Row(scenario, measure, "n/a" if math.isnan(value) else format(value, fmt))


def table(rows: Iterable[Row]) -> str:
    lines = ["| scenario | measure | value | target | verdict |", "|---|---|---|---|---|"]
    lines += [f"| {r.scenario} | {r.measure} | {r.value} | {r.target} | {r.verdict} |"
              for r in rows]
    return "\n".join(lines)


# -- API server metrics -----------------------------------------------------------------

LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def mutating_requests(text: str) -> collections.Counter[str]:
    """``apiserver_request_total`` of mutating verbs, by ``VERB resource[/subresource]``."""
    counts: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, _, value = line.rpartition("} ") if "{" in line else \
            line.partition(" ")
        labels = dict(LABEL.findall(labels_text))
        verb = labels.get("verb", "")
        if verb not in MUTATING_VERBS or labels.get("resource") == "endpoints":
            continue  # endpoints: the API server's own reconciler (422 every 10 s, no nodes)
        what = labels.get("resource", "?")
        if labels.get("subresource"):
            what += "/" + labels["subresource"]
        if not labels.get("code", "200").startswith("2"):
            what += f" ({labels['code']})"
        counts[f"{verb} {what}"] += int(float(value))
    return counts


async def api_writes(client: kube.ClusterClient) -> collections.Counter[str]:
    return mutating_requests((await client.request_raw("/metrics")).decode())


def server_traffic(text: str) -> collections.Counter[str]:
    """An API server's own account of what it served, every verb: ``requests VERB
    resource[/subresource]`` (``apiserver_request_total``, all codes; requests for no
    resource, such as the bench's polls of ``/metrics``, left out), ``watch events KIND``
    sent to watchers (``apiserver_watch_events_total``) and ``watch bytes KIND`` (the
    sum of ``apiserver_watch_events_sizes``): what a template costs the server beyond
    its writes."""
    counts: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        name = line.split("{", 1)[0]
        if name not in ("apiserver_request_total", "apiserver_watch_events_total",
                        "apiserver_watch_events_sizes_sum"):
            continue
        labels_text, _, value = line.rpartition("} ") if "{" in line else \
            line.partition(" ")
        labels = dict(LABEL.findall(labels_text))
        if name == "apiserver_request_total":
            if not labels.get("resource") or labels["resource"] == "endpoints":
                continue
            what = labels["resource"] + ("/" + labels["subresource"]
                                         if labels.get("subresource") else "")
            key = f"requests {labels.get('verb', '?')} {what}"
        else:
            kind = labels.get("resource") or labels.get("kind") or "?"
            key = f"watch {'events' if name.endswith('total') else 'bytes'} {kind}"
        counts[key] += int(float(value))
    return counts


def traffic_per_template(hub: collections.Counter[str], members: collections.Counter[str],
                         templates: int) -> list[tuple[str, str]]:
    """Rows: requests (every verb), watch events and watch KB per template, hub / members."""
    def total(counts: collections.Counter[str], prefix: str, scale: float = 1.0) -> float:
        return sum(v for k, v in counts.items() if k.startswith(prefix)) / scale / templates

    return [(f"API server {what} per template: hub / members",
             f"{total(hub, prefix, scale):.2f} / {total(members, prefix, scale):.2f}")
            for what, prefix, scale in (("requests (all verbs)", "requests ", 1.0),
                                        ("watch events sent", "watch events ", 1.0),
                                        ("watch KB sent", "watch bytes ", 1024.0))]


def delta(after: collections.Counter[str], before: collections.Counter[str]
          ) -> collections.Counter[str]:
    return collections.Counter({k: after[k] - before[k] for k in after
                                if after[k] - before[k] > 0})


def heartbeats(counts: collections.Counter[str]) -> int:
    """Writes of MemberCluster status: the health controller's, per member, not per template."""
    return sum(n for what, n in counts.items() if what.split(" ")[1].startswith("memberclusters"))


def breakdown(counts: collections.Counter[str], top: int = 8) -> str:
    return ", ".join(f"{what} {n}" for what, n in counts.most_common(top)) or "none"


def plane_counts(text: str) -> collections.Counter[str]:
    """The control plane's own counters a template's path moves, from its ``/metrics``:
    reconciles per controller and result, API requests by cluster kind (hub or member) and
    verb, watch events by cluster kind and resource."""
    counts: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name not in PLANE_COUNTERS:
            continue
        labels_text, _, value = line.rpartition("} ") if "{" in line else \
            line.partition(" ")
        labels = dict(LABEL.findall(labels_text))
        where = "hub" if labels.get("cluster") == "hub" else "member"
        if name == "federation_reconcile_total":
            key = f"reconciles {labels.get('controller')} {labels.get('result')}"
        elif name == "federation_propagation_unchanged_total":
            key = "propagation fast path"
        elif name == "federation_gc_cpu_seconds_total":
            counts["collector CPU us"] += int(float(value) * 1e6)
            continue
        elif name == "federation_client_request_duration_seconds_count":
            key = f"requests {where} {labels.get('verb')}"
        else:
            key = f"watch events {where} {labels.get('resource')}"
        counts[key] += int(float(value))
    return counts


PLANE_COUNTERS = ("federation_reconcile_total", "federation_propagation_unchanged_total",
                  "federation_gc_cpu_seconds_total",
                  "federation_client_request_duration_seconds_count",
                  "federation_watch_events_total", "federation_watch_events")


def counts_per_template(counts: collections.Counter[str], templates: int
                        ) -> list[tuple[str, float]]:
    """Per template: propagation's reconciles, API requests and watch events (hub, members)."""
    totals: collections.Counter[str] = collections.Counter()
    for key, value in counts.items():
        if key.startswith("reconciles propagation "):
            totals["propagation reconciles"] += value
        elif key == "propagation fast path":
            totals["propagation reconciles on the fast path"] += value
        elif key.startswith("requests "):
            totals["API requests (" + key.split()[1] + ")"] += value
        elif key.startswith("watch events "):
            totals["watch events (" + key.split()[2] + ")"] += value
        elif key == "collector CPU us":
            totals["garbage collector CPU (us)"] += value
    return [(key, value / templates) for key, value in sorted(totals.items())]


# -- the control plane -----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_by_owner(fleet: fleet_lib.Fleet, plane: int | None) -> dict[str, float]:
    """CPU seconds so far of the hub (its API server and etcd), the members (all of theirs
    summed), the simulator and the control plane: where a scenario's cost lands."""
    found: dict[str, float] = {}
    for owner, pids in fleet.process_ids().items():
        group = owner if owner in ("hub", "simulator") else "members"
        found[group] = found.get(group, 0.0) + sum(cpu_seconds(pid) for pid in pids)
    found["control plane"] = cpu_seconds(plane)
    return found


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU of one process (not its children), from /proc/<pid>/stat."""
    if pid is None:
        return math.nan
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return math.nan
    fields = raw[raw.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ControlPlane:
    """`fedctl install` as admin, then `python -m federation run` with the control plane's
    own kubeconfig, at its default flags plus ``extra``; tracked by the fleet's pid file,
    so `fedctl local down` stops it too."""

    def __init__(self, fleet: fleet_lib.Fleet, extra: Sequence[str],
                 profile: str | None = None, pid_file: Path | None = None,
                 log_file: Path | None = None) -> None:
        self.fleet = fleet
        self.extra = list(extra)
        self.profile = profile
        self.pid_file = pid_file or fleet.control_plane_pid_file
        """Another pid and log file than the fleet's run one more replica (bench/scale_bench.py)."""
        self.log_file = log_file or fleet.control_plane_log_file
        self.starts = 0
        self.metrics_port = self.health_port = 0
        self.session: aiohttp.ClientSession | None = None

    @property
    def pid(self) -> int | None:
        return processes.owned_pid(self.pid_file)

    def install(self) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "federation", "install", "--kubeconfig",
             str(self.fleet.kubeconfig), "--hub-context", "hub", "--clusters",
             str(self.fleet.clusters_file)], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"fedctl install failed: {done.stderr.strip()}")

    def start(self) -> float:
        """Spawn `fedctl run`; the monotonic time it was spawned."""
        if self.pid is not None:
            raise RuntimeError(f"a control plane already runs ({self.pid_file})")
        self.metrics_port, self.health_port = free_port(), free_port()
        identity = self.fleet.ensure_control_plane_identity()
        self.starts += 1
        launcher = ["-m", "federation"] if self.profile is None else [
            str(ROOT / "bench" / "cpu_profile.py"), f"{self.profile}.{self.starts}"]
        argv = [sys.executable, *launcher, "run", "--kubeconfig", str(identity),
                "--hub-context", "hub",
                "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
                "--health-probe-bind-address", f"127.0.0.1:{self.health_port}", *self.extra]
        started = time.monotonic()
        processes.spawn(argv, self.pid_file, self.log_file,
                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
        return started

    def stop(self) -> None:
        processes.terminate(self.pid_file, timeout=30)

    async def profile_window(self, what: str) -> str | None:
        """With ``--profile-cpu``: ``start`` drops what the profiler counted so far;
        ``dump`` writes what it counted since, and returns that file (None on failure)."""
        pid = self.pid
        if self.profile is None or pid is None:
            return None
        if what == "start":
            os.kill(pid, signal.SIGUSR1)
            return None
        out = Path(f"{self.profile}.{self.starts}.window")
        written = _size(out, remove=True)
        os.kill(pid, signal.SIGUSR2)
        for _ in range(100):  # a large profile takes a moment to write
            await asyncio.sleep(0.1)
            size = _size(out)
            if size and size == written:  # no longer growing
                return str(out)
            written = size
        return None

    async def _get(self, port: int, path: str) -> tuple[int, str]:
        if self.session is None:
            self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        try:
            async with self.session.get(f"http://127.0.0.1:{port}{path}") as response:
                return response.status, await response.text()
        except (aiohttp.ClientError, TimeoutError, OSError):
            return 0, ""

    async def ready(self) -> bool:
        return (await self._get(self.health_port, "/readyz"))[0] == 200

    async def wait_ready(self, timeout: float = 120) -> float:
        """Monotonic time /readyz first answered 200."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pid is None:
                raise RuntimeError(f"fedctl run exited; see {self.log_file}")
            if await self.ready():
                return time.monotonic()
            await asyncio.sleep(0.1)
        raise TimeoutError(f"fedctl run not ready within {timeout:.0f} s")

    def background_writes(self, hub: collections.Counter[str]) -> int:
        """Hub writes :meth:`settle` does not count as activity: MemberCluster heartbeats."""
        return heartbeats(hub)

    async def queue_state(self) -> tuple[float, float] | None:
        """(keys queued or being processed, keys ever added), summed over controllers;
        None when the metrics do not say (the bench then relies on quiet API servers)."""
        status, text = await self._get(self.metrics_port, QUEUE_METRICS_PATH)
        if status != 200:
            return None
        busy = adds = 0.0
        found = False
        for line in text.splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in ("federation_workqueue_depth", "federation_workqueue_processing"):
                busy += float(line.rsplit(" ", 1)[1])
                found = True
            elif name in ("federation_workqueue_adds", "federation_workqueue_adds_total"):
                adds += float(line.rsplit(" ", 1)[1])
        return (busy, adds) if found else None

    async def counts(self) -> collections.Counter[str]:
        """:func:`plane_counts` now (empty when the metrics do not answer)."""
        status, text = await self._get(self.metrics_port, "/metrics")
        return plane_counts(text) if status == 200 else collections.Counter()

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


PROFILE_STAGES = (
    "runtime/controller.py", "reconciler.py:", "(_record)", "kit/chain.py",
    "kit/plan.py", "kit/executor.py", "contexts/client.py:737(request)",
    "contexts/cache.py:259(run)",
    "(_apply)", "(_emit)", "json/decoder.py", "json/encoder.py", "copy.py", "logging",
    "runtime/metrics.py",
)
"""Labels (substrings of :func:`cpu_profile.where`) whose CPU with callees the profile
summary shows: the stages of a template's path, and the usual suspects."""


def _size(path: Path, remove: bool = False) -> int:
    """The size of ``path`` (0 when absent), after removing it when ``remove``."""
    if remove:
        path.unlink(missing_ok=True)
    return path.stat().st_size if path.exists() else 0


QUEUE_METRICS_PATH = "/metrics?" + "&".join(
    f"name[]={name}" for name in ("federation_workqueue_depth", "federation_workqueue_processing",
                                  "federation_workqueue_adds_total"))
"""Only the series :meth:`ControlPlane.queue_state` reads: the bench polls while it measures,
and rendering every histogram each time was about a tenth of the control plane's CPU."""


# -- the fleet's clients ----------------------------------------------------------------


class Clients:
    """Admin clients to the hub and every member, unthrottled."""

    def __init__(self, fleet: fleet_lib.Fleet) -> None:
        config = kubeconfig.load(fleet.kubeconfig)
        self.members = [c.name for c in fleet.load().members]
        self.hub = kube.ClusterClient(config.context("hub"), UNTHROTTLED)
        self.member = {name: kube.ClusterClient(config.context(name), UNTHROTTLED)
                       for name in self.members}
        self.own_hub_writes = 0
        """Mutating requests the bench itself sent to the hub (subtracted from the counts)."""

    async def hub_create(self, resource: kube.Resource, body: JSON) -> None:
        self.own_hub_writes += 1
        try:
            await self.hub.create(resource, body)
        except kube.ApiError as exc:
            if exc.status != 409:
                raise

    async def traffic(self) -> tuple[collections.Counter[str], collections.Counter[str]]:
        """:func:`server_traffic` so far: the hub's, and all members' together."""
        async def of(client: kube.ClusterClient) -> collections.Counter[str]:
            return server_traffic((await client.request_raw("/metrics")).decode())

        hub = await of(self.hub)
        members: collections.Counter[str] = collections.Counter()
        for counts in await asyncio.gather(*(of(c) for c in self.member.values())):
            members.update(counts)
        return hub, members

    async def writes(self) -> tuple[collections.Counter[str], collections.Counter[str]]:
        """Mutating requests so far: the hub's, and all members' together."""
        hub = await api_writes(self.hub)
        members: collections.Counter[str] = collections.Counter()
        for counts in await asyncio.gather(*(api_writes(c) for c in self.member.values())):
            members.update(counts)
        return hub, members

    async def close(self) -> None:
        for client in (self.hub, *self.member.values()):
            await client.close()


def deployment(name: str, namespace: str, replicas: int = 1) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "img:1"}]}}}}


def policy(namespace: str, members: Sequence[str], divided: bool) -> JSON:
    """All Deployments of ``namespace`` to exactly ``members`` (named, so a fleet that grows
    later does not propagate old templates to new members)."""
    placement: JSON = {"clusterAffinity": {"clusterNames": list(members)}}
    if divided:
        placement["replicaScheduling"] = {
            "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
            "weightPreference": {"staticWeightList": [
                {"targetCluster": {"clusterNames": [m]}, "weight": 1} for m in members]}}
    else:
        placement["replicaScheduling"] = {"replicaSchedulingType": "Duplicated"}
    return {"apiVersion": POLICIES.api_version, "kind": POLICIES.kind,
            "metadata": {"name": "bench", "namespace": namespace},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                     "placement": placement}}


async def bounded(calls: Iterable[Callable[[], Awaitable[Any]]], limit: int) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[Any]]) -> None:
        async with gate:
            await call()

    await asyncio.gather(*(one(c) for c in calls))


async def ensure_namespace(client: kube.ClusterClient, name: str) -> None:
    try:
        await client.create(kube.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": name}})
    except kube.ApiError as exc:
        if exc.status != 409:
            raise


# -- watching copies --------------------------------------------------------------------


def copy_ready(obj: JSON) -> bool:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    want = spec.get("replicas", 1)
    return (int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 1)
            and int(status.get("readyReplicas") or 0) >= int(want))


class CopyWatch:
    """When each template's copy first appears, and first reports ready, on each member."""

    def __init__(self, clients: Clients, namespace: str, members: Sequence[str]) -> None:
        self.clients = clients
        self.namespace = namespace
        self.members = list(members)
        self.seen: dict[str, dict[str, float]] = {m: {} for m in members}
        self.ready: dict[str, dict[str, float]] = {m: {} for m in members}
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        for member in self.members:
            client = self.clients.member[member]
            listing = await client.list(kube.DEPLOYMENTS, self.namespace)
            now = time.monotonic()
            for obj in listing.get("items", []):
                self._record(member, obj, now)
            version = str(listing["metadata"].get("resourceVersion") or "")
            self.tasks.append(asyncio.create_task(self._watch(member, version)))

    def _record(self, member: str, obj: JSON, now: float) -> None:
        name = obj["metadata"]["name"]
        self.seen[member].setdefault(name, now)
        if copy_ready(obj):
            self.ready[member].setdefault(name, now)

    async def _watch(self, member: str, version: str) -> None:
        client = self.clients.member[member]
        while True:
            try:
                async for event in client.watch(kube.DEPLOYMENTS, namespace=self.namespace,
                                                resource_version=version):
                    obj = event.get("object") or {}
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._record(member, obj, time.monotonic())
            except kube.ClientError as exc:
                log(f"watch of {member} restarts: {exc}")
                await asyncio.sleep(0.5)
                listing = await client.list(kube.DEPLOYMENTS, self.namespace)
                now = time.monotonic()
                for obj in listing.get("items", []):
                    self._record(member, obj, now)
                version = str(listing["metadata"].get("resourceVersion") or "")

    def stop(self) -> None:
        for task in self.tasks:
            task.cancel()

    def missing(self, names: Iterable[str], where: dict[str, dict[str, float]]) -> int:
        return sum(1 for name in names for member in self.members
                   if name not in where[member])

    async def wait(self, names: Sequence[str], ready: bool, deadline: float) -> bool:
        where = self.ready if ready else self.seen
        while self.missing(names, where):
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    def all_present(self, name: str) -> float | None:
        times = [self.seen[m].get(name) for m in self.members]
        return None if None in times else max(t for t in times if t is not None)


# -- one measured run of creates ----------------------------------------------------------


@dataclasses.dataclass
class Run:
    latencies: list[float]
    copies_per_second: float
    hub_writes: collections.Counter[str]
    member_writes: collections.Counter[str]
    own_writes: int
    cpu: float
    creates_done: float
    """Seconds from the first hub create sent until the hub had answered the last one."""
    window_cpu: dict[str, float]
    """CPU seconds by owner (:func:`cpu_by_owner`) from the first create to the last copy."""
    window_writes: tuple[int, int]
    """Mutating requests from the first create to the last copy: the hub's (ours, without
    heartbeats), the members' (ours and the data plane's status writes)."""
    complete: bool
    templates: int
    members: int
    elapsed: float
    rest: float = math.nan
    """Cores the control plane used just before, idle (:meth:`Bench.plane_at_rest`)."""
    cpu_window: float = math.nan
    """Seconds over which ``cpu`` was counted."""
    profile: str | None = None
    """With ``--profile-cpu``: the control plane's CPU profile of the same window as
    ``cpu`` (first create to quiet)."""
    counts: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    """The control plane's own counters (:func:`plane_counts`) over the same window."""
    traffic: tuple[collections.Counter[str], collections.Counter[str]] = (
        collections.Counter(), collections.Counter())
    """What the hub's and the members' API servers served (:func:`server_traffic`) from
    before the first create until quiet (the bench's own watches and creates included)."""
    total_cpu: dict[str, float] = dataclasses.field(default_factory=dict)
    """The same from the first create to quiet: the whole burst's cost, whatever its pace
    (a slower burst puts more of its status rounds before the last copy)."""

    @property
    def hub_writes_per_template(self) -> float:
        """Beyond the bench's own creates, and without MemberCluster heartbeats (per member,
        not per template: 20 members write several a second whatever the templates do)."""
        return (sum(self.hub_writes.values()) - heartbeats(self.hub_writes)
                - self.own_writes) / self.templates


class Bench:
    TEMPLATE_NAMESPACES = "bench-t-"
    """The prefix of the namespaces whose templates :meth:`propagated_templates` counts."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rows: list[Row] = []
        self.fleet = fleet_lib.Fleet(Path(args.state_dir), Path(args.kubeconfig))
        self.owned_fleet = False
        self.plane = ControlPlane(self.fleet, args.control_plane_arg, args.profile_cpu)
        self.clients: Clients | None = None
        self.namespaces = 0
        self.at_rest: dict[int, float] = {}
        self.profiles: list[tuple[str, str]] = []
        """(scenario, tables) of each profiled window (``--profile-cpu``)."""
        """Cores the members' API servers and etcds use idle, by fleet size."""

    # -- fleet and control plane ----------------------------------------------------

    async def fleet_up(self, members: int, fresh: bool) -> Clients:
        """The fleet with ``members`` members; ``fresh`` starts over when the bench owns it."""
        if self.clients is not None:
            await self.clients.close()
            self.clients = None
        if fresh and self.owned_fleet:
            await asyncio.to_thread(self.fleet.down)
        if not self.fleet.exists():
            self.owned_fleet = True
        log(f"fleet: hub + {members} members in {self.fleet.state_dir}")
        grown = self.fleet.exists() and len(self.fleet.load().members) < members
        try:
            await asyncio.to_thread(self.fleet.up, members, simulator=SIMULATOR, progress=log)
        except fleet_lib.FleetError as exc:  # 21 API servers starting on 2 cores can take long
            log(f"{exc}; waiting once more")
            await asyncio.to_thread(self.fleet.up, members, simulator=SIMULATOR, progress=log)
        if grown:  # the simulator plays the members it was started with: restart it
            self.fleet.stop_simulator()
            self.fleet.start_simulator(log)
        self.clients = Clients(self.fleet)
        self.at_rest[members] = await self.members_at_rest()
        log(f"fleet at rest: its {members} members' API servers and etcds use "
            f"{self.at_rest[members]:.2f} cores doing nothing")
        return self.clients

    async def members_at_rest(self, window: float = 5.0, limit: float = 150.0) -> float:
        """Wait until the members' CPU use has stopped falling (API servers spend their
        first minute bootstrapping, which no scenario should be charged for), and return
        it: the cores an idle fleet of this size takes from everything else."""
        deadline = time.monotonic() + limit
        previous = math.inf
        while True:
            before = cpu_by_owner(self.fleet, None).get("members", 0.0)
            await asyncio.sleep(window)
            rate = (cpu_by_owner(self.fleet, None).get("members", 0.0) - before) / window
            if rate >= previous * 0.85 or time.monotonic() > deadline:
                return rate
            previous = rate

    async def plane_at_rest(self, window: float = 5.0) -> float:
        """Cores the control plane uses with nothing to do (probes, heartbeats, capacity
        summaries, its own timers) over ``window`` seconds, nobody polling it: what any
        window of a scenario costs it whatever the templates do."""
        before = cpu_seconds(self.plane.pid)
        await asyncio.sleep(window)
        return (cpu_seconds(self.plane.pid) - before) / window

    async def start_plane(self) -> None:
        await asyncio.to_thread(self.plane.install)
        self.plane.start()
        await self.plane.wait_ready()
        await self.settle(timeout=120)
        log(f"control plane ready: fedctl run {' '.join(self.args.control_plane_arg)}"
            f"{'' if self.args.control_plane_arg else '(default flags)'}")

    async def settle(self, timeout: float = 120.0) -> float:
        """Wait until the control plane is idle: its queues empty, no key added and no
        write on any API server for ``--quiet`` seconds. The monotonic time the quiet
        window began (the moment it went idle), or NaN on timeout."""
        assert self.clients is not None
        deadline = time.monotonic() + timeout
        window_start, last = time.monotonic(), None
        while time.monotonic() < deadline:
            queue = await self.queue_state()
            hub, members = await self.clients.writes()
            state = (sum(hub.values()) - self.background_writes(hub), sum(members.values()),
                     queue[1] if queue else 0.0)
            busy = queue is not None and queue[0] > 0
            now = time.monotonic()
            if busy or state != last:
                window_start, last = now, state
            elif now - window_start >= self.args.quiet:
                return window_start
            await asyncio.sleep(0.25)
        return math.nan

    def background_writes(self, hub: collections.Counter[str]) -> int:
        """Hub writes :meth:`settle` does not count as activity: MemberCluster heartbeats."""
        return heartbeats(hub)

    async def queue_state(self) -> tuple[float, float] | None:
        """The control plane's (keys busy, keys ever added) that :meth:`settle` watches."""
        return await self.plane.queue_state()

    def namespace(self, scenario: str) -> str:
        self.namespaces += 1
        return f"bench-{scenario}-{os.getpid()}-{self.namespaces}"

    # -- measured creates -------------------------------------------------------------

    @contextlib.contextmanager
    def data_plane_paused(self, paused: bool) -> Iterator[None]:
        """The simulator (the members' stand-in for kubelets and controllers) stopped with
        SIGSTOP for the block, when ``paused``; its watches catch up when it resumes."""
        if not paused:
            yield
            return
        processes.send(self.fleet.simulator_pid_file, signal.SIGSTOP)
        try:
            yield
        finally:
            processes.send(self.fleet.simulator_pid_file, signal.SIGCONT)

    async def create_templates(self, count: int, interval: float | None,
                               members: Sequence[str], pause_data_plane: bool = False) -> Run:
        """``count`` templates in a new namespace: at once (``--concurrency`` in flight)
        or one every ``interval`` s; measured until every copy is ready and all is quiet."""
        clients = self.clients
        assert clients is not None
        namespace = self.namespace("t")
        replicas = len(members) if self.args.placement == "divided" else 1
        await clients.hub_create(kube.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": namespace}})
        await clients.hub_create(POLICIES, policy(namespace, members,
                                                  self.args.placement == "divided"))
        watch = CopyWatch(clients, namespace, members)
        await watch.start()
        await asyncio.sleep(1)  # the policy reaches the control plane's cache first
        own_before = clients.own_hub_writes
        hub_before, members_before = await clients.writes()
        traffic_before = await clients.traffic()
        rest = await self.plane_at_rest()
        counts_before = await self.plane.counts()  # read outside the CPU window
        cpu_before, cpu_from = cpu_seconds(self.plane.pid), time.monotonic()
        await self.plane.profile_window("start")
        owners_before = cpu_by_owner(self.fleet, self.plane.pid)
        names = [f"d{i}" for i in range(count)]
        created: dict[str, float] = {}
        accepted: dict[str, float] = {}

        async def create(name: str) -> None:
            created[name] = time.monotonic()
            await clients.hub_create(kube.DEPLOYMENTS, deployment(name, namespace, replicas))
            accepted[name] = time.monotonic()

        await self.window_opened("ours")
        started = time.monotonic()
        with self.data_plane_paused(pause_data_plane):
            if interval is None:
                await bounded([functools.partial(create, n) for n in names],
                              self.args.concurrency)
            else:
                tasks = []
                for index, name in enumerate(names):
                    await asyncio.sleep(max(0.0, started + index * interval - time.monotonic()))
                    tasks.append(asyncio.create_task(create(name)))
                await asyncio.gather(*tasks)
            deadline = started + self.args.timeout
            present = await watch.wait(names, ready=False, deadline=deadline)
            owners = cpu_by_owner(self.fleet, self.plane.pid)
            await self.window_closed("ours")
        window_cpu = {k: v - owners_before.get(k, 0.0) for k, v in owners.items()}
        hub_present, members_present = await clients.writes()
        window_writes = (sum(delta(hub_present, hub_before).values())
                         - heartbeats(delta(hub_present, hub_before))
                         - (clients.own_hub_writes - own_before),
                         sum(delta(members_present, members_before).values()))
        ready = present and await watch.wait(names, ready=True, deadline=deadline)
        if not ready:
            log(f"not complete within {self.args.timeout:.0f} s: "
                f"{watch.missing(names, watch.seen)} copies missing, "
                f"{watch.missing(names, watch.ready)} not ready")
        quiet = await self.settle()
        total_cpu = {k: v - owners_before.get(k, 0.0)
                     for k, v in cpu_by_owner(self.fleet, self.plane.pid).items()}
        hub_after, members_after = await clients.writes()
        traffic_after = await clients.traffic()
        cpu, cpu_window = cpu_seconds(self.plane.pid) - cpu_before, time.monotonic() - cpu_from
        profile = await self.plane.profile_window("dump")
        counts = delta(await self.plane.counts(), counts_before)
        watch.stop()
        done = {n: t for n in names if (t := watch.all_present(n)) is not None}
        latencies = [done[n] - created[n] for n in names if n in done]
        last = max(done.values(), default=math.nan)
        copies = len(done) * len(members)
        rate = copies / (last - started) if done else math.nan
        if math.isnan(quiet):
            log("the control plane did not go quiet within 120 s")
        return Run(latencies=latencies, copies_per_second=rate,
                   hub_writes=delta(hub_after, hub_before),
                   member_writes=delta(members_after, members_before),
                   own_writes=clients.own_hub_writes - own_before, cpu=cpu,
                   window_cpu=window_cpu, total_cpu=total_cpu,
                   window_writes=window_writes, complete=ready,
                   templates=count, members=len(members),
                   elapsed=(last - started) if done else math.nan,
                   creates_done=max(accepted.values(), default=math.nan) - started,
                   profile=profile, rest=rest, cpu_window=cpu_window, counts=counts,
                   traffic=(delta(traffic_after[0], traffic_before[0]),
                            delta(traffic_after[1], traffic_before[1])))

    def report(self, scenario: str, run: Run, p99_target: float | None) -> None:
        note = "" if run.complete else " (incomplete: timed out)"
        p50, p99 = percentile(run.latencies, 0.5), percentile(run.latencies, 0.99)
        self.rows.append(info(scenario, "templates x members",
                              f"{run.templates} x {run.members}{note}"))
        if p99_target is None:
            self.rows.append(info(scenario, "p50 / p99 create -> all copies (s)",
                                  f"{p50:.2f} / {p99:.2f}"))
        else:
            row = judged(scenario, "p99 create -> all copies (s)", p99, ".2f",
                         f"<= {p99_target:g}", lambda v: v <= p99_target and run.complete)
            self.rows.append(info(scenario, "p50 create -> all copies (s)", p50))
            self.rows.append(row)
        self.rows.append(judged(scenario, "hub writes per template", run.hub_writes_per_template,
                                ".2f", "<= 3", lambda v: v <= 3))
        self.rows.append(info(scenario, "control plane CPU (s)", run.cpu, ".1f"))
        per_template = 1000 * run.cpu / run.templates
        measure = "control plane CPU per template (ms, first create -> quiet)"
        if run.profile is not None or self.args.profile_cpu:
            self.rows.append(info(scenario, measure + ", under cProfile", per_template, ".2f"))
        elif scenario == "burst":
            self.rows.append(judged(scenario, measure, per_template, ".2f", "<= 5",
                                    lambda v: v <= 5))
        else:
            self.rows.append(info(scenario, measure, per_template, ".2f"))
        self.rows.append(info(scenario, "control plane at rest before the run (cores)",
                              run.rest, ".3f"))
        self.rows.append(info(
            scenario, "control plane CPU per template net of its rest (ms; window s)",
            f"{1000 * (run.cpu - run.rest * run.cpu_window) / run.templates:.2f}; "
            f"{run.cpu_window:.1f}"))
        window = run.window_cpu.get("control plane", math.nan)
        self.rows.append(info(scenario, "control plane CPU per template until all copies (ms)",
                              1000 * window / run.templates, ".2f"))
        for measure, value in counts_per_template(run.counts, run.templates):
            self.rows.append(info(scenario, f"{measure} per template", value, ".2f"))
        if run.counts:
            log(f"{scenario}: control plane counts {breakdown(run.counts, top=30)}")
        for measure, shown in traffic_per_template(*run.traffic, run.templates):
            self.rows.append(info(scenario, measure, shown))
        for where, counts in zip(("hub", "members"), run.traffic, strict=True):
            log(f"{scenario}: {where} API server served, per template: " + ", ".join(
                f"{what} {n / run.templates:.2f}" for what, n in counts.most_common(40)))
        if run.profile is not None:
            self.profiles.append((scenario, cpu_profile.summary(
                run.profile, run.templates, names=PROFILE_STAGES)))
        self.rows.append(info(scenario, "the bench's hub creates / all copies done after (s)",
                              f"{run.creates_done:.2f} / {run.elapsed:.2f}"))
        if run.members in self.at_rest:
            self.rows.append(info(scenario, "members at rest before the run (cores of 2)",
                                  self.at_rest[run.members], ".2f"))
        self.rows.append(info(scenario, "writes until all copies: hub (ours) / members",
                              "{} / {}".format(*run.window_writes)))
        self.rows.append(info(scenario, "CPU s until all copies: " + ", ".join(
            run.window_cpu), " / ".join(f"{v:.1f}" for v in run.window_cpu.values())))
        self.rows.append(info(scenario, "CPU ms per template, first create -> quiet: " + ", ".join(
            run.total_cpu), " / ".join(f"{1000 * v / run.templates:.1f}"
                                       for v in run.total_cpu.values())))
        log(f"{scenario}: hub writes {breakdown(run.hub_writes)} (the bench's own: "
            f"{run.own_writes}); member writes {breakdown(run.member_writes)}")

    async def window_opened(self, label: str) -> None:
        """A window's copies are about to be written (``raw``: by the bench, ``ours``: through
        the control plane); bench/member_profile.py profiles a member from here."""

    async def window_closed(self, label: str) -> None:
        """The window's last copy has been seen (its CPU read); nothing is written until this
        returns."""

    # -- scenarios --------------------------------------------------------------------

    async def raw_rate(self, count: int) -> tuple[float, dict[str, float]]:
        """Member writes/s of the same copies written straight to the members, and the CPU
        seconds by owner (:func:`cpu_by_owner`) while they were written."""
        clients = self.clients
        assert clients is not None
        namespace = self.namespace("raw")
        for member in clients.members:
            await ensure_namespace(clients.member[member], namespace)

        def writer(member: str, name: str) -> Callable[[], Awaitable[Any]]:
            return lambda: clients.member[member].create(kube.DEPLOYMENTS,
                                                         deployment(name, namespace))

        names = [f"d{i}" for i in range(count)]
        per_member = [[writer(m, name) for name in names] for m in clients.members]
        # Seen by the same watch as ours: both windows end when the last copy is observed
        # (and both pay the members' cost of telling the watch), not when a write answers.
        watch = CopyWatch(clients, namespace, clients.members)
        await watch.start()
        owners_before = cpu_by_owner(self.fleet, None)
        with self.data_plane_paused(self.args.data_plane == "paused"):
            await self.window_opened("raw")
            started = time.monotonic()
            await asyncio.gather(*(bounded(calls, self.args.concurrency)
                                   for calls in per_member))
            await watch.wait(names, ready=False, deadline=started + self.args.timeout)
            owners = cpu_by_owner(self.fleet, None)
            await self.window_closed("raw")
        watch.stop()
        elapsed = max(t for n in names if (t := watch.all_present(n)) is not None) - started
        cpu = {k: v - owners_before.get(k, 0.0) for k, v in owners.items()
               if k != "control plane"}
        # The simulator would keep packing these copies: remove them (no namespace
        # controller runs on the members, so deleting the namespace would not).
        for member in clients.members:
            await clients.member[member].request("DELETE", kube.DEPLOYMENTS.path(namespace))
        return count * len(clients.members) / elapsed, cpu

    async def burst(self) -> None:
        clients = await self.fleet_up(self.args.members, fresh=False)
        members = clients.members[: self.args.members]
        count = self.args.templates
        if self.plane.pid is not None:
            self.plane.stop()  # the baseline runs with no control plane, as before
        log(f"raw: {count} Deployments x {len(members)} members straight to the members "
            f"({self.args.concurrency} writers per member, no client-side limit)")
        samples = []
        for _ in range(self.args.raw_runs):
            samples.append(await self.raw_rate(count))
            await self.members_at_rest()  # the data plane's work on those copies is done
        raw, raw_cpu = sorted(samples, key=lambda sample: sample[0])[len(samples) // 2]
        await self.start_plane()
        log(f"burst: {count} templates on the hub at once")
        run = await self.create_templates(count, None, members,
                                          pause_data_plane=self.args.data_plane == "paused")
        ratio = run.copies_per_second / raw
        self.rows.append(info("burst", f"raw member writes/s (median of {len(samples)})", raw,
                              ".0f"))
        if len(samples) > 1:
            self.rows.append(info("burst", "raw runs (writes/s)",
                                  " / ".join(f"{rate:.0f}" for rate, _ in samples)))
        self.rows.append(info("burst", "raw: CPU s while writing: " + ", ".join(raw_cpu),
                              " / ".join(f"{v:.1f}" for v in raw_cpu.values())))
        self.rows.append(info("burst", "ours: copies/s (create -> all copies present)",
                              run.copies_per_second, ".0f"))
        self.rows.append(judged("burst", "ratio ours/raw", ratio, ".2f", ">= 0.4",
                                lambda v: v >= 0.4 and run.complete))
        self.report("burst", run, None)

    async def ensure_plane(self, members: int, fresh: bool = False) -> list[str]:
        clients = self.clients
        if clients is None or fresh or len(clients.members) < members:
            clients = await self.fleet_up(members, fresh)
        if self.plane.pid is None:
            await self.start_plane()
        return clients.members[:members]

    async def paced(self) -> None:
        members = await self.ensure_plane(self.args.members)
        rate = self.args.paced_rate
        log(f"paced: {self.args.paced_templates} templates at {rate:g}/s")
        run = await self.create_templates(self.args.paced_templates, 1 / rate, members)
        self.report("paced", run, 1.0)

    async def wide(self) -> None:
        if self.plane.pid is not None:
            self.plane.stop()
        members = await self.ensure_plane(self.args.wide_members, fresh=True)
        rate = self.args.wide_rate
        log(f"wide: {self.args.wide_templates} templates at {rate:g}/s to {len(members)} members")
        run = await self.create_templates(self.args.wide_templates, 1 / rate, members)
        self.report("wide", run, 2.0)

    async def restart(self) -> None:
        members = await self.ensure_plane(self.args.members)
        clients = self.clients
        assert clients is not None
        have = await self.propagated_templates()
        missing = max(0, self.args.restart_templates - have)
        if missing:
            log(f"restart: {have} templates propagated; creating {missing} more")
            run = await self.create_templates(missing, None, members)
            if not run.complete:
                self.rows.append(Row("restart", "setup", "templates did not all propagate",
                                     "", "FAIL"))
                return
        total = await self.propagated_templates()
        await self.settle()
        hub_before, members_before = await clients.writes()
        log(f"restart: stopping the control plane with {total} templates propagated")
        await asyncio.to_thread(self.plane.stop)
        started = self.plane.start()
        ready_at = await self.plane.wait_ready()
        idle_at = await self.settle(timeout=300)
        cpu = cpu_seconds(self.plane.pid)
        hub_after, members_after = await clients.writes()
        hub, member = delta(hub_after, hub_before), delta(members_after, members_before)
        self.rows.append(info("restart", "templates propagated", str(total)))
        refreshes = heartbeats(hub)
        # MemberCluster status (Ready conditions, the capacity summary every 10 s) is the
        # health controller's, per member and on its own clock: a summary that changed
        # since the last one written (the copies created just before) is refreshed at
        # start rather than at the next tick. It is shown, and judged apart from the rest.
        self.rows.append(judged("restart", "hub writes (without MemberCluster status)",
                                float(sum(hub.values()) - refreshes), ".0f", "0",
                                lambda v: v == 0))
        self.rows.append(info("restart", "MemberCluster status refreshes", float(refreshes),
                              ".0f"))
        self.rows.append(judged("restart", "member writes", float(sum(member.values())),
                                ".0f", "0", lambda v: v == 0))
        self.rows.append(info("restart", "start -> /readyz 200 (s)", ready_at - started))
        self.rows.append(judged("restart", "start -> idle (s)", idle_at - started, ".1f",
                                "<= 10", lambda v: v <= 10))
        self.rows.append(info("restart", "control plane CPU to idle (s)", cpu, ".1f"))
        counts = await self.plane.counts()  # from its spawn
        for measure, value in counts_per_template(counts, total):
            self.rows.append(info("restart", f"{measure} per template", value, ".2f"))
        log(f"restart: control plane counts {breakdown(counts, top=30)}")
        log(f"restart: hub writes {breakdown(hub)}; member writes {breakdown(member)}")

    async def propagated_templates(self) -> int:
        """Bench templates on the hub (every namespace the bench made) whose copies are ready."""
        clients = self.clients
        assert clients is not None
        hub = await clients.hub.list(kube.DEPLOYMENTS)
        names = {(o["metadata"]["namespace"], o["metadata"]["name"])
                 for o in hub.get("items", [])
                 if o["metadata"]["namespace"].startswith(self.TEMPLATE_NAMESPACES)}
        for member in clients.members[: self.args.members]:
            listing = await clients.member[member].list(kube.DEPLOYMENTS)
            names &= {(o["metadata"]["namespace"], o["metadata"]["name"])
                      for o in listing.get("items", []) if copy_ready(o)}
        return len(names)

    # -- the run ------------------------------------------------------------------------

    async def run(self) -> None:
        chosen = self.args.scenarios
        try:
            for scenario in SCENARIOS:
                if scenario in chosen:
                    try:
                        await getattr(self, scenario)()
                    except (kube.ClientError, fleet_lib.FleetError, RuntimeError,
                            TimeoutError) as exc:
                        log(f"{scenario} failed: {exc}")
                        self.rows.append(Row(scenario, "error", str(exc)[:120], "", "FAIL"))
        finally:
            await self.close()

    async def close(self) -> None:
        await asyncio.to_thread(self.plane.stop)
        await self.plane.close()
        if self.clients is not None:
            await self.clients.close()
        if self.owned_fleet and not self.args.keep:
            await asyncio.to_thread(self.fleet.down)


def machine() -> str:
    load = Path("/proc/loadavg").read_text().split()[:3]
    return f"{os.cpu_count()} cores, load average {' '.join(load)}"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help=f"comma-separated, of {', '.join(SCENARIOS)}")
    parser.add_argument("--members", type=int, default=3, help="members of burst/paced/restart")
    parser.add_argument("--templates", type=int, default=500, help="templates of the burst")
    parser.add_argument("--paced-templates", type=int, default=300)
    parser.add_argument("--paced-rate", type=float, default=20.0, help="templates/s")
    parser.add_argument("--restart-templates", type=int, default=1000)
    parser.add_argument("--wide-members", type=int, default=20)
    parser.add_argument("--wide-templates", type=int, default=100)
    parser.add_argument("--wide-rate", type=float, default=5.0, help="templates/s")
    parser.add_argument("--placement", choices=("duplicated", "divided"), default="duplicated",
                        help="divided: replicas = members, one per member, equal weights")
    parser.add_argument("--raw-runs", type=int, default=3,
                        help="raw baselines written one after the other; the median counts "
                             "(a one-second burst on a fresh fleet swings by half between runs)")
    parser.add_argument("--concurrency", type=int, default=16,
                        help="the bench's writers in flight per cluster")
    parser.add_argument("--quiet", type=float, default=3.0,
                        help="seconds without writes or queued keys that count as idle")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds a scenario's copies may take to appear and be ready")
    parser.add_argument("--state-dir", default=str(ROOT / ".fleet-bench"),
                        help="the fleet's state directory (an existing fleet is reused "
                             "and left running)")
    parser.add_argument("--kubeconfig", default=str(ROOT / "kubeconfigs" / "bench.local.yaml"),
                        help="the fleet's admin kubeconfig (with --state-dir)")
    parser.add_argument("--keep", action="store_true", help="leave a fleet the bench started")
    parser.add_argument("--control-plane-arg", action="append", default=[],
                        help="an extra `fedctl run` flag (repeatable; the targets assume none)")
    parser.add_argument("--data-plane", choices=("paused", "running"), default="running",
                        help="the data-plane simulator during both burst windows (raw writes; "
                             "hub creates until every copy is present): running, as the "
                             "fleet always is, or paused to compare the write paths alone")
    parser.add_argument("--profile-cpu", metavar="FILE",
                        help="run the control plane under cProfile counting CPU time; "
                             "FILE.N is written at the Nth control plane's exit")
    args = parser.parse_args(argv)
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = sorted(set(args.scenarios) - set(SCENARIOS))
    if unknown:
        parser.error(f"--scenarios: unknown {', '.join(unknown)} (have {', '.join(SCENARIOS)})")
    for name in ("members", "templates", "paced_templates", "restart_templates",
                 "wide_members", "wide_templates", "concurrency", "raw_runs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("paced_rate", "wide_rate", "quiet", "timeout"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "?"
    before = machine()
    bench = Bench(args)
    started = time.monotonic()
    asyncio.run(bench.run())
    flags = " ".join(args.control_plane_arg) or "default flags"
    print(f"propagation bench, {time.strftime('%Y-%m-%d %H:%M')}, commit {commit}, "
          f"control plane at {flags}, {args.placement}")
    print(f"machine: {before} at start, {machine().split(', ', 1)[1]} at end; "
          f"{time.monotonic() - started:.0f} s")
    print()
    print(table(bench.rows))
    for scenario, tables in bench.profiles:
        print()
        print(f"{scenario}: control plane CPU profile, first create -> quiet")
        print()
        print(tables)


if __name__ == "__main__":
    main()
