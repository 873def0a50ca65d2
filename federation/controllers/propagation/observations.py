"""After the writes: what the copies say, through the resource interpreter.

Per cluster with a copy, its health (InterpretHealth) and the status it reflects to the
hub (InterpretStatus); for the template, the members' statuses added up
(AggregateStatus). A customization that scripts the operation for the kind answers
(Karmada's priority rules, :mod:`.customized`); otherwise the built-in status code
answers as it always did: :func:`federation.hub.status.health` (a workload is healthy
once its generation is observed and its replicas ready, any other kind once it exists),
the member's status without its conditions, and for the workload kinds the summed
counters of :func:`federation.hub.status.template_status`. So a core kind without a
customization costs no script, no thread and no write more than before.

A script that fails or overruns its budget never stops the record (the writes it
reports on have happened): that copy's health is Unknown, its reflected status is left
out, the template's aggregated status is not written, and each failure is one part of a
``StatusInterpreted`` condition (False, ``InterpreterFailed``) naming the cluster, the
customization and the operation. Scripts run off the event loop on the interpreter's
budget (:mod:`federation.controllers.kit.interpreting`). Not a transformer: the
reconciler asks it between Execute and Record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from federation.controllers.kit.interpreting import InterpretError, InterpretTimeout
from federation.controllers.propagation import customized
from federation.controllers.propagation.context import TransformContext
from federation.hub import status
from federation.interpreter import declarative
from federation.interpreter.customizations import Operation

JSON = dict[str, Any]

CONDITION = "StatusInterpreted"
REASON = "InterpreterFailed"

_KARMADA_HEALTH = {"Healthy": "Healthy", "Progressing": "Unhealthy", "Unhealthy": "Unhealthy",
                   "Unknown": "Unknown"}
"""Our health as Karmada names it in an AggregatedStatusItem (a script compares to these)."""


@dataclasses.dataclass(frozen=True)
class Observations:
    """Per cluster, the copy's health and reflected status; the template's aggregated
    status (None: the built-in decides, or the script failed); what failed."""

    health: Mapping[str, status.Health]
    reflected: Mapping[str, JSON | None]
    aggregated: JSON | None = None
    failures: tuple[str, ...] = ()
    timed_out: bool = False
    """A script gave no answer in time (:class:`InterpretTimeout`): nothing else may change
    to requeue the template, so the reconciler asks again after a while."""

    def copy_states(self) -> dict[str, tuple[str, JSON | None]]:
        """(health, reflected status) by cluster, for the binding's aggregated status."""
        return {c: (self.health[c], self.reflected.get(c)) for c in self.health}

    def condition(self, previous: Any) -> JSON | None:
        """``StatusInterpreted`` False naming each failure, or None when none failed (the
        condition is then left out: a binding that never met a failure does not change)."""
        if not self.failures:
            return None
        return status.condition(CONDITION, False, REASON, "; ".join(self.failures), previous)


async def observe(ctx: TransformContext, template: Mapping[str, Any],
                  copies: Mapping[str, Mapping[str, Any] | None],
                  failed: Mapping[str, str]) -> Observations:
    """What the interpreter says of ``copies`` (each target's copy as it is now; None:
    none, or unreadable) and of ``template``'s status over them."""
    health: dict[str, status.Health] = {}
    reflected: dict[str, JSON | None] = {}
    failures = _Failures()
    for cluster, copy in sorted(copies.items()):
        health[cluster], reflected[cluster] = await _one(ctx, cluster, copy, failures)
    items = [{"clusterName": cluster, "status": reflected.get(cluster),
              "applied": copies[cluster] is not None and cluster not in failed,
              "health": _KARMADA_HEALTH[health[cluster]]} for cluster in sorted(copies)]
    aggregated = await _aggregate(ctx, template, items, failures)
    return Observations(health, reflected, aggregated, tuple(failures.messages),
                        failures.timed_out)


@dataclasses.dataclass
class _Failures:
    """What failed while observing, and whether any of it was a timeout."""

    messages: list[str] = dataclasses.field(default_factory=list)
    timed_out: bool = False

    def add(self, exc: InterpretError, where: str = "") -> None:
        self.messages.append(f"{where}: {exc}" if where else str(exc))
        self.timed_out = self.timed_out or isinstance(exc, InterpretTimeout)


async def _one(ctx: TransformContext, cluster: str, copy: Mapping[str, Any] | None,
               failures: _Failures) -> tuple[status.Health, JSON | None]:
    if copy is None:
        return "Unknown", None
    args = declarative.Arguments(observed=customized.as_json(copy))
    health: status.Health = status.health(copy)
    try:
        found = await customized.interpret(ctx, Operation.INTERPRET_HEALTH, args, copy)
        if found is not None:
            health = "Healthy" if found["healthy"] else "Unhealthy"
    except InterpretError as exc:
        failures.add(exc, cluster)
        health = "Unknown"
    own = copy.get("status")
    state: JSON | None = {k: v for k, v in own.items() if k != "conditions"} \
        if isinstance(own, Mapping) and own else None
    try:
        found = await customized.interpret(ctx, Operation.INTERPRET_STATUS, args, copy)
        if found is not None:
            state = found["status"] if isinstance(found["status"], dict) else None
    except InterpretError as exc:
        failures.add(exc, cluster)
        state = None
    return health, state


async def _aggregate(ctx: TransformContext, template: Mapping[str, Any], items: list[JSON],
                     failures: _Failures) -> JSON | None:
    """The template's status by its customization's AggregateStatus; None when none
    scripts it or it failed (then the template's status is left as it is)."""
    args = declarative.Arguments(desired=customized.as_json(template), status_items=items)
    try:
        found = await customized.interpret(ctx, Operation.AGGREGATE_STATUS, args, template)
    except InterpretError as exc:
        failures.add(exc)
        return None
    if found is None:
        return None
    result = found["aggregatedStatus"].get("status") or {}
    conditions = result.get("conditions") if isinstance(result, dict) else None
    if not isinstance(result, dict) or not (conditions is None or (
            isinstance(conditions, list) and all(isinstance(c, dict) for c in conditions))):
        name = await customized.chosen(ctx, Operation.AGGREGATE_STATUS, template)
        failures.messages.append(f"customization {name}, AggregateStatus: the returned "
                                 "status must be an object whose conditions are a list of "
                                 "objects")
        return None
    return result
