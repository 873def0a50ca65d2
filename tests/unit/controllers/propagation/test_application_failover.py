"""Application failover and state preservation inside a propagation Build (virtual time):
unhealthy clocks, eviction tasks as Karmada's, purge modes, preserved labels, attacks."""

from __future__ import annotations

from typing import Any

import pytest

from federation.contexts import client as kube
from federation.controllers import propagation
from federation.controllers.kit import plan
from federation.controllers.propagation import application_failover, eviction_tasks
from federation.hub import eviction_tasks as tasks_
from federation.hub import failover, manifests
from federation.placement import clusters as clusters_
from federation.placement import decision as decision_
from federation.placement import policy as policy_
from tests.unit.controllers.fakes import FakeContext

T0 = 1_700_000_000.0


def deployment(healthy: bool, status: dict[str, Any] | None = None) -> dict[str, Any]:
    """A member copy whose built-in InterpretHealth is ``healthy``."""
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "generation": 1},
            "spec": {"replicas": 2, "template": {"spec": {"containers": []}}},
            "status": {"observedGeneration": 1, "updatedReplicas": 2,
                       "availableReplicas": 2 if healthy else 0, **(status or {})}}


def build(failover_spec: dict[str, Any], binding_spec: dict[str, Any] | None = None,
          decision: dict[str, int] | None = None,
          aggregated: list[dict[str, Any]] | None = None) -> propagation.Build:
    policy = policy_.Policy.model_validate({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                 "failover": failover_spec}})
    assert policy_.problems(policy) == []
    decision = {"member1": 2} if decision is None else decision
    binding = {"metadata": {"name": "web-deployment"},
               "spec": {"clusters": [{"name": n, "replicas": r} for n, r in decision.items()],
                        **(binding_spec or {})},
               "status": {"aggregatedStatus": aggregated or []}}
    template = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "shop"}}
    found = propagation.Build(template=template, resource=kube.DEPLOYMENTS, hub="hub",
                              binding=binding)
    found.policy = policy
    found.clusters = [clusters_.Cluster(name=n) for n in ("member1", "member2", "member3")]
    found.failover.judgements = {c.name: failover.Judgement(failover.State.READY)
                                 for c in found.clusters}
    return found


def app(purge_mode: str = "Gracefully", tolerate: int = 30, **more: Any) -> dict[str, Any]:
    return {"application": {"decisionConditions": {"tolerationSeconds": tolerate},
                            "purgeMode": purge_mode, **more}}


async def test_an_unhealthy_copy_is_evicted_after_toleration_seconds() -> None:
    """First look: the clock starts and the template is looked at again when it runs out;
    past it: a task as Karmada's, and member1 is no candidate for this template."""
    copies: dict[str, Any] = {"member1": deployment(False)}
    first = build(app())
    verdict = await application_failover.apply_application_failover(
        FakeContext(copies=copies, now=T0), first)
    assert first.record[tasks_.SINCE] == {"member1": failover.format_time(T0)}
    assert first.eviction_tasks == []
    assert verdict is not None and verdict.requeue_after == pytest.approx(30.1)
    later = build(app(), {tasks_.SINCE: first.record[tasks_.SINCE]})
    await application_failover.apply_application_failover(
        FakeContext(copies=copies, now=T0 + 31), later)
    [task] = later.record[tasks_.TASKS]
    assert task == {"fromCluster": "member1", "purgeMode": "Gracefully",
                    "reason": "ApplicationFailure", "producer": "application-failover",
                    "creationTimestamp": failover.format_time(T0 + 31), "replicas": 2,
                    "gracePeriodSeconds": 600}
    assert {c.name: c.ready for c in later.clusters} == {
        "member1": False, "member2": True, "member3": True}
    assert later.record[tasks_.SINCE] == {}


async def test_a_clock_started_within_a_second_is_never_cut_short() -> None:
    """The record holds whole seconds: a copy first seen unhealthy at T0+0.4 has its clock
    start at T0+1, so it is still tolerated at T0+30.7 (a start cut down to T0 would have
    evicted it 0.3 s early) and evicted after T0+31."""
    copies: dict[str, Any] = {"member1": deployment(False)}
    first = build(app())
    verdict = await application_failover.apply_application_failover(
        FakeContext(copies=copies, now=T0 + 0.4), first)
    assert first.record[tasks_.SINCE] == {"member1": failover.format_time(T0 + 1)}
    assert verdict is not None and verdict.requeue_after == pytest.approx(30.7)
    early = build(app(), {tasks_.SINCE: first.record[tasks_.SINCE]})
    await application_failover.apply_application_failover(
        FakeContext(copies=copies, now=T0 + 30.7), early)
    assert early.eviction_tasks == []
    late = build(app(), {tasks_.SINCE: first.record[tasks_.SINCE]})
    await application_failover.apply_application_failover(
        FakeContext(copies=copies, now=T0 + 31.2), late)
    assert [t.from_cluster for t in late.eviction_tasks] == ["member1"]


