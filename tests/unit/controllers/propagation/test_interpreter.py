"""Propagation asks the hub's ResourceInterpreterCustomizations: InterpretReplica before the
schedule, ReviseReplica per copy, Retain before comparing; a failing script stops the
reconcile with a condition naming it, and the event loop never waits for a script."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("lupa")

from federation.contexts.client import Resource
from federation.controllers import propagation
from federation.controllers.kit import plan
from federation.controllers.kit.chain import Problem
from federation.controllers.propagation import customized
from federation.controllers.propagation.copies import plan_copies
from federation.controllers.propagation.interpret import interpret_replicas
from federation.hub import manifests
from federation.placement import loader
from tests.unit.controllers.fakes import FakeContext

JSON = dict[str, Any]
WIDGETS = Resource("example.io", "v1", "widgets", "Widget")


def customization(**scripts: str) -> JSON:
    return {"apiVersion": "config.karmada.io/v1alpha1",
            "kind": "ResourceInterpreterCustomization",
            "metadata": {"name": "widgets", "resourceVersion": str(hash(str(scripts)))},
            "spec": {"target": {"apiVersion": "example.io/v1", "kind": "Widget"},
                     "customizations": {f: {"luaScript": s} for f, s in scripts.items()}}}


RETAIN_PAUSED = """function Retain(desired, observed)
  desired.spec.paused = observed.spec.paused
  return desired
end"""


def widget(paused: bool = False) -> JSON:
    return {"apiVersion": "example.io/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "shop", "uid": "u1"},
            "spec": {"size": 10, "paused": paused}}


def build() -> propagation.Build:
    found = propagation.Build(template=widget(), resource=WIDGETS, hub="hub")
    found.policy = loader.parse_policy({
        "apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "w", "namespace": "shop"},
        "spec": {"resourceSelectors": [{"apiVersion": "example.io/v1", "kind": "Widget"}],
                 "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}}, "test")
    found.desired = {"member1": manifests.mark(manifests.render(widget(), None, False), "u1")}
    return found


def paused_copy(b: propagation.Build) -> JSON:
    """Our copy, which a controller in the member paused since we wrote it."""
    live = dict(b.desired["member1"])
    live["spec"] = {**live["spec"], "paused": True}
    return live


async def test_a_field_the_customization_retains_is_not_reverted() -> None:
    b = build()
    ctx = FakeContext(lists={"ResourceInterpreterCustomization": [
        customization(retention=RETAIN_PAUSED)]}, copies={"member1": paused_copy(b)})
    await plan_copies(ctx, b)
    [vertex] = list(b.dag)
    assert vertex.action is plan.Action.NOOP


async def test_without_the_customization_the_same_change_is_drift() -> None:
    b = build()
    await plan_copies(FakeContext(copies={"member1": paused_copy(b)}), b)
    [vertex] = list(b.dag)
    assert (vertex.action, vertex.reason) == (plan.Action.UPDATE, "drift at /spec/paused")


async def test_a_failing_script_is_a_condition_naming_it_and_nothing_is_written() -> None:
    b = build()
    broken = customization(retention="function Retain(d, o) return d.nope.deeper end")
    ctx = FakeContext(lists={"ResourceInterpreterCustomization": [broken]},
                      copies={"member1": paused_copy(b)})
    with pytest.raises(Problem) as raised:
        await plan_copies(ctx, b)
    assert raised.value.reason == "InterpreterFailed"
    assert str(raised.value).startswith("customization widgets, Retain: ")
    assert len(b.dag) == 0


async def test_an_endless_script_does_not_hold_the_event_loop() -> None:
    """The attack: a script that never ends. It stops at its budget with a condition, and
    the loop kept running other work all along."""
    b = build()
    endless = customization(retention="function Retain(d, o) while true do end end")
    ctx = FakeContext(lists={"ResourceInterpreterCustomization": [endless]},
                      copies={"member1": paused_copy(b)})
    ticks = 0
    done = asyncio.Event()

    async def other_work() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(other_work())
    with pytest.raises(Problem, match="instruction budget exhausted"):
        await plan_copies(ctx, b)
    done.set()
    await ticker
    assert ticks > 100


async def test_a_customization_that_does_not_parse_is_named() -> None:
    b = build()
    bad = customization(retention=RETAIN_PAUSED)
    bad["spec"]["customizations"]["retain"] = {"luaScript": "x"}
    ctx = FakeContext(lists={"ResourceInterpreterCustomization": [bad]},
                      copies={"member1": paused_copy(b)})
    with pytest.raises(Problem, match="unknown field 'retain'"):
        await plan_copies(ctx, b)


async def test_replicas_come_from_interpret_replica_and_copies_from_revise_replica() -> None:
    scripts = customization(
        replicaResource="function GetReplicas(o) return o.spec.size, nil end",
        replicaRevision="function ReviseReplica(o, n) o.spec.size = n return o end")
    ctx = FakeContext(lists={"ResourceInterpreterCustomization": [scripts]})
    b = build()
    await interpret_replicas(ctx, b)
    assert propagation.template_resource(b).replicas == 10
    revised = await customized.revise(ctx, manifests.render(widget(), 5, True), 5)
    assert revised["spec"]["size"] == 5
