"""The status path asks the resource interpreter: a custom kind's per-cluster health and
reflected status come from its customization's InterpretHealth and InterpretStatus, the
hub template's status from its AggregateStatus; a failing or endless script is a
StatusInterpreted condition naming it, and the reconcile still records what it wrote."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("lupa")

from federation.controllers import propagation
from federation.controllers.kit.interpreting import Interpreting
from federation.controllers.propagation import observations
from federation.hub import bindings
from tests.unit.controllers.fakes import (
    JSON,
    FakeKinds,
    FakeMC,
    FakeRecorder,
    cluster_set,
    reconciler,
    request_for,
)

MEMBERS = ("member1", "member2")

HEALTH = """function InterpretHealth(obj)
  return obj.status ~= nil and obj.status.readyReplicas == obj.spec.replicas
end"""
REFLECT = """function ReflectStatus(obj)
  if obj.status == nil then return {} end
  return {readyReplicas = obj.status.readyReplicas, replicas = obj.status.replicas}
end"""
AGGREGATE = """function AggregateStatus(desired, items)
  local ready, replicas = 0, 0
  for i = 1, #items do
    if items[i].status ~= nil then
      ready = ready + (items[i].status.readyReplicas or 0)
      replicas = replicas + (items[i].status.replicas or 0)
    end
  end
  desired.status = {readyReplicas = ready, replicas = replicas, clusters = #items}
  return desired
end"""


def customization(**scripts: str) -> JSON:
    return {"apiVersion": "config.karmada.io/v1alpha1",
            "kind": "ResourceInterpreterCustomization", "metadata": {"name": "widgets"},
            "spec": {"target": {"apiVersion": "example.io/v1", "kind": "Widget"},
                     "customizations": {f: {"luaScript": s} for f, s in scripts.items()}}}


ALL = {"healthInterpretation": HEALTH, "statusReflection": REFLECT,
       "statusAggregation": AGGREGATE}


def widget() -> JSON:
    return {"apiVersion": "example.io/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "shop", "generation": 1},
            "spec": {"replicas": 2}}


def policy() -> JSON:
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "w", "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "example.io/v1", "kind": "Widget"}],
                     "placement": {"clusterAffinity": {"clusterNames": list(MEMBERS)}}}}


def fleet(**scripts: str) -> tuple[FakeMC, JSON]:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", policy())
    if scripts:
        mc.put("hub", customization(**scripts))
    return mc, mc.put("hub", widget())


def report(mc: FakeMC, member: str, ready: int) -> None:
    """The member's own controller writes the copy's status (a condition of its own too)."""
    copy = mc.find(member, "Widget", "w", "shop")
    assert copy is not None
    copy["status"] = {"replicas": 2, "readyReplicas": ready, "internal": "x",
                      "conditions": [{"type": "Ready", "status": "True"}]}
    mc.put(member, copy)


def record(mc: FakeMC) -> bindings.BindingRecord:
    return bindings.BindingRecord.of(mc.find("hub", "ResourceBinding", "w-widget", "shop"))


def conditions(obj: Any) -> dict[str, JSON]:
    return {c["type"]: c for c in obj}


async def test_health_reflected_and_aggregated_status_come_from_the_scripts() -> None:
    mc, template = fleet(**ALL)
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    # No status yet: the script says unhealthy (the built-in would say healthy: it exists).
    assert {e.health for e in record(mc).aggregated} == {"Unhealthy"}
    assert "member1: Unhealthy" in conditions(record(mc).conditions)["Healthy"]["message"]
    report(mc, "member1", 2)
    report(mc, "member2", 1)
    await r.reconcile(request_for(template))
    assert ("status", "hub", "Widget/w") not in mc.writes  # not ready: coalesced
    report(mc, "member2", 2)
    await r.reconcile(request_for(template))
    found = {e.cluster: e for e in record(mc).aggregated}
    assert (found["member1"].health, found["member2"].health) == ("Healthy", "Healthy")
    assert found["member1"].status == {"readyReplicas": 2, "replicas": 2}  # reflected
    stored = mc.find("hub", "Widget", "w", "shop")
    assert stored is not None
    assert {k: v for k, v in stored["status"].items() if k != "conditions"} == \
        {"readyReplicas": 4, "replicas": 4, "clusters": 2}
    assert conditions(stored["status"]["conditions"])["Healthy"]["status"] == "True"


async def test_a_settled_custom_kind_costs_no_write() -> None:
    """Once ready and recorded, a reconcile with nothing new writes nothing (scripts run,
    the write budget holds)."""
    mc, template = fleet(**ALL)
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    for member in MEMBERS:
        report(mc, member, 2)
    await r.reconcile(request_for(template))
    before = len(mc.writes)
    await r.reconcile(request_for(template))
    assert mc.writes[before:] == []


async def test_without_a_customization_a_custom_kind_is_healthy_once_it_exists() -> None:
    """The built-in answer, as before: healthy once there, no template status."""
    mc, template = fleet()
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    report(mc, "member1", 0)
    await r.reconcile(request_for(template))
    found = {e.cluster: e for e in record(mc).aggregated}
    assert found["member1"].health == "Healthy"
    assert "status" not in (mc.find("hub", "Widget", "w", "shop") or {})


async def test_a_failing_health_script_is_a_condition_and_the_record_is_written() -> None:
    mc, template = fleet(healthInterpretation="function InterpretHealth(o) "
                                              "return o.status.nope.deeper end")
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert mc.find("member1", "Widget", "w", "shop") is not None  # the writes happened
    found = conditions(record(mc).conditions)[observations.CONDITION]
    assert (found["status"], found["reason"]) == ("False", "InterpreterFailed")
    assert "member1: customization widgets, InterpretHealth: " in found["message"]
    assert {e.health for e in record(mc).aggregated} == {"Unknown"}


async def test_a_script_with_no_answer_in_time_is_asked_again() -> None:
    """A script that ran out of wall-clock time (a busy machine, not a spent budget) may
    answer next time, and no event need come: the template is requeued, so its health is
    not left Unknown until something else changes. A script that failed is not: the same
    inputs fail the same way."""
    mc, template = fleet(**ALL)
    settings = propagation.PropagationSettings()
    timing_out = propagation.Reconciler(mc, mc.clusters, FakeKinds(), FakeRecorder(),
                                        settings, interpreting=Interpreting(timeout=0.0))
    result = await timing_out.reconcile(request_for(template))
    found = conditions(record(mc).conditions)[observations.CONDITION]
    assert "no answer within 0 s (abandoned)" in found["message"]
    assert result is not None and result.requeue_after == settings.retry_pending

    failing, _ = fleet(healthInterpretation="function InterpretHealth(o) error('no') end")
    result = await reconciler(failing).reconcile(request_for(template))
    assert observations.CONDITION in conditions(record(failing).conditions)
    assert result is None or result.requeue_after is None


async def test_an_endless_aggregate_script_stops_at_its_budget_with_a_condition() -> None:
    """The attack: AggregateStatus that never ends. The reconcile returns, the binding
    names the customization and the operation, the template's status is not written."""
    mc, template = fleet(statusAggregation="function AggregateStatus(d, i) "
                                           "while true do end end")
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    for member in MEMBERS:
        report(mc, member, 2)
    await r.reconcile(request_for(template))
    message = conditions(record(mc).conditions)[observations.CONDITION]["message"]
    assert message.startswith("customization widgets, AggregateStatus: instruction budget")
    assert ("status", "hub", "Widget/w") not in mc.writes


async def test_a_cleared_failure_takes_its_condition_away() -> None:
    mc, template = fleet(statusAggregation="function AggregateStatus(d, i) return 1 end")
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert observations.CONDITION in conditions(record(mc).conditions)
    mc.put("hub", customization(**ALL))
    await r.reconcile(request_for(template))
    assert observations.CONDITION not in conditions(record(mc).conditions)


async def test_a_problem_reaches_the_template_of_an_aggregated_kind() -> None:
    """A kind whose status a script aggregates carries our conditions like a Deployment:
    a problem later (here its InterpretReplica failing) turns Applied False on the
    template too, its aggregated fields kept."""
    mc, template = fleet(**ALL)
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    for member in MEMBERS:
        report(mc, member, 2)
    await r.reconcile(request_for(template))
    broken = customization(**ALL, replicaResource="function GetReplicas(o) error('no') end")
    mc.put("hub", broken)
    await r.reconcile(request_for(template))
    stored = mc.find("hub", "Widget", "w", "shop")
    assert stored is not None
    applied = conditions(stored["status"]["conditions"])["Applied"]
    assert (applied["status"], applied["reason"]) == ("False", "InterpreterFailed")
    assert stored["status"]["readyReplicas"] == 4


class _LateKinds(FakeKinds):
    """A kind the members do not serve when the reconcile reads their copies (its CRD
    comes with the reconcile's own plan): the first attempt per member to follow it
    finds nothing to follow, a later one does."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: dict[str, int] = {}
        self.followed: set[str] = set()

    def member_resource(self, cluster: str, kind: str) -> Any:
        return self.resource(kind) if cluster in self.followed else None

    async def track_members(self, resource: Any, only: Any = None) -> None:
        for cluster in only or ():
            self.asked[cluster.name] = self.asked.get(cluster.name, 0) + 1
            if self.asked[cluster.name] > 1:  # served by now: the copy was written
                self.followed.add(cluster.name)


async def test_a_copy_written_where_its_kind_was_not_served_yet_is_followed() -> None:
    """The CRD reaches a member in the same plan as the first copy. The member's later
    changes to the copy (its status) must reconcile the template, so the kind is followed
    there once the copy exists; before, nothing did until another event came, and the
    template's health stayed as first recorded (test_interpreter_crd's timeouts in CI)."""
    mc, template = fleet(**ALL)
    for member in MEMBERS:  # engaged: a member that does not serve a kind holds no copy
        mc.clusters.get(member).client = mc  # type: ignore[assignment]
    kinds = _LateKinds()
    r = propagation.Reconciler(mc, mc.clusters, kinds, FakeRecorder())
    await r.reconcile(request_for(template))
    assert all(mc.find(m, "Widget", "w", "shop") is not None for m in MEMBERS)
    assert kinds.followed == set(MEMBERS)


async def test_a_member_whose_discovery_still_lags_has_the_template_looked_at_again() -> None:
    """The copy is written but the member's discovery does not list its kind yet: the
    template is requeued, so the kind is followed at the next look."""
    mc, template = fleet(**ALL)
    for member in MEMBERS:
        mc.clusters.get(member).client = mc  # type: ignore[assignment]
    kinds = _LateKinds()
    kinds.asked = {m: -5 for m in MEMBERS}  # not served for a few more asks
    settings = propagation.PropagationSettings()
    r = propagation.Reconciler(mc, mc.clusters, kinds, FakeRecorder(), settings)
    result = await r.reconcile(request_for(template))
    assert kinds.followed == set()
    assert result is not None and result.requeue_after == settings.retry_pending


async def test_health_follows_each_report_with_a_customization_that_came_late() -> None:
    """test_interpreter_crd's sequence on one reconciler (one interpreter registry, the
    binding memo across versions): the template is reconciled before its customization
    exists (the registry is first built from none), then the customization arrives; each
    member's report moves the binding's Healthy condition, ready and back."""
    mc, template = fleet()
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert {e.health for e in record(mc).aggregated} == {"Healthy"}  # the built-in: exists
    mc.put("hub", customization(**ALL))
    await r.reconcile(request_for(template))
    assert conditions(record(mc).conditions)["Healthy"]["status"] == "False"  # the script
    for member in MEMBERS:
        report(mc, member, 2)
        await r.reconcile(request_for(template))
    assert conditions(record(mc).conditions)["Healthy"]["status"] == "True"
    report(mc, "member2", 1)
    await r.reconcile(request_for(template))
    healthy = conditions(record(mc).conditions)["Healthy"]
    assert (healthy["status"], healthy["message"]) == ("False", "member2: Unhealthy")
