"""Propagation latency and throughput on the local fleet, against a raw baseline.

In one run, on the same fleet:

1. raw: the same Deployments written straight to the members (one POST each,
   ``CONCURRENCY`` in flight per member), the rate of member writes a client
   alone achieves here;
2. ours: the Deployments created on the hub with a policy duplicating them to
   every member, `fedctl run` doing the rest; for each Deployment the time from
   its hub create to the moment all member copies are seen (by watches on the
   members), and the member write rate this implies.

Prints p50/p99 latency and the ratio ours/raw. Run: `.venv/bin/python bench/propagation_bench.py
[--count 500]`; it starts its own fleet in `.fleet-bench` and removes it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from federation.contexts import client as kube  # noqa: E402
from federation.contexts import kubeconfig  # noqa: E402
from federation.controllers import api  # noqa: E402
from federation.local import fleet as fleet_lib  # noqa: E402

CONCURRENCY = 16
MEMBERS = ("member1", "member2", "member3")


def deployment(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "img:1"}]}}}}


async def bounded(calls: list[Any], limit: int) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(call: Any) -> None:
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


async def raw_rate(clients: dict[str, kube.ClusterClient], count: int) -> float:
    namespace = f"raw-{uuid.uuid4().hex[:6]}"
    for member in MEMBERS:
        await ensure_namespace(clients[member], namespace)
    calls = [functools.partial(clients[m].create, kube.DEPLOYMENTS,
                               deployment(f"d{i}", namespace))
             for i in range(count) for m in MEMBERS]
    started = time.monotonic()
    await bounded(calls, CONCURRENCY * len(MEMBERS))
    elapsed = time.monotonic() - started
    for member in MEMBERS:
        await clients[member].delete(kube.NAMESPACES, namespace)
    return len(calls) / elapsed


async def watch_copies(client: kube.ClusterClient, namespace: str, seen: dict[str, float],
                       version: str) -> None:
    while True:
        try:
            async for event in client.watch(kube.DEPLOYMENTS, namespace=namespace,
                                            resource_version=version):
                obj = event.get("object") or {}
                meta = obj.get("metadata") or {}
                version = meta.get("resourceVersion") or version
                if event.get("type") == "ADDED":
                    seen.setdefault(meta["name"], time.monotonic())
        except kube.ClientError:
            await asyncio.sleep(0.2)


async def ours(clients: dict[str, kube.ClusterClient], count: int
               ) -> tuple[list[float], float]:
    namespace = f"prop-{uuid.uuid4().hex[:6]}"
    hub = clients["hub"]
    await ensure_namespace(hub, namespace)
    policy = {"apiVersion": api.PROPAGATION_POLICIES.api_version, "kind": "PropagationPolicy",
              "metadata": {"name": "all", "namespace": namespace},
              "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                       "placement": {"replicaScheduling": {
                           "replicaSchedulingType": "Duplicated"}}}}
    await hub.create(api.PROPAGATION_POLICIES, policy)
    seen: dict[str, dict[str, float]] = {m: {} for m in MEMBERS}
    watchers = []
    for member in MEMBERS:
        listing = await clients[member].list(kube.DEPLOYMENTS, namespace)
        watchers.append(asyncio.create_task(watch_copies(
            clients[member], namespace, seen[member], listing["metadata"]["resourceVersion"])))
    created: dict[str, float] = {}

    async def create(index: int) -> None:
        name = f"d{index}"
        created[name] = time.monotonic()
        await hub.create(kube.DEPLOYMENTS, deployment(name, namespace))

    started = time.monotonic()
    await bounded([functools.partial(create, i) for i in range(count)], CONCURRENCY)
    deadline = time.monotonic() + 600
    while any(len(s) < count for s in seen.values()):
        if time.monotonic() > deadline:
            raise TimeoutError("copies did not all appear within 600 s")
        await asyncio.sleep(0.1)
    finished = max(max(s.values()) for s in seen.values())
    for task in watchers:
        task.cancel()
    latencies = sorted(max(seen[m][name] for m in MEMBERS) - at for name, at in created.items())
    return latencies, count * len(MEMBERS) / (finished - started)


async def main(count: int, keep: bool, qps: float | None) -> None:
    state = ROOT / ".fleet-bench"
    target = fleet_lib.Fleet(state, ROOT / "kubeconfigs" / "bench.local.yaml")
    target.up(3, progress=lambda m: print(f"  {m}", file=sys.stderr))
    try:
        config = kubeconfig.load(target.kubeconfig)
        settings = kube.ClientSettings()
        clients = {name: kube.ClusterClient(config.context(name), settings)
                   for name in ("hub", *MEMBERS)}
        try:
            print(f"raw: {count} Deployments x {len(MEMBERS)} members straight to the members")
            raw = await raw_rate(clients, count)
            print(f"  {raw:.0f} member writes/s")
            limits = ["--kube-api-qps", str(qps), "--kube-api-burst", str(int(qps * 2))] \
                if qps else []
            target.start_control_plane(lambda m: print(f"  {m}", file=sys.stderr), limits)
            print(f"control plane: fedctl run {' '.join(limits) or '(default client limits)'}")
            await asyncio.sleep(3)
            print(f"ours: {count} Deployments on the hub, duplicated to {len(MEMBERS)} members")
            latencies, rate = await ours(clients, count)
            p50 = statistics.median(latencies)
            p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
            print(f"  hub create -> all copies present: p50 {p50:.2f}s  p99 {p99:.2f}s")
            print(f"  {rate:.0f} member writes/s")
            print(f"ratio ours/raw (member write rate): {rate / raw:.2f}")
        finally:
            for client in clients.values():
                await client.close()
    finally:
        if not keep:
            target.down()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--keep", action="store_true", help="leave the fleet running")
    parser.add_argument("--kube-api-qps", type=float, default=None,
                        help="the control plane's per-cluster request rate (default: fedctl's)")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.count, arguments.keep, arguments.kube_api_qps))
