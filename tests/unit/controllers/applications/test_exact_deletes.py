"""Exact deletes, as the applications controller uses them for its tracker: a DELETE
vertex whose reference is :func:`~federation.controllers.kit.plan.reference` ``exact``
carries the resourceVersion it read, and fails when the object changed since."""

from __future__ import annotations

from typing import Any

import pytest

from federation.contexts import client as kube
from federation.controllers.kit import executor, plan
from tests.unit.controllers import fakes


def fleet() -> tuple[fakes.FakeMC, dict[str, Any]]:
    mc = fakes.FakeMC(fakes.cluster_set("member1"))
    stored = mc.put("hub", {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "shop", "namespace": "shop"}})
    return mc, stored


async def test_a_changed_object_is_not_deleted_by_an_exact_reference() -> None:
    """The attack on a stale read: the object was written after we read it (a newer
    version); deleting what we read must not delete what we did not see."""
    mc, stored = fleet()
    read = {**stored, "metadata": {**stored["metadata"], "resourceVersion": "stale"}}
    writer = executor.Writer(mc, "hub")
    with pytest.raises(kube.ApiError) as refused:
        await writer.delete("hub", plan.reference(read, exact=True))
    assert refused.value.status == 409
    assert mc.find("hub", "ConfigMap", "shop", "shop") is not None
    await writer.delete("hub", plan.reference(stored, exact=True))
    assert mc.find("hub", "ConfigMap", "shop", "shop") is None


async def test_a_plain_reference_is_conditional_on_the_uid_only() -> None:
    """Unchanged for every other delete (propagation's copies)."""
    mc, stored = fleet()
    read = {**stored, "metadata": {**stored["metadata"], "resourceVersion": "stale"}}
    await executor.Writer(mc, "hub").delete("hub", plan.reference(read))
    assert mc.find("hub", "ConfigMap", "shop", "shop") is None
