"""Lua customizations: Karmada's conversions, and a sandbox that holds against its script."""

import time
from typing import Any

import pytest

pytest.importorskip("lupa")

from federation.interpreter import customizations, declarative, engine, lua
from federation.interpreter.customizations import Operation

JSON = dict[str, Any]
SMALL = lua.Budget(instructions=2_000_000, memory=16 * 2**20)

WIDGETS = """
local kube = require("kube")
function GetReplicas(obj)
  return obj.spec.replicas, kube.accuratePodRequirements(obj.spec.template)
end
function ReviseReplica(obj, replicas)
  obj.spec.replicas = replicas
  return obj
end
function Retain(desired, observed)
  desired.spec.paused = observed.spec.paused
  return desired
end
function InterpretHealth(obj)
  return obj.status ~= nil and obj.status.readyReplicas == obj.spec.replicas
end
function ReflectStatus(obj)
  return {readyReplicas = obj.status.readyReplicas, conditions = {}}
end
function AggregateStatus(obj, items)
  local ready = 0
  for _, item in ipairs(items or {}) do ready = ready + item.status.readyReplicas end
  obj.status = {readyReplicas = ready}
  return obj
end
function GetDependencies(obj)
  return kube.getPodDependencies(obj.spec.template, obj.metadata.namespace)
end
"""


def customization(script: str = WIDGETS, name: str = "widgets") -> customizations.Customization:
    fields = ("replicaResource", "replicaRevision", "retention", "healthInterpretation",
              "statusReflection", "statusAggregation", "dependencyInterpretation")
    return customizations.parse({
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": name},
        "spec": {"target": {"apiVersion": "example.io/v1", "kind": "Widget"},
                 "customizations": {f: {"luaScript": script} for f in fields}}})


def widget(replicas: int = 10) -> JSON:
    return {"apiVersion": "example.io/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "shop"},
            "spec": {"replicas": replicas, "paused": False, "selector": {},
                     "template": {"spec": {"containers": [
                         {"name": "a", "resources": {"requests": {"cpu": "250m"}},
                          "envFrom": [{"configMapRef": {"name": "conf"}}]}]}}},
            "status": {"readyReplicas": 10}}


def run(operation: Operation, args: declarative.Arguments,
        found: customizations.Customization | None = None) -> JSON:
    registry = customizations.Registry([found or customization()])
    return dict(engine.execute(registry, operation, args))


def test_every_operation_of_a_customization() -> None:
    one = declarative.Arguments(observed=widget())
    assert run(Operation.INTERPRET_REPLICA, one) == {
        "replica": 10, "requires": {"resourceRequest": {"cpu": "250m"}}}
    revised = run(Operation.REVISE_REPLICA, declarative.Arguments(desired=widget(), replicas=5))
    assert revised["revised"]["spec"]["replicas"] == 5
    assert revised["revised"]["spec"]["selector"] == {}, "an empty object stays an object"
    live = widget()
    live["spec"]["paused"] = True
    retained = run(Operation.RETAIN, declarative.Arguments(desired=widget(), observed=live))
    assert retained["retained"]["spec"]["paused"] is True
    assert run(Operation.INTERPRET_HEALTH, one) == {"healthy": True}
    assert run(Operation.INTERPRET_STATUS, one) == {"status": {"readyReplicas": 10}}
    items = [{"clusterName": "a", "status": {"readyReplicas": 2}},
             {"clusterName": "b", "status": {"readyReplicas": 3}}]
    total = run(Operation.AGGREGATE_STATUS,
                declarative.Arguments(desired=widget(), status_items=items))
    assert total["aggregatedStatus"]["status"] == {"readyReplicas": 5}
    assert run(Operation.INTERPRET_DEPENDENCY, one) == {"dependencies": [
        {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "shop", "name": "conf"}]}


def test_first_customization_by_name_wins_and_the_other_is_reported() -> None:
    other = customization('function InterpretHealth(obj) return false end', name="a-first")
    registry = customizations.Registry([customization(), other])
    chosen = registry.choose(widget(), Operation.INTERPRET_HEALTH)
    assert chosen is not None and chosen.customization == "a-first"
    assert any("widgets: InterpretHealth is not used" in line for line in registry.shadowed())


def test_unknown_fields_are_refused_by_name() -> None:
    with pytest.raises(customizations.CustomizationError, match="unknown field 'retain'"):
        customizations.parse({
            "apiVersion": "config.karmada.io/v1alpha1",
            "kind": "ResourceInterpreterCustomization", "metadata": {"name": "x"},
            "spec": {"target": {"apiVersion": "v1", "kind": "Pod"},
                     "customizations": {"retain": {"luaScript": "x"}}}})


def health(script: str, budget: lua.Budget = SMALL) -> Any:
    return declarative.run(Operation.INTERPRET_HEALTH, script,
                           declarative.Arguments(observed=widget()), budget)


def test_an_endless_loop_is_stopped_by_the_instruction_budget() -> None:
    started = time.monotonic()
    with pytest.raises(lua.ScriptError, match=lua.EXHAUSTED):
        health("function InterpretHealth(obj) while true do end end")
    assert time.monotonic() - started < 5


