"""An engaged cluster's life under one cancel scope (multicluster-runtime's "engaged cluster").

Engaging a cluster starts several things that must all end together when it
leaves (``fedctl unjoin``, its Secret removed or refused, shutdown): its
informers, its prober, whatever per-cluster tasks controllers start, and the
connection pool of its client. An :class:`Engagement` owns all of them. It is
started once (:meth:`Engagement.start`) and stopped once
(:meth:`Engagement.stop`): every task it spawned is cancelled and awaited, the
caches stop, and the client is closed unless it is shared (a member context
pointing at the hub's own API server reuses the hub's pool, which the hub's
engagement closes). Nothing else keeps per-cluster tasks or connections, so
leaving a cluster is this one call, and a test can check that nothing of the
cluster is left running after it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Protocol

from federation.contexts import cache, health

log = logging.getLogger("federation.engagement")


class Closable(Protocol):
    async def close(self) -> None: ...


class Engagement:
    """One engaged cluster: its client, caches, prober and tasks; see the module docstring."""

    def __init__(self, name: str, client: Closable, caches: cache.ClusterCache,
                 prober: health.ProbeLoop, *, owns_client: bool = True) -> None:
        self.name = name
        self.client = client
        self.cache = caches
        self.prober = prober
        self.owns_client = owns_client
        self.started = False
        self.stopped = False
        self._tasks: set[asyncio.Task[Any]] = set()

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else "started" if self.started else "new"
        return f"<Engagement {self.name} {state}, {len(self._tasks)} tasks>"

    @property
    def tasks(self) -> list[asyncio.Task[Any]]:
        """The tasks spawned here and still running (informers run in the cache's own)."""
        return [t for t in self._tasks if not t.done()]

    def start(self) -> None:
        """Start the informers asked for so far and the prober (once; later calls do nothing)."""
        if self.started or self.stopped:
            return
        self.started = True
        self.cache.start()
        self.spawn(self.prober.run(), f"health probe of {self.name}")

    def spawn(self, coroutine: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coroutine`` for as long as the cluster is engaged (cancelled by :meth:`stop`)."""
        if self.stopped:
            coroutine.close()
            raise RuntimeError(f"cluster {self.name} has left; {name} not started")
        task = asyncio.create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop(self) -> None:
        """Cancel and await every task, stop the caches, close the client (if ours)."""
        if self.stopped:
            return
        self.stopped = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for result in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(result, Exception):  # leaving must finish; a task dying now is moot
                log.debug("a task of cluster %s ended with %r while leaving", self.name, result)
        await self.cache.stop()
        if self.owns_client:
            await self.client.close()
