"""install_crds: `fedctl run` applies only CRDs that changed, so a restart writes nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from federation.contexts.client import ApiError, Resource
from federation.controllers import install
from tests.unit.clients import Unserved

JSON = dict[str, Any]
ESTABLISHED = {"conditions": [{"type": "Established", "status": "True"}]}


class FakeHub(Unserved):
    """CRDs by name; every apply recorded (and stored as the server would, established)."""

    def __init__(self) -> None:
        self.crds: dict[str, JSON] = {}
        self.applied: list[str] = []

    async def apply(self, resource: Resource, body: JSON, field_manager: str, *,
                    force: bool = False, subresource: str | None = None) -> JSON:
        assert force and field_manager == install.FIELD_MANAGER
        name = body["metadata"]["name"]
        self.applied.append(name)
        self.crds[name] = {**body, "status": ESTABLISHED}
        return self.crds[name]

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        if name not in self.crds:
            raise ApiError("hub", 404, "NotFound", f"{name} not found")
        return self.crds[name]


def run(hub: FakeHub, only_changed: bool) -> list[str]:
    return asyncio.run(install.install_crds(hub, only_changed=only_changed))


def names() -> list[str]:
    return [doc["metadata"]["name"] for doc in install.crd_documents()]


def test_run_applies_nothing_when_every_crd_is_current() -> None:
    hub = FakeHub()
    assert run(hub, only_changed=False) == names()
    hub.applied.clear()
    assert run(hub, only_changed=True) == names()
    assert hub.applied == []


def test_install_applies_every_crd_even_when_current() -> None:
    hub = FakeHub()
    run(hub, only_changed=False)
    hub.applied.clear()
    run(hub, only_changed=False)
    assert hub.applied == names()


@pytest.mark.parametrize("change", ["missing", "old digest", "no digest", "not established"])
def test_run_applies_a_crd_that_differs_or_is_not_served(change: str) -> None:
    hub = FakeHub()
    run(hub, only_changed=False)
    hub.applied.clear()
    target = names()[0]
    crd = hub.crds[target]
    if change == "missing":
        del hub.crds[target]
    elif change == "old digest":
        crd["metadata"]["annotations"][install.CRD_DIGEST_ANNOTATION] = "0" * 16
    elif change == "no digest":
        del crd["metadata"]["annotations"][install.CRD_DIGEST_ANNOTATION]
    else:
        crd["status"] = {"conditions": [{"type": "Established", "status": "False"}]}
        hub.crds[target] = crd
    run(hub, only_changed=True)
    assert hub.applied == [target]


def test_the_digest_is_of_the_shipped_document_and_ignores_its_own_annotation() -> None:
    doc = install.crd_documents()[0]
    marked = install.with_digest(doc)
    assert marked["metadata"]["annotations"][install.CRD_DIGEST_ANNOTATION] == \
        install.crd_digest(doc)
    assert "annotations" not in doc["metadata"] or \
        install.CRD_DIGEST_ANNOTATION not in doc["metadata"]["annotations"]
    assert install.crd_digest({**doc, "spec": {**doc["spec"], "scope": "Other"}}) != \
        install.crd_digest(doc)


def test_a_server_error_reading_a_crd_is_not_taken_for_absent() -> None:
    class Broken(FakeHub):
        async def get(self, resource: Resource, name: str, namespace: str | None = None
                      ) -> JSON:
            raise ApiError("hub", 403, "Forbidden", "no")

    with pytest.raises(ApiError, match="403"):
        run(Broken(), only_changed=True)


@pytest.mark.parametrize("only_changed", [False, True])
def test_kubeblocks_own_crds_are_never_applied_over(only_changed: bool) -> None:
    """A hub that runs KubeBlocks keeps KubeBlocks' CRDs (more versions, a strict schema):
    ours are installed only where none exists."""
    hub = FakeHub()
    theirs: JSON = {"metadata": {"name": "configconstraints.apps.kubeblocks.io"},
              "spec": {"versions": [{"name": "v1alpha1"}, {"name": "v1beta1"}]},
              "status": ESTABLISHED}
    hub.crds["configconstraints.apps.kubeblocks.io"] = theirs
    run(hub, only_changed=only_changed)
    assert "configconstraints.apps.kubeblocks.io" not in hub.applied
    assert hub.crds["configconstraints.apps.kubeblocks.io"] is theirs
    assert "parametersdefinitions.parameters.kubeblocks.io" in hub.applied  # absent: ours


class CountingHub(FakeHub):
    """Counts reads and how many were in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.in_flight = 0
        self.most_in_flight = 0

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        self.reads += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0)
            return await super().get(resource, name, namespace)
        finally:
            self.in_flight -= 1


def test_a_restart_with_every_crd_current_reads_each_once_and_all_at_once() -> None:
    """A replica starting beside others that list the fleet: one round trip, not 54."""
    hub = CountingHub()
    run(hub, only_changed=False)
    hub.reads = hub.most_in_flight = 0
    hub.applied.clear()
    assert run(hub, only_changed=True) == names()
    assert hub.applied == [] and hub.reads == len(names())
    assert hub.most_in_flight == len(names())