async def test_a_healthy_copy_forgets_its_clock_and_nothing_moves() -> None:
    found = build(app(), {tasks_.SINCE: {"member1": failover.format_time(T0)}})
    await application_failover.apply_application_failover(
        FakeContext(copies={"member1": deployment(True)}, now=T0 + 100), found)
    assert found.record[tasks_.SINCE] == {} and found.eviction_tasks == []
    assert all(c.ready for c in found.clusters)


async def test_a_copy_on_a_cluster_that_is_not_ready_is_not_judged() -> None:
    """Only an otherwise healthy cluster: cluster failover owns a NotReady one."""
    found = build(app(), {tasks_.SINCE: {"member1": failover.format_time(T0)}})
    found.failover.judgements["member1"] = failover.Judgement(failover.State.HELD, "down")
    await application_failover.apply_application_failover(
        FakeContext(copies={"member1": deployment(False)}, now=T0 + 100), found)
    assert found.eviction_tasks == [] and found.record[tasks_.SINCE] == {}


async def test_without_application_failover_nothing_is_judged() -> None:
    found = build({"cluster": {"purgeMode": "Directly"}})
    await application_failover.apply_application_failover(
        FakeContext(copies={"member1": deployment(False)}, now=T0), found)
    assert found.eviction_tasks == [] and found.record[tasks_.SINCE] == {}


def task(purge_mode: str, created: float = T0, **more: Any) -> dict[str, Any]:
    return {"fromCluster": "member1", "purgeMode": purge_mode, "reason": "ApplicationFailure",
            "producer": "application-failover", "creationTimestamp": failover.format_time(created),
            **more}


async def assess(found: propagation.Build, now: float, new_healthy: bool) -> list[str]:
    """Run the task transformers after a decision of member2 only, with the old copy's
    delete planned; the clusters whose old copy is deleted."""
    ctx = FakeContext(copies={}, now=now)
    await application_failover.apply_application_failover(ctx, found)
    found.live = {"member2": deployment(new_healthy)}
    found.desired = {"member2": deployment(True)}
    found.removals.append("member1")
    found.dag.add(plan.Vertex("member1", plan.Action.DELETE, plan.reference(deployment(True)),
                              reason="copy no longer wanted"))
    found.decision = _decision({"member2": 2})
    await eviction_tasks.plan_eviction_tasks(ctx, found)
    return sorted(v.cluster for v in found.dag if v.action is plan.Action.DELETE)


def theirs(copy: dict[str, Any]) -> dict[str, str]:
    """The copy's labels that are not ours."""
    return {k: v for k, v in copy["metadata"].get("labels", {}).items()
            if k != manifests.MANAGED_BY_LABEL}


def _decision(clusters: dict[str, int]) -> decision_.Decision:
    return decision_.Decision(replicas=2, clusters=clusters)


@pytest.mark.parametrize(("purge_mode", "more", "deleted", "kept"), [
    ("Directly", {}, ["member1"], True),           # deleted at once; task lasts
    ("Gracefully", {"gracePeriodSeconds": 600}, [], True),   # kept: new copy unhealthy
    ("Never", {"suppressDeletion": True}, [], True),          # kept for ever
])
async def test_purge_modes_while_the_new_copy_is_not_healthy(
        purge_mode: str, more: dict[str, Any], deleted: list[str], kept: bool) -> None:
    found = build(app(purge_mode), {tasks_.TASKS: [task(purge_mode, **more)]}, decision={})
    assert await assess(found, T0 + 10, new_healthy=False) == deleted
    assert bool(found.eviction_tasks) is kept
    assert ("member1" in found.failover.held) is (not deleted)


async def test_gracefully_ends_when_the_new_copy_is_healthy() -> None:
    found = build(app(), {tasks_.TASKS: [task("Gracefully", gracePeriodSeconds=600)]},
                  decision={})
    assert await assess(found, T0 + 10, new_healthy=True) == ["member1"]
    assert found.eviction_tasks == [] and found.record[tasks_.TASKS] == []


