"""`fedctl install --control-plane`'s writes: server-side apply of each object, in order."""

from __future__ import annotations

from typing import Any

import pytest

from federation.contexts.client import ApiError, ObjectClient, Resource
from federation.deploy import apply, manifests
from federation.deploy.manifests import Options
from tests.unit.clients import Unserved


class FakeHub(Unserved):
    """Records applies; refuses the resources in ``missing`` with a 404 as a hub that does
    not serve them does."""

    name = "hub"

    def __init__(self, missing: set[str] | None = None, refuse: str | None = None) -> None:
        self.missing = missing or set()
        self.refuse = refuse
        self.applied: list[tuple[str, str, str, bool]] = []

    async def apply(self, resource: Resource, body: dict[str, Any], field_manager: str, *,
                    force: bool = False, subresource: str | None = None) -> dict[str, Any]:
        if resource.api_version + "/" + resource.plural in self.missing:
            raise ApiError(self.name, 404, "NotFound", "the server could not find it")
        if body["kind"] == self.refuse:
            raise ApiError(self.name, 422, "Invalid", "bad", {"message": "spec: Invalid"})
        self.applied.append((body["apiVersion"], body["kind"], field_manager, force))
        return body


def hub(fake: FakeHub) -> ObjectClient:
    return fake


async def test_every_object_is_applied_in_order_forced_by_our_field_manager() -> None:
    fake = FakeHub()
    objects = manifests.workload_objects(Options())
    names = await apply.apply_objects(hub(fake), objects)
    assert names == [f"{o['kind']}/{o['metadata']['name']}" for o in objects]
    assert [(a, k) for a, k, _, _ in fake.applied] == \
        [(o["apiVersion"], o["kind"]) for o in objects]
    assert {(m, f) for _, _, m, f in fake.applied} == {("federation", True)}


async def test_a_hub_without_policy_v1_gets_the_pdb_as_v1beta1() -> None:
    """Kubernetes before 1.21 (the local fleet's 1.20) serves PDBs only as v1beta1."""
    fake = FakeHub(missing={"policy/v1/poddisruptionbudgets"})
    await apply.apply_objects(hub(fake), manifests.workload_objects(Options()))
    assert ("policy/v1beta1", "PodDisruptionBudget", "federation", True) in fake.applied


async def test_other_404s_are_not_retried_and_a_refusal_names_the_object() -> None:
    fake = FakeHub(missing={"apps/v1/deployments"})
    with pytest.raises(ApiError) as caught:
        await apply.apply_objects(hub(fake), manifests.workload_objects(Options()))
    assert "Deployment/federation-controller-manager" in str(caught.value)
    fake = FakeHub(refuse="Service")
    with pytest.raises(ApiError, match="Service/federation-controller-manager-metrics: "
                                       "spec: Invalid"):
        await apply.apply_objects(hub(fake), manifests.workload_objects(Options()))


def test_an_unknown_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="no REST resource known for Ingress"):
        apply.resource({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress"})
