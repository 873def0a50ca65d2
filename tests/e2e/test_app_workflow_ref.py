"""KubeVela's ``spec.workflow.ref`` on the local fleet, with the control plane's real RBAC:
another namespace's Workflow is not reachable (by ``ns/name``, nor by its name from
another namespace); an Application applied before its Workflow waits (renderFailed,
naming it); the Workflow created, its two deploy steps deliver to member1 then member2;
the Workflow edited (its second step to member3), the change is picked up (the watch)
and the new steps run.

`fedctl run` runs for the module with its defaults.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane, app_namespace, running_plane
from tests.e2e.helpers import apply, get_or_none, wait_for


@pytest.fixture(scope="module")
def ref_plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[ControlPlane]:
    yield from running_plane(fleet_session, tmp_path_factory)


@pytest.fixture
def ns(fleet: TestFleet, ref_plane: ControlPlane) -> Iterator[str]:
    yield from app_namespace(fleet, ref_plane, "wfref")


@pytest.fixture
def other(fleet: TestFleet, ref_plane: ControlPlane) -> Iterator[str]:
    """Another tenant's namespace."""
    yield from app_namespace(fleet, ref_plane, "wfother")


def application(ns: str, ref: str = "two-steps") -> dict[str, Any]:
    return {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "release", "namespace": ns},
        "spec": {
            "components": [{"name": "web", "type": "webservice",
                            "properties": {"image": "registry.local/web:1.0"}}],
            "policies": [{"name": f"to-{m}", "type": "topology",
                          "properties": {"clusters": [m]}}
                         for m in ("member1", "member2", "member3")],
            "workflow": {"ref": ref}}}


def workflow(ns: str, first: str, second: str) -> dict[str, Any]:
    return {"apiVersion": "core.oam.dev/v1alpha1", "kind": "Workflow",
            "metadata": {"name": "two-steps", "namespace": ns},
            "steps": [{"name": f"to-{m}", "type": "deploy", "properties": {
                "policies": [f"to-{m}"]}} for m in (first, second)]}


def status_of(fleet: TestFleet, ns: str) -> dict[str, Any]:
    found = get_or_none(fleet, "hub", "applications.core.oam.dev", "release", "-n", ns) or {}
    status: dict[str, Any] = found.get("status") or {}
    return status


def ran(fleet: TestFleet, ns: str, steps: list[str]) -> bool:
    flow = status_of(fleet, ns).get("workflow") or {}
    return flow.get("phase") == "succeeded" and \
        [s.get("name") for s in flow.get("steps") or []] == steps


def refusal(fleet: TestFleet, ns: str) -> str:
    status = status_of(fleet, ns)
    conditions = status.get("conditions") or [{}]
    return str(conditions[0].get("message")) if status.get("status") == "renderFailed" \
        else ""


def test_a_workflow_object_delivers_and_its_edit_takes_effect(fleet: TestFleet, ns: str,
                                                               other: str) -> None:
    # the attack first: another namespace's Workflow (two member deploys ready to run) is
    # neither reachable by a namespaced ref nor by its bare name
    apply(fleet, "hub", workflow(other, "member1", "member2"))
    apply(fleet, "hub", application(ns, f"{other}/two-steps"))
    wait_for(lambda: "must be the name of a Workflow" in refusal(fleet, ns), timeout=60,
             what="a ref naming another namespace refused")
    apply(fleet, "hub", application(ns))
    missing = (f"spec.workflow.ref: Workflow {ns}/two-steps not found on the hub (the "
               "Application is rendered once it exists in its namespace)")
    wait_for(lambda: refusal(fleet, ns) == missing, timeout=60,
             what="the Application refused while its own namespace has no Workflow")
    assert get_or_none(fleet, "member1", "deployment", "web", "-n", ns) is None
    apply(fleet, "hub", workflow(ns, "member1", "member2"))
    try:
        wait_for(lambda: ran(fleet, ns, ["to-member1", "to-member2"]), timeout=120,
                 what="the Workflow's two steps succeeded")
    except AssertionError:
        raise AssertionError(json.dumps(status_of(fleet, ns), indent=1)[:3000]) from None
    for member in ("member1", "member2"):
        assert get_or_none(fleet, member, "deployment", "web", "-n", ns) is not None
    apply(fleet, "hub", workflow(ns, "member1", "member3"))  # edited: member3 for member2
    try:
        wait_for(lambda: ran(fleet, ns, ["to-member1", "to-member3"]), timeout=120,
                 what="the edited Workflow's steps succeeded")
    except AssertionError:
        raise AssertionError(json.dumps(status_of(fleet, ns), indent=1)[:3000]) from None
    assert get_or_none(fleet, "member3", "deployment", "web", "-n", ns) is not None
    wait_for(lambda: get_or_none(fleet, "member2", "deployment", "web", "-n", ns) is None,
             timeout=60, what="member2's Deployment deleted: no step renders it any more")
    revision = get_or_none(fleet, "hub", "applicationrevisions.core.oam.dev", "release-v2",
                           "-n", ns)
    assert revision is not None
    assert [s["name"] for s in revision["spec"]["workflow"]["steps"]] == \
        ["to-member1", "to-member3"]
