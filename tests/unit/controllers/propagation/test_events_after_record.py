"""Events are posted after the record (the binding) that states them is written: when the
record write fails, no event claims the transition (the retry posts it, once written)."""

from __future__ import annotations

from typing import Any

import pytest

from federation.contexts.client import ApiError
from federation.controllers import propagation
from tests.unit.controllers.fakes import (
    MEMBERS,
    FakeMC,
    FakeRecorder,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)

JSON = dict[str, Any]


class FailingHub:
    """The reconciler's writer with every hub write of a ResourceBinding refused (403)."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.fail = True

    def _refuse(self, cluster: str, obj: JSON) -> None:
        if self.fail and cluster == "hub" and obj.get("kind") == "ResourceBinding":
            raise ApiError(cluster, 403, "Forbidden", "binding write refused")

    async def create(self, cluster: str, obj: JSON) -> JSON:
        self._refuse(cluster, obj)
        return dict(await self.writer.create(cluster, obj))

    async def update(self, cluster: str, obj: JSON) -> JSON:
        self._refuse(cluster, obj)
        return dict(await self.writer.update(cluster, obj))

    async def apply(self, cluster: str, obj: JSON) -> JSON:
        return dict(await self.writer.apply(cluster, obj))

    async def patch_status(self, cluster: str, obj: JSON) -> JSON:
        return dict(await self.writer.patch_status(cluster, obj))

    async def delete(self, cluster: str, obj: JSON) -> JSON:
        self._refuse(cluster, obj)
        return dict(await self.writer.delete(cluster, obj))


def events_of(r: propagation.Reconciler) -> list[tuple[str, str, str]]:
    recorder = r.recorder
    assert isinstance(recorder, FakeRecorder)
    return recorder.events


async def test_a_decision_event_waits_for_its_binding() -> None:
    """The policy narrows to member1: the Scheduled event says so only once the binding
    records it; with the binding write refused, the reconcile fails and says nothing."""
    mc = FakeMC(cluster_set(*MEMBERS))
    policy = mc.put("hub", duplicated_policy("d", MEMBERS))
    template = mc.put("hub", config_map("d"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    mc.put("hub", {**duplicated_policy("d", ("member1",)), "metadata": {**policy["metadata"]}})
    failing = FailingHub(r.writer)
    r.writer = failing
    with pytest.raises(ApiError):
        await r.reconcile(request_for(template))
    assert events_of(r) == []
    failing.fail = False
    assert await r.reconcile(request_for(template)) is None
    assert [e[1] for e in events_of(r)] == ["Scheduled", "Applied"]


async def test_a_problem_event_waits_for_its_condition() -> None:
    """A policy naming an unknown cluster: the UnknownCluster Warning is posted only once
    the binding's condition states it; a refused binding write posts nothing."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("p", ("member1",)))
    template = mc.put("hub", config_map("p"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    policy = mc.find("hub", "PropagationPolicy", "p", "shop")
    assert policy is not None
    mc.put("hub", {**duplicated_policy("p", ("member1", "nowhere")),
                   "metadata": {**policy["metadata"]}})
    failing = FailingHub(r.writer)
    r.writer = failing
    with pytest.raises(ApiError):
        await r.reconcile(request_for(template))
    assert events_of(r) == []
    failing.fail = False
    await r.reconcile(request_for(template))
    assert [e[1] for e in events_of(r)] == ["UnknownCluster"]
