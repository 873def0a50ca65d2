"""Karmada's WorkloadRebalancer (``apps.karmada.io/v1alpha1``), parsed once into a typed
value, and the pure parts of its controller (Karmada's ``workloadrebalancer`` controller:
read, never copied).

A rebalancer lists workloads (``spec.workloads``: apiVersion, kind, name, namespace) whose
divisions should be made afresh. For each, the controller sets Karmada's
``rescheduleTriggeredAt`` on the workload's binding to the rebalancer's creation time
(unless the binding already has a later one), and propagation then divides that workload
once with Karmada's Fresh assignment (:func:`federation.placement.division.divide_fresh`).
The status lists each workload (``status.observedWorkloads``, sorted as Karmada sorts
them) with ``result`` ``Successful`` (the trigger is on its binding) or ``Failed`` with
reason ``ReferencedBindingNotFound``; a workload removed from the spec stays listed only
if it had succeeded. ``finishTime`` is set when every workload has a result, and
``ttlSecondsAfterFinished`` after it the rebalancer is deleted (0: at once; unset: never).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from federation.hub import failover

JSON = dict[str, Any]
SUCCESSFUL = "Successful"
FAILED = "Failed"
NOT_FOUND = "ReferencedBindingNotFound"
RESULTS = ("", SUCCESSFUL, FAILED)
INT32 = range(-2**31, 2**31)


class RebalancerError(ValueError):
    """A rebalancer field of the wrong shape (the message names it, never its value)."""


@dataclasses.dataclass(frozen=True)
class Workload:
    """Karmada's ``ObjectReference``: a template on the hub."""

    api_version: str
    kind: str
    name: str
    namespace: str = ""

    @classmethod
    def from_obj(cls, obj: Any, field: str) -> Workload:
        entry = _mapping(obj, field)
        _known(entry, ("apiVersion", "kind", "name", "namespace"), field)
        values = [_string(entry.get(key), f"{field}.{key}", required=key != "namespace")
                  for key in ("apiVersion", "kind", "name", "namespace")]
        return cls(*values)

    def to_obj(self) -> JSON:
        obj = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            obj["namespace"] = self.namespace
        return obj

    @property
    def sort_key(self) -> str:
        """Karmada's status order: ``apiVersion kind namespace name``."""
        return f"{self.api_version} {self.kind} {self.namespace} {self.name}"

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


@dataclasses.dataclass(frozen=True)
class Observed:
    workload: Workload
    result: str = ""
    reason: str = ""

    def to_obj(self) -> JSON:
        obj: JSON = {"workload": self.workload.to_obj()}
        if self.result:
            obj["result"] = self.result
        if self.reason:
            obj["reason"] = self.reason
        return obj


@dataclasses.dataclass(frozen=True)
class Rebalancer:
    name: str
    created: str
    """``metadata.creationTimestamp``: the trigger written into the bindings."""
    generation: int
    workloads: tuple[Workload, ...]
    ttl: int | None
    observed: tuple[Observed, ...]
    finish_time: str | None
    observed_generation: int = 0

    def status_obj(self, observed: tuple[Observed, ...], finish_time: str | None) -> JSON:
        status: JSON = {"observedWorkloads": [o.to_obj() for o in observed],
                        "observedGeneration": self.generation}
        if finish_time:
            status["finishTime"] = finish_time
        return status

    def current_status(self) -> JSON:
        return {"observedWorkloads": [o.to_obj() for o in self.observed],
                "observedGeneration": self.observed_generation,
                **({"finishTime": self.finish_time} if self.finish_time else {})}


def parse(doc: Mapping[str, Any]) -> Rebalancer:
    """The typed rebalancer; :class:`RebalancerError` names a malformed field."""
    meta = _mapping(doc.get("metadata"), "metadata")
    spec = _mapping(doc.get("spec"), "spec")
    _known(spec, ("workloads", "ttlSecondsAfterFinished"), "spec")
    workloads = tuple(Workload.from_obj(w, f"spec.workloads[{i}]")
                      for i, w in enumerate(_items(spec.get("workloads"), "spec.workloads")))
    if not workloads:
        raise RebalancerError("spec.workloads: at least one workload is required")
    ttl = spec.get("ttlSecondsAfterFinished")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl not in INT32):
        raise RebalancerError("spec.ttlSecondsAfterFinished: must be an int32")
    state = _mapping(doc.get("status"), "status")
    observed = tuple(_observed(o, f"status.observedWorkloads[{i}]") for i, o in
                     enumerate(_items(state.get("observedWorkloads"), "status.observedWorkloads")))
    finish = state.get("finishTime")
    return Rebalancer(
        name=_string(meta.get("name"), "metadata.name", required=True),
        created=_string(meta.get("creationTimestamp"), "metadata.creationTimestamp",
                        required=True),
        generation=_count(meta.get("generation"), "metadata.generation"),
        workloads=workloads, ttl=ttl, observed=observed,
        finish_time=finish if isinstance(finish, str) and finish else None,
        observed_generation=_count(state.get("observedGeneration"),
                                   "status.observedGeneration"))


def synced(rebalancer: Rebalancer) -> list[Observed]:
    """Karmada's syncWorkloadsFromSpecToStatus: each listed workload with its earlier
    result, workloads no longer listed kept only if they had succeeded; sorted."""
    listed = dict.fromkeys(rebalancer.workloads)
    found: list[Observed] = []
    for item in rebalancer.observed:
        if item.workload in listed:
            found.append(item)
            del listed[item.workload]
        elif item.result == SUCCESSFUL:
            found.append(item)
    found += [Observed(w) for w in listed]
    return sorted(found, key=lambda o: o.workload.sort_key)


def needs_trigger(created: str, triggered_at: str | None) -> bool:
    """Karmada's needTriggerReschedule: no trigger yet, or an older one."""
    if not triggered_at:
        return True
    mine, theirs = failover.parse_time(created), failover.parse_time(triggered_at)
    return mine is not None and (theirs is None or mine > theirs)


def seconds_left(rebalancer: Rebalancer, finish_time: str | None, now: float) -> float | None:
    """Seconds until the rebalancer may be deleted (<= 0: now); None: never (no TTL, or
    not finished)."""
    finished = failover.parse_time(finish_time)
    if rebalancer.ttl is None or finished is None:
        return None
    return finished + rebalancer.ttl - now


# -- shapes ----------------------------------------------------------------------------------


def _observed(obj: Any, field: str) -> Observed:
    entry = _mapping(obj, field)
    _known(entry, ("workload", "result", "reason"), field)
    result = _string(entry.get("result"), f"{field}.result")
    if result not in RESULTS:
        raise RebalancerError(f"{field}.result: must be Successful or Failed")
    return Observed(Workload.from_obj(entry.get("workload"), f"{field}.workload"), result,
                    _string(entry.get("reason"), f"{field}.reason"))


def _mapping(value: Any, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RebalancerError(f"{field}: must be an object")
    return value


def _items(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RebalancerError(f"{field}: must be a list")
    return value


def _known(entry: Mapping[str, Any], known: tuple[str, ...], field: str) -> None:
    unknown = sorted(str(k) for k in entry if k not in known)
    if unknown:
        raise RebalancerError(f"{field}.{unknown[0]}: unknown field")


def _string(value: Any, field: str, required: bool = False) -> str:
    if value is None or value == "":
        if required:
            raise RebalancerError(f"{field}: required")
        return ""
    if not isinstance(value, str):
        raise RebalancerError(f"{field}: must be a string")
    return value


def _count(value: Any, field: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise RebalancerError(f"{field}: must be an integer")
    return value
