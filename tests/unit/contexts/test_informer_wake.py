"""An informer backing off after an outage retries at once when its cluster answers again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from federation.contexts import cache
from federation.contexts import client as kube
from tests.unit.clients import Unserved


class FlakyClient(Unserved):
    name = "member2"

    def __init__(self) -> None:
        self.lists = 0

    async def list(self, resource: kube.Resource, namespace: str | None = None,
                   **_: Any) -> dict[str, Any]:
        self.lists += 1
        if self.lists == 1:
            raise kube.ClusterUnavailable("member2", "connection refused")
        return {"items": [], "metadata": {"resourceVersion": "1"}}

    async def watch(self, resource: kube.Resource, **_: Any) -> AsyncIterator[dict[str, Any]]:
        await asyncio.sleep(3600)
        yield {}


@pytest.mark.timeout(30)
async def test_wake_cuts_a_long_backoff_short() -> None:
    """With a 60 s backoff pending, wake() makes the informer list again at once."""
    settings = cache.CacheSettings(backoff_initial=60.0, backoff_max=60.0)
    informer = cache.Informer(FlakyClient(), kube.CONFIGMAPS,
                              settings=settings)
    task = asyncio.create_task(informer.run())
    try:
        for _ in range(500):
            if informer.state == "backoff":
                break
            await asyncio.sleep(0.01)
        assert informer.state == "backoff"
        informer.wake()
        await asyncio.wait_for(informer.synced.wait(), 2)
        assert informer.lists == 1 and informer.restarts == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
