"""The hub's Secrets are cached only in granted namespaces (finding 4, the cache side).

The multi-cluster client and the cache here are the real ones; only the HTTP client is a
fake API server that answers lists and watches per namespace, remembers every list it
was asked for, and answers 403 where the control plane's RBAC would. The attack: the hub
identity could list every Secret (kube-system's, federation-system's CA keys) and its
informer held them all. Now nothing lists Secrets cluster-wide, kube-system and our own
namespace are never listed whatever RoleBinding says, and a read elsewhere is
``NotGranted`` (never "not found").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from federation.contexts import client as kube
from federation.contexts.clusters import Cluster, ClusterSet
from federation.contexts.multicluster import MultiClusterClient
from federation.contexts.scoped import NotGranted, ScopedInformer
from federation.controllers.kit import secrets
from federation.rbac import roles
from tests.unit.clients import Unserved

JSON = dict[str, Any]
SECRETS = secrets.SECRETS


def binding(namespace: str, *, role: str = roles.SECRETS_ROLE,
            user: str = roles.USER) -> JSON:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": roles.SECRETS_ROLE, "namespace": namespace,
                         "resourceVersion": "1"},
            "roleRef": {"apiGroup": roles.RBAC_GROUP, "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "apiGroup": roles.RBAC_GROUP, "name": user}]}


def secret(namespace: str, name: str = "s") -> JSON:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
            "data": {"k": "dg=="}}


class FakeHubServer(Unserved):
    """Lists and watches per (resource, namespace); Secrets readable only where ``rbac``
    allows (403 elsewhere, as the API server would answer the control plane)."""

    name = "hub"

    def __init__(self, objects: list[JSON], rbac: set[str | None] | None) -> None:
        self.objects = objects
        self.rbac = rbac
        self.lists: list[tuple[str, str | None, str | None]] = []
        self.queues: dict[tuple[str, str | None], asyncio.Queue[JSON]] = {}

    def _matching(self, resource: kube.Resource, namespace: str | None,
                  field_selector: str | None) -> list[JSON]:
        found = [o for o in self.objects if o["kind"] == resource.kind
                 and namespace in (None, o["metadata"]["namespace"])]
        if field_selector:
            name = field_selector.removeprefix("metadata.name=")
            found = [o for o in found if o["metadata"]["name"] == name]
        return found

    def _check(self, resource: kube.Resource, namespace: str | None) -> None:
        if resource.kind == "Secret" and self.rbac is not None and namespace not in self.rbac:
            raise kube.ApiError("hub", 403, "Forbidden", f"secrets in {namespace} forbidden")

    async def list(self, resource: kube.Resource, namespace: str | None = None,
                   **query: Any) -> JSON:
        self.lists.append((resource.plural, namespace, query.get("fieldSelector")))
        self._check(resource, namespace)
        return {"items": [dict(o) for o in self._matching(resource, namespace,
                                                          query.get("fieldSelector"))],
                "metadata": {"resourceVersion": "1"}}

    async def watch(self, resource: kube.Resource, namespace: str | None = None,
                    **_: Any) -> AsyncIterator[JSON]:
        self._check(resource, namespace)
        queue = self.queues.setdefault((resource.plural, namespace), asyncio.Queue())
        while True:
            yield await queue.get()

    def push(self, resource: kube.Resource, namespace: str | None, kind: str,
             obj: JSON) -> None:
        self.queues.setdefault((resource.plural, namespace), asyncio.Queue()).put_nowait(
            {"type": kind, "object": obj})


async def settle(condition: Any, what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{what} not reached")


class Hub:
    def __init__(self, objects: list[JSON], rbac: set[str | None] | None) -> None:
        self.server = FakeHubServer(objects, rbac)
        self.cluster = Cluster("hub", is_hub=True, client=self.server)
        self.cluster.available = True
        self.access = secrets.restrict(self.cluster)
        self.mc = MultiClusterClient(ClusterSet([self.cluster]))
        self.events: list[tuple[str, str, bool]] = []

    @property
    def informer(self) -> ScopedInformer:
        assert self.cluster.cache is not None
        informer = self.cluster.cache.informer(SECRETS)
        assert isinstance(informer, ScopedInformer)
        return informer

    def follow(self) -> None:
        self.informer.add_handler(lambda e: self.events.append(
            (e.type, f"{e.obj['metadata']['namespace']}/{e.obj['metadata']['name']}",
             e.initial)))

    async def close(self) -> None:
        assert self.cluster.cache is not None
        await self.cluster.cache.stop()


EVERYWHERE = None
"""RBAC that would let the control plane read Secrets everywhere (cluster-wide too): it
must still read only the granted namespaces, never the system ones or ours."""


@pytest.mark.timeout(30)
async def test_secrets_are_listed_only_in_granted_namespaces() -> None:
    """RoleBindings in team-a (ours), kube-system and federation-system (never honoured),
    team-b (binding someone else) and other (another role): only team-a is listed, never
    a cluster-wide list of Secrets, even where RBAC would allow it."""
    objects = [binding("team-a"), binding("kube-system"), binding("federation-system"),
               binding("team-b", user="someone-else"), binding("other", role="view"),
               *(secret(ns) for ns in ("team-a", "team-b", "kube-system",
                                        "federation-system", "other")),
               secret("federation-system", "federation-work-ca")]
    hub = Hub(objects, rbac=EVERYWHERE)
    try:
        assert await hub.mc.get(SECRETS, "s", "team-a", cluster="hub") is not None
        listed = [(plural, ns) for plural, ns, _ in hub.server.lists]
        assert ("secrets", "team-a") in listed
        assert [entry for entry in listed if entry[0] == "secrets"] == [("secrets", "team-a")]
        assert ("rolebindings", None, f"metadata.name={roles.SECRETS_ROLE}") in \
            hub.server.lists
        cached = {(o["metadata"]["namespace"], o["metadata"]["name"])
                  for o in hub.informer.store.list()}
        assert cached == {("team-a", "s")}
        for namespace in ("kube-system", "federation-system", "team-b", "other"):
            with pytest.raises(NotGranted) as error:
                await hub.mc.get(SECRETS, "s", namespace, cluster="hub")
            assert f"namespace {namespace}" in str(error.value)
        listing = await hub.mc.list(SECRETS, "kube-system", clusters=["hub"])
        assert isinstance(listing.errors["hub"], NotGranted) and not listing.items
    finally:
        await hub.close()


@pytest.mark.timeout(30)
async def test_a_grant_while_running_lists_the_namespace_as_news() -> None:
    """A RoleBinding made while running: the namespace is listed and its objects come as
    events that are not `initial` (they are reconciled at once); listeners hear it."""
    hub = Hub([secret("team-c")], rbac=EVERYWHERE)
    heard: list[frozenset[str]] = []
    hub.access.on_change(heard.append)
    hub.follow()
    try:
        with pytest.raises(NotGranted):
            await hub.mc.get(SECRETS, "s", "team-c", cluster="hub")
        await settle(lambda: hub.informer.synced.is_set(), "synced")
        hub.server.push(secrets.ROLE_BINDINGS, None, "ADDED", binding("team-c"))
        await settle(lambda: hub.events, "the granted namespace's objects")
        assert hub.events == [("ADDED", "team-c/s", False)]
        assert heard == [frozenset({"team-c"})]
        assert await hub.mc.get(SECRETS, "s", "team-c", cluster="hub") is not None
    finally:
        await hub.close()


@pytest.mark.timeout(30)
async def test_a_revoked_grant_hides_objects_without_deleting_them() -> None:
    """The RoleBinding deleted: the namespace's Secrets leave the cache with no DELETED
    event (nothing may take them for deleted and remove their copies); reads are
    NotGranted, retryable, never None."""
    hub = Hub([binding("team-a"), secret("team-a")], rbac=EVERYWHERE)
    hub.follow()
    try:
        assert await hub.mc.get(SECRETS, "s", "team-a", cluster="hub") is not None
        hub.server.push(secrets.ROLE_BINDINGS, None, "DELETED", binding("team-a"))
        await settle(lambda: not hub.informer.granted, "the grant gone")
        assert [e[0] for e in hub.events] == ["ADDED"]
        assert hub.informer.store.list() == []
        with pytest.raises(NotGranted) as error:
            await hub.mc.get(SECRETS, "s", "team-a", cluster="hub")
        assert error.value.retryable
    finally:
        await hub.close()


@pytest.mark.timeout(30)
async def test_one_namespace_rbac_refuses_does_not_stop_the_others() -> None:
    """A grant the API server does not honour (403 for team-b): team-b's reads are
    unavailable with the 403, team-a's work, and the cache still counts as synced."""
    hub = Hub([binding("team-a"), binding("team-b"), secret("team-a"), secret("team-b")],
              rbac={"team-a"})
    try:
        assert await hub.mc.get(SECRETS, "s", "team-a", cluster="hub") is not None
        await settle(lambda: hub.informer.synced.is_set(), "synced despite team-b")
        assert hub.informer.state == "watching"
        assert "namespace team-b" in str(hub.informer.last_error)
    finally:
        await hub.close()


