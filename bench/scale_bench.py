"""Issue 26's bench at scale: replicas of `fedctl run --shards N`, 10,000 templates, handover.

Scenarios (``--scenarios``, in this order), on one local fleet of ``--members`` (3):

- ``replicas``: a raw baseline first (the same copies written straight to the members, as
  bench/propagation_bench.py's burst measures it, before any control plane runs); then for
  each configuration of ``--configs`` (``1``: plain `fedctl run`; ``1s``: one replica of
  `--shards 1`; ``2``/``3``: that many replicas of `--shards 2`/`--shards 3`) the same
  burst of ``--templates`` (500) created at once. Each configuration starts fresh replicas
  and waits until they are ready, have **claimed** their shards (a sharded replica writes
  nothing for one lease duration, 15 s, after it takes its shard: the claim wait, reported
  apart) and are idle; the burst is timed from there. Per configuration: templates/s and
  copies/s (first hub create -> last copy seen by the bench's member watches), the ratio to
  the raw rate, control-plane CPU per template per replica (``/proc/<pid>/stat`` from the
  first create until idle again, gross, and net of the replica's own idle rate over that
  time, measured over ``--idle-window`` (15 s) once it settled before the burst), keys
  held per replica (``federation_shard_keys_held{controller="propagation"}``), and who wrote
  each copy, from the members' audit logs (User-Agent ``fedctl/<v> (<identity>)``): copies
  written per replica, copies written more than once or by two replicas, copies not written.
- ``scale``: tops the hub up to ``--scale-templates`` (10,000) propagated templates with a
  plain `fedctl run` (the top-up is one burst: its create -> all copies time is reported),
  reads its RSS, then cold restarts of the control plane as each of ``--restarts``
  (``1``: plain; ``3``: three replicas of `--shards 3`): hub and member writes during the
  restart (each API server's ``apiserver_request_total``, mutating verbs, MemberCluster
  status and Leases apart), start -> /readyz 200 on every replica, start -> idle, RSS per
  replica once idle. ``--profile-restart FILE`` runs the restarts' replicas under
  bench/cpu_profile.py and prints where each one's CPU went, start -> idle (profiled
  times are slower than the real ones: read the shares).
- ``handover``: three replicas of `--shards 3`, claimed and idle; a burst of
  ``--handover-templates`` (500); ``--kill-after`` (1.5 s) after its first create one
  replica is SIGKILLed. Reported: kill -> first write of one of its keys (by the seed's
  rendezvous hash over the three shards) by another replica, kill -> every copy present,
  copies written twice or by two replicas, copies never written (audit logs).

Run: ``flock /tmp/federation-e2e.lock .venv/bin/python bench/scale_bench.py --scenarios
replicas`` (one scenario per lock: others run e2e in between). It starts its own fleet in
``.fleet-bench`` (or reuses ``--state-dir``) and removes what it started (``--keep``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import datetime
import functools
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import cpu_profile
import propagation_bench as pb

from federation.contexts import client as kube
from federation.controllers import setup
from federation.hub import bindings
from federation.local import fleet as fleet_lib
from federation.runtime import leader, peers, shards

SCENARIOS = ("replicas", "scale", "handover")
CONFIGS = {"1": (1, 0), "1s": (1, 1), "2": (2, 2), "3": (3, 3)}
"""A configuration's name -> (replicas, ``--shards``; 0 is plain `fedctl run`)."""
GIB = 1024**3
log = pb.log


# -- pure parts (tests/unit/bench/test_scale_bench.py) ------------------------------------


def keys_held(metrics: str, controller: str = "propagation") -> float | None:
    """``federation_shard_keys_held{controller=...}`` from a replica's /metrics; None when
    the replica does not shard (the series is absent)."""
    for line in metrics.splitlines():
        if line.startswith("federation_shard_keys_held{"):
            labels_text, _, value = line.rpartition("} ")
            if dict(pb.LABEL.findall(labels_text)).get("controller") == controller:
                return float(value)
    return None


def rss_bytes(status: str) -> int | None:
    """Resident set size from the text of ``/proc/<pid>/status`` (``VmRSS: N kB``)."""
    found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    return int(found.group(1)) * 1024 if found else None


SHARDED = frozenset(setup.shard_keys())
"""The controllers every sharded replica runs; the others run on the leader only, and a
follower's queues of those keep what it will do if it leads (never empty)."""


