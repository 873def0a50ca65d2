"""Pull mode at fleet scale: one control plane serving ``--agents`` agents, against push.

One local fleet with a hub and one member API server, which every agent (and, in the push
phase, every member context) uses as its apply target under its own namespaces: the issue
allows a shared target, and it keeps 20 members within a 2-core machine. Each phase:

- ``pull``: MemberClusters ``pull-01``.. in pull mode (``fedctl join --mode pull``), a
  control plane with a kubeconfig holding the hub only and a work server, one
  ``fedctl agent`` process per member (the member's least-privilege identity);
- ``push``: MemberClusters ``push-01``.. whose contexts all point at the member API
  server, a control plane dialling each.

Then ``--templates`` ConfigMaps per member are created on the hub, in namespace
``<member>`` with a policy placing them on that member only. Delivery latency is from a
template's POST to its copy appearing on the member API server (the bench's own watch);
hub requests are the hub API server's own ``apiserver_request_total`` (every verb) from
before the first create until the copies are in and the control plane is quiet, minus
the bench's creates. Run: ``.venv/bin/python bench/agent_bench.py`` (defaults: 20 members,
10 templates each; ``--templates 100`` is the issue's size). It starts its own fleet in
``--state-dir`` and removes it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from federation.contexts import client as kube  # noqa: E402
from federation.contexts import kubeconfig  # noqa: E402
from federation.local import fleet as fleet_lib  # noqa: E402

FEDCTL = [sys.executable, "-m", "federation"]
POLICY = kube.Resource("policy.federation.io", "v1alpha1", "propagationpolicies",
                       "PropagationPolicy")
_SAMPLE = re.compile(r'^apiserver_request_total\{([^}]*)\}\s+(\S+)$', re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def hub_requests(hub: kube.ClusterClient) -> Counter[str]:
    """The hub API server's own request counts, per "VERB resource[/subresource]"."""
    text = (await hub.request_raw("/metrics")).decode()
    counts: Counter[str] = Counter()
    for labels, value in _SAMPLE.findall(text):
        found = dict(_LABEL.findall(labels))
        sub = f"/{found['subresource']}" if found.get("subresource") else ""
        counts[f"{found.get('verb')} {found.get('resource')}{sub}"] += int(float(value))
    return counts


def only(document: dict[str, Any], keep: set[str], renames: dict[str, str] | None = None
         ) -> dict[str, Any]:
    """A kubeconfig with the contexts ``keep``, plus ``renames`` (new name -> existing)."""
    out = {**document, "current-context": "hub",
           "contexts": [c for c in document["contexts"] if c["name"] in keep]}
    by_name = {c["name"]: c for c in document["contexts"]}
    for new, old in (renames or {}).items():
        out["contexts"].append({"name": new, "context": dict(by_name[old]["context"])})
    return out


class Phase:
    def __init__(self, mode: str, target: fleet_lib.Fleet, members: list[str],
                 work_dir: Path) -> None:
        self.mode = mode
        self.fleet = target
        self.members = members
        self.dir = work_dir / mode
        self.dir.mkdir(parents=True, exist_ok=True)
        self.processes: list[subprocess.Popen[bytes]] = []
        self.work_port = free_port()

    def spawn(self, argv: list[str], log: str) -> None:
        with (self.dir / log).open("ab") as out:
            self.processes.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                                   env={**os.environ,
                                                        "PYTHONUNBUFFERED": "1"}))

    def start(self) -> None:
        source = yaml.safe_load(self.fleet.ensure_control_plane_identity().read_text())
        plane = self.dir / "control-plane.yaml"
        extra: list[str] = []
        if self.mode == "pull":
            plane.write_text(yaml.safe_dump(only(source, {"hub"})))
            extra = ["--work-bind-address", f"127.0.0.1:{self.work_port}"]
            agent_config = self.dir / "agent.yaml"
            agent_config.write_text(yaml.safe_dump(
                {**only(source, {"member1"}), "current-context": "member1"}))
            for name in self.members:
                tls = self.dir / name
                subprocess.run([*FEDCTL, "join", name, "--mode", "pull", "--hub-kubeconfig",
                                str(self.fleet.kubeconfig), "--hub-context", "hub",
                                "--out-dir", str(tls)], check=True, capture_output=True)
        else:
            plane.write_text(yaml.safe_dump(only(source, {"hub"},
                                                 {m: "member1" for m in self.members})))
        self.spawn([*FEDCTL, "run", "--kubeconfig", str(plane), "--hub-context", "hub",
                    "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
                    *extra], "fedctl-run.log")
        if self.mode == "pull":
            for name in self.members:
                tls = self.dir / name
                self.spawn([*FEDCTL, "agent", "--hub-address", f"127.0.0.1:{self.work_port}",
                            "--cluster-name", name, "--kubeconfig",
                            str(self.dir / "agent.yaml"), "--tls-cert", str(tls / "tls.crt"),
                            "--tls-key", str(tls / "tls.key"), "--tls-ca", str(tls / "ca.crt"),
                            "--state-dir", str(tls), "--health-probe-bind-address", "0",
                            "--metrics-bind-address", "0"], f"agent-{name}.log")

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()


