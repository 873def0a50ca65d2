"""One operation of a customization's Lua script: arguments in, Karmada's typed results out.

The results are named as ``karmadactl interpret`` names them (``replica`` and ``requires``,
``revised``, ``retained``, ``aggregatedStatus``, ``status``, ``healthy``, ``dependencies``,
``components``) and shaped as Karmada's Go types shape them: a table returned where an
object is expected is converted as Karmada's ``ConvertLuaResultInto`` converts it. An
empty Lua table is an empty array or an empty object only by reference to the objects the
script was given (the field was empty there in that shape), and is dropped otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from federation.interpreter import kube, lua
from federation.interpreter.customizations import Operation

JSON = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Arguments:
    desired: JSON | None = None
    observed: JSON | None = None
    status_items: list[JSON] | None = None
    replicas: int = 0

    def one(self) -> JSON:
        """The object of an operation on one object (desired or observed, not both)."""
        if self.desired is None and self.observed is None:
            raise lua.ScriptError("desired-file, observed-file options are not set")
        if self.desired is not None and self.observed is not None:
            raise lua.ScriptError("you can not specify both desired-file and observed-file "
                                  "options")
        return self.desired if self.desired is not None else self.observed  # type: ignore[return-value]


Results = list[tuple[str, Any]]


DEFAULT_BUDGET = lua.Budget()


def run(operation: Operation, script: str, args: Arguments,
        budget: lua.Budget = DEFAULT_BUDGET) -> Results:
    """Run ``operation``'s function of ``script``; :class:`lua.ScriptError` on any failure."""
    return _RUNNERS[operation](script, args, budget)


def _call(script: str, operation: Operation, values: Sequence[Any], results: int,
          budget: lua.Budget) -> list[Any]:
    return lua.run(script, operation.function, values, results, kube.FUNCTIONS, budget)


def _replica(script: str, args: Arguments, budget: lua.Budget) -> Results:
    replica, requires = _call(script, Operation.INTERPRET_REPLICA, [args.one()], 2, budget)
    if not isinstance(replica, int | float) or isinstance(replica, bool):
        raise lua.ScriptError(f"result type {_type(replica)} is not number")
    if requires is not None and not isinstance(requires, Mapping | tuple):
        raise lua.ScriptError(f"expect the returned requires type is table but got "
                              f"{_type(requires)}")
    found = None if requires is None else requirements(fix_empty(requires, [], struct=True))
    return [("replica", _int32(replica)), ("requires", found)]


def _revise(script: str, args: Arguments, budget: lua.Budget) -> Results:
    obj = args.one()
    result = _call(script, Operation.REVISE_REPLICA, [obj, args.replicas], 1, budget)[0]
    return [("revised", _unstructured(result, [obj]))]


def _retain(script: str, args: Arguments, budget: lua.Budget) -> Results:
    if args.desired is None:
        raise lua.ScriptError("desired, desired-file options are not set")
    if args.observed is None:
        raise lua.ScriptError("observed, observed-file options are not set")
    result = _call(script, Operation.RETAIN, [args.desired, args.observed], 1, budget)[0]
    return [("retained", _unstructured(result, [args.desired, args.observed]))]


def _aggregate(script: str, args: Arguments, budget: lua.Budget) -> Results:
    items = None if args.status_items is None else [status_item(i) for i in args.status_items]
    result = _call(script, Operation.AGGREGATE_STATUS, [args.one(), items], 1, budget)[0]
    return [("aggregatedStatus", _unstructured(result, []))]


def _status(script: str, args: Arguments, budget: lua.Budget) -> Results:
    result = _call(script, Operation.INTERPRET_STATUS, [args.one()], 1, budget)[0]
    if not isinstance(result, Mapping | list | tuple):
        raise lua.ScriptError(f"expect the returned replica type is table but got "
                              f"{_type(result)}")
    return [("status", fix_empty(result, [], struct=True))]


def _health(script: str, args: Arguments, budget: lua.Budget) -> Results:
    result = _call(script, Operation.INTERPRET_HEALTH, [args.one()], 1, budget)[0]
    if not isinstance(result, bool):
        raise lua.ScriptError(f"result type {_type(result)} is not bool")
    return [("healthy", result)]


def _dependencies(script: str, args: Arguments, budget: lua.Budget) -> Results:
    result = _call(script, Operation.INTERPRET_DEPENDENCY, [args.one()], 1, budget)[0]
    if not isinstance(result, list | tuple | Mapping):
        raise lua.ScriptError(f"expect the returned requires type is table but got "
                              f"{_type(result)}")
    found = fix_empty(result, [], struct=False)
    return [("dependencies", unique_dependencies(
        [dependency(d) for d in _items(found, "dependencies")]))]


def unique_dependencies(found: list[JSON]) -> list[JSON]:
    """Each reference once (Karmada keeps them in a set), each one valid."""
    unique: dict[str, JSON] = {}
    for index, ref in enumerate(found):
        if not ref.get("apiVersion") or not ref.get("kind"):
            raise lua.ScriptError(f"dependencies[{index}]: missing required apiVersion or kind")
        if not ref.get("name") and "labelSelector" not in ref:
            raise lua.ScriptError(f"dependencies[{index}]: dependency can not leave name and "
                                  "labelSelector all empty")
        unique.setdefault(repr(sorted(ref.items())), ref)
    return list(unique.values())


