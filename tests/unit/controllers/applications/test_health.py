"""Observe health: what each reached (step, cluster) shows, from the caches."""

from __future__ import annotations

from typing import Any

import pytest

from federation.controllers.applications import compilation, health
from tests.unit.controllers.applications.fakes import (
    FakeView,
    app,
    build_of,
    canary_started,
    kept,
    live_copy,
    run_through,
)


async def observed(view: FakeView, doc: dict[str, Any]) -> dict[tuple[str, str], Any]:
    await kept(view, doc)
    build = build_of(doc)
    await run_through(view, build, health.observe_health)
    return build.health


async def rendered(kind: str = "Deployment") -> dict[str, Any]:
    """The test app's manifest of ``kind`` (what the canary puts on member1)."""
    build = build_of(app())
    await run_through(FakeView(), build, compilation.compile_app)
    assert build.compiled is not None
    return next(o for o in build.compiled.targets["canary"].clusters["member1"]
                if o["kind"] == kind)


async def test_only_reached_clusters_are_observed_and_missing_objects_progress() -> None:
    found = await observed(FakeView(), app(status={"workflow": canary_started()}))
    assert list(found) == [("canary", "member1")]
    assert found[("canary", "member1")][0] == "progressing"
    assert found[("canary", "member1")][1].endswith("not created yet")


async def test_our_content_ready_is_healthy_and_other_content_progresses() -> None:
    deployment = await rendered()
    view = FakeView([("member1", live_copy(deployment))])
    doc = app(status={"workflow": canary_started()})
    assert (await observed(view, doc))[("canary", "member1")] == ("healthy", "")
    view.put("member1", live_copy(deployment, ready=False))
    state, message = (await observed(view, doc))[("canary", "member1")]
    assert (state, message) == ("progressing", "Deployment shop/web: 0/1 ready")
    stale = live_copy(deployment)
    stale["metadata"]["annotations"]["federation.io/applied-hash"] = "old"
    view.put("member1", stale)
    state, message = (await observed(view, doc))[("canary", "member1")]
    assert message == "Deployment shop/web not updated yet"


async def test_a_workload_that_stopped_progressing_fails() -> None:
    live = {"kind": "Deployment", "metadata": {"generation": 1}, "spec": {"replicas": 2},
            "status": {"conditions": [{"type": "Progressing", "status": "False",
                                       "reason": "ProgressDeadlineExceeded",
                                       "message": "too slow"}]}}
    assert health.workload_health("Deployment shop/web", live) == (
        "failed", "Deployment shop/web: ProgressDeadlineExceeded: too slow")
    live["status"] = {"observedGeneration": 0}
    assert health.workload_health("d", live) == ("progressing", "d: generation not observed yet")


async def test_a_member_that_cannot_be_read_is_progressing_never_healthy() -> None:
    view = FakeView()
    view.down.add("member1")
    found = await observed(view, app(status={"workflow": canary_started()}))
    state, message = found[("canary", "member1")]
    assert state == "progressing" and message.startswith("member1: ")


async def test_the_worst_object_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    """Failed at the first failure; else the first progressing message; else healthy."""
    view = FakeView()
    build = build_of(app())

    async def verdict(states: list[tuple[str, str]]) -> tuple[str, str]:
        answers = iter(states)

        async def fake(*_: Any) -> Any:
            return next(answers)
        monkeypatch.setattr(health, "object_health", fake)
        return await health.cluster_health(view, build, "canary", "member1",
                                           [{}] * len(states))

    assert await verdict([("healthy", ""), ("progressing", "a"), ("progressing", "b")]) == \
        ("progressing", "a")
    assert await verdict([("progressing", "a"), ("failed", "x"), ("healthy", "")]) == \
        ("failed", "x")
    assert await verdict([]) == ("healthy", "")


def test_a_daemon_set_is_healthy_when_every_scheduled_pod_is_ready_and_updated() -> None:
    """daemon.cue's healthPolicy: desired == ready == updated == current, at the current
    generation; a DaemonSet has no readyReplicas (the Deployment rule waited for ever)."""
    live: dict[str, Any] = {"metadata": {"generation": 2}, "status": {
        "observedGeneration": 2, "desiredNumberScheduled": 3, "numberReady": 3,
        "updatedNumberScheduled": 3, "currentNumberScheduled": 3}}
    assert health.workload_health("d", live, "DaemonSet") == ("healthy", "")
    live["status"]["updatedNumberScheduled"] = 2
    assert health.workload_health("d", live, "DaemonSet") == ("progressing", "d: Ready:3/3")
    live["status"].update(updatedNumberScheduled=3, observedGeneration=1)
    assert health.workload_health("d", live, "DaemonSet")[0] == "progressing"