async def test_gracefully_ends_when_its_grace_period_ends() -> None:
    found = build(app(), {tasks_.TASKS: [task("Gracefully", gracePeriodSeconds=60)]},
                  decision={})
    assert await assess(found, T0 + 61, new_healthy=False) == ["member1"]


async def test_never_ends_only_when_a_user_clears_suppress_deletion() -> None:
    found = build(app("Never"), {tasks_.TASKS: [task("Never", suppressDeletion=False)]},
                  decision={})
    assert await assess(found, T0 + 10, new_healthy=False) == ["member1"]
    assert found.eviction_tasks == []


async def test_the_evicted_cluster_is_not_chosen_while_the_task_lasts() -> None:
    found = build(app(), {tasks_.TASKS: [task("Gracefully", gracePeriodSeconds=600)]},
                  decision={"member2": 2})
    await application_failover.apply_application_failover(FakeContext(now=T0 + 5), found)
    assert [c.name for c in found.clusters if not c.ready] == ["member1"]


PRESERVE: dict[str, Any] = {"statePreservation": {"rules": [
    {"aliasLabelName": "failover.example.com/job-id", "jsonPath": "{ .jobStatus.jobID }"}]}}


async def test_application_failover_preserves_state_into_the_new_copy() -> None:
    """Directly, one target: the label read from the evicted copy's status is injected into
    the new copy, and leaves it when the task ends."""
    copies: dict[str, Any] = {"member1": deployment(False, {"jobStatus": {"jobID": "j-42"}})}
    found = build(app("Directly", **PRESERVE),
                  {tasks_.SINCE: {"member1": failover.format_time(T0)}})
    await application_failover.apply_application_failover(
        FakeContext(copies=copies, now=T0 + 31), found)
    [evicted] = found.eviction_tasks
    assert evicted.preserved_label_state == {"failover.example.com/job-id": "j-42"}
    assert evicted.clusters_before_failover == ("member1",)
    found.decision = _decision({"member2": 2})
    found.desired = {"member2": deployment(True)}
    await eviction_tasks.inject_preserved_state(FakeContext(now=T0 + 31), found)
    assert theirs(found.desired["member2"]) == {"failover.example.com/job-id": "j-42"}


async def test_the_labels_are_part_of_the_copys_digest() -> None:
    """Injected after render's marks, the labels are marked again: without them (the task
    ended) the copy's digest differs, so it is rewritten without them (an extra label on a
    member object is no drift, and would otherwise stay for ever)."""
    state: dict[str, Any] = {"preservedLabelState": {"a.example.com/x": "1"},
                             "clustersBeforeFailover": ["member1"]}
    found = build(app("Directly"), {tasks_.TASKS: [task("Directly", **state)]}, decision={})
    await application_failover.apply_application_failover(FakeContext(now=T0), found)
    found.decision = _decision({"member2": 2})
    plain = manifests.mark(deployment(True), "")
    found.desired = {"member2": manifests.mark(deployment(True), "")}
    await eviction_tasks.inject_preserved_state(FakeContext(now=T0), found)
    injected = found.desired["member2"]
    assert injected["metadata"]["labels"]["a.example.com/x"] == "1"
    assert injected["metadata"]["labels"][manifests.MANAGED_BY_LABEL] == manifests.MANAGER
    assert manifests.needs_write(plain, injected) == "content changed"


async def test_no_labels_with_several_targets_or_gracefully() -> None:
    """Karmada injects only for Directly into a single target."""
    state: dict[str, Any] = {"preservedLabelState": {"a.example.com/x": "1"},
             "clustersBeforeFailover": ["member1"]}
    for purge_mode, targets in (("Gracefully", {"member2": 2}),
                                ("Directly", {"member2": 1, "member3": 1})):
        found = build(app(purge_mode), {tasks_.TASKS: [task(purge_mode, **state)]},
                      decision={})
        await application_failover.apply_application_failover(FakeContext(now=T0), found)
        found.decision = _decision(targets)
        found.desired = {name: deployment(True) for name in targets}
        await eviction_tasks.inject_preserved_state(FakeContext(now=T0), found)
        assert all("labels" not in d["metadata"] for d in found.desired.values())


async def test_attack_a_forged_task_cannot_set_our_labels() -> None:
    """A binding written by hand with a task whose preserved state names our ownership
    label: the label is not injected (the policy side refuses such a rule too)."""
    state: dict[str, Any] = {"preservedLabelState": {"federation.io/managed-by": "someone-else",
                                     "a.example.com/x": "1"}}
    found = build(app("Directly"), {tasks_.TASKS: [task("Directly", **state)]}, decision={})
    await application_failover.apply_application_failover(FakeContext(now=T0), found)
    found.decision = _decision({"member2": 2})
    found.desired = {"member2": deployment(True)}
    await eviction_tasks.inject_preserved_state(FakeContext(now=T0), found)
    labels = found.desired["member2"]["metadata"]["labels"]
    assert labels[manifests.MANAGED_BY_LABEL] == manifests.MANAGER
    assert theirs(found.desired["member2"]) == {"a.example.com/x": "1"}


