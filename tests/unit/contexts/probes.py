"""Drive a cluster's one prober with scripted results, on no clock at all."""

from __future__ import annotations

from federation.contexts.clusters import Cluster
from federation.contexts.health import ProbeLoop, ProbeResult


class Silent:
    name = "scripted"

    async def request_raw(self, path: str, *, timeout: float | None = None) -> bytes:
        raise AssertionError("scripted probes never reach a client")


def result(ready: bool, detail: str | None = None, reachable: bool | None = None) -> ProbeResult:
    return ProbeResult(ready if reachable is None else reachable, ready,
                       detail or ("GET /readyz: ok" if ready else "GET /readyz: refused"))


async def probe(cluster: Cluster, outcome: ProbeResult, times: int = 1,
                now: float = 1_700_000_000.0) -> None:
    """Feed ``outcome`` to the cluster's prober ``times`` times (its real transition path)."""

    async def scripted(_: object, __: float) -> ProbeResult:
        return outcome

    loop = ProbeLoop(Silent(), cluster.health, cluster.on_transition, probe=scripted,
                     clock=lambda: now)
    for _ in range(times):
        await loop.once()


async def settle(cluster: Cluster, outcome: ProbeResult) -> None:
    """Probe until the cluster's ready state is the outcome's (at most the threshold)."""
    settings = cluster.health.settings
    for _ in range(max(settings.failure_threshold, settings.success_threshold)):
        if cluster.available is outcome.ready:
            return
        await probe(cluster, outcome)
    assert cluster.available is outcome.ready
