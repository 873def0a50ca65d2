"""An informer's first list survives a page that times out: the page is asked again with
the same continue token, not the whole list from the start."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from federation.contexts import cache, clusters
from federation.contexts import client as kube
from tests.unit.clients import Unserved
from tests.unit.runtime import virtual

pytestmark = pytest.mark.timeout(30)


class SlowPages(Unserved):
    """Three pages of two ConfigMaps; the pages named in ``failing`` time out once each
    (``forever``: every time)."""

    name = "hub"

    def __init__(self, failing: set[str], forever: bool = False) -> None:
        self.failing = failing
        self.forever = forever
        self.asked: list[str] = []

    async def list(self, resource: kube.Resource, namespace: str | None = None,
                   **params: Any) -> dict[str, Any]:
        token = params.get("continue") or "p0"
        self.asked.append(token)
        if token in self.failing:
            if not self.forever:
                self.failing.discard(token)
            raise kube.ClusterUnavailable("hub", f"GET page {token}: timed out")
        index = int(token[1:])
        items = [{"metadata": {"name": f"c{index}-{i}", "namespace": "ns",
                               "resourceVersion": "1"}} for i in range(2)]
        meta = {"resourceVersion": "9"} if index == 2 else {"continue": f"p{index + 1}"}
        return {"items": items, "metadata": meta}

    async def watch(self, resource: kube.Resource, **_: Any) -> AsyncIterator[dict[str, Any]]:
        await asyncio.sleep(3600)
        yield {}


async def synced(client: Unserved, timeout: float = 60, *,
                 informer: cache.Informer | None = None) -> cache.Informer:
    informer = informer or cache.Informer(client, kube.CONFIGMAPS)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), timeout)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return informer


def test_a_page_that_times_out_is_asked_again_not_the_whole_list() -> None:
    async def scenario() -> None:
        client = SlowPages({"p1", "p2"})
        informer = await synced(client)
        assert client.asked == ["p0", "p1", "p1", "p2", "p2"]  # p0 was never asked again
        assert len(informer.store) == 6 and informer.lists == 1 and informer.restarts == 0

    virtual.run(scenario())


def test_a_page_that_keeps_failing_starts_the_list_over_after_the_retries() -> None:
    async def scenario() -> None:
        client = SlowPages({"p1"}, forever=True)
        informer = cache.Informer(client, kube.CONFIGMAPS)
        task = asyncio.create_task(informer.run())
        await asyncio.sleep(4)  # three retries 0.8 s apart, then the informer's backoff
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert client.asked[:5] == ["p0", "p1", "p1", "p1", "p1"]
        assert informer.restarts >= 1 and not informer.synced.is_set()

    virtual.run(scenario())


def test_a_first_page_that_fails_is_the_informers_backoff_as_before() -> None:
    async def scenario() -> None:
        client = SlowPages({"p0"})
        informer = await synced(client)
        assert client.asked[:2] == ["p0", "p0"] and informer.restarts == 1
        assert len(informer.store) == 6

    virtual.run(scenario())


FROM_CACHE = cache.CacheSettings(first_list_from_cache=True)


class Versions(Unserved):
    """Records each list's query; the first watch says the version is gone (410) once, so
    the informer relists; ``paged``: the server pages even a watch-cache read."""

    name = "hub"

    def __init__(self, paged: bool = False) -> None:
        self.paged = paged
        self.lists: list[dict[str, Any]] = []
        self.watches = 0

    async def list(self, resource: kube.Resource, namespace: str | None = None,
                   **params: Any) -> dict[str, Any]:
        self.lists.append(dict(params))
        last = not self.paged or params.get("continue") == "p1"
        items = [{"metadata": {"name": f"c{len(self.lists)}", "namespace": "ns",
                               "resourceVersion": "1"}}]
        return {"items": items,
                "metadata": {"resourceVersion": "9"} if last else {"continue": "p1"}}

    async def watch(self, resource: kube.Resource, **_: Any) -> AsyncIterator[dict[str, Any]]:
        self.watches += 1
        if self.watches == 1:
            raise kube.ApiError("hub", 410, "Expired", "too old resource version")
        await asyncio.sleep(3600)
        yield {}


def test_the_first_list_reads_the_watch_cache_and_a_relist_reads_etcd() -> None:
    """``resourceVersion=0`` on the first list only (any recent state is a fine start: the
    watch resumes from it); the relist after a 410 is a consistent paged read."""

    async def scenario() -> None:
        client = Versions()
        informer = cache.Informer(client, kube.CONFIGMAPS, settings=FROM_CACHE)
        task = asyncio.create_task(informer.run())
        await asyncio.sleep(5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert [q.get("resourceVersion") for q in client.lists] == ["0", None]
        # The whole answer gets the longer bound; the relist's pages the client's own.
        assert [q.get("request_timeout") for q in client.lists] == \
            [informer.settings.first_list_timeout, None]
        assert all(q["limit"] == informer.settings.page_size for q in client.lists)
        assert informer.lists == 2 and informer.relists == 1

    virtual.run(scenario())


def test_a_server_that_pages_the_cache_read_gets_no_version_with_its_token() -> None:
    """The API server refuses a resourceVersion beside a continue token."""

    async def scenario() -> None:
        client = Versions(paged=True)
        informer = await synced(client, informer=cache.Informer(client, kube.CONFIGMAPS,
                                                                settings=FROM_CACHE))
        assert client.lists[0].get("resourceVersion") == "0"
        assert client.lists[1].get("continue") == "p1"
        assert "resourceVersion" not in client.lists[1]
        assert len(informer.store) == 2

    virtual.run(scenario())


def test_the_cache_read_is_the_default_and_can_be_turned_off() -> None:
    async def first_query(settings: cache.CacheSettings) -> dict[str, Any]:
        client = Versions()
        await synced(client, 5, informer=cache.Informer(client, kube.CONFIGMAPS,
                                                        settings=settings))
        return client.lists[0]

    async def scenario() -> None:
        assert (await first_query(cache.CacheSettings())).get("resourceVersion") == "0"
        paged = await first_query(cache.CacheSettings(first_list_from_cache=False))
        assert "resourceVersion" not in paged and paged.get("request_timeout") is None

    virtual.run(scenario())


class ManyInOnePage(Unserved):
    """1,200 ConfigMaps in one answer (a watch-cache list)."""

    name = "hub"

    async def list(self, resource: kube.Resource, namespace: str | None = None,
                   **params: Any) -> dict[str, Any]:
        items = [{"metadata": {"name": f"c{i:04d}", "namespace": "ns", "resourceVersion": "1"}}
                 for i in range(1200)]
        return {"items": items, "metadata": {"resourceVersion": "9"}}

    async def watch(self, resource: kube.Resource, **_: Any) -> AsyncIterator[dict[str, Any]]:
        await asyncio.sleep(3600)
        yield {}


def test_a_long_list_is_stored_in_batches_with_the_loop_turning_between() -> None:
    """Other tasks (a shard round) run between batches of cache.REPLACE_BATCH; every object
    is stored and handed out, and the informer is synced only after the last batch."""

    async def scenario() -> None:
        turns = 0

        async def ticker() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        client = ManyInOnePage()
        informer = cache.Informer(client, kube.CONFIGMAPS)
        seen: list[tuple[str, int, bool]] = []
        informer.add_handler(lambda e: seen.append((e.obj["metadata"]["name"], turns,
                                                    informer.synced.is_set())))
        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        await synced(client, informer=informer)
        ticking.cancel()
        assert [name for name, _, _ in seen] == [f"c{i:04d}" for i in range(1200)]
        assert not any(was_synced for _, _, was_synced in seen)
        batch = cache.REPLACE_BATCH
        assert seen[0][1] == seen[batch - 1][1] < seen[batch][1] < seen[2 * batch][1]

    virtual.run(scenario())


class SilentWhole(Versions):
    """A server whose whole (watch-cache) answer never comes in time: the client gives up
    on its silence; pages answer."""

    async def list(self, resource: kube.Resource, namespace: str | None = None,
                   **params: Any) -> dict[str, Any]:
        if params.get("resourceVersion") == "0":
            self.lists.append(dict(params))
            raise kube.ClusterUnavailable("member1", "GET deployments: timed out")
        return await super().list(resource, namespace, **params)


def test_a_whole_list_that_fails_makes_the_informer_list_in_pages() -> None:
    """A member too big (or too busy) to answer whole within the silence bound still syncs:
    after one failed whole answer, the informer's next first list is paged."""

    async def scenario() -> None:
        client = SilentWhole()
        informer = await synced(client, 10, informer=cache.Informer(
            client, kube.CONFIGMAPS, settings=FROM_CACHE))
        whole, paged = client.lists[0], client.lists[1]
        assert whole.get("resourceVersion") == "0"
        assert whole.get("silence_timeout") is None  # a member's: the client's own bound
        assert "resourceVersion" not in paged and paged.get("request_timeout") is None
        assert informer.restarts == 1 and len(informer.store) == 1

    virtual.run(scenario())


def test_the_hubs_whole_list_waits_out_its_silence_and_a_members_does_not() -> None:
    """The hub's caches wait the whole ``first_list_timeout`` for a first byte; a member's
    give up after the client's own bound (None here: ``ClusterClient`` fills it in)."""
    hub = clusters.Cluster("hub", is_hub=True, client=Versions())
    member = clusters.Cluster("member1", client=Versions())
    assert hub.cache is not None and member.cache is not None
    assert hub.cache.settings.first_list_silence == hub.cache.settings.first_list_timeout == 60
    assert member.cache.settings.first_list_silence is None
    chosen = cache.CacheSettings(first_list_silence=5.0)
    assert chosen.for_hub() is chosen  # a silence set on purpose is kept for the hub too
