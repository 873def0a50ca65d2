"""Client choice: kubernetes_asyncio's models vs. plain dicts from a thin aiohttp client.

Run: ``python bench/client_bench.py [--pods N] [--rounds R] [--state-dir D --kubeconfig K]``
(starts or reuses a local fleet; pods go into namespace ``bench`` of member1).

The same list of N Pods is read several ways, in one run, best of R rounds:

- raw: the HTTP body only (aiohttp, no decoding): the transport's floor;
- thin: :class:`federation.contexts.client.ClusterClient` (aiohttp + json.loads
  to dicts): what the control plane uses;
- thin+orjson: the same bytes decoded with orjson, when it is installed;
- k8s-asyncio models: ``CoreV1Api.list_namespaced_pod`` (deserialised to models);
- k8s-asyncio raw: the same call with ``_preload_content=False`` + json.loads.

For each: microseconds per object and retained memory per object (tracemalloc
of the decoded result), and ratios to the thin client. docs/runtime.md records
the numbers and the decision.

``--writes W`` (``--writes-only`` to skip the reads) measures the client-side rate
limit instead: W ConfigMap creates, 16 in flight, with the old default limit (50 qps,
burst 100) and with none (today's default), alternating, best of 3 each: writes per
second and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from federation.contexts import client as kube
from federation.contexts import kubeconfig
from federation.local import fleet as local_fleet

PODS = kube.Resource("", "v1", "pods", "Pod")
SERVICE_ACCOUNTS = kube.Resource("", "v1", "serviceaccounts", "ServiceAccount")
NAMESPACE = "bench"
ROOT = Path(__file__).resolve().parent.parent


def pod(index: int) -> dict[str, Any]:
    """A Pod shaped like a real one: labels, two containers, env, resources, probes."""
    name = f"bench-{index:05d}"
    container = {
        "name": "app", "image": "registry.example/team/app:1.2.3",
        "args": ["--port=8080", "--log-level=info"],
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": f"SETTING_{i}", "value": f"value-{i}-{index}"} for i in range(6)],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"cpu": "500m", "memory": "256Mi"}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
    }
    sidecar = {"name": "proxy", "image": "registry.example/proxy:0.9",
               "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "labels": {"app": "bench", "tier": "web", "index": str(index % 10)},
                         "annotations": {"example.com/owner": "team-a"}},
            "spec": {"automountServiceAccountToken": False, "containers": [container, sidecar],
                     "nodeSelector": {"kubernetes.io/os": "linux"}}}


def fleet_from_args(args: argparse.Namespace) -> local_fleet.Fleet:
    target = local_fleet.Fleet(Path(args.state_dir), Path(args.kubeconfig))
    if not (target.exists() and all(s.ready for s in target.status())):
        target.up(1, progress=lambda m: print(m, file=sys.stderr))
    return target


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", default=str(ROOT / ".fleet-bench"))
    parser.add_argument("--kubeconfig", default=str(ROOT / "kubeconfigs" / "bench.local.yaml"))
    parser.add_argument("--context", default="member1")


async def ensure_pods(client: kube.ClusterClient, count: int) -> None:
    """Namespace ``bench`` holding exactly pods bench-00000.. up to ``count``."""
    for resource, body in ((kube.NAMESPACES, {"metadata": {"name": NAMESPACE}}),
                           (SERVICE_ACCOUNTS, {"metadata": {"name": "default",
                                                            "namespace": NAMESPACE}})):
        try:
            await client.create(resource, body)
        except kube.ApiError as exc:
            if exc.status != 409:
                raise
    have = {p["metadata"]["name"] for p in (await client.list(PODS, NAMESPACE))["items"]}
    missing = [i for i in range(count) if pod(i)["metadata"]["name"] not in have]
    semaphore = asyncio.Semaphore(16)

    async def create(index: int) -> None:
        async with semaphore:
            await client.create(PODS, pod(index))

    await asyncio.gather(*(create(i) for i in missing))


async def best(rounds: int, read: Callable[[], Awaitable[Any]]) -> tuple[float, int, Any]:
    """Fastest of ``rounds`` reads (seconds), bytes retained by one result, and the result."""
    fastest = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        await read()
        fastest = min(fastest, time.perf_counter() - started)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    result = await read()
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return fastest, retained, result


async def measure(context: kubeconfig.Context, count: int, rounds: int) -> None:
    settings = kube.ClientSettings(request_timeout=120)  # no client-side limit (the default)
    async with kube.connect(context, settings) as client:
        await ensure_pods(client, count)
        path = PODS.path(NAMESPACE)
        rows: list[tuple[str, float, int]] = []

        async def raw() -> bytes:
            return await client.request_raw(path, timeout=120)

        async def thin() -> Any:
            return (await client.list(PODS, NAMESPACE))["items"]

        for label, read in (("raw bytes (aiohttp)", raw), ("thin: aiohttp + json", thin)):
            seconds, memory, _ = await best(rounds, read)
            rows.append((label, seconds, memory))
        body = await raw()
        try:
            import orjson  # type: ignore[import-not-found, unused-ignore]

            async def thin_orjson() -> Any:
                return orjson.loads(await client.request_raw(path, timeout=120))["items"]

            seconds, memory, _ = await best(rounds, thin_orjson)
            rows.append(("thin: aiohttp + orjson", seconds, memory))
        except ImportError:
            print("(orjson not installed: skipped)")
        rows.extend(await measure_kubernetes_asyncio(context, rounds))
    objects = len(json.loads(body)["items"])
    print(f"\n{objects} Pods, average JSON size {len(body) / objects:.0f} B, best of {rounds}")
    thin_row = rows[1]
    print(f"{'reader':<34} {'µs/object':>10} {'KiB/object':>11} {'time x':>7} {'mem x':>7}")
    for label, seconds, memory in rows:
        print(f"{label:<34} {seconds / objects * 1e6:>10.1f} {memory / objects / 1024:>11.1f} "
              f"{seconds / thin_row[1]:>7.2f} {memory / max(thin_row[2], 1):>7.2f}")


async def measure_kubernetes_asyncio(context: kubeconfig.Context,
                                     rounds: int) -> list[tuple[str, float, int]]:
    try:
        from kubernetes_asyncio import client as k8s
        from kubernetes_asyncio import config as k8s_config
    except ImportError:
        print("(kubernetes_asyncio not installed: `pip install kubernetes_asyncio` to compare)")
        return []
    configuration = k8s.Configuration()
    loader = k8s_config.kube_config.KubeConfigLoader(
        config_dict=yaml_config(context), active_context=context.name)
    await loader.load_and_set(configuration)
    rows = []
    async with k8s.ApiClient(configuration) as api_client:
        api = k8s.CoreV1Api(api_client)

        async def models() -> Any:
            return (await api.list_namespaced_pod(NAMESPACE)).items

        async def preload_false() -> Any:
            response: Any = await api.list_namespaced_pod(NAMESPACE, _preload_content=False)
            return json.loads(await response.read())["items"]

        for label, read in (("k8s-asyncio: models", models),
                            ("k8s-asyncio: _preload_content=False", preload_false)):
            seconds, memory, _ = await best(rounds, read)
            rows.append((label, seconds, memory))
    return rows


def yaml_config(context: kubeconfig.Context) -> dict[str, Any]:
    """A one-context kubeconfig dict for kubernetes_asyncio's loader (data inline)."""
    import base64

    def b64(data: bytes | None) -> str:
        return base64.b64encode(data or b"").decode()

    return {"apiVersion": "v1", "kind": "Config", "current-context": context.name,
            "clusters": [{"name": "c", "cluster": {
                "server": context.server, "certificate-authority-data": b64(context.ca_data)}}],
            "users": [{"name": "u", "user": {
                "client-certificate-data": b64(context.client_cert_data),
                "client-key-data": b64(context.client_key_data)}}],
            "contexts": [{"name": context.name, "context": {"cluster": "c", "user": "u"}}]}


