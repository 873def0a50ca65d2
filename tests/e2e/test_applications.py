"""Applications on the local fleet: a staged rollout, KubeVela's first-steps example, a
failing release stopped at the canary and rolled back, and clean-up.

`fedctl run` runs for the module with `--app-local-cluster member1` (KubeVela's `local`).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane, running_plane
from tests.e2e.helpers import apply, get_or_none, wait_for

MEMBERS = ("member1", "member2", "member3")
APP_API = "core.oam.dev/v1beta1"


@pytest.fixture(scope="module")
def apps_plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[ControlPlane]:
    yield from running_plane(fleet_session, tmp_path_factory, "--cleanup-wait", "8",
                             "--app-local-cluster", "member1")


@pytest.fixture
def ns(fleet: TestFleet, apps_plane: ControlPlane) -> Iterator[str]:
    name = f"app-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    if apps_plane.process is not None and apps_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{apps_plane.log_tail()}")
    fleet.kubectl("hub", "delete", "applications.core.oam.dev", "--all", "-n", name,
                  "--wait=false", check=False)


def fedctl(fleet: TestFleet, *args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "federation", "app", *args,
                             "--kubeconfig", str(fleet.kubeconfig), "--hub-context", "hub"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def grant(fleet: TestFleet, ns: str, targets: str) -> None:
    """What an administrator does: annotate the hub Namespace with the member namespaces
    its Applications may target besides their own."""
    fleet.kubectl("hub", "annotate", "--overwrite", "namespace", ns,
                  f"apps.federation.io/target-namespaces={targets}")


def application(name: str, ns: str, image: str, fail: bool = False,
                canary_timeout: str | None = None) -> dict[str, Any]:
    """The docs/applications.md example: canary on member1, approval, then member2 and
    member3 one at a time, with an image override for member2."""
    properties: dict[str, Any] = {"image": image, "ports": [{"port": 80, "expose": True}],
                                  "replicas": 2}
    if fail:
        properties["annotations"] = {"federation.io/simulate-unhealthy": "true"}
    canary: dict[str, Any] = {"name": "canary", "type": "deploy",
                              "properties": {"policies": ["canary"]}}
    if canary_timeout:
        canary["timeout"] = canary_timeout
    return {
        "apiVersion": APP_API, "kind": "Application",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "components": [{"name": "web", "type": "webservice", "properties": properties}],
            "policies": [
                {"name": "canary", "type": "topology", "properties": {"clusters": ["member1"]}},
                {"name": "rest", "type": "topology",
                 "properties": {"clusters": ["member2", "member3"]}},
                {"name": "eu-mirror", "type": "override", "properties": {"overrideRules": [
                    {"targetCluster": {"clusterNames": ["member2"]},
                     "overriders": {"imageOverrider": [
                         {"component": "Registry", "operator": "replace",
                          "value": "eu.mirror.example.com"}]}}]}},
            ],
            "workflow": {"steps": [
                canary,
                {"name": "approval", "type": "approve",
                 "properties": {"message": "check the canary"}},
                {"name": "rollout", "type": "deploy",
                 "properties": {"policies": ["rest", "eu-mirror"], "parallelism": 1}},
            ]},
        },
    }


def image_in(fleet: TestFleet, member: str, ns: str, name: str = "web") -> str | None:
    found = get_or_none(fleet, member, "deployment", name, "-n", ns)
    if found is None:
        return None
    return str(found["spec"]["template"]["spec"]["containers"][0]["image"])


def app_status(fleet: TestFleet, ns: str, name: str) -> dict[str, Any]:
    found = get_or_none(fleet, "hub", "applications.core.oam.dev", name, "-n", ns) or {}
    status: dict[str, Any] = found.get("status") or {}
    return status


def steps(fleet: TestFleet, ns: str, name: str) -> dict[str, dict[str, Any]]:
    flow = app_status(fleet, ns, name).get("workflow") or {}
    return {s["name"]: s for s in flow.get("steps") or []}


def release(fleet: TestFleet, ns: str, name: str, image: str) -> None:
    """Apply ``image`` and take it through the approval to every member."""
    apply(fleet, "hub", application(name, ns, image))
    try:
        wait_for(lambda: app_status(fleet, ns, name).get("status") == "workflowSuspending"
                 and image_in(fleet, "member1", ns) == image, timeout=90,
                 what="canary + suspend")
    except AssertionError:
        import json
        status = app_status(fleet, ns, name)
        status.get("workflow", {}).pop("_state", None)
        raise AssertionError(json.dumps(status, indent=1)[:3000]) from None
    fedctl(fleet, "resume", name, "-n", ns)
    wait_for(lambda: app_status(fleet, ns, name).get("status") == "running", timeout=90,
             what="workflow succeeded")


def test_canary_approval_then_one_cluster_at_a_time(fleet: TestFleet, ns: str) -> None:
    release(fleet, ns, "shop", "registry.local/web:1.0")
    apply(fleet, "hub", application("shop", ns, "registry.local/web:2.0"))
    wait_for(lambda: image_in(fleet, "member1", ns) == "registry.local/web:2.0", timeout=60,
             what="canary gets the new image")
    wait_for(lambda: app_status(fleet, ns, "shop").get("status") == "workflowSuspending",
             timeout=60, what="workflow suspends after the canary")
    # The others keep the old release while the workflow waits.
    assert image_in(fleet, "member2", ns) == "eu.mirror.example.com/web:1.0"
    assert image_in(fleet, "member3", ns) == "registry.local/web:1.0"
    seen: list[tuple[str | None, str | None]] = []

    def rolled() -> bool:
        seen.append((image_in(fleet, "member2", ns), image_in(fleet, "member3", ns)))
        return app_status(fleet, ns, "shop").get("status") == "running"

    fedctl(fleet, "resume", "shop", "-n", ns)
    wait_for(rolled, timeout=120, interval=0.1, what="rollout finished")
    assert image_in(fleet, "member2", ns) == "eu.mirror.example.com/web:2.0"
    assert image_in(fleet, "member3", ns) == "registry.local/web:2.0"
    # One at a time: member3 never had the new image while member2 still had the old one.
    assert ("eu.mirror.example.com/web:1.0", "registry.local/web:2.0") not in seen
    timing = steps(fleet, ns, "shop")
    assert [timing[s]["phase"] for s in ("canary", "approval", "rollout")] == \
        ["succeeded"] * 3
    assert all(timing[s]["firstExecuteTime"] and timing[s]["finishedTime"]
               for s in timing)
    assert timing["rollout"]["clusters"] == ["member2", "member3"]
    tree = fedctl(fleet, "status", "shop", "-n", ns)
    assert "rollout (deploy): succeeded" in tree and "member3: healthy" in tree
    listed = fedctl(fleet, "revisions", "shop", "-n", ns)
    assert "shop-v1" in listed and "shop-v2" in listed


def test_failing_release_stops_at_canary_and_rolls_back(fleet: TestFleet, ns: str) -> None:
    release(fleet, ns, "pay", "registry.local/web:1.0")
    broken = application("pay", ns, "registry.local/web:bad", fail=True,
                         canary_timeout="60s")
    apply(fleet, "hub", broken)
    wait_for(lambda: app_status(fleet, ns, "pay").get("status") == "workflowFailed",
             timeout=90, what="workflow failed at the canary")
    canary = steps(fleet, ns, "pay")["canary"]
    assert canary["phase"] == "failed" and canary["reason"] == "Unhealthy"
    assert "ProgressDeadlineExceeded" in canary["message"]
    conditions = {c["type"]: c for c in app_status(fleet, ns, "pay")["conditions"]}
    assert conditions["WorkflowFailed"]["status"] == "True"
    assert steps(fleet, ns, "pay")["rollout"]["phase"] == "skipped"
    assert image_in(fleet, "member2", ns) == "eu.mirror.example.com/web:1.0"
    assert image_in(fleet, "member3", ns) == "registry.local/web:1.0"
    assert image_in(fleet, "member1", ns) == "registry.local/web:bad"
    fedctl(fleet, "rollback", "pay", "-n", ns)
    wait_for(lambda: image_in(fleet, "member1", ns) == "registry.local/web:1.0", timeout=60,
             what="canary back on the previous revision")
    assert app_status(fleet, ns, "pay")["rollback"]["revision"] == 1


def test_kubevela_first_steps_example_applies_unchanged(fleet: TestFleet, ns: str) -> None:
    """KubeVela's first-vela-app (docs: Quick Start) as published; `local` is member1.

    Its topologies deploy into `default` and `prod`, not the Application's namespace, so
    first the hub Namespace is annotated (apps.federation.io/target-namespaces) as an
    administrator would grant it; the Application itself is unchanged."""
    grant(fleet, ns, "default,prod")
    app: dict[str, Any] = {
        "apiVersion": APP_API, "kind": "Application",
        "metadata": {"name": "first-vela-app", "namespace": ns},
        "spec": {
            "components": [{"name": "express-server", "type": "webservice",
                            "properties": {"image": "oamdev/hello-world",
                                           "ports": [{"port": 8000, "expose": True}]},
                            "traits": [{"type": "scaler", "properties": {"replicas": 1}}]}],
            "policies": [
                {"name": "target-default", "type": "topology",
                 "properties": {"clusters": ["local"], "namespace": "default"}},
                {"name": "target-prod", "type": "topology",
                 "properties": {"clusters": ["local"], "namespace": "prod"}},
                {"name": "deploy-ha", "type": "override",
                 "properties": {"components": [{"type": "webservice", "traits": [
                     {"type": "scaler", "properties": {"replicas": 2}}]}]}},
            ],
            "workflow": {"steps": [
                {"name": "deploy2default", "type": "deploy",
                 "properties": {"policies": ["target-default"]}},
                {"name": "manual-approval", "type": "suspend"},
                {"name": "deploy2prod", "type": "deploy",
                 "properties": {"policies": ["target-prod", "deploy-ha"]}},
            ]},
        },
    }
    apply(fleet, "hub", app)
    wait_for(lambda: app_status(fleet, ns, "first-vela-app").get("status") ==
             "workflowSuspending", timeout=90, what="first step delivered, suspended")
    default = get_or_none(fleet, "member1", "deployment", "express-server", "-n", "default")
    assert default is not None and default["spec"]["replicas"] == 1
    assert get_or_none(fleet, "member1", "service", "express-server", "-n",
                       "default") is not None
    fedctl(fleet, "resume", "first-vela-app", "-n", ns)
    wait_for(lambda: app_status(fleet, ns, "first-vela-app").get("status") == "running",
             timeout=90, what="prod delivered")
    prod = get_or_none(fleet, "member1", "deployment", "express-server", "-n", "prod")
    assert prod is not None and prod["spec"]["replicas"] == 2
    # A new release reaches member1 through the first step: prod, put there by the third
    # step, keeps the old release until the approval (not deleted meanwhile).
    app["spec"]["components"][0]["properties"]["image"] = "oamdev/hello-world:v2"
    apply(fleet, "hub", app)
    wait_for(lambda: image_in(fleet, "member1", "default", "express-server") ==
             "oamdev/hello-world:v2" and app_status(fleet, ns, "first-vela-app").get(
                 "status") == "workflowSuspending", timeout=90, what="v2 in default")
    assert image_in(fleet, "member1", "prod", "express-server") == "oamdev/hello-world"


def test_another_namespace_is_refused_until_an_admin_grants_it(fleet: TestFleet,
                                                              ns: str) -> None:
    """An author in one hub namespace may not deploy into another member namespace: the
    Application is refused naming the field and nothing lands; once an administrator
    annotates the hub Namespace, the same Application delivers (the grant requeues it)."""
    other = f"{ns}-other"
    app: dict[str, Any] = {
        "apiVersion": APP_API, "kind": "Application",
        "metadata": {"name": "escape", "namespace": ns},
        "spec": {"components": [{"name": "web", "type": "webservice",
                                 "properties": {"image": "web:1"}}],
                 "policies": [{"name": "there", "type": "topology",
                               "properties": {"clusters": list(MEMBERS),
                                              "namespace": other}}]}}
    apply(fleet, "hub", app)
    wait_for(lambda: app_status(fleet, ns, "escape").get("status") == "renderFailed",
             timeout=60, what="refused")
    condition = app_status(fleet, ns, "escape")["conditions"][0]
    assert condition["type"] == "Rendered" and condition["status"] == "False"
    assert condition["message"].startswith(
        f"spec.policies[0].properties.namespace: namespace '{other}'")
    assert "apps.federation.io/target-namespaces" in condition["message"]
    assert not any(get_or_none(fleet, m, "deployment", "web", "-n", other) for m in MEMBERS)
    assert not any(get_or_none(fleet, m, "namespace", other) for m in MEMBERS)
    grant(fleet, ns, other)
    wait_for(lambda: all(image_in(fleet, m, other) == "web:1" for m in MEMBERS),
             timeout=90, what="delivered once granted")


def test_component_removal_and_delete_leave_nothing(fleet: TestFleet, ns: str) -> None:
    app: dict[str, Any] = {"apiVersion": APP_API, "kind": "Application",
           "metadata": {"name": "gc", "namespace": ns},
           "spec": {"components": [
               {"name": "web", "type": "webservice", "properties": {"image": "web:1"}},
               {"name": "settings", "type": "config", "properties": {"data": {"a": "b"}}}],
               "policies": [{"name": "all", "type": "topology",
                             "properties": {"clusters": list(MEMBERS)}}]}}
    apply(fleet, "hub", app)
    wait_for(lambda: all(get_or_none(fleet, m, "configmap", "settings", "-n", ns)
                         for m in MEMBERS), timeout=90, what="config everywhere")
    app["spec"]["components"] = app["spec"]["components"][:1]
    apply(fleet, "hub", app)
    wait_for(lambda: not any(get_or_none(fleet, m, "configmap", "settings", "-n", ns)
                             for m in MEMBERS), timeout=90, what="removed component deleted")
    assert all(image_in(fleet, m, ns) == "web:1" for m in MEMBERS)
    fleet.stop("member2")
    try:
        fleet.kubectl("hub", "delete", "applications.core.oam.dev", "gc", "-n", ns,
                      "--wait=false")
        wait_for(lambda: not any(image_in(fleet, m, ns) for m in ("member1", "member3")),
                 timeout=60, what="deleted from the running members")
        tracker = wait_for(lambda: get_or_none(fleet, "hub", "resourcetrackers.core.oam.dev",
                                               "gc", "-n", ns), timeout=30, what="tracker")
        assert {e["cluster"] for e in tracker["spec"]["pendingCleanup"]} == {"member2"}
    finally:
        fleet.start("member2")
    wait_for(lambda: image_in(fleet, "member2", ns) is None, timeout=90,
             what="member2 cleaned once back")
    wait_for(lambda: get_or_none(fleet, "hub", "resourcetrackers.core.oam.dev", "gc",
                                 "-n", ns) is None, timeout=30, what="tracker removed")
    assert get_or_none(fleet, "hub", "applicationrevisions.core.oam.dev", "gc-v1",
                       "-n", ns) is None