def queue_totals(metrics: str) -> tuple[float, float] | None:
    """(keys queued or being processed, keys ever added) of a replica's /metrics, over the
    controllers it runs: all on a leader or a plain run, the sharded ones on a follower
    (``federation_leader 0``). None when the workqueue series are absent."""
    follower = re.search(r"^federation_leader 0(\.0)?$", metrics, re.MULTILINE) is not None
    busy = adds = 0.0
    found = False
    for line in metrics.splitlines():
        name, _, rest = line.partition("{")
        if name not in ("federation_workqueue_depth", "federation_workqueue_processing",
                        "federation_workqueue_adds_total"):
            continue
        labels_text, _, value = rest.rpartition("} ")
        if follower and dict(pb.LABEL.findall(labels_text)).get("controller") not in SHARDED:
            continue
        found = True
        if name == "federation_workqueue_adds_total":
            adds += float(value)
        else:
            busy += float(value)
    return (busy, adds) if found else None


SHARD_LINE = re.compile(r": shard (\S+), live shards (.*?)( \(waiting to claim\))?$",
                        re.MULTILINE)


def claimed(log_text: str, shard_count: int) -> bool:
    """The replica's last shard line says it claims its keys with ``shard_count`` live
    shards (runtime/peers.py logs one at every change of either)."""
    lines = SHARD_LINE.findall(log_text)
    if not lines:
        return False
    _, live, waiting = lines[-1]
    return not waiting and len([s for s in live.split(", ") if s]) == shard_count


def took_shard(log_text: str) -> tuple[str, str] | None:
    """(identity, shard) from a replica's ``<identity>: took shard <name>`` line."""
    found = re.search(r" (\S+): took shard (\S+?);", log_text)
    return (found.group(1), found.group(2)) if found else None


def identity_pid(identity: str) -> int | None:
    """The pid inside a control-plane identity (``host_pid_suffix``, runtime/leader.py)."""
    found = re.search(r"_(\d+)_[0-9a-f]{8}$", identity)
    return int(found.group(1)) if found else None


@dataclasses.dataclass(frozen=True)
class CopyWrite:
    """One control-plane write of a copy, as a member's audit log has it."""

    received: float
    member: str
    name: str
    verb: str
    code: int
    writer: str
    """The identity inside the User-Agent's parentheses."""


def copy_writes(member: str, lines: Iterable[str], namespace: str,
                resource: str = "deployments") -> list[CopyWrite]:
    """The control plane's (User-Agent ``fedctl/...``) writes of ``resource`` objects in
    ``namespace`` among one member's audit log lines; a line that is not JSON is skipped
    (a partial last line of a log being written)."""
    found = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        ref = entry.get("objectRef") or {}
        agent = str(entry.get("userAgent") or "")
        writer = re.search(r"\(([^()]*)\)", agent)
        if (not agent.startswith("fedctl/") or writer is None or ref.get("namespace") != namespace
                or ref.get("resource") != resource or ref.get("subresource")):
            continue
        stamp = str(entry.get("requestReceivedTimestamp", "")).replace("Z", "+00:00")
        found.append(CopyWrite(
            received=_timestamp(stamp), member=member, name=str(ref.get("name") or ""),
            verb=str(entry.get("verb", "")),
            code=int((entry.get("responseStatus") or {}).get("code", 0)),
            writer=writer.group(1)))
    return found


def _timestamp(stamp: str) -> float:
    try:
        return datetime.datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return math.nan


@dataclasses.dataclass(frozen=True)
class WriteCounts:
    writes: int
    """Control-plane writes of the copies (any verb, any answer)."""
    written: int
    """Copies with a successful write."""
    extra: int
    """Writes beyond one per copy (a retry, a conflict, an update after the create)."""
    by_two: int
    """Copies written (successfully) by more than one replica."""
    lost: int
    """Expected copies without any successful write."""
    per_writer: dict[str, int]
    """Copies each replica wrote successfully (first successful writer)."""


