"""Lua scripts of ``ResourceInterpreterCustomization`` objects, run in a sandbox.

A script comes from a cluster-scoped object only an admin may write, but it runs inside
the control plane on every member's copies, so it is held to a budget anyway: a typo (an
endless loop, a table that grows forever) must cost one condition, never the control
plane.

Each call gets a fresh Lua 5.1 state (the dialect of gopher-lua, which Karmada's scripts
are written for; lupa's ``lua51``), so nothing one script or call leaves behind reaches the
next, with:

- an **instruction budget**: a count hook set before the script's globals are built
  (``debug`` is gone by then, so the script cannot remove it; ``coroutine`` is gone, so
  it cannot run where the hook is not). Once spent the hook fires at every instruction,
  so an error caught by ``pcall`` is raised again at the next instruction outside it;
- a **CPU time budget**, checked by the same hook: work in C between two instructions
  that no instruction count reflects (Lua 5.1's string interning turns quadratic on long
  strings that differ near their end) stops within a hook's interval of it;
- a **memory budget** (lupa's ``max_memory``, the state's whole allocation);
- **globals by allow-list**: the base functions a pure script needs, ``string`` without
  ``dump``, ``table``, ``math``, ``os`` with only ``date``/``time``/``clock``/``difftime``
  (Karmada's scripts call ``os.date``), and ``require`` that knows one module, ``kube``
  (:mod:`federation.interpreter.kube`). No ``io``, no ``load``/``loadstring``/``dofile``/
  ``loadfile``, no ``debug``, no metatables (Karmada's list of refused functions raises
  Karmada's error), and precompiled chunks (``\\27Lua``) are refused before loading;
- a **pattern guard**: Lua's pattern matcher runs in C, out of the hook's reach, and
  backtracks; ``string.find``/``match``/``gmatch``/``gsub`` refuse a pattern whose
  worst case (subject length to the power of its quantifiers plus one) exceeds the
  instruction budget; and the two other C loops no budget bounds: ``string.rep`` of more
  copies than the instruction budget (of an empty string it allocates nothing) and
  ``table.insert`` at a position below 1.

Lua never sees a Python object: arguments become Lua tables, results become JSON values
(the conversion Karmada's ``gopher-json`` does: a table with a sequence part is an array,
an empty table is ``[]``), and ``kube`` functions are Lua closures over Python callables
whose attributes are filtered out. A C function (a Lua pattern match) is not interrupted
by the hook; the controllers run scripts in a worker process with a wall-clock deadline
(docs/interpreter.md, "The sandbox").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

try:  # lupa is the one dependency of Lua customizations; without it they are refused
    from lupa import lua51
except ImportError:  # pragma: no cover - the lead's environment installs it
    lua51 = None

INSTRUCTIONS = 20_000_000
"""Instructions per call: about a quarter of a second of Lua on one core, and a hundred
times what the longest script of Karmada's corpus needs on its largest test object."""
MEMORY = 64 * 2**20
"""Bytes per call: the Lua state's whole heap, a CR of a few MiB and its copies."""
HOOK_EVERY = 1000
"""Instructions between two hook calls: the budget's granularity (cheap: 0.1% of them)."""

CPU_SECONDS = 1.0
"""Process CPU seconds per call (os.clock: the whole process's, so the budget is spent
sooner, never later, while other threads run): four times the instruction budget's
quarter second, for work in C between instructions that no instruction counts."""

EXHAUSTED = "instruction budget exhausted"
CPU_EXHAUSTED = "CPU time budget exhausted: "
_BLOCKED = ("collectgarbage", "dofile", "getfenv", "getmetatable", "load", "loadfile",
            "loadstring", "rawequal", "rawget", "rawset", "setfenv", "setmetatable",
            "module", "newproxy")
_BASE = ("assert", "error", "ipairs", "next", "pairs", "pcall", "select",
         "tonumber", "tostring", "type", "unpack", "xpcall", "_VERSION")

