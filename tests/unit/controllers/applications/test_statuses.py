"""Definitions' healthPolicy and customStatus in the controller: judged on the live member
objects, reported per component and trait in ``status.services``, and a deploy step waits
for them; a hostile policy is stopped off the event loop with its reason in the status."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from federation.controllers.applications import definitions
from federation.controllers.kit import sandbox
from tests.unit.applications.test_custom_status import server_definitions
from tests.unit.controllers.applications.fakes import World, status_after

JSON = dict[str, Any]


def server_app(trait: bool = True) -> JSON:
    component: JSON = {"name": "api", "type": "server", "properties": {"image": "api:1"}}
    if trait:
        component["traits"] = [{"type": "probe", "properties": {"wanted": "yes"}}]
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": "shop", "namespace": "shop", "uid": "uid-app"},
            "spec": {"components": [component],
                     "policies": [{"name": "one", "type": "topology",
                                   "properties": {"clusters": ["member1"]}}]},
            "status": {}}


def world_of(*docs: JSON) -> World:
    world = World()
    for doc in docs:
        world.view.put("hub", doc)
    return world


def land(world: World, ready: int, seen: str = "yes", cluster_ip: str = "10.0.0.7") -> None:
    """The member holds what was written, its controllers having filled in the status."""
    for sent in world.writer.sent:
        body = copy.deepcopy(sent)
        body["metadata"]["uid"] = f"uid-{body['kind']}"
        if body["kind"] == "Deployment":
            body["status"] = {"readyReplicas": ready, "replicas": 2, "updatedReplicas": 2}
        elif body["kind"] == "Service":
            body["spec"]["clusterIP"] = cluster_ip
        elif body["kind"] == "ConfigMap":
            body["data"] = {**body.get("data", {}), "seen": seen}
        world.view.put("member1", body)


async def reconciled(world: World) -> JSON:
    """The Application's status after one more reconcile, as the hub keeps it (the
    controller sends what changed, as a merge patch)."""
    app = world.view.objects[("hub", "Application", "shop", "shop")]
    sent = len(world.status.written)
    await world.reconcile()
    return status_after(world, app, sent)


def component_entry(status: JSON) -> JSON:
    entries: list[JSON] = [s for s in status["services"] if "name" in s]
    assert len(entries) == 1
    return entries[0]


async def test_the_policy_judges_the_live_workload_and_the_step_waits_for_it() -> None:
    """Not ready: the component is unhealthy with its customStatus message and the deploy
    step waits (although every object is our content); ready: healthy, the step ends."""
    world = world_of(*server_definitions(), server_app())
    await reconciled(world)
    land(world, ready=1)
    status = await reconciled(world)
    entry = component_entry(status)
    assert entry == {"name": "api", "namespace": "shop", "cluster": "member1",
                     "step": "deploy", "healthy": False,
                     "message": "Ready:1/2 healthy=false of api:1",
                     "traits": [{"type": "probe", "healthy": True, "message": "probe yes"}]}
    step = status["services"][-1]
    assert (step["step"], step["healthy"]) == ("deploy", False)
    assert "Ready:1/2" in step["message"]
    assert status["status"] == "runningWorkflow" and status["healthy"] is False
    land(world, ready=2)
    status = await reconciled(world)
    assert component_entry(status)["healthy"] is True
    assert component_entry(status)["message"] == "Ready:2/2 healthy=true of api:1"
    assert status["status"] == "running" and status["healthy"] is True


async def test_an_unhealthy_trait_keeps_the_component_waiting() -> None:
    world = world_of(*server_definitions(), server_app())
    await reconciled(world)
    land(world, ready=2, seen="no")
    status = await reconciled(world)
    entry = component_entry(status)
    assert entry["healthy"] is False
    assert entry["traits"] == [{"type": "probe", "healthy": False, "message": "probe no"}]
    assert status["status"] == "runningWorkflow"


async def test_the_policy_reads_the_auxiliary_object_by_its_output_name() -> None:
    """``context.outputs.web``: the live Service (its clusterIP set by the member)."""
    world = world_of(*server_definitions(), server_app(trait=False))
    await reconciled(world)
    land(world, ready=2, cluster_ip="")
    assert component_entry(await reconciled(world))["healthy"] is False
    land(world, ready=2)
    assert component_entry(await reconciled(world))["healthy"] is True


async def test_a_failing_policy_says_why_in_the_status() -> None:
    """A policy that reads what is not there: unhealthy, the reason (path, no value) as
    the message, the step waiting; no traceback, nothing raised."""
    docs = server_definitions()
    docs[0]["spec"]["status"] = {"healthPolicy": "isHealth: context.output.status.nope > 0"}
    world = world_of(*docs, server_app(trait=False))
    await reconciled(world)
    land(world, ready=2)
    entry = component_entry(await reconciled(world))
    assert entry["healthy"] is False
    assert entry["message"].startswith(
        "ComponentDefinition vela-system/server: healthPolicy: isHealth: ")
    assert "nope" in entry["message"] and "\n" not in entry["message"]


HOSTILE = """
_n: [for k, _ in context.output.metadata {k}, for i, _ in context.output.spec.template {i}]
_big: [for a in _n for b in _n for c in _n for d in _n for e in _n for f in _n {a+b+c+d+e+f}]
isHealth: len(_big) > 0
"""


async def test_a_hostile_policy_is_stopped_off_the_loop() -> None:
    """Attack: a healthPolicy that does unbounded work runs in a worker process, killed at
    its deadline; the event loop keeps running meanwhile (a ticker counts) and the status
    says why, one line; the loop is never frozen."""
    docs = server_definitions()
    docs[0]["spec"]["status"] = {"healthPolicy": HOSTILE}
    world = world_of(*docs, server_app(trait=False))
    await reconciled(world)
    land(world, ready=2)
    pool = sandbox.Sandbox(definitions.WORK, workers=1, timeout=0.5, ready_timeout=120.0)
    world.view.evaluations = definitions.Evaluations(pool.ask)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        status = await reconciled(world)
    finally:
        task.cancel()
        await pool.close()
    entry = component_entry(status)
    assert entry["healthy"] is False and status["status"] == "runningWorkflow"
    assert entry["message"].startswith("ComponentDefinition vela-system/server: healthPolicy: ")
    assert "took longer than 0.5s" in entry["message"] or "budget" in entry["message"]
    assert ticks >= 10


async def test_a_live_secrets_data_is_not_given_to_a_policy() -> None:
    """A Secret output is read without its data (a member fills Secrets the author did not
    write): a policy reading it says the field is not there, and the value is nowhere in
    the status."""
    docs = server_definitions()
    docs[0]["spec"]["schematic"]["cue"]["template"] = docs[0]["spec"]["schematic"]["cue"][
        "template"].replace('kind:       "Service"', 'kind: "Secret"').replace(
        "spec: {selector: app: context.name, ports: [{port: 80}]}", "")
    docs[0]["spec"]["status"] = {"healthPolicy": 'isHealth: context.outputs.web.data.token != ""',
                                 "customStatus": 'message: "\\(context.outputs.web.data.token)"'}
    world = world_of(*docs, server_app(trait=False))
    await reconciled(world)
    land(world, ready=2)
    secret = world.view.objects[("member1", "Secret", "shop", "api")]
    secret["data"] = {"token": "c2VjcmV0LXRva2Vu"}
    status = await reconciled(world)
    entry = component_entry(status)
    assert entry["healthy"] is False and "data" in entry["message"]
    assert "c2VjcmV0LXRva2Vu" not in repr(status)
