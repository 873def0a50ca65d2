"""The hub API install: a restart of the control plane writes nothing when the CRDs are ours."""

from __future__ import annotations

import copy
from typing import Any

from federation.contexts.client import ApiError
from federation.controllers import install


class Hub:
    """A hub that serves CRDs with server defaults added, and records every apply."""

    def __init__(self, served: dict[str, Any]) -> None:
        self.served = served
        self.applied: list[str] = []

    async def get(self, resource: Any, name: str) -> Any:
        if name not in self.served:  # as the real client answers a missing object
            raise ApiError("hub", 404, "NotFound", f"{name} not found")
        return copy.deepcopy(self.served[name])

    async def apply(self, resource: Any, doc: dict[str, Any], manager: str,
                    force: bool = False) -> dict[str, Any]:
        self.applied.append(doc["metadata"]["name"])
        served = copy.deepcopy(doc)
        served["spec"]["conversion"] = {"strategy": "None"}  # a server default
        served["status"] = {"conditions": [{"type": "Established", "status": "True"}]}
        self.served[doc["metadata"]["name"]] = served
        return served


async def test_first_install_applies_every_crd_and_a_restart_applies_none() -> None:
    """Absent CRDs are applied; the same CRDs served (with server defaults) are skipped."""
    hub = Hub({})
    names = await install.install_crds(hub)  # type: ignore[arg-type]
    assert hub.applied == names and names
    hub.applied.clear()
    assert await install.install_crds(hub) == names  # type: ignore[arg-type]
    assert hub.applied == []


async def test_a_changed_crd_is_applied_again() -> None:
    """A served CRD that differs from ours (an older version of the project) is re-applied."""
    hub = Hub({})
    names = await install.install_crds(hub)  # type: ignore[arg-type]
    hub.served[names[0]]["spec"]["versions"][0]["name"] = "v0"
    hub.applied.clear()
    await install.install_crds(hub)  # type: ignore[arg-type]
    assert hub.applied == [names[0]]


def test_contains_is_a_superset_check() -> None:
    """Live objects carry server defaults: extra keys are fine, a different value is not."""
    assert install.contains({"a": 1, "b": [{"c": 2, "d": 3}]}, {"b": [{"c": 2}]})
    assert not install.contains({"a": 1}, {"a": 2})
    assert not install.contains({"b": [1, 2]}, {"b": [1]})
    assert not install.contains(None, {"a": 1})
