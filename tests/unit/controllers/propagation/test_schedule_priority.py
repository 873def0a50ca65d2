"""schedulePriority: the PriorityClass's value recorded as Karmada's binding carries it, a
missing class stops the template (as Karmada's detector), and templates waiting for room
are retried highest priority first, one at a time."""

from __future__ import annotations

from typing import Any

from federation.controllers.propagation import room
from tests.unit.controllers.fakes import FakeMC, cluster_set, reconciler, request_for

JSON = dict[str, Any]
MEMBERS = ("member1", "member2")


def priority_class(name: str, value: Any) -> JSON:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value}


def deployment(name: str, replicas: int = 2) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "a", "image": "x"}]}}}}


def policy(name: str, priority_class_name: str | None, **placement: Any) -> JSON:
    spec: JSON = {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                         "name": name}],
                  "placement": {"clusterAffinity": {"clusterNames": list(MEMBERS)},
                                **placement}}
    if priority_class_name is not None:
        spec["schedulePriority"] = {"priorityClassSource": "KubePriorityClass",
                                    "priorityClassName": priority_class_name}
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": "shop"}, "spec": spec}


def binding(mc: FakeMC, name: str) -> JSON:
    found = mc.find("hub", "ResourceBinding", f"{name}-deployment", "shop")
    assert found is not None
    return found


async def test_the_priority_class_value_is_recorded_as_karmadas_binding() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", priority_class("high", 1000))
    mc.put("hub", policy("web", "high"))
    template = mc.put("hub", deployment("web"))
    await reconciler(mc).reconcile(request_for(template))
    assert binding(mc, "web")["spec"]["schedulePriority"] == {"priority": 1000}


async def test_a_missing_priority_class_places_nothing_and_says_so() -> None:
    """Karmada's detector builds no binding when the class is missing: nothing placed."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", policy("web", "nope"))
    template = mc.put("hub", deployment("web"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert [w for w in mc.writes if w[1] != "hub"] == []
    scheduled = {c["type"]: c for c in binding(mc, "web")["status"]["conditions"]}["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "PriorityClassNotFound")
    assert "'nope'" in scheduled["message"]
    mc.put("hub", priority_class("nope", 7))  # its event requeues the template
    await r.reconcile(request_for(template))
    assert mc.find("member1", "Deployment", "web", "shop") is not None
    assert binding(mc, "web")["spec"]["schedulePriority"] == {"priority": 7}


async def test_a_class_without_an_int32_value_is_refused() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", priority_class("odd", "high"))
    mc.put("hub", policy("web", "odd"))
    template = mc.put("hub", deployment("web"))
    await reconciler(mc).reconcile(request_for(template))
    assert mc.find("member1", "Deployment", "web", "shop") is None


async def test_a_policy_without_the_field_records_nothing() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", policy("web", None))
    template = mc.put("hub", deployment("web"))
    await reconciler(mc).reconcile(request_for(template))
    assert "schedulePriority" not in binding(mc, "web")["spec"]


async def test_an_unschedulable_template_waits_for_room() -> None:
    """No room: the template waits (not retried on a timer); placed, it waits no more."""
    mc = FakeMC(cluster_set(*MEMBERS))
    dynamic = {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                     "replicaDivisionPreference": "Aggregated"}}
    mc.put("hub", policy("web", None, **dynamic))
    template = mc.put("hub", deployment("web", replicas=3))
    r = reconciler(mc)
    full = {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "0"},
            "allocated": {"cpu": "0", "memory": "0", "pods": "0"}}
    for member in MEMBERS:
        mc.put("hub", {"apiVersion": "cluster.federation.io/v1alpha1", "kind": "MemberCluster",
                       "metadata": {"name": member},
                       "spec": {"context": member}, "status": {"resourceSummary": full}})
    result = await r.reconcile(request_for(template))
    assert result is None  # no timer
    assert request_for(template) in r.waiting_for_room
    roomy = {**full, "allocatable": {**full["allocatable"], "pods": "10"}}
    for member in MEMBERS:
        found = mc.find("hub", "MemberCluster", member)
        assert found is not None
        found["status"]["resourceSummary"] = roomy
        mc.put("hub", found)
    await r.reconcile(request_for(template))
    assert request_for(template) not in r.waiting_for_room
    assert mc.find("member1", "Deployment", "web", "shop") is not None or \
        mc.find("member2", "Deployment", "web", "shop") is not None


# -- rounds ----------------------------------------------------------------------------------


def test_a_round_takes_the_highest_priority_first_then_the_longest_waiting() -> None:
    waiting = {"low-old": 0, "high-new": 3, "low-new": 2, "mid": 1}
    ranks = {"low-old": 0, "low-new": 0, "high-new": 1000, "mid": 5}
    rounds = room.Rounds(waiting, ranks.__getitem__)
    assert rounds.room_appeared() == "high-new"
    assert rounds.finished("high-new") == "mid"  # still waiting: too big for the room
    assert rounds.finished("mid") == "low-old"
    assert rounds.finished("low-old") == "low-new"
    assert rounds.finished("low-new") is None
    assert rounds.current is None


def test_the_first_template_placed_ends_the_round() -> None:
    """Its replicas are not in the summary yet: the next waits for the next summary."""
    waiting = {"low": 0, "high": 1}
    rounds = room.Rounds(waiting, {"low": 0, "high": 10}.__getitem__)
    assert rounds.room_appeared() == "high"
    del waiting["high"]  # placed
    assert rounds.finished("high") is None
    assert rounds.room_appeared() == "low"


def test_a_summary_during_a_round_starts_another_after_it() -> None:
    waiting = {"a": 0, "b": 1}
    rounds = room.Rounds(waiting, lambda _: 0)
    assert rounds.room_appeared() == "a"
    assert rounds.room_appeared() is None  # a round runs
    del waiting["a"]
    assert rounds.finished("a") == "b"  # the new round starts at once
    assert rounds.finished("other") is None


def test_only_a_summary_change_starts_a_round() -> None:
    """A capacity refresh (the summary) starts a round; a condition flip alone does not
    (it requeues every template anyway), nor a first list."""
    from federation.contexts.cache import Event
    from federation.controllers.setup import summary_changed
    from federation.hub import api

    def member(pods: str, ready: str = "True") -> JSON:
        return {"metadata": {"name": "m"},
                "status": {"conditions": [{"type": "Ready", "status": ready}],
                           "resourceSummary": {"allocatable": {"pods": pods}}}}

    def event(new: JSON, old: JSON | None) -> Event:
        return Event("MODIFIED", "hub", api.MEMBER_CLUSTERS, new, old)

    assert summary_changed(event(member("10"), member("0")))
    assert not summary_changed(event(member("0", "False"), member("0")))
    assert not summary_changed(event(member("0"), None))
