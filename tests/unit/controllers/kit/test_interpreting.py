"""The resource interpreter's threads belong to the manager: one per manager, made at the
first script, shut down when the manager stops (or loses the lead); never module-level."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("lupa")

from federation.controllers import setup
from federation.controllers.kit.interpreting import Interpreting
from federation.interpreter import declarative
from federation.interpreter.customizations import Operation
from federation.runtime import manager
from tests.unit.controllers.fakes import JSON, cluster_set

CUSTOMIZATION: JSON = {
    "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
    "metadata": {"name": "widgets", "uid": "u", "resourceVersion": "1"},
    "spec": {"target": {"apiVersion": "example.io/v1", "kind": "Widget"},
             "customizations": {"healthInterpretation": {
                 "luaScript": "function InterpretHealth(o) return true end"}}}}
WIDGET: JSON = {"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w"}}


async def healthy(interpreting: Interpreting) -> object:
    found = await interpreting.run([CUSTOMIZATION], Operation.INTERPRET_HEALTH,
                                   declarative.Arguments(observed=WIDGET), WIDGET)
    return found["healthy"] if found is not None else None


def interpreter_of(mgr: manager.Manager) -> Interpreting:
    [keep] = [run for name, run in mgr.runnables if name == "resource interpreter threads"]
    owner = getattr(keep, "__self__", None)
    assert isinstance(owner, Interpreting)
    return owner


def test_each_manager_has_its_own_interpreter() -> None:
    first, second = (manager.Manager(cluster_set("member1")) for _ in range(2))
    for mgr in (first, second):
        setup.setup(mgr, setup.Settings())
    assert interpreter_of(first) is not interpreter_of(second)


async def test_the_threads_end_with_the_managers_runnable() -> None:
    """Made at the first script; the runnable's end (the manager stopping) shuts them down;
    a new term makes new ones."""
    interpreting = Interpreting()
    assert not interpreting.pool_open
    kept = asyncio.create_task(interpreting.keep())
    assert await healthy(interpreting) is True
    assert interpreting.pool_open
    kept.cancel()
    with pytest.raises(asyncio.CancelledError):
        await kept
    assert not interpreting.pool_open
    assert await healthy(interpreting) is True
    interpreting.close()


def _version(customization: JSON, version: str, script: str) -> JSON:
    """``customization`` at resourceVersion ``version`` with ``script`` as its health check."""
    return {**customization, "metadata": {**customization["metadata"],
                                          "resourceVersion": version},
            "spec": {**customization["spec"], "customizations": {"healthInterpretation": {
                "luaScript": script}}}}


async def test_the_registry_is_built_again_when_a_customization_changes_or_goes() -> None:
    """The registry is kept while the same versions are in force, and a new version, a
    broken one or none at all is answered by a registry of what is in force now: a change
    to a customization takes effect at the next question, never an old script."""
    interpreting = Interpreting()
    first = interpreting.registry([CUSTOMIZATION])
    assert interpreting.registry([CUSTOMIZATION]) is first  # same versions: kept
    unhealthy = _version(CUSTOMIZATION, "2", "function InterpretHealth(o) return false end")
    assert interpreting.registry([unhealthy]) is not first
    assert await interpreting.run([unhealthy], Operation.INTERPRET_HEALTH,
                                  declarative.Arguments(observed=WIDGET), WIDGET) == {
        "healthy": False}
    broken = _version(CUSTOMIZATION, "3", "")
    broken["spec"] = {**broken["spec"], "customizations": {"noSuchOperation": {}}}
    _, refused = interpreting.registry([broken])
    assert refused  # refused by name, not answered with the last good one
    registry, refused = interpreting.registry([])
    assert refused == {} and registry.choose(WIDGET, Operation.INTERPRET_HEALTH) is None
    assert await healthy(interpreting) is True
    interpreting.close()