def test_an_endless_loop_cannot_catch_the_budget_error() -> None:
    script = """function InterpretHealth(obj)
      while true do pcall(function() while true do end end) end
    end"""
    with pytest.raises(lua.ScriptError, match=lua.EXHAUSTED):
        health(script)


def test_a_huge_allocation_is_stopped_by_the_memory_budget() -> None:
    script = """function InterpretHealth(obj)
      local t = {} local s = string.rep("x", 1024)
      for i = 1, 1e9 do t[i] = s .. i end
    end"""
    with pytest.raises(lua.ScriptError, match="memory budget"):
        health(script, lua.Budget(instructions=10**9, memory=8 * 2**20))
    with pytest.raises(lua.ScriptError, match="memory budget"):
        health('function InterpretHealth(obj) return string.rep("x", 2^30) end',
               lua.Budget(instructions=2**31, memory=8 * 2**20))


@pytest.mark.parametrize("call", [
    'os.execute("touch /tmp/pwned")', 'io.open("/etc/passwd")', 'require("os")',
    'loadstring("return 1")', 'load(function() return nil end)', 'dofile("/etc/passwd")',
    'debug.sethook()', 'string.dump(InterpretHealth)', '("x").dump(InterpretHealth)',
    'coroutine.create(function() end)', 'setmetatable({}, {})', 'getfenv(1)',
    'python.builtins.open("/etc/passwd")', 'os.getenv("HOME")', 'os.exit(1)',
    'require("kube").resourceAdd.__globals__', 'collectgarbage("count")',
])
def test_the_sandbox_offers_no_way_out(call: str) -> None:
    with pytest.raises(lua.ScriptError):
        health(f"function InterpretHealth(obj) local x = {call} return true end")


def test_precompiled_chunks_are_refused() -> None:
    with pytest.raises(lua.ScriptError, match="precompiled"):
        health("\x1bLua\x51\x00")


def test_a_failing_script_names_its_customization_and_operation() -> None:
    broken = customization("function InterpretHealth(obj) return obj.nope.deeper end")
    with pytest.raises(lua.ScriptError, match=r"^customization widgets, InterpretHealth: .*index"):
        run(Operation.INTERPRET_HEALTH, declarative.Arguments(observed=widget()), broken)
    with pytest.raises(lua.ScriptError, match="is not bool"):
        health("function InterpretHealth(obj) return 1 end")


def test_nothing_leaks_from_one_call_to_the_next() -> None:
    script = """function InterpretHealth(obj)
      local before = seen
      seen = true
      string.upper = nil
      return before == nil
    end"""
    assert health(script) == [("healthy", True)]
    assert health(script) == [("healthy", True)]
    assert health("function InterpretHealth(obj) return string.upper('a') == 'A' end") == \
        [("healthy", True)]


def test_check_reports_a_syntax_error() -> None:
    assert lua.check("function broken(") is not None
    assert lua.check(WIDGETS) is None


def test_a_catastrophic_pattern_is_refused_before_it_runs() -> None:
    """Lua's matcher runs in C, where the budget's hook never fires."""
    script = """function InterpretHealth(obj)
      local s = string.rep("a", 5000)
      return s:find("a*a*a*a*a*a*b") ~= nil
    end"""
    started = time.monotonic()
    with pytest.raises(lua.ScriptError, match="pattern too costly"):
        health(script)
    assert time.monotonic() - started < 5
    assert health('function InterpretHealth(o) return ("a-b"):find("-", 1, true) == 2 end') \
        == [("healthy", True)]
    assert health('function InterpretHealth(o) return ("v1.2"):match("%d+%.(%d+)") == "2" end') \
        == [("healthy", True)]


@pytest.mark.parametrize("loop", [
    'string.rep("", 2^31 - 1)', '(""):rep(2^31 - 1)', 'string.rep("", "2147483647")',
    'table.insert({}, -2^31 + 1, 1)', 'table.insert({}, "-2147483647", 1)',
])
def test_a_loop_in_c_is_refused_before_it_runs(loop: str) -> None:
    """C loops the hook never reaches and the memory budget never bounds (no allocation):
    each call ran for tens of seconds; in a Lua loop, for hours, holding its thread."""
    started = time.monotonic()
    with pytest.raises(lua.ScriptError, match=r"too costly|out of bounds"):
        health(f"function InterpretHealth(obj) for i = 1, 1e9 do {loop} end end",
               lua.Budget())
    assert time.monotonic() - started < 5
    assert health('function InterpretHealth(o) local t = {"b"} table.insert(t, 1, "a") '
                  'table.insert(t, "c") return table.concat(t) .. ("x"):rep(2) == "abcxx" end'
                  ) == [("healthy", True)]


def test_work_in_c_between_instructions_is_held_to_the_cpu_budget() -> None:
    """Lua 5.1 interns every string and hashes 32 characters of a long one: strings that
    differ at their end collide, so each new one is compared with all before it. 64 MiB
    of them took minutes in a few hundred thousand instructions."""
    script = """function InterpretHealth(obj)
      local t = {} local s = string.rep("x", 1024)
      for i = 1, 1e9 do t[i] = s .. i end
    end"""
    started = time.process_time()
    with pytest.raises(lua.ScriptError, match="CPU time budget exhausted"):
        health(script, lua.Budget(cpu_seconds=0.3))
    assert time.process_time() - started < 3