async def ready(hub: kube.ClusterClient, names: list[str], timeout: float) -> None:
    members = kube.Resource("cluster.federation.io", "v1alpha1", "memberclusters",
                            "MemberCluster", namespaced=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listing = await hub.list(members)
        good = {i["metadata"]["name"] for i in listing["items"]
                for c in (i.get("status") or {}).get("conditions") or []
                if c.get("type") == "Ready" and c.get("status") == "True"}
        if set(names) <= good:
            return
        await asyncio.sleep(1)
    raise SystemExit(f"members not Ready within {timeout:.0f}s")


async def measure(phase: Phase, hub: kube.ClusterClient, member: kube.ClusterClient,
                  templates: int) -> dict[str, Any]:
    for name in phase.members:
        await _ensure(hub, kube.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": name}})
        await _ensure(hub, POLICY, {
            "apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "all", "namespace": name},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                     "placement": {"clusterAffinity": {"clusterNames": [name]}}}})
    await ready(hub, phase.members, 180)
    seen: dict[tuple[str, str], float] = {}
    wanted = {(n, f"cm-{t}") for n in phase.members for t in range(templates)}
    complete = asyncio.Event()

    async def watch() -> None:
        listing = await member.list(kube.CONFIGMAPS)
        version = listing["metadata"]["resourceVersion"]
        async for event in member.watch(kube.CONFIGMAPS, resource_version=version,
                                        timeout_seconds=600):
            meta = event["object"].get("metadata") or {}
            key = (meta.get("namespace"), meta.get("name"))
            if event["type"] == "ADDED" and key in wanted:
                seen.setdefault(key, time.monotonic())
                if len(seen) == len(wanted):
                    complete.set()

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(1)
    before = await hub_requests(hub)
    sent: dict[tuple[str, str], float] = {}
    limit = asyncio.Semaphore(20)

    async def create(key: tuple[str, str]) -> None:
        async with limit:
            sent[key] = time.monotonic()
            await hub.create(kube.CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": key[1],
                                                            "namespace": key[0]},
                                               "data": {"k": "v"}})

    started = time.monotonic()
    await asyncio.gather(*(create(k) for k in sorted(wanted)))
    try:
        await asyncio.wait_for(complete.wait(), 600)
    except TimeoutError:
        print(f"{phase.mode}: {len(wanted) - len(seen)} copies missing after 600 s")
    delivered = time.monotonic() - started
    await asyncio.sleep(10)  # status, bindings and events settle: the quiet tail counts too
    after = await hub_requests(hub)
    watcher.cancel()
    latencies = [seen[k] - sent[k] for k in wanted if k in seen]
    return {"copies": len(latencies), "wanted": len(wanted), "seconds": delivered,
            "p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99),
            "hub_requests": sum((after - before).values()) - len(wanted),
            "top": ", ".join(f"{k} {v}" for k, v in (after - before).most_common(6))}


async def _ensure(client: kube.ClusterClient, resource: kube.Resource, body: dict[str, Any]
                  ) -> None:
    try:
        await client.create(resource, body)
    except kube.ApiError as exc:
        if exc.status != 409:
            raise


async def run_phase(phase: Phase, templates: int) -> dict[str, Any]:
    config = kubeconfig.load(phase.fleet.kubeconfig)
    async with kube.connect(config.context("hub")) as hub, \
            kube.connect(config.context("member1")) as member:
        return await measure(phase, hub, member, templates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--templates", type=int, default=10)
    parser.add_argument("--modes", default="pull,push")
    parser.add_argument("--state-dir", type=Path, default=ROOT / ".fleet-agent-bench")
    parser.add_argument("--keep-logs", type=Path, default=None,
                        help="Copy the processes' logs here before the fleet is removed.")
    args = parser.parse_args()
    target = fleet_lib.Fleet(args.state_dir, args.state_dir / "kubeconfigs" / "local.yaml")
    results: dict[str, dict[str, Any]] = {}
    for mode in args.modes.split(","):
        # A fresh fleet per phase: the other phase's templates would be reconciled (and
        # counted on the hub) by this phase's control plane.
        target.up(1, simulator=fleet_lib.SimulatorSettings(enabled=False), progress=print)
        try:
            names = [f"{mode}-{i:02d}" for i in range(1, args.agents + 1)]
            clusters = args.state_dir / f"clusters-{mode}.yaml"
            # Every member's context is member1 (RBAC for the identities goes there once).
            clusters.write_text(yaml.safe_dump({"clusters": [
                {"name": n, "context": "member1", "labels": {}} for n in names]}))
            installed = subprocess.run([*FEDCTL, "install", "--kubeconfig",
                                        str(target.kubeconfig), "--hub-context", "hub",
                                        "--clusters", str(clusters)],
                                       capture_output=True, text=True)
            if installed.returncode != 0:
                raise SystemExit(f"fedctl install: {installed.stderr.strip()}")
            phase = Phase(mode, target, names, args.state_dir / "bench")
            phase.start()
            try:
                results[mode] = asyncio.run(run_phase(phase, args.templates))
            finally:
                phase.stop()
        finally:
            if args.keep_logs is not None:  # the processes' logs, for a look
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                subprocess.run(["cp", "-r", str(args.state_dir / "bench" / mode),
                                str(args.keep_logs / mode)], check=False)
            target.down(progress=print)
    print(f"\n{args.agents} members x {args.templates} ConfigMaps, one control plane")
    print(f"{'mode':<6} {'copies':>9} {'all in (s)':>10} {'p50 (s)':>8} {'p99 (s)':>8} "
          f"{'hub requests':>13}")
    for mode, r in results.items():
        print(f"{mode:<6} {int(r['copies']):>4}/{int(r['wanted']):<4} {r['seconds']:>10.1f} "
              f"{r['p50']:>8.2f} {r['p99']:>8.2f} {int(r['hub_requests']):>13}")
    for mode, r in results.items():
        print(f"{mode} hub requests, most: {r['top']}")


if __name__ == "__main__":
    main()