def _components(script: str, args: Arguments, budget: lua.Budget) -> Results:
    result = _call(script, Operation.INTERPRET_COMPONENT, [args.one()], 1, budget)[0]
    if result is None:
        return [("components", [])]
    if not isinstance(result, list | tuple | Mapping):
        raise lua.ScriptError(f"expected result type 'table' or 'nil' from GetComponents, "
                              f"but got '{_type(result)}'")
    found = fix_empty(result, [], struct=False)
    return [("components", [component(c) for c in _items(found, "components")])]


_RUNNERS = {
    Operation.INTERPRET_REPLICA: _replica, Operation.REVISE_REPLICA: _revise,
    Operation.RETAIN: _retain, Operation.AGGREGATE_STATUS: _aggregate,
    Operation.INTERPRET_STATUS: _status, Operation.INTERPRET_HEALTH: _health,
    Operation.INTERPRET_DEPENDENCY: _dependencies, Operation.INTERPRET_COMPONENT: _components,
}


def _type(value: Any) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else "table"


def _int32(value: float) -> int:
    return int(value)


def _items(value: Any, what: str) -> list[Mapping[str, Any]]:
    if isinstance(value, Mapping) and not value:
        return []
    if not isinstance(value, list) or not all(isinstance(i, Mapping) for i in value):
        raise lua.ScriptError(f"{what} must be a list of objects")
    return list(value)


def _unstructured(result: Any, references: list[JSON]) -> JSON:
    if not isinstance(result, Mapping | tuple | list):
        raise lua.ScriptError(f"expect the returned requires type is table but got "
                              f"{_type(result)}")
    found = fix_empty(result, references, struct=True)
    if not isinstance(found, dict) or not found.get("kind"):
        raise lua.ScriptError("Object 'Kind' is missing in the returned object")
    return found


# --- Karmada's empty-table rule ---------------------------------------------------------

Path = tuple[str, ...]


def _empty_paths(value: Any, path: Path, lists: set[Path], objects: set[Path]) -> None:
    """Where ``value`` holds an empty array or object; array indices are not in paths."""
    children = value.items() if isinstance(value, Mapping) else \
        (("", item) for item in value) if isinstance(value, list) else ()
    for key, item in children:
        here = (*path, str(key)) if isinstance(value, Mapping) else path
        if isinstance(item, list) and not item:
            lists.add(here)
        elif isinstance(item, Mapping) and not item:
            objects.add(here)
        elif isinstance(item, Mapping | list):
            _empty_paths(item, here, lists, objects)


def fix_empty(value: Any, references: Sequence[Any], struct: bool) -> Any:
    """``value`` with each empty Lua table made ``[]`` or ``{}`` as it was in a reference
    at the same path, or removed when no reference has it empty (Karmada's rule)."""
    if value is lua.EMPTY:
        return {} if struct else []
    lists: set[Path] = set()
    objects: set[Path] = set()
    for reference in references:
        _empty_paths(reference, (), lists, objects)
    return _fixed(value, (), lists, objects)


def _fixed(value: Any, path: Path, lists: set[Path], objects: set[Path]) -> Any:
    if isinstance(value, Mapping):
        found: JSON = {}
        for key, item in value.items():
            here = (*path, key)
            if item is lua.EMPTY:
                if here in objects:
                    found[key] = {}
                elif here in lists:
                    found[key] = []
                continue
            found[key] = _fixed(item, here, lists, objects)
        return found
    if isinstance(value, list):
        kept: list[Any] = []
        for item in value:
            if item is lua.EMPTY:
                if path in objects:
                    kept.append({})
                elif path in lists:
                    kept.append([])
                continue
            kept.append(_fixed(item, path, lists, objects))
        return kept
    return value


# --- Karmada's typed results ------------------------------------------------------------

def _pick(value: Mapping[str, Any], fields: Mapping[str, type | tuple[type, ...]]) -> JSON:
    """The known fields of a Go struct decoded from JSON, empty ones left out (omitempty);
    a field of the wrong type fails as Go's decoder does."""
    found: JSON = {}
    for name, kind in fields.items():
        item = value.get(name)
        if item is None or item == "" or item == {} or item == []:
            continue
        if not isinstance(item, kind) or (isinstance(item, bool) and kind is not bool):
            raise lua.ScriptError(f"json unmarshal obj failed: field {name} has the wrong type")
        found[name] = item
    return found


def requirements(value: Any) -> JSON:
    if not isinstance(value, Mapping):
        raise lua.ScriptError("requires must be an object")
    found = _pick(value, {"nodeClaim": Mapping, "resourceRequest": Mapping,
                          "namespace": str, "priorityClassName": str})
    if "nodeClaim" in found:
        found["nodeClaim"] = _pick(found["nodeClaim"], {
            "hardNodeAffinity": Mapping, "nodeSelector": Mapping, "tolerations": list})
        if not found["nodeClaim"]:
            del found["nodeClaim"]
    return found


def dependency(value: Mapping[str, Any]) -> JSON:
    return _pick(value, {"apiVersion": str, "kind": str, "namespace": str, "name": str,
                         "labelSelector": Mapping})


def component(value: Mapping[str, Any]) -> JSON:
    found = _pick(value, {"name": str, "replicas": (int, float),
                          "replicaRequirements": Mapping})
    if "replicas" in found:
        found["replicas"] = int(found["replicas"])
    if "replicaRequirements" in found:
        found["replicaRequirements"] = requirements(found["replicaRequirements"])
    return found


def status_item(value: Mapping[str, Any]) -> JSON:
    """An AggregatedStatusItem as the script sees it (its JSON fields only)."""
    return _pick(value, {"clusterName": str, "status": Mapping, "applied": bool,
                         "appliedMessage": str, "health": str})
