"""The record: the binding and the template's status written only when something anyone
acts on changed; conditions and events for conflicts, pending clean-up and recovery."""

from __future__ import annotations

from typing import Any

from federation.contexts import client as kube
from federation.controllers import propagation
from federation.controllers.kit import plan
from federation.controllers.propagation import record
from federation.hub import status
from federation.placement import decision as decision_
from tests.unit.controllers.fakes import (
    JSON,
    FakeMC,
    FakeRecorder,
    cluster_set,
    reconciler,
    request_for,
)

MEMBERS = ("member1", "member2")


def deployment(replicas: int = 2) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "c", "image": "nginx"}]}}}}


def deployment_policy() -> JSON:
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": "web"}],
                     "placement": {"clusterAffinity": {"clusterNames": list(MEMBERS)},
                                   "replicaScheduling": {
                                       "replicaSchedulingType": "Duplicated"}}}}


def make_ready(mc: FakeMC, member: str, ready: int) -> None:
    """The member's controllers report ``ready`` replicas on our copy (cache updated)."""
    copy = mc.find(member, "Deployment", "web", "shop")
    assert copy is not None
    copy["status"] = {"replicas": copy["spec"]["replicas"], "readyReplicas": ready,
                      "availableReplicas": ready}
    mc.put(member, copy)


def status_writes(mc: FakeMC) -> list[tuple[str, str, str]]:
    return [w for w in mc.writes if w[0] == "status"]