async def write_rate(context: kubeconfig.Context, settings: kube.ClientSettings,
                     count: int) -> float:
    """Creates per second of ``count`` ConfigMaps, 16 in flight (then deleted, untimed)."""
    async with kube.connect(context, settings) as client:
        gate = asyncio.Semaphore(16)
        prefix = f"w{time.time_ns()}"

        async def create(index: int) -> None:
            async with gate:
                await client.create(kube.CONFIGMAPS, {
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": f"{prefix}-{index}", "namespace": NAMESPACE,
                                 "labels": {"bench": prefix}}, "data": {"k": "v"}})

        started = time.perf_counter()
        await asyncio.gather(*(create(i) for i in range(count)))
        seconds = time.perf_counter() - started
        await client.request("DELETE", kube.CONFIGMAPS.path(NAMESPACE),
                             params={"labelSelector": f"bench={prefix}"}, timeout=120)
        return count / seconds


async def measure_writes(context: kubeconfig.Context, count: int) -> None:
    limited = kube.ClientSettings(qps=50.0, burst=100, request_timeout=120)
    unlimited = kube.ClientSettings(request_timeout=120)
    async with kube.connect(context, unlimited) as client:
        try:
            await client.create(kube.NAMESPACES, {"metadata": {"name": NAMESPACE}})
        except kube.ApiError as exc:
            if exc.status != 409:
                raise
    rates: dict[str, list[float]] = {"limited": [], "unlimited": []}
    for _ in range(3):
        rates["limited"].append(await write_rate(context, limited, count))
        rates["unlimited"].append(await write_rate(context, unlimited, count))
    old, new = max(rates["limited"]), max(rates["unlimited"])
    print(f"\n{count} creates on {context.name}, 16 in flight, best of 3")
    print(f"client limit 50 qps / burst 100 (old default) {old:>8.0f} writes/s")
    print(f"no client-side limit (default)                {new:>8.0f} writes/s"
          f"   ratio {new / old:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--writes", type=int, default=600)
    parser.add_argument("--writes-only", action="store_true")
    add_fleet_arguments(parser)
    args = parser.parse_args()
    target = fleet_from_args(args)
    context = kubeconfig.load(target.kubeconfig).context(args.context)
    if not args.writes_only:
        asyncio.run(measure(context, args.pods, args.rounds))
    if args.writes:
        asyncio.run(measure_writes(context, args.writes))


if __name__ == "__main__":
    main()