def count_writes(writes: Sequence[CopyWrite], expected: Iterable[tuple[str, str]]
                 ) -> WriteCounts:
    """Tally :func:`copy_writes` against the (member, name) copies a burst should make."""
    by_copy: dict[tuple[str, str], list[CopyWrite]] = collections.defaultdict(list)
    for write in sorted(writes, key=lambda w: w.received):
        by_copy[(write.member, write.name)].append(write)
    ok = {k: [w for w in v if 200 <= w.code < 300] for k, v in by_copy.items()}
    per_writer: collections.Counter[str] = collections.Counter(
        v[0].writer for v in ok.values() if v)
    return WriteCounts(
        writes=len(writes), written=sum(1 for v in ok.values() if v),
        extra=sum(len(v) - 1 for v in by_copy.values()),
        by_two=sum(1 for v in ok.values() if len({w.writer for w in v}) > 1),
        lost=sum(1 for copy in expected if not ok.get(copy)),
        per_writer=dict(per_writer))


def net_cpu(used: float, idle_rate: float, seconds: float) -> float:
    """CPU seconds a replica spent beyond its idle rate (cores) over ``seconds``."""
    return max(0.0, used - idle_rate * seconds)


@dataclasses.dataclass
class ConfigResult:
    """One configuration's burst in the replicas scenario."""

    name: str
    replicas: int
    shards: int
    templates: int
    members: int
    ready_s: float
    """Spawn -> every replica's /readyz 200."""
    claimed_s: float
    """Spawn -> every replica claiming its keys (NaN without shards)."""
    elapsed: float
    """First hub create -> last copy seen."""
    cpu_ms: list[float]
    """Net CPU ms per template, per replica (first create -> idle, minus the idle rate)."""
    gross_ms: list[float]
    """Gross CPU ms per template, per replica (first create -> idle)."""
    keys: list[float | None]
    writes: WriteCounts
    complete: bool

    @property
    def templates_per_second(self) -> float:
        return self.templates / self.elapsed if self.elapsed > 0 else math.nan

    @property
    def copies_per_second(self) -> float:
        return self.templates_per_second * self.members


def label(replicas: int, shard_count: int) -> str:
    if shard_count == 0:
        return "1 (plain `fedctl run`)"
    return f"{replicas} x `--shards {shard_count}`"


def replicas_table(results: Sequence[ConfigResult], raw: float) -> str:
    """The replicas scenario as one table: each configuration's rate, its ratio to the raw
    baseline and to the first configuration, CPU, keys and audit-log write counts."""
    lines = ["| replicas | templates/s | copies/s | ratio ours/raw (>= 0.4) | rate vs first | "
             "CPU ms/template per replica, gross (net of idle) | CPU ms/template, all, gross "
             "(net) | keys held per replica | copies written per replica | "
             "extra writes / by two / lost | claim wait (s) |",
             "|---|---:|---:|---:|---:|---|---:|---|---|---|---:|"]
    first = results[0].templates_per_second if results else math.nan
    for r in results:
        note = "" if r.complete else " (incomplete)"
        keys = " / ".join("-" if k is None else f"{k:.0f}" for k in r.keys)
        written = " / ".join(str(n) for _, n in sorted(r.writes.per_writer.items())) or "-"
        claim = "-" if math.isnan(r.claimed_s) else f"{r.claimed_s:.1f}"
        lines.append(
            f"| {label(r.replicas, r.shards)}{note} | {r.templates_per_second:.1f} | "
            f"{r.copies_per_second:.0f} | "
            f"{r.copies_per_second / raw:.2f} | {r.templates_per_second / first:.2f} | "
            f"{cpu_cells(r.gross_ms, r.cpu_ms)} | {sum(r.gross_ms):.1f} ({sum(r.cpu_ms):.1f}) | "
            f"{keys} | "
            f"{written} | {r.writes.extra} / {r.writes.by_two} / {r.writes.lost} | {claim} |")
    return "\n".join(lines)


def cpu_cells(gross: Sequence[float], net: Sequence[float]) -> str:
    """Per replica ``gross (net)`` CPU ms: the net alone hides a wrong idle rate."""
    return " / ".join(f"{g:.1f} ({n:.1f})" for g, n in zip(gross, net, strict=True))


def without_background(counts: collections.Counter[str]) -> int:
    """Hub writes that are neither MemberCluster status nor Leases (per member or replica,
    on their own clocks: not work the templates caused)."""
    return sum(n for what, n in counts.items()
               if not what.split(" ")[1].startswith(("memberclusters", "leases")))


# -- replicas ------------------------------------------------------------------------------


QUEUE_METRICS_PATH = pb.QUEUE_METRICS_PATH + "&name[]=federation_leader"