async def test_attack_a_json_path_reads_only_the_copys_status() -> None:
    """A rule aimed at the copy's spec (or metadata) finds nothing there: the path is read
    in the status alone, so the eviction stops with a condition naming the rule, and no
    value of the spec reaches a label."""
    rules: dict[str, Any] = {"statePreservation": {"rules": [
        {"aliasLabelName": "a.example.com/x", "jsonPath": "{.spec.replicas}"}]}}
    copies: dict[str, Any] = {"member1": deployment(False)}
    found = build(app("Directly", **rules),
                  {tasks_.SINCE: {"member1": failover.format_time(T0)}})
    with pytest.raises(propagation.Problem) as caught:
        await application_failover.apply_application_failover(
            FakeContext(copies=copies, now=T0 + 31), found)
    assert caught.value.reason == "StatePreservationFailed"
    assert "rule 0" in str(caught.value)


async def test_a_value_that_is_no_label_value_is_refused_without_quoting_it() -> None:
    secret = {"jobStatus": {"jobID": "s3cr3t value!"}}
    copies: dict[str, Any] = {"member1": deployment(False, secret)}
    found = build(app("Directly", **PRESERVE),
                  {tasks_.SINCE: {"member1": failover.format_time(T0)}})
    with pytest.raises(propagation.Problem) as caught:
        await application_failover.apply_application_failover(
            FakeContext(copies=copies, now=T0 + 31), found)
    assert "s3cr3t" not in str(caught.value) and "not a valid label value" in str(caught.value)


async def test_cluster_failover_preserves_the_last_observed_status() -> None:
    """A cluster failover evicting member1 (unreachable: its status is what the binding
    last recorded) gets a task carrying the preserved label."""
    aggregated = [{"cluster": "member1", "applied": False, "health": "Unknown",
                   "error": "unavailable", "status": {"jobStatus": {"jobID": "j-7"}}}]
    found = build({"cluster": {"purgeMode": "Directly", **PRESERVE}}, aggregated=aggregated)
    found.failover.behaviour = policy_.ClusterFailoverBehavior.model_validate(
        {"purgeMode": "Directly", **PRESERVE})
    found.failover.judgements["member1"] = failover.Judgement(
        failover.State.EVICTED, "not ready", evicted_at=T0)
    await application_failover.apply_application_failover(FakeContext(now=T0 + 1), found)
    [evicted] = found.eviction_tasks
    assert evicted.reason == "TaintUntolerated"
    assert evicted.preserved_label_state == {"failover.example.com/job-id": "j-7"}


async def test_a_malformed_task_in_the_binding_is_a_condition() -> None:
    found = build(app(), {tasks_.TASKS: [{"fromCluster": "member1"}]})
    with pytest.raises(propagation.Problem) as caught:
        await application_failover.apply_application_failover(FakeContext(now=T0), found)
    assert "creationTimestamp" in str(caught.value)


async def test_a_copy_that_cannot_be_read_keeps_its_clock() -> None:
    """member1 unreadable for a moment: its clock neither stops nor restarts."""
    found = build(app(), {tasks_.SINCE: {"member1": failover.format_time(T0)}})
    ctx = FakeContext(copies={"member1": deployment(False)}, now=T0 + 10)
    ctx.down.add("member1")
    await application_failover.apply_application_failover(ctx, found)
    assert found.record[tasks_.SINCE] == {"member1": failover.format_time(T0)}
    assert found.eviction_tasks == []


async def test_every_unhealthy_cluster_is_evicted_and_healthy_ones_stay() -> None:
    since = {c: failover.format_time(T0) for c in ("member1", "member2")}
    found = build(app("Directly"), {tasks_.SINCE: since},
                  decision={"member1": 1, "member2": 1, "member3": 1})
    copies: dict[str, Any] = {"member1": deployment(False), "member2": deployment(False),
                              "member3": deployment(True)}
    await application_failover.apply_application_failover(
        FakeContext(copies=copies, now=T0 + 31), found)
    assert [t.from_cluster for t in found.eviction_tasks] == ["member1", "member2"]
    assert [c.name for c in found.clusters if c.ready] == ["member3"]
