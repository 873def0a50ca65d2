"""Cache ingest: informer objects/second vs. raw HTTP reads, and memory per cached object.

Run: ``python bench/cache_bench.py [--pods N] [--updates M] [--state-dir D --kubeconfig K]``
(starts or reuses a local fleet; uses the Pods of bench/client_bench.py on member1).

In one run:

1. **list**: the raw rate of reading the N Pods with plain HTTP (paginated GETs,
   bytes only) vs. an :class:`~federation.contexts.cache.Informer`'s first list
   (pages decoded, managedFields stripped, stored and indexed): objects/second
   and the ratio;
2. **watch**: M label updates written by 16 concurrent writers; the rate at
   which the informer applies the resulting events vs. the rate the server
   accepted the writes (the informer cannot see changes faster than they are
   made, so ~1.0 means it keeps up);
3. **memory**: resident memory (RSS) grown by holding the N cached Pods, per
   object, vs. each Pod's JSON size; and the bytes a store retains per object by
   tracemalloc (RSS understates when the allocator reuses memory freed earlier);
4. **reads**: the multi-cluster client's cached reads of the N Pods, a ``list`` of
   the namespace and a ``get`` of each, as deep copies (``copy=True``, the default)
   vs. the cached objects themselves (``copy=False``): microseconds per object and
   the ratio copy/no-copy.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from client_bench import (
    NAMESPACE,
    PODS,
    add_fleet_arguments,
    ensure_pods,
    fleet_from_args,
)

from federation.contexts import cache, clusters, kubeconfig, multicluster
from federation.contexts import client as kube


def rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def raw_read(client: kube.ClusterClient) -> tuple[float, int, int]:
    """Seconds to GET every page (bytes only), objects, and total JSON bytes."""
    started = time.perf_counter()
    token, objects, size = None, 0, 0
    while True:
        params = {"limit": 500, "continue": token}
        body = await client.request_raw(PODS.path(NAMESPACE), params=params, timeout=120)
        size += len(body)
        elapsed = time.perf_counter() - started
        page = json.loads(body)  # outside the timing: only to follow the continue token
        objects += len(page["items"])
        token = page["metadata"].get("continue")
        started = time.perf_counter() - elapsed
        if not token:
            return time.perf_counter() - started, objects, size


def best(rounds: int, call: Callable[[], Awaitable[object]]) -> Callable[[], Awaitable[float]]:
    async def timed() -> float:
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            await call()
            times.append(time.perf_counter() - started)
        return min(times)

    return timed


async def reads(client: kube.ClusterClient, count: int) -> dict[str, tuple[float, float]]:
    """Seconds per object (copy, no copy) of cached list and get, through the client."""
    cluster = clusters.Cluster(client.name, is_hub=True, client=client)
    cluster.available = True
    mc = multicluster.MultiClusterClient(clusters.ClusterSet([cluster]))
    names = [f"bench-{i:05d}" for i in range(count)]

    async def get_all(copy: bool) -> None:
        for name in names:
            await mc.get(PODS, name, NAMESPACE, cluster=client.name, copy=copy)

    found: dict[str, tuple[float, float]] = {}
    try:
        await mc.list(PODS, NAMESPACE, clusters=[client.name], copy=False)  # list and sync
        for label, call in (("list", lambda copy: mc.list(PODS, NAMESPACE,
                                                          clusters=[client.name], copy=copy)),
                            ("get", get_all)):
            copied = await best(5, functools.partial(call, True))()
            shared = await best(5, functools.partial(call, False))()
            found[label] = (copied / count, shared / count)
    finally:
        assert cluster.cache is not None
        await cluster.cache.stop()
    return found


async def measure(context: kubeconfig.Context, count: int, updates: int) -> None:
    settings = kube.ClientSettings(request_timeout=120)  # no client-side limit (the default)
    async with kube.connect(context, settings) as client:
        await ensure_pods(client, count)
        raw_seconds = min([(await raw_read(client))[0] for _ in range(3)])
        _, objects, size = await raw_read(client)

        gc.collect()
        memory_before = rss()
        informer = cache.Informer(client, PODS, namespace=NAMESPACE)
        applied = asyncio.Event()
        seen = 0
        target = 0

        def on_event(event: cache.Event) -> None:
            nonlocal seen
            if event.type == "MODIFIED":
                seen += 1
                if seen >= target > 0:
                    applied.set()

        informer.add_handler(on_event)
        started = time.perf_counter()
        task = asyncio.create_task(informer.run())
        await informer.wait_synced(120)
        list_seconds = time.perf_counter() - started
        gc.collect()
        memory_after = rss()

        target = updates
        semaphore = asyncio.Semaphore(16)
        stamp = str(time.time_ns())

        async def touch(index: int) -> None:
            async with semaphore:
                await client.patch(PODS, f"bench-{index % count:05d}",
                                   {"metadata": {"labels": {"touched": f"{stamp}-{index}"}}},
                                   namespace=NAMESPACE)

        started = time.perf_counter()
        await asyncio.gather(*(touch(i) for i in range(min(updates, count))))
        write_seconds = time.perf_counter() - started
        await asyncio.wait_for(applied.wait(), 120)
        watch_seconds = time.perf_counter() - started
        task.cancel()
        # RSS above can reuse memory freed by earlier decoding; tracemalloc counts exactly
        # what a second informer's store retains.
        gc.collect()
        tracemalloc.start()
        second = cache.Informer(client, PODS, namespace=NAMESPACE)
        second_task = asyncio.create_task(second.run())
        await second.wait_synced(120)
        second_task.cancel()
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] / len(second.store)
        tracemalloc.stop()
        del second
        read_costs = await reads(client, count)

    per_object = (memory_after - memory_before) / objects
    print(f"\n{objects} Pods on {context.name}, {size / objects:.0f} B of JSON each")
    print("list   raw HTTP (bytes only)     "
          f"{objects / raw_seconds:>9.0f} objects/s")
    print("list   informer (decode+store)   "
          f"{objects / list_seconds:>9.0f} objects/s   "
          f"ratio to raw {raw_seconds / list_seconds:.2f}")
    n = min(updates, count)
    print(f"watch  server accepted writes    {n / write_seconds:>9.0f} objects/s")
    print(f"watch  informer applied events   {n / watch_seconds:>9.0f} objects/s"
          f"   ratio to writes {write_seconds / watch_seconds:.2f}")
    print(f"memory resident per cached Pod   {per_object / 1024:>9.1f} KiB"
          f"   ratio to its JSON {per_object / (size / objects):.2f}")
    print(f"memory retained per cached Pod   {traced / 1024:>9.1f} KiB"
          f"   ratio to its JSON {traced / (size / objects):.2f}   (tracemalloc)")
    for label, (copied, shared) in read_costs.items():
        print(f"read   {label:<4} copy / no copy     {copied * 1e6:>7.1f} / {shared * 1e6:.2f} "
              f"µs/object   ratio {copied / shared:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--updates", type=int, default=1000)
    add_fleet_arguments(parser)
    args = parser.parse_args()
    target = fleet_from_args(args)
    context = kubeconfig.load(target.kubeconfig).context(args.context)
    asyncio.run(measure(context, args.pods, args.updates))


if __name__ == "__main__":
    main()
