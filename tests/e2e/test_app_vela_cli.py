"""vela-core's ``vela-cli`` and ``build-push-image`` on the local fleet, with the control
plane's real identity: the step's Job (or kaniko Pod) is delivered to the Application's
own namespace of the local cluster (member1), under that namespace's ``default``
ServiceAccount, never to the hub or ``vela-system``. The fleet runs no kubelet and no Job
controller, so the test plays them: it patches the delivered object's status
(``kubectl patch --subresource=status``). Until then the step keeps running; a succeeded
pod ends it and the workflow goes on; three failed pods fail it; a Succeeded kaniko Pod
ends build-push-image.

`fedctl run` runs for the module with `--app-local-cluster member1`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane, app_namespace, running_plane
from tests.e2e.helpers import apply, get_or_none, wait_for


@pytest.fixture(scope="module")
def plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[ControlPlane]:
    yield from running_plane(fleet_session, tmp_path_factory, "--app-local-cluster", "member1")


@pytest.fixture
def ns(fleet: TestFleet, plane: ControlPlane) -> Iterator[str]:
    yield from app_namespace(fleet, plane, "velacli", "member1")


def application(ns: str, *steps: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": "cli", "namespace": ns},
            "spec": {"components": [], "workflow": {"steps": list(steps)}}}


LIST_APPS = {"name": "ls", "type": "vela-cli", "properties": {"command": ["vela", "ls"]}}
SAY = {"name": "say", "type": "print-message-in-status", "properties": {"message": "done"}}


def workflow_of(fleet: TestFleet, ns: str) -> dict[str, Any]:
    app = get_or_none(fleet, "hub", "applications.core.oam.dev", "cli", "-n", ns) or {}
    return dict((app.get("status") or {}).get("workflow") or {})


def step_of(fleet: TestFleet, ns: str, name: str) -> dict[str, Any]:
    return next((s for s in workflow_of(fleet, ns).get("steps") or () if s["name"] == name),
                {})


def until(fleet: TestFleet, ns: str, condition: Callable[[], Any], what: str) -> None:
    """``wait_for`` that says the workflow's state when it gives up."""
    try:
        wait_for(condition, timeout=60, what=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {json.dumps(workflow_of(fleet, ns))}") from None


def health_of(fleet: TestFleet, ns: str, step: str) -> str:
    """What the controller last judged of the step's object in member1 (the status'
    ``services`` entry of the step)."""
    app = get_or_none(fleet, "hub", "applications.core.oam.dev", "cli", "-n", ns) or {}
    return next((str(s.get("message")) for s in (app.get("status") or {}).get("services")
                 or () if s.get("step") == step), "")


def says(fleet: TestFleet, ns: str, step: str, words: str, what: str) -> None:
    until(fleet, ns, lambda: words in health_of(fleet, ns, step), what)


def delivered(fleet: TestFleet, ns: str, kind: str) -> dict[str, Any]:
    """The one ``kind`` object the step put in ``ns`` of member1."""
    def found() -> dict[str, Any] | None:
        listed = json.loads(fleet.kubectl("member1", "get", kind, "-n", ns, "-o",
                                          "json").stdout)["items"]
        return listed[0] if len(listed) == 1 else None
    return dict(wait_for(found, timeout=60, what=f"the step's {kind} in member1/{ns}"))


def play_the_job_controller(fleet: TestFleet, ns: str, name: str, status: dict[str, Any]
                            ) -> None:
    fleet.kubectl("member1", "patch", "job", name, "-n", ns, "--subresource=status",
                  "--type=merge", "-p", json.dumps({"status": status}))


def test_the_step_runs_until_the_job_reports_a_succeeded_pod(fleet: TestFleet, ns: str
                                                              ) -> None:
    apply(fleet, "hub", application(ns, LIST_APPS, SAY))
    job = delivered(fleet, ns, "jobs")
    name = job["metadata"]["name"]
    assert name.startswith("cli-ls-") and len(name) <= 63
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "default"
    assert pod["containers"][0]["command"] == ["vela", "ls"]
    assert pod["containers"][0]["image"] == "oamdev/vela-cli:v1.6.4"
    for cluster in ("hub", "member2"):
        assert get_or_none(fleet, cluster, "job", name, "-n", ns) is None
    # the controller read the Job back and judged it still running (no pod reported yet)
    says(fleet, ns, "ls", "Active/Failed/Succeeded:0/0/0", "the step waiting on the Job's counts")
    assert step_of(fleet, ns, "ls")["phase"] == "running"
    play_the_job_controller(fleet, ns, name, {"active": 1})
    says(fleet, ns, "ls", "Active/Failed/Succeeded:1/0/0", "the step seeing the active pod")
    assert step_of(fleet, ns, "ls")["phase"] == "running"
    assert step_of(fleet, ns, "say").get("phase") in (None, "pending")

    play_the_job_controller(fleet, ns, name, {"active": 0, "succeeded": 1})
    until(fleet, ns, lambda: workflow_of(fleet, ns).get("phase") == "succeeded",
          "the workflow succeeded")
    assert step_of(fleet, ns, "ls")["phase"] == "succeeded"
    assert step_of(fleet, ns, "say")["message"] == "done"


def test_three_failed_pods_fail_the_step(fleet: TestFleet, ns: str) -> None:
    apply(fleet, "hub", application(ns, LIST_APPS, SAY))
    name = delivered(fleet, ns, "jobs")["metadata"]["name"]
    play_the_job_controller(fleet, ns, name, {"active": 1, "failed": 2})
    says(fleet, ns, "ls", "Active/Failed/Succeeded:1/2/0",
         "the step seeing two failed pods, still running")
    assert step_of(fleet, ns, "ls")["phase"] == "running"
    play_the_job_controller(fleet, ns, name, {"active": 0, "failed": 3})
    until(fleet, ns, lambda: workflow_of(fleet, ns).get("phase") == "failed",
          "the workflow failed")
    step = step_of(fleet, ns, "ls")
    assert step["phase"] == "failed" and "3 pod(s) failed" in step["message"]
    assert step_of(fleet, ns, "say").get("phase") != "succeeded"


def test_a_succeeded_kaniko_pod_ends_build_push_image(fleet: TestFleet, plane: ControlPlane,
                                                      ns: str) -> None:
    """The Pod kind granted to the control plane in members (not a default kind); the
    namespace's ``default`` ServiceAccount made, as a member's controller would (the
    API server's ServiceAccount admission wants it for a Pod)."""
    plane.install("--propagate-kinds", "pods")
    apply(fleet, "member1", {"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": "default", "namespace": ns}})
    build = {"name": "build", "type": "build-push-image",
             "properties": {"context": {"git": "github.com/FogDong/simple-web-demo",
                                        "branch": "main"},
                            "image": "registry.example/demo:v1",
                            "credentials": {"image": {"name": "image-secret"}}}}
    apply(fleet, "hub", application(ns, build))
    pod = delivered(fleet, ns, "pods")
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["volumes"][0]["secret"]["secretName"] == "image-secret"
    says(fleet, ns, "build", "phase", "the step waiting on the Pod's phase")
    assert step_of(fleet, ns, "build")["phase"] == "running"
    fleet.kubectl("member1", "patch", "pod", pod["metadata"]["name"], "-n", ns,
                  "--subresource=status", "--type=merge",
                  "-p", json.dumps({"status": {"phase": "Succeeded"}}))
    until(fleet, ns, lambda: workflow_of(fleet, ns).get("phase") == "succeeded",
          "the workflow succeeded")