# Runs in a fresh state with the full libraries, then leaves only the allow-list. The hook
# is set here, while ``debug`` exists; the script's chunk gets ``env`` as its globals.
_PRELUDE = """
local budget, every, kube_functions, cpu = ...
local sethook, error, clock = debug.sethook, error, os.clock
local spent, started, why = 0, clock(), "%(exhausted)s"
local function exhausted() error(why, 0) end
-- Instructions can be cheap for the VM and dear in C (Lua 5.1 interns every string, and
-- its hash samples 32 characters of a long one: strings differing near their end collide,
-- and each new one is compared with all of its bucket), so the hook also spends CPU time.
sethook(function()
  spent = spent + every
  if clock() - started > cpu then why = "%(cpu_exhausted)s" .. cpu .. " s" end
  if spent > budget or why ~= "%(exhausted)s" then sethook(exhausted, "", 1); exhausted() end
end, "", every)
string.dump = nil
-- A pattern match runs in C, where the hook never fires, and Lua's matcher backtracks:
-- with k quantifiers a subject of n bytes can cost n^(k+1) steps. Refuse what could cost
-- more than the whole instruction budget (patterns with plain = true are not patterns).
local raw_gsub = string.gsub
local function guarded(match, plain_at)
  return function(subject, pattern, ...)
    if type(subject) == "string" and type(pattern) == "string"
        and not (plain_at and select(plain_at - 2, ...)) then
      local quantifiers = select(2, raw_gsub(raw_gsub(pattern, "%%%%.", ""), "[%%*%%+%%-%%?]", ""))
      if (#subject) ^ (quantifiers + 1) > budget then
        error("pattern too costly for the sandbox: " .. quantifiers ..
              " quantifiers over " .. #subject .. " bytes", 2)
      end
    end
    return match(subject, pattern, ...)
  end
end
string.find = guarded(string.find, 4)
string.match, string.gmatch = guarded(string.match), guarded(string.gmatch)
string.gsub = guarded(string.gsub)
-- Two more loops in C that neither the hook nor the memory budget bounds: string.rep of an
-- empty string (n appends of nothing: 2^31 of them run for half a minute) and
-- table.insert at a position below 1 (every index from #t down to it shifted, 2^31 of them
-- for minutes). More repetitions than the instruction budget, or such a position, is refused.
local raw_rep, raw_insert, tonumber = string.rep, table.insert, tonumber
string.rep = function(s, n, ...)
  local count = tonumber(n)
  if count and count > budget then
    error("string.rep of " .. count .. " copies is too costly for the sandbox", 2)
  end
  return raw_rep(s, n, ...)
end
table.insert = function(t, ...)
  if select("#", ...) >= 2 then
    local position = tonumber((...))
    if position and position < 1 then
      error("bad argument #2 to 'insert' (position out of bounds)", 2)
    end
  end
  return raw_insert(t, ...)
end
local env = {}
for _, name in ipairs({%(base)s}) do env[name] = _G[name] end
for _, name in ipairs({%(blocked)s}) do
  env[name] = function()
    error("call function " .. name ..
          " is not supported in karmada customized resourceinterpreter.", 2)
  end
end
local function copy(t) local c = {} for k, v in pairs(t) do c[k] = v end return c end
env.string, env.table, env.math = copy(string), copy(table), copy(math)
env.print = function() end  -- a script's output is its result, never the control plane's log
env.os = {date = os.date, time = os.time, clock = os.clock, difftime = os.difftime}
local kube = {}
for name, call in pairs(kube_functions) do kube[name] = function(...) return call(...) end end
env.require = function(name)
  if name == "kube" then return kube end
  error("module " .. tostring(name) .. " not found", 2)
end
env._G = env
return env
"""


class ScriptError(Exception):
    """A script that does not load, fails, runs out of budget or returns the wrong thing."""


@dataclasses.dataclass(frozen=True)
class Budget:
    instructions: int = INSTRUCTIONS
    memory: int = MEMORY
    cpu_seconds: float = CPU_SECONDS


def available() -> bool:
    return lua51 is not None


def check(script: str) -> str | None:
    """Why ``script`` does not load (syntax), or None (karmadactl's ``--check``)."""
    if lua51 is None:
        return "Lua scripts need the lupa package, which is not installed"
    if script.lstrip().startswith("\x1b"):
        return "precompiled Lua chunks are refused; give the script's source"
    runtime = lua51.LuaRuntime(register_eval=False, register_builtins=False,
                               max_memory=MEMORY, attribute_filter=_deny_attributes)
    loaded = runtime.eval("function(source) local chunk, problem = loadstring(source, "
                          "'=script') return problem end")
    problem = loaded(script)
    return None if problem is None else str(problem).splitlines()[0][:300]


def _deny_attributes(obj: Any, name: Any, setting: bool) -> Any:
    raise AttributeError("Python attributes are not available to scripts")