class Replica(pb.ControlPlane):
    """One `fedctl run` of a group, with its own pid and log file."""

    def __init__(self, bench: ScaleBench, index: int, shard_count: int, election_id: str,
                 profile: str | None = None) -> None:
        directory = bench.fleet.state_dir / "bench-replicas"
        directory.mkdir(parents=True, exist_ok=True)
        extra = list(bench.args.control_plane_arg)
        if shard_count:
            extra += ["--shards", str(shard_count), "--leader-election-id", election_id]
        super().__init__(bench.fleet, extra, profile=profile,
                         pid_file=directory / f"{index}.pid",
                         log_file=directory / f"{election_id}-{index}.log")
        """A log per group: the claim and the identity are read from its last lines."""
        self.shard_count = shard_count

    def log_text(self) -> str:
        try:
            return Path(self.log_file).read_text(errors="replace")
        except OSError:
            return ""

    def claimed(self) -> bool:
        return self.shard_count == 0 or claimed(self.log_text(), self.shard_count)

    async def queue_state(self) -> tuple[float, float] | None:
        status, text = await self._get(self.metrics_port, QUEUE_METRICS_PATH)
        return queue_totals(text) if status == 200 else None

    async def keys(self) -> float | None:
        status, text = await self._get(self.metrics_port, "/metrics?name[]="
                                       "federation_shard_keys_held")
        return keys_held(text) if status == 200 else None

    def rss(self) -> float:
        pid = self.pid
        if pid is None:
            return math.nan
        try:
            found = rss_bytes(Path(f"/proc/{pid}/status").read_text())
        except OSError:
            return math.nan
        return math.nan if found is None else found / GIB

    def kill(self) -> None:
        pid = self.pid
        if pid is not None:
            os.kill(pid, signal.SIGKILL)


class Audit:
    """The members' audit logs from a mark on: every file's size then, new bytes after."""

    def __init__(self, bench: ScaleBench, members: Sequence[str]) -> None:
        self.dirs = {m: bench.fleet.cluster_dir(m) for m in members}
        self.sizes = {path: path.stat().st_size for d in self.dirs.values()
                      for path in d.glob("audit*.log")}

    def writes(self, namespace: str) -> list[CopyWrite]:
        found: list[CopyWrite] = []
        for member, directory in self.dirs.items():
            for path in directory.glob("audit*.log"):
                with path.open("rb") as handle:
                    offset = self.sizes.get(path, 0)
                    handle.seek(offset if offset <= path.stat().st_size else 0)
                    data = handle.read().decode(errors="replace")
                found += copy_writes(member, data.splitlines(), namespace)
        return found


