"""Definitions' status on the local fleet: a user ComponentDefinition with a healthPolicy and
a customStatus (ours, written the way KubeVela's own are); its Application reports the
component unhealthy with the message read from the live member object and its deploy step
waits, until the member object says ready (the fleet runs no controllers: the test plays
the member's controller by annotating the object there); then healthy and running.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane, running_plane
from tests.e2e.helpers import apply, get_or_none, wait_for

APP_API = "core.oam.dev/v1beta1"
READY = "example.com/ready"
TEMPLATE = """
output: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	data: greeting: parameter.greeting
}
parameter: greeting: string
"""
HEALTH = f"""
isHealth: *false | bool
if context.output.metadata.annotations["{READY}"] != _|_ {{
	isHealth: context.output.metadata.annotations["{READY}"] == "yes"
}}
"""
MESSAGE = f"""
_ready: *"no" | string
if context.output.metadata.annotations["{READY}"] != _|_ {{
	_ready: context.output.metadata.annotations["{READY}"]
}}
message: "ready=\\(_ready) in \\(context.cluster)"
"""


@pytest.fixture(scope="module")
def status_plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[ControlPlane]:
    fleet_session.kubectl("hub", "create", "namespace", "vela-system", check=False)
    yield from running_plane(fleet_session, tmp_path_factory, "--cleanup-wait", "8")


@pytest.fixture
def ns(fleet: TestFleet, status_plane: ControlPlane) -> Iterator[str]:
    name = f"status-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    if status_plane.process is not None and status_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{status_plane.log_tail()}")
    fleet.kubectl("hub", "delete", "applications.core.oam.dev", "--all", "-n", name,
                  "--wait=false", check=False)
    fleet.kubectl("hub", "delete", "componentdefinitions.core.oam.dev", "greeter", "-n",
                  "vela-system", "--wait=false", check=False)


def definition() -> dict[str, Any]:
    return {"apiVersion": APP_API, "kind": "ComponentDefinition",
            "metadata": {"name": "greeter", "namespace": "vela-system"},
            "spec": {"workload": {"definition": {"apiVersion": "v1", "kind": "ConfigMap"}},
                     "schematic": {"cue": {"template": TEMPLATE}},
                     "status": {"healthPolicy": HEALTH, "customStatus": MESSAGE}}}


def application(ns: str) -> dict[str, Any]:
    return {"apiVersion": APP_API, "kind": "Application",
            "metadata": {"name": "hello", "namespace": ns},
            "spec": {"components": [{"name": "hello", "type": "greeter",
                                     "properties": {"greeting": "hi"}}],
                     "policies": [{"name": "two", "type": "topology",
                                   "properties": {"clusters": ["member1", "member2"]}}],
                     "workflow": {"steps": [{"name": "deploy", "type": "deploy",
                                             "properties": {"policies": ["two"]}}]}}}


def app_status(fleet: TestFleet, ns: str) -> dict[str, Any]:
    found = get_or_none(fleet, "hub", "applications.core.oam.dev", "hello", "-n", ns) or {}
    status: dict[str, Any] = found.get("status") or {}
    return status


def components(fleet: TestFleet, ns: str) -> dict[str, dict[str, Any]] | None:
    """The per-component entries by cluster, once both clusters have one."""
    found = {s["cluster"]: s for s in app_status(fleet, ns).get("services") or []
             if "name" in s}
    return found if set(found) == {"member1", "member2"} else None


def test_the_status_follows_the_live_member_objects(fleet: TestFleet, ns: str) -> None:
    apply(fleet, "hub", definition())
    apply(fleet, "hub", application(ns))
    found = wait_for(functools.partial(components, fleet, ns), timeout=90,
                     what="a component status in each member")
    for cluster in ("member1", "member2"):
        assert found[cluster]["healthy"] is False
        assert found[cluster]["message"] == f"ready=no in {cluster}"
    assert app_status(fleet, ns)["status"] == "runningWorkflow"
    # member1's controller says ready: healthy there, the step still waits for member2
    fleet.kubectl("member1", "annotate", "configmap", "hello", "-n", ns, f"{READY}=yes")

    def member1_ready() -> dict[str, dict[str, Any]] | None:
        now = components(fleet, ns)
        return now if now and now["member1"]["healthy"] else None
    found = wait_for(member1_ready, timeout=60, what="member1 healthy")
    assert found["member1"]["message"] == "ready=yes in member1"
    assert found["member2"]["healthy"] is False
    assert app_status(fleet, ns)["status"] == "runningWorkflow"
    fleet.kubectl("member2", "annotate", "configmap", "hello", "-n", ns, f"{READY}=yes")

    def running() -> dict[str, Any] | None:
        status = app_status(fleet, ns)
        return status if status.get("status") == "running" else None
    status = wait_for(running, timeout=60, what="the Application running")
    assert status["healthy"] is True
    assert all(s["healthy"] for s in status["services"])