def run(script: str, function: str, args: Sequence[Any], results: int,
        kube: Mapping[str, Callable[..., Any]] | None = None,
        budget: Budget = Budget()) -> list[Any]:
    """Load ``script``, call its global ``function`` with ``args`` (JSON values) and return
    its first ``results`` values as JSON values (None for nil)."""
    if lua51 is None:
        raise ScriptError("Lua scripts need the lupa package, which is not installed")
    if script.lstrip().startswith("\x1b"):
        raise ScriptError("precompiled Lua chunks are refused; give the script's source")
    runtime = lua51.LuaRuntime(register_eval=False, register_builtins=False,
                               unpack_returned_tuples=True, max_memory=budget.memory,
                               attribute_filter=_deny_attributes)
    try:
        return _call(runtime, script, function, args, results, kube or {}, budget)
    except lua51.LuaMemoryError as exc:
        raise ScriptError(f"memory budget of {budget.memory} bytes exhausted") from exc
    except lua51.LuaSyntaxError as exc:
        raise ScriptError(f"does not load: {_first_line(exc)}") from exc
    except lua51.LuaError as exc:
        raise ScriptError(_first_line(exc)) from exc
    except MemoryError as exc:
        raise ScriptError(f"memory budget of {budget.memory} bytes exhausted") from exc
    except RecursionError as exc:
        raise ScriptError("result nested too deeply") from exc


def _call(runtime: Any, script: str, function: str, args: Sequence[Any], results: int,
          kube: Mapping[str, Callable[..., Any]], budget: Budget) -> list[Any]:
    functions = runtime.table_from({name: _bridge(runtime, call) for name, call in kube.items()})
    env = runtime.execute(_prelude(), budget.instructions, HOOK_EVERY, functions,
                          budget.cpu_seconds)
    loader = runtime.eval("function(source, env) local chunk, problem = loadstring(source, "
                          "'=script') if not chunk then return nil, problem end "
                          "setfenv(chunk, env) return chunk, '' end")
    chunk, problem = loader(script, env)
    if chunk is None:
        raise ScriptError(f"does not load: {problem}")
    chunk()
    target = env[function]
    if lua51.lua_type(target) != "function":
        raise ScriptError(f"not found function {function}" if target is None else
                          f"{function} is not a function: {lua51.lua_type(target) or 'value'}")
    answer = target(*[to_lua(runtime, arg) for arg in args])
    values = list(answer) if isinstance(answer, tuple) else [answer]
    values += [None] * (results - len(values))
    return [from_lua(value) for value in values[:results]]


def _prelude() -> str:
    quoted = ", ".join
    return _PRELUDE % {"exhausted": EXHAUSTED, "cpu_exhausted": CPU_EXHAUSTED,
                       "base": quoted(f'"{name}"' for name in _BASE),
                       "blocked": quoted(f'"{name}"' for name in _BLOCKED)}


def _bridge(runtime: Any, call: Callable[..., Any]) -> Callable[..., Any]:
    """A Python function of JSON values, callable from Lua with Lua values."""
    def bridged(*args: Any) -> Any:
        return to_lua(runtime, call(*[from_lua(arg) for arg in args]))
    return bridged


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def to_lua(runtime: Any, value: Any) -> Any:
    """A JSON value as a Lua value (objects and arrays as tables, null as nil)."""
    if isinstance(value, Mapping):
        table = runtime.table()
        for key, item in value.items():
            if item is not None:
                table[str(key)] = to_lua(runtime, item)
        return table
    if isinstance(value, list | tuple):
        table = runtime.table()
        for index, item in enumerate(value, start=1):
            if item is not None:
                table[index] = to_lua(runtime, item)
        return table
    return value


EMPTY = ()
"""What an empty Lua table converts to before :func:`federation.interpreter.convert`
decides, as Karmada does, whether it was an empty array or an empty object."""


def from_lua(value: Any) -> Any:
    """A Lua value as a JSON value: gopher-json's encoding, which Karmada's expected
    outputs were written against. A table with a sequence part is an array of it; any
    other non-empty table an object (number keys printed); an empty one :data:`EMPTY`."""
    kind = lua51.lua_type(value) if lua51 is not None else None
    if kind is None:
        if isinstance(value, float) and not math.isfinite(value):
            raise ScriptError("a script returned a number JSON cannot hold (NaN or infinity)")
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
            return int(value)
        return value
    if kind != "table":
        raise ScriptError(f"a script returned a {kind}, which is not data")
    length = len(value)
    if length > 0:
        return [from_lua(value[index]) for index in range(1, length + 1)]
    items = list(value.items())
    if not items:
        return EMPTY
    return {_key(key): from_lua(item) for key, item in items}


def _key(key: Any) -> str:
    if isinstance(key, bool) or not isinstance(key, str | int | float):
        raise ScriptError("a script returned a table with a key that is not a string")
    if isinstance(key, float) and key.is_integer():
        return str(int(key))
    return str(key)