def test_a_job_is_healthy_once_its_pods_succeeded_and_failed_once_it_gave_up() -> None:
    """task.cue's healthPolicy: succeeded == spec.parallelism (Jobs report no
    observedGeneration); a Job whose retries are spent (condition Failed) fails the step."""
    live: dict[str, Any] = {"kind": "Job", "metadata": {"generation": 1},
                            "spec": {"parallelism": 2}, "status": {"active": 2}}
    assert health.workload_health("j", live) == (
        "progressing", "j: Active/Failed/Succeeded:2/0/0")
    live["status"] = {"succeeded": 2}
    assert health.workload_health("j", live) == ("healthy", "")
    live["status"] = {"failed": 7, "conditions": [
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
         "message": "Job has reached the specified backoff limit"}]}
    assert health.workload_health("j", live) == (
        "failed", "j: BackoffLimitExceeded: Job has reached the specified backoff limit")


def test_a_stateful_set_needs_its_pods_created_too() -> None:
    """statefulset.cue's healthPolicy also compares status.replicas with spec.replicas."""
    live: dict[str, Any] = {"metadata": {"generation": 1}, "spec": {"replicas": 2}, "status": {
        "observedGeneration": 1, "readyReplicas": 2, "updatedReplicas": 2, "replicas": 3}}
    assert health.workload_health("s", live, "StatefulSet")[0] == "progressing"
    live["status"]["replicas"] = 2
    assert health.workload_health("s", live, "StatefulSet") == ("healthy", "")


async def test_a_read_only_object_is_healthy_by_its_state_whoever_wrote_it() -> None:
    """read-only: no applied-hash of ours to compare; the workload's state decides."""
    doc = app(status={"workflow": canary_started()})
    doc["spec"]["policies"].append({"name": "ro", "type": "read-only", "properties": {
        "rules": [{"selector": {"resourceTypes": ["Deployment"]}}]}})
    theirs = live_copy(await rendered())
    theirs["metadata"]["annotations"]["federation.io/applied-hash"] = "someone else's"
    assert (await observed(FakeView([("member1", theirs)]), doc))[("canary", "member1")] == \
        ("healthy", "")
    theirs = live_copy(await rendered(), ready=False)
    state, _ = (await observed(FakeView([("member1", theirs)]), doc))[("canary", "member1")]
    assert state == "progressing"


async def test_a_terraform_configuration_waits_for_its_module_to_be_applied() -> None:
    """KubeVela's setStatus for a Terraform component: not healthy on existing alone, as
    other kinds without a workload's status are, but once ``Available``."""
    obj = {"apiVersion": "terraform.core.oam.dev/v1beta2", "kind": "Configuration",
           "metadata": {"name": "db", "namespace": "shop"}, "spec": {"hcl": "x"}}
    build = build_of(app())
    body = live_copy(obj, uid=build.uid, owner=build.owner)
    body["metadata"]["generation"] = 1
    body["status"] = {"observedGeneration": 1, "apply": {"state": "ProvisioningAndChecking",
                                                         "message": "secret=x"}}
    view = FakeView([("member1", body)])
    assert await health.object_health(view, build, "member1", obj) == (
        "progressing", "Configuration shop/db: state ProvisioningAndChecking")
    body["status"]["apply"]["state"] = "Available"
    view.put("member1", body)
    assert await health.object_health(view, build, "member1", obj) == ("healthy", "")


async def test_a_terraform_provider_waits_for_the_controller_to_report_it_ready() -> None:
    """apply-terraform-provider's check: ``status.state: ready``; the controller's message
    (it can quote the credentials Secret) is not copied."""
    obj = {"apiVersion": "terraform.core.oam.dev/v1beta1", "kind": "Provider",
           "metadata": {"name": "aws", "namespace": "shop"}, "spec": {"provider": "aws"}}
    build = build_of(app())
    body = live_copy(obj, uid=build.uid, owner=build.owner)
    body["status"] = {"state": "ProviderNotReady", "message": "key=AKIA-SECRET"}
    view = FakeView([("member1", body)])
    assert await health.object_health(view, build, "member1", obj) == (
        "progressing", "Provider shop/aws: state ProviderNotReady")
    body["status"] = {"state": "ready"}
    view.put("member1", body)
    assert await health.object_health(view, build, "member1", obj) == ("healthy", "")
