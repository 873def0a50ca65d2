"""The kit executor's ``exact_deletes`` (which the applications controller turns on): a
delete carrying the resourceVersion it read fails when the object changed since."""

from __future__ import annotations

from typing import Any, cast

import pytest

from federation.contexts import client as kube
from federation.contexts.multicluster import MultiClusterClient
from federation.controllers.kit import executor
from tests.unit.controllers import fakes


def fleet() -> tuple[fakes.FakeMC, dict[str, Any]]:
    mc = fakes.FakeMC(fakes.cluster_set("member1"))
    stored = mc.put("hub", {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "shop", "namespace": "shop"}})
    return mc, stored


async def test_a_changed_object_is_not_deleted_with_exact_deletes() -> None:
    """The attack on a stale read: the object was written after we read it (a newer
    version); deleting what we read must not delete what we did not see."""
    mc, stored = fleet()
    read = {**stored, "metadata": {**stored["metadata"], "resourceVersion": "stale"}}
    writer = executor.Writer(cast(MultiClusterClient, mc), "hub", exact_deletes=True)
    with pytest.raises(kube.ApiError) as refused:
        await writer.delete("hub", read)
    assert refused.value.status == 409
    assert mc.find("hub", "ConfigMap", "shop", "shop") is not None
    await writer.delete("hub", stored)
    assert mc.find("hub", "ConfigMap", "shop", "shop") is None


async def test_without_it_a_delete_is_conditional_on_the_uid_only() -> None:
    """Unchanged for every other user of the kit (propagation's copies)."""
    mc, stored = fleet()
    read = {**stored, "metadata": {**stored["metadata"], "resourceVersion": "stale"}}
    await executor.Writer(cast(MultiClusterClient, mc), "hub").delete("hub", read)
    assert mc.find("hub", "ConfigMap", "shop", "shop") is None