class ScaleBench(pb.Bench):
    TEMPLATE_NAMESPACES = "bench-s-"

    def __init__(self, args: argparse.Namespace) -> None:
        args.data_plane = "running"
        args.placement = "duplicated"
        args.profile_cpu = None
        super().__init__(args)
        self.replicas: list[Replica] = []
        self.results: list[ConfigResult] = []
        self.raw = math.nan
        self.groups = 0

    # -- hooks of pb.Bench ---------------------------------------------------------------

    async def queue_state(self) -> tuple[float, float] | None:
        states = [await r.queue_state() for r in self.replicas]
        if not states or any(s is None for s in states):
            return None
        return (sum(s[0] for s in states if s), sum(s[1] for s in states if s))

    def background_writes(self, hub: collections.Counter[str]) -> int:
        return sum(hub.values()) - without_background(hub)

    # -- a group of replicas -------------------------------------------------------------

    async def start_group(self, count: int, shard_count: int) -> tuple[float, float, float]:
        """Stop the running replicas, start ``count`` (plain when ``shard_count`` is 0) on a
        fresh Lease id; (spawned at, all ready at, all claimed at) as monotonic times."""
        await self.prepare_group(count, shard_count)
        return await self.launch_group()

    async def prepare_group(self, count: int, shard_count: int, profile: str | None = None
                            ) -> None:
        """Stop the running replicas and install the RBAC of a fresh Lease id (its writes
        are the installer's, made before a restart is measured); ``profile``: the replicas
        run under bench/cpu_profile.py, writing ``<profile>-<group>-<index>.1``."""
        await self.stop_group()
        self.groups += 1
        election_id = f"bench-{os.getpid()}-{self.groups}"
        self.replicas = [Replica(self, i, shard_count, election_id,
                                 None if profile is None else f"{profile}-{self.groups}-{i}")
                         for i in range(count)]
        await asyncio.to_thread(self.install, election_id)

    async def launch_group(self) -> tuple[float, float, float]:
        spawned = time.monotonic()
        for replica in self.replicas:
            replica.start()
        ready = max([await r.wait_ready(timeout=600) for r in self.replicas])
        deadline = time.monotonic() + 120
        while not all(r.claimed() for r in self.replicas):
            if time.monotonic() > deadline:
                raise TimeoutError("replicas did not claim their shards within 120 s")
            await asyncio.sleep(0.1)
        return spawned, ready, time.monotonic()

    def install(self, election_id: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "federation", "install", "--kubeconfig",
             str(self.fleet.kubeconfig), "--hub-context", "hub", "--clusters",
             str(self.fleet.clusters_file), "--leader-election-id", election_id],
            capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"fedctl install failed: {done.stderr.strip()}")

    async def stop_group(self) -> None:
        for replica in self.replicas:
            await asyncio.to_thread(replica.stop)
            await replica.close()
        self.replicas = []

    async def idle_rates(self) -> list[float]:
        """Each replica's CPU rate (cores) over ``--idle-window`` seconds with nothing to do.
        Called after :meth:`settle`: a window of a few seconds right after a burst or a
        start catches the tail of its work (informer relists, timers), and a rate that
        high subtracted over a whole burst ate all of it (a 0.0 ms column)."""
        window = self.args.idle_window
        before = self.cpu()
        await asyncio.sleep(window)
        after = self.cpu()
        return [(a - b) / window for a, b in zip(after, before, strict=True)]

    def cpu(self) -> list[float]:
        return [pb.cpu_seconds(r.pid) for r in self.replicas]

    # -- one burst -----------------------------------------------------------------------

    async def burst_once(self, count: int, members: Sequence[str],
                         kill_after: float | None = None) -> Burst:
        clients = self.clients
        assert clients is not None
        namespace = self.namespace("s")
        await clients.hub_create(kube.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": namespace}})
        await clients.hub_create(pb.POLICIES, pb.policy(namespace, members, False))
        watch = pb.CopyWatch(clients, namespace, members)
        await watch.start()
        await asyncio.sleep(1)  # the policy reaches the replicas' caches first
        await self.settle(timeout=300)
        idle = await self.idle_rates()
        audit = Audit(self, members)
        names = [f"d{i}" for i in range(count)]
        cpu_before = self.cpu()
        started = time.monotonic()

        async def create(name: str) -> None:
            await clients.hub_create(kube.DEPLOYMENTS, pb.deployment(name, namespace))

        creating = asyncio.create_task(pb.bounded(
            [functools.partial(create, n) for n in names], self.args.concurrency))
        killed = killed_wall = math.nan
        if kill_after is not None:
            await asyncio.sleep(kill_after)
            killed_wall = time.time()
            killed = time.monotonic()
            self.replicas[1].kill()
            log(f"handover: SIGKILLed replica 1 {kill_after:.1f} s into the burst")
        await creating
        present = await watch.wait(names, ready=False, deadline=started + self.args.timeout)
        done = [t for n in names if (t := watch.all_present(n)) is not None]
        last = max(done, default=math.nan)
        ready = present and await watch.wait(names, ready=True,
                                              deadline=started + self.args.timeout)
        idle_at = await self.settle(timeout=300)
        watch.stop()
        quiet = (idle_at if not math.isnan(idle_at) else time.monotonic()) - started
        used = [c - b for c, b in zip(self.cpu(), cpu_before, strict=True)]
        net = [net_cpu(u, rate, quiet) if not math.isnan(u) else math.nan
               for u, rate in zip(used, idle, strict=True)]
        return Burst(namespace=namespace, names=names, members=list(members),
                     elapsed=last - started, complete=ready, cpu_gross=used, cpu_net=net,
                     writes=audit.writes(namespace), killed=killed, killed_wall=killed_wall,
                     last=last)

    # -- scenarios -----------------------------------------------------------------------

    async def replicas_scenario(self) -> None:
        clients = await self.fleet_up(self.args.members, fresh=False)
        members = clients.members[: self.args.members]
        count = self.args.templates
        await self.stop_group()
        log(f"raw: {count} Deployments x {len(members)} members straight to the members")
        samples = []
        for _ in range(self.args.raw_runs):
            samples.append((await self.raw_rate(count))[0])
            await self.members_at_rest()
        self.raw = sorted(samples)[len(samples) // 2]
        self.rows.append(pb.info("replicas", f"raw member writes/s (median of {len(samples)})",
                                 self.raw, ".0f"))
        for name in self.args.configs:
            replicas, shard_count = CONFIGS[name]
            spawned, ready, claimed_at = await self.start_group(replicas, shard_count)
            await self.settle(timeout=300)
            log(f"replicas {name}: ready {ready - spawned:.1f} s, claimed "
                f"{claimed_at - spawned:.1f} s after spawn; burst of {count}")
            burst = await self.burst_once(count, members)
            keys = [await r.keys() for r in self.replicas]
            counts = count_writes(burst.writes, burst.expected())
            self.results.append(ConfigResult(
                name=name, replicas=replicas, shards=shard_count, templates=count,
                members=len(members), ready_s=ready - spawned,
                claimed_s=(claimed_at - spawned) if shard_count else math.nan,
                elapsed=burst.elapsed, cpu_ms=[c * 1000 / count for c in burst.cpu_net],
                gross_ms=[c * 1000 / count for c in burst.cpu_gross],
                keys=keys, writes=counts, complete=burst.complete))
            log(f"replicas {name}: {count / burst.elapsed:.1f} templates/s, writes {counts}; "
                "row: " + replicas_table(self.results, self.raw).splitlines()[-1])
        await self.stop_group()

    async def scale(self) -> None:
        clients = await self.fleet_up(self.args.members, fresh=False)
        members = clients.members[: self.args.members]
        await self.start_group(1, 0)
        await self.settle(timeout=600)
        have = await self.propagated_templates()
        missing = max(0, self.args.scale_templates - have)
        if missing:
            log(f"scale: {have} templates propagated; creating {missing} more at once")
            burst = await self.burst_once(missing, members)
            self.rows.append(pb.info("scale", f"top-up: {missing} templates x {len(members)} "
                                     "members, create -> all copies (s)"
                                     + ("" if burst.complete else " (incomplete)"),
                                     burst.elapsed, ".1f"))
            self.rows.append(pb.info("scale", "top-up: templates/s",
                                     missing / burst.elapsed, ".1f"))
            self.rows.append(pb.info("scale", "top-up: control plane CPU ms per template, "
                                     "gross (net of idle)", cpu_cells(
                                         [burst.cpu_gross[0] * 1000 / missing],
                                         [burst.cpu_net[0] * 1000 / missing])))
        total = await self.propagated_templates()
        self.rows.append(pb.info("scale", "templates propagated (x members)",
                                 f"{total} x {len(members)}"))
        self.rows.append(pb.judged("scale", "RSS after sync, plain `fedctl run` (GiB)",
                                   self.replicas[0].rss(), ".2f", "<= 1.5",
                                   lambda v: v <= 1.5))
        for name in self.args.restarts:
            await self.restart_as(name)
        await self.stop_group()

    async def restart_as(self, name: str) -> None:
        clients = self.clients
        assert clients is not None
        replicas, shard_count = CONFIGS[name]
        what = f"restart as {label(replicas, shard_count)}"
        # stops the running ones
        await self.prepare_group(replicas, shard_count, self.args.profile_restart)
        await self.settle(timeout=300)
        hub_before, members_before = await clients.writes()
        spawned, ready, claimed_at = await self.launch_group()
        idle_at = await self.settle(timeout=300)
        hub_after, members_after = await clients.writes()
        hub, member = pb.delta(hub_after, hub_before), pb.delta(members_after, members_before)
        self.rows.append(pb.judged("scale", f"{what}: hub writes (without MemberCluster "
                                   "status and Leases)", float(without_background(hub)),
                                   ".0f", "0", lambda v: v == 0))
        self.rows.append(pb.info("scale", f"{what}: MemberCluster status / Lease writes",
                                 f"{sum(hub.values()) - without_background(hub)}"))
        self.rows.append(pb.judged("scale", f"{what}: member writes",
                                   float(sum(member.values())), ".0f", "0", lambda v: v == 0))
        self.rows.append(pb.info("scale", f"{what}: start -> /readyz 200 (s)", ready - spawned))
        if shard_count:
            self.rows.append(pb.info("scale", f"{what}: start -> shards claimed (s)",
                                     claimed_at - spawned))
        self.rows.append(pb.judged("scale", f"{what}: start -> idle (s)", idle_at - spawned,
                                   ".1f", "<= 30", lambda v: v <= 30))
        rss = [r.rss() for r in self.replicas]
        self.rows.append(pb.judged("scale", f"{what}: RSS per replica once idle (GiB)",
                                   max(rss), ".2f", "<= 1.5", lambda v: v <= 1.5))
        if len(rss) > 1:
            self.rows.append(pb.info("scale", f"{what}: RSS of each (GiB)",
                                     " / ".join(f"{v:.2f}" for v in rss)))
        self.rows.append(pb.info("scale", f"{what}: CPU s to idle, per replica", " / ".join(
            f"{c:.1f}" for c in self.cpu())))
        counts: collections.Counter[str] = collections.Counter()
        for replica in self.replicas:  # their counters start at the spawn
            counts.update(await replica.counts())
        templates = await self.propagated_templates()
        for measure, value in pb.counts_per_template(counts, templates):
            self.rows.append(pb.info("scale", f"{what}: {measure} per template", value))
        log(f"{what}: control plane counts {pb.breakdown(counts, top=30)}")
        log(f"{what}: hub writes {pb.breakdown(hub)}; member writes {pb.breakdown(member)}")
        for index, replica in enumerate(self.replicas):
            profile = await replica.profile_window("dump")  # start -> now (never restarted)
            if profile is not None:
                self.profiles.append((f"{what}, replica {index}", cpu_profile.summary(
                    profile, await self.propagated_templates(), names=pb.PROFILE_STAGES)))

    async def handover(self) -> None:
        clients = await self.fleet_up(self.args.members, fresh=False)
        members = clients.members[: self.args.members]
        await self.start_group(3, 3)
        await self.settle(timeout=600)
        victim = took_shard(self.replicas[1].log_text())
        assert victim is not None
        election_id = self.replicas[1].extra[-1]
        seed = await self.seed(election_id)
        live = peers.shard_names(election_id, 3)
        count = self.args.handover_templates
        log(f"handover: burst of {count}, replica 1 ({victim[1]}) killed mid-burst")
        burst = await self.burst_once(count, members, kill_after=self.args.kill_after)
        counts = count_writes(burst.writes, burst.expected())
        namespace = burst.namespace
        victim_keys = {n for n in burst.names if shards.owner(
            seed, live, f"{namespace}/{bindings.binding_name(n, 'Deployment')}") == victim[1]}
        taken = [w.received for w in burst.writes if w.name in victim_keys
                 and w.writer != victim[0] and 200 <= w.code < 300]
        by_victim = sum(1 for w in burst.writes if w.writer == victim[0] and 200 <= w.code < 300)
        first = min(taken, default=math.nan) - burst.killed_wall
        self.rows.append(pb.info("handover", "templates x members, replicas",
                                 f"{count} x {len(members)}, 3 x `--shards 3`"))
        self.rows.append(pb.info("handover", "the killed replica's keys in the burst / its "
                                 "copies written before the kill",
                                 f"{len(victim_keys)} / {by_victim}"))
        self.rows.append(pb.judged("handover", "kill -> first of its keys written by another (s)",
                                   first, ".1f", "<= 15 + 2 x 2 + 2",
                                   lambda v: v <= 21))
        self.rows.append(pb.info("handover", "kill -> every copy present (s)"
                                 + ("" if burst.complete else " (incomplete)"),
                                 burst.last - burst.killed, ".1f"))
        self.rows.append(pb.judged("handover", "copies written twice / by two replicas",
                                   float(counts.extra + counts.by_two), ".0f", "0",
                                   lambda v: v == 0))
        self.rows.append(pb.judged("handover", "copies never written (lost)", float(counts.lost),
                                   ".0f", "0", lambda v: v == 0))
        self.rows.append(pb.info("handover", "copies written per replica (audit logs)", " / ".join(
            f"{n}" for _, n in sorted(counts.per_writer.items()))))
        await self.stop_group()

    async def seed(self, election_id: str) -> bytes:
        assert self.clients is not None
        lease = await self.clients.hub.get(leader.LEASES, peers.seed_name(election_id),
                                           "kube-system")
        return bytes.fromhex(lease["metadata"]["annotations"][peers.SEED_ANNOTATION])

    async def run(self) -> None:
        steps = {"replicas": self.replicas_scenario, "scale": self.scale,
                 "handover": self.handover}
        try:
            for scenario in SCENARIOS:
                if scenario in self.args.scenarios:
                    try:
                        await steps[scenario]()
                    except (kube.ClientError, fleet_lib.FleetError, RuntimeError,
                            TimeoutError, AssertionError) as exc:
                        log(f"{scenario} failed: {exc}")
                        self.rows.append(pb.Row(scenario, "error", str(exc)[:120], "", "FAIL"))
        finally:
            await self.stop_group()
            await self.close()


@dataclasses.dataclass
class Burst:
    namespace: str
    names: list[str]
    members: list[str]
    elapsed: float
    complete: bool
    cpu_gross: list[float]
    """CPU seconds per replica, first create -> idle."""
    cpu_net: list[float]
    """The same beyond each replica's idle rate."""
    writes: list[CopyWrite]
    killed: float
    killed_wall: float
    last: float

    def expected(self) -> list[tuple[str, str]]:
        return [(m, n) for m in self.members for n in self.names]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help=f"comma-separated, of {', '.join(SCENARIOS)}")
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--templates", type=int, default=500, help="the replicas' burst")
    parser.add_argument("--configs", default="1,1s,2,3",
                        help=f"replicas configurations, of {', '.join(CONFIGS)}")
    parser.add_argument("--raw-runs", type=int, default=3)
    parser.add_argument("--scale-templates", type=int, default=10_000)
    parser.add_argument("--restarts", default="1,3", help="cold restarts of the scale "
                        f"scenario, as configurations of {', '.join(CONFIGS)}")
    parser.add_argument("--handover-templates", type=int, default=500)
    parser.add_argument("--kill-after", type=float, default=1.5,
                        help="seconds into the handover burst the replica is killed")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--quiet", type=float, default=3.0)
    parser.add_argument("--idle-window", type=float, default=15.0,
                        help="seconds each replica's idle CPU rate is measured over, after "
                        "it settled, before a burst")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds a burst's copies may take to appear and be ready")
    parser.add_argument("--state-dir", default=str(pb.ROOT / ".fleet-bench"))
    parser.add_argument("--kubeconfig", default=str(pb.ROOT / "kubeconfigs" / "bench.local.yaml"))
    parser.add_argument("--keep", action="store_true", help="leave a fleet the bench started")
    parser.add_argument("--control-plane-arg", action="append", default=[])
    parser.add_argument("--profile-restart", metavar="FILE", help="run the restarts' "
                        "replicas under bench/cpu_profile.py (CPU time, slower: their times "
                        "are not the unprofiled ones) and print each one's profile, start -> "
                        "idle, per template")
    args = parser.parse_args(argv)
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    args.configs = [s.strip() for s in args.configs.split(",") if s.strip()]
    args.restarts = [s.strip() for s in args.restarts.split(",") if s.strip()]
    if unknown := sorted(set(args.scenarios) - set(SCENARIOS)):
        parser.error(f"--scenarios: unknown {', '.join(unknown)}")
    if unknown := sorted(set(args.configs + args.restarts) - set(CONFIGS)):
        parser.error(f"--configs/--restarts: unknown {', '.join(unknown)}")
    for name in ("members", "templates", "scale_templates", "handover_templates",
                 "concurrency", "raw_runs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    commit = subprocess.run(["git", "-C", str(pb.ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "?"
    before = pb.machine()
    bench = ScaleBench(args)
    started = time.monotonic()
    asyncio.run(bench.run())
    flags = " ".join(args.control_plane_arg) or "default flags"
    print(f"scale bench, {time.strftime('%Y-%m-%d %H:%M')}, commit {commit}, "
          f"control plane at {flags}")
    print(f"machine: {before} at start, {pb.machine().split(', ', 1)[1]} at end; "
          f"{time.monotonic() - started:.0f} s")
    if bench.results:
        print()
        print(f"replicas: burst of {args.templates} templates x {args.members} members, raw "
              f"{bench.raw:.0f} member writes/s; timed from every replica claimed and idle")
        print()
        print(replicas_table(bench.results, bench.raw))
    print()
    print(pb.table(bench.rows))
    for what, tables in bench.profiles:
        print()
        print(f"{what}: control plane CPU profile, start -> idle")
        print()
        print(tables)


if __name__ == "__main__":
    main()