async def test_template_status_is_written_once_copies_are_ready_then_never_again() -> None:
    """A new Deployment: no template status while copies are not ready; one status write
    (summed counts, Healthy) when they are; a further reconcile writes nothing at all."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy())
    template = mc.put("hub", deployment())
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert status_writes(mc) == []
    for member in MEMBERS:
        make_ready(mc, member, 2)
    await r.reconcile(request_for(template))
    assert status_writes(mc) == [("status", "hub", "Deployment/web")]
    stored = mc.find("hub", "Deployment", "web", "shop")
    assert stored is not None
    assert stored["status"]["readyReplicas"] == 4
    assert {c["type"]: c["status"] for c in stored["status"]["conditions"]}["Healthy"] == "True"
    before = len(mc.writes)
    await r.reconcile(request_for(template))
    assert mc.writes[before:] == []


def conds(healthy: bool, applied: bool = True) -> list[JSON]:
    return [status.condition("Scheduled", True, "Scheduled", "placed"),
            status.condition("Applied", applied, "Applied" if applied else "ApplyFailed", "x"),
            status.condition("Healthy", healthy, "Healthy" if healthy else "NotHealthy", "y")]


def ready_copy(ready: int) -> JSON:
    return {"kind": "Deployment", "spec": {"replicas": 2},
            "status": {"replicas": 2, "readyReplicas": ready}}


def test_ready_template_is_rewritten_when_its_counts_change() -> None:
    """While ready, a change of the summed counts (a scale) is written; the same counts
    with only a condition message changed are not."""
    template = {**deployment(), "status": {}}
    first = record.template_status_write(template, {"m": ready_copy(2)}, conds(True))
    assert first is not None
    template["status"] = first
    assert record.template_status_write(template, {"m": ready_copy(2)}, conds(True)) is None
    scaled = {"m": {**ready_copy(3), "status": {"replicas": 3, "readyReplicas": 3}}}
    assert record.template_status_write(template, scaled, conds(True)) is not None


def test_a_status_stored_without_its_null_fields_is_not_written_again() -> None:
    """An AggregateStatus script's answer may hold nulls; the API server keeps no null
    field of a merge patch, so the status it stored without them is the one the write
    would leave: none is sent again (and no echo is processed)."""
    template = {**deployment(), "status": {}}
    aggregated = {"phase": "Running", "message": None, "nested": {"a": 1, "b": None}}
    first = record.template_status_write(template, {"m": ready_copy(2)}, conds(True),
                                         aggregated)
    assert first is not None and first.get("message", "absent") is None
    template["status"] = record.without_nulls(first)  # as the server stored it
    assert record.template_status_write(template, {"m": ready_copy(2)}, conds(True),
                                        aggregated) is None
    assert record.template_status_write(template, {"m": ready_copy(2)}, conds(True),
                                        {**aggregated, "phase": "Failed"}) is not None


def test_a_problem_appearing_is_written_even_before_ready() -> None:
    """Applied turning False on a not-yet-ready template is written (a problem appeared),
    although readiness itself has not changed."""
    template = {**deployment(), "status": {}}
    assert record.template_status_write(template, {"m": ready_copy(0)}, conds(False)) is None
    assert record.template_status_write(template, {"m": ready_copy(0)},
                                        conds(False, applied=False)) is not None


def test_kinds_without_a_status_we_fill_are_never_written() -> None:
    """A ConfigMap template gets no status write, whatever the conditions."""
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
    assert record.template_status_write(config, {}, conds(False, applied=False)) is None


def test_cluster_scoped_template_status_body_has_no_namespace() -> None:
    """The status vertex names the template (no namespace for a cluster-scoped one) and
    carries only the status."""
    writes = plan.Plan()
    template = {"apiVersion": "example.com/v1", "kind": "Thing",
                "metadata": {"name": "t", "uid": "u"}, "spec": {"big": "x"}}
    record.add_template_status(writes, "hub", template, {"replicas": 1})
    (vertex,) = list(writes)
    assert vertex.action is plan.Action.STATUS
    assert vertex.obj == {"apiVersion": "example.com/v1", "kind": "Thing",
                          "metadata": {"name": "t"}, "status": {"replicas": 1}}


def build_with(previous: list[JSON] | None = None) -> propagation.Build:
    template = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "shop", "uid": "u1"}}
    binding: dict[str, Any] | None = None
    if previous is not None:
        binding = {"metadata": {"name": "a-configmap", "namespace": "shop"},
                   "spec": {"resource": {"uid": "u1"},
                            "clusters": [{"name": "member1", "replicas": 0}]},
                   "status": {"conditions": previous}}
    found = propagation.Build(template=template, resource=kube.CONFIGMAPS, hub="hub",
                              binding=binding)
    found.decision = decision_.Decision(replicas=0, clusters={"member1": 0})
    return found


def test_conflict_and_pending_clean_up_become_conditions() -> None:
    """A conflict makes Applied False and adds Conflict (ObjectNotManaged); a copy still to
    delete adds CleanupPending naming the cluster."""
    b = build_with()
    b.conflicts["member1"] = "ConfigMap shop/a exists and is not managed by federation"
    found = {c["type"]: c for c in record.conditions(b, {}, ["member3"], {"member1": None})}
    assert found["Applied"]["status"] == "False"
    assert found["Applied"]["reason"] == "ApplyFailed"
    assert found["Conflict"]["reason"] == "ObjectNotManaged"
    assert "member1: ConfigMap shop/a" in found["Conflict"]["message"]
    assert found["CleanupPending"]["message"] == "copies still to delete in member3"


def test_refused_write_is_reported_as_override_refused() -> None:
    """A failure the executor refused before any server (plan.REFUSED) is OverrideRefused,
    not a retryable ApplyFailed."""
    b = build_with()
    found = {c["type"]: c for c in record.conditions(
        b, {"member1": f"{plan.REFUSED} wrong identity"}, [], {"member1": None})}
    assert found["Applied"]["reason"] == "OverrideRefused"


async def test_problem_is_one_warning_event_and_recovery_one_applied_event() -> None:
    """A condition turning bad is a Warning with its reason; the same condition again is no
    event; Applied turning True again is one Normal Applied event."""
    recorder = FakeRecorder()
    bad = [status.condition("Applied", False, "ApplyFailed", "member1: 403")]
    await record.emit_transitions(recorder, build_with([]), bad)
    await record.emit_transitions(recorder, build_with(bad), bad)
    good = [status.condition("Applied", True, "Applied", "applied to member1", bad)]
    await record.emit_transitions(recorder, build_with(bad), good)
    assert recorder.events == [("Warning", "ApplyFailed", "member1: 403"),
                               ("Normal", "Applied", "applied to member1")]
