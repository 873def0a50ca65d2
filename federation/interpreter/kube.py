"""Karmada's ``kube`` Lua library, written here from its documented behaviour.

``local kube = require("kube")`` gives a script:

- ``kube.resourceAdd(q1, q2, ...)``: the sum of quantities (nil counts as zero), printed
  as Kubernetes prints it, in the format of the first non-zero one;
- ``kube.accuratePodRequirements(podTemplate)``: a replica's ReplicaRequirements
  (:func:`federation.interpreter.pods.requirements`);
- ``kube.getPodDependencies(podTemplate, namespace)``: the ConfigMaps, Secrets,
  ServiceAccount and PVCs it names (namespace ``default`` when nil);
- ``kube.getResourceQuantity(q)``: a quantity as a number.

Each takes and returns JSON values (:mod:`federation.interpreter.lua` converts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from federation.interpreter import pods, quantity
from federation.interpreter.lua import EMPTY, ScriptError


def _quantity(value: Any) -> quantity.Quantity:
    if value is None:
        return quantity.ZERO
    if not isinstance(value, str):
        raise ScriptError(f"bad argument (string expected, got {type(value).__name__})")
    try:
        return quantity.Quantity.parse(value)
    except quantity.QuantityError as exc:
        raise ScriptError(str(exc)) from exc


def resource_add(*values: Any) -> str:
    total = quantity.ZERO
    for value in values:
        total = total + _quantity(value)
    return str(total)


def _template(value: Any, function: str) -> Mapping[str, Any]:
    if value is EMPTY:
        return {}
    if not isinstance(value, Mapping):
        raise ScriptError(f"{function}: the pod template must be a table")
    return value


def accurate_pod_requirements(*args: Any) -> Any:
    if len(args) != 1:
        raise ScriptError("getPodRequirements only accepts one argument")
    return pods.requirements(_template(args[0], "accuratePodRequirements"))


def get_pod_dependencies(*args: Any) -> Any:
    if len(args) != 2:
        raise ScriptError("getPodDependencies only accepts two argument")
    namespace = args[1]
    if namespace is None:
        namespace = "default"
    if not isinstance(namespace, str | int | float) or isinstance(namespace, bool):
        raise ScriptError("getPodDependencies: the namespace must be a string")
    found = pods.dependencies(_template(args[0], "getPodDependencies"), str(namespace))
    return found or None


def get_resource_quantity(*args: Any) -> float:
    if len(args) != 1:
        raise ScriptError("getResourceQuantity only accepts one argument")
    value = _quantity(args[0]).value
    if value < 0:
        raise ScriptError("int approximation unexpectedly returned a negative value")
    return float(value)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "resourceAdd": resource_add,
    "accuratePodRequirements": accurate_pod_requirements,
    "getPodDependencies": get_pod_dependencies,
    "getResourceQuantity": get_resource_quantity,
}