@pytest.mark.timeout(30)
async def test_unreadable_grants_fail_reads_at_once() -> None:
    """RoleBindings not listable (an old RBAC): Secret reads fail fast saying why, as a
    retryable unavailability, not NotGranted and not None."""

    class NoRoleBindings(FakeHubServer):
        async def list(self, resource: kube.Resource, namespace: str | None = None,
                       **query: Any) -> JSON:
            if resource.plural == "rolebindings":
                raise kube.ApiError("hub", 403, "Forbidden", "rolebindings forbidden")
            return await super().list(resource, namespace, **query)

    hub = Hub([], rbac=EVERYWHERE)
    hub.server.__class__ = NoRoleBindings
    try:
        with pytest.raises(kube.ClusterUnavailable) as error:
            await hub.mc.get(SECRETS, "s", "team-a", cluster="hub")
        assert "cannot tell where secrets may be read" in str(error.value)
        assert not isinstance(error.value, NotGranted)
        assert isinstance(hub.access.granted(), str)
    finally:
        await hub.close()


def test_system_namespaces_and_ours_are_never_honoured_whatever_the_binding() -> None:
    for namespace in ("kube-system", "kube-public", "kube-node-lease", "federation-system"):
        assert secrets.granted_namespace(binding(namespace)) is None
    assert secrets.granted_namespace(binding("team-a")) == "team-a"
    sa = binding("team-a")
    sa["subjects"] = [{"kind": "ServiceAccount", "name": roles.SERVICE_ACCOUNT,
                       "namespace": roles.NAMESPACE}]
    assert secrets.granted_namespace(sa) == "team-a"
    sa["subjects"][0]["namespace"] = "team-a"  # a ServiceAccount of that name elsewhere
    assert secrets.granted_namespace(sa) is None
