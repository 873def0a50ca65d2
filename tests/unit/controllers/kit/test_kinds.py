"""The kind tracker: following a propagated kind on the hub and in the members, and the
requests its informers' events and its template listing produce."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import pytest

from federation.contexts import client as kube
from federation.contexts.cache import Event
from federation.controllers.kit import kinds
from federation.hub import deny
from federation.runtime import reconcile


class Discovery:
    """Resolves every kind to a resource, except those a member does not serve."""

    def __init__(self, unserved: tuple[str, ...] = (), plural: str | None = None) -> None:
        self.unserved = unserved
        self.plural = plural
        self.resolved: list[tuple[str, str]] = []

    async def resolve(self, api_version: str, kind: str) -> kube.Resource:
        self.resolved.append((api_version, kind))
        if kind in self.unserved:
            raise kube.ApiError("m", 404, "NotFound", f"{kind} not served")
        group, _, version = api_version.rpartition("/")
        return kube.Resource(group, version, self.plural or kind.lower() + "s", kind)


class Informer:
    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.handlers: list[Callable[[Event], None]] = []
        self.store = types.SimpleNamespace(list=lambda _ns, _sel: objects)

    def add_handler(self, handler: Callable[[Event], None]) -> None:
        self.handlers.append(handler)


class Cache:
    def __init__(self, objects: list[dict[str, Any]] | None = None) -> None:
        self.objects = objects or []
        self.informers: dict[kube.Resource, Informer] = {}

    def informer(self, resource: kube.Resource) -> Informer:
        return self.informers.setdefault(resource, Informer(self.objects))


def cluster(name: str, *, is_hub: bool = False, engaged: bool = True,
            discovery: Discovery | None = None,
            objects: list[dict[str, Any]] | None = None) -> Any:
    return types.SimpleNamespace(name=name, is_hub=is_hub, engaged=engaged,
                                 discovery=discovery or Discovery(), cache=Cache(objects))


def fleet(*members: Any, hub_objects: list[dict[str, Any]] | None = None) -> Any:
    hub = cluster("hub", is_hub=True, objects=hub_objects)
    return types.SimpleNamespace(hub=hub, members=[hub, *members])


def web(namespace: str = "shop") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": namespace, "resourceVersion": "3"}}


async def test_tracking_a_kind_follows_it_on_the_hub_and_every_engaged_member() -> None:
    away = cluster("member3", engaged=False)
    clusters = fleet(cluster("member1"), cluster("member2"), away)
    tracker = kinds.KindTracker(clusters, lambda _r, _p: None)
    resource = await tracker.track("apps/v1", "Deployment")
    assert tracker.resource("Deployment.apps") == resource
    assert len(clusters.hub.cache.informers[resource].handlers) == 1
    assert tracker.member_resource("member1", "Deployment.apps") == resource
    assert tracker.member_resource("member2", "Deployment.apps") == resource
    assert tracker.member_resource("member3", "Deployment.apps") is None
    assert away.discovery.resolved == []
    await tracker.track("apps/v1", "Deployment")  # idempotent: no second handler
    assert len(clusters.hub.cache.informers[resource].handlers) == 1


async def test_a_member_that_does_not_serve_the_kind_is_looked_at_again_later() -> None:
    member = cluster("member1", discovery=Discovery(unserved=("Widget",)))
    tracker = kinds.KindTracker(fleet(member), lambda _r, _p: None)
    resource = await tracker.track("example.com/v1", "Widget")
    assert tracker.member_resource("member1", "Widget.example.com") is None
    member.discovery.unserved = ()
    await tracker.track_members(resource, [member])
    assert tracker.member_resource("member1", "Widget.example.com") is not None


async def test_a_denied_kind_under_another_name_is_refused_after_discovery() -> None:
    """The deny list names kinds; a kind served under an unexpected version still is one."""
    clusters = fleet()
    clusters.hub.discovery = Discovery()
    tracker = kinds.KindTracker(clusters, lambda _r, _p: None,
                                denied=deny.DenyList.configured(("example.com/Widget",)))
    with pytest.raises(deny.Denied, match="deny list"):
        await tracker.track("example.com/v2", "Widget")
    assert tracker.hub_resources == {}


async def test_templates_lists_every_cached_template_of_the_tracked_kinds() -> None:
    clusters = fleet(hub_objects=[web("shop"), web("bank")])
    tracker = kinds.KindTracker(clusters, lambda _r, _p: None)
    await tracker.track("apps/v1", "Deployment")
    found = tracker.templates()
    assert {(r.namespace, r.name) for r in found} == {("shop", "web"), ("bank", "web")}
    assert tracker.templates("ConfigMap") == []


def test_member_events_wait_and_bring_their_related_templates() -> None:
    """With a delayed queue, a copy's event waits MEMBER_EVENT_DELAY, and so does every
    further template the wiring says it concerns (a propagateDeps dependency's carriers)."""
    delayed: list[tuple[reconcile.Request, float]] = []
    tracker = kinds.KindTracker(fleet(cluster("member1")), lambda _r, _p: None,
                                enqueue_after=lambda r, d, _p: delayed.append((r, d)))
    carrier = reconcile.Request("hub", "Deployment.apps", "shop", "api")
    tracker.related = lambda _event: [carrier]
    tracker._copy_event(Event("MODIFIED", "member1", kube.DEPLOYMENTS, web()))
    assert [(r.name, d) for r, d in delayed] == [("web", kinds.MEMBER_EVENT_DELAY),
                                                ("api", kinds.MEMBER_EVENT_DELAY)]


def test_a_first_list_of_member_copies_is_queued_at_once_without_timers() -> None:
    """The copies found at start are no burst of changes: queued at once at the copies'
    priority (a key the hub's first list queued already takes nothing more), no timer."""
    delayed: list[reconcile.Request] = []
    queued: list[tuple[reconcile.Request, int]] = []
    tracker = kinds.KindTracker(fleet(cluster("member1")), lambda r, p: queued.append((r, p)),
                                enqueue_after=lambda r, _d, _p: delayed.append(r))
    tracker._copy_event(Event("ADDED", "member1", kube.DEPLOYMENTS, web(), initial=True))
    assert delayed == []
    assert queued == [(reconcile.Request("hub", "Deployment.apps", "shop", "web"),
                       kinds.COPY_EVENT_PRIORITY)]
