"""The mirror: list then watch as the user; a refusal narrows to a namespace and says so."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from federation.contexts.client import ApiError, ClusterUnavailable, Resource
from federation.dashboard import mirror as mirror_
from federation.hub import api
from tests.unit.clients import Unserved

JSON = dict[str, Any]
APPS = mirror_.Source("applications", api.APPLICATIONS)
MEMBERS = mirror_.Source("members", api.MEMBER_CLUSTERS)


def obj(namespace: str, name: str, **extra: Any) -> JSON:
    return {"metadata": {"namespace": namespace, "name": name}, **extra}


class Hub(Unserved):
    """Lists what it holds per namespace; refuses cluster-wide when ``narrow``; each watch
    replays ``events`` once, then stays open until cancelled."""

    def __init__(self, held: dict[str, list[JSON]], narrow: bool = False,
                 events: list[JSON] | None = None, fail_lists: int = 0) -> None:
        self.held = held
        self.narrow = narrow
        self.events = list(events or [])
        self.fail_lists = fail_lists
        self.listed: list[str | None] = []

    async def list(self, resource: Resource, namespace: str | None = None,
                   **params: Any) -> JSON:
        self.listed.append(namespace)
        if self.fail_lists:
            self.fail_lists -= 1
            raise ClusterUnavailable("hub", "connection refused")
        if namespace is None and self.narrow and resource.namespaced:
            raise ApiError("hub", 403, "Forbidden", "user bob cannot list applications")
        items = [o for ns, objs in self.held.items() for o in objs
                 if namespace is None or ns == namespace]
        return {"metadata": {"resourceVersion": "7"}, "items": items}

    async def watch(self, resource: Resource, *, namespace: str | None = None,
                    resource_version: str | None = None, timeout_seconds: int = 290,
                    inactivity_timeout: float | None = None,
                    **params: Any) -> AsyncIterator[JSON]:
        while self.events:
            yield self.events.pop(0)
        await asyncio.Event().wait()


async def settle(found: mirror_.Mirror, condition: Any) -> None:
    seen = -1
    while not condition():
        seen = await asyncio.wait_for(found.wait(seen), 2)


async def test_a_user_who_may_not_list_cluster_wide_sees_their_namespace_only() -> None:
    hub = Hub({"shop": [obj("shop", "web")], "bank": [obj("bank", "vault")]}, narrow=True)
    found = mirror_.Mirror(hub, fallback_namespace="shop", sources=[APPS])
    task = asyncio.create_task(found.run())
    try:
        await settle(found, lambda: found.objects["applications"])
        assert list(found.objects["applications"]) == [("shop", "web")]
        assert found.notes["applications"].startswith("forbidden cluster-wide (hub: 403")
        assert found.notes["applications"].endswith("namespace shop only")
        assert hub.listed == [None, "shop"]
    finally:
        task.cancel()


async def test_given_namespaces_are_the_only_ones_read() -> None:
    hub = Hub({"shop": [obj("shop", "web")], "bank": [obj("bank", "vault")]})
    found = mirror_.Mirror(hub, ["bank"], sources=[APPS])
    task = asyncio.create_task(found.run())
    try:
        await settle(found, lambda: found.objects["applications"])
        assert list(found.objects["applications"]) == [("bank", "vault")]
        assert hub.listed == ["bank"]
    finally:
        task.cancel()


async def test_watch_events_change_what_is_shown() -> None:
    events = [{"type": "ADDED", "object": obj("", "member2")},
              {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
              {"type": "DELETED", "object": obj("", "member1")}]
    hub = Hub({"": [obj("", "member1")]}, events=events)
    found = mirror_.Mirror(hub, sources=[MEMBERS])
    task = asyncio.create_task(found.run())
    try:
        await settle(found, lambda: list(found.objects["members"]) == [("", "member2")])
    finally:
        task.cancel()


async def test_an_unreachable_hub_is_noted_then_read_when_back() -> None:
    pauses: list[float] = []
    notes: list[str | None] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        notes.append(found.notes.get("members"))

    hub = Hub({"": [obj("", "member1")]}, fail_lists=2)
    found = mirror_.Mirror(hub, sources=[MEMBERS], sleep=sleep)
    task = asyncio.create_task(found.run())
    try:
        await settle(found, lambda: found.objects["members"])
        assert notes == ["hub: connection refused"] * 2
        assert pauses == [1.0, 2.0]
        assert "members" not in found.notes  # read again: the note is gone
    finally:
        task.cancel()


def test_only_the_newest_events_are_kept() -> None:
    found = mirror_.Mirror(Hub({}), sources=[mirror_.Source("events", api.EVENTS)])
    store = found.objects["events"]
    for n in range(mirror_.EVENTS_KEPT + 5):
        store[("ns", f"e{n}")] = obj("ns", f"e{n}", lastTimestamp=f"2026-01-01T00:{n:05d}")
    found._trim("events")
    assert len(store) == mirror_.EVENTS_KEPT
    assert ("ns", "e0") not in store and ("ns", f"e{mirror_.EVENTS_KEPT + 4}") in store
