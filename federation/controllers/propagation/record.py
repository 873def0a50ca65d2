"""After the copies: the record of what was learned, as a second, small plan.

The template's ResourceBinding (spec and status in one object: the CRD has no status
subresource, so a create carries its status) and, for workload kinds, the template's
status. Both are written only when something anyone acts on changed
(:func:`~federation.hub.bindings.same_record`, :func:`template_status_write`):
a reconcile that changes nothing writes nothing, and a new template costs one binding
create, then one template status and one binding write when its copies turn ready.
Events follow the Kubernetes event correlator's spirit: a first placement and a routine
success are no events; a decision that changes, a condition that turns bad, and an
Applied that changes are, once each (the recorder drops repeats).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from federation.contexts.cache import ReadOnly
from federation.controllers.kit import events, plan
from federation.controllers.propagation import observations, rollouts
from federation.controllers.propagation.build import JSON, Build
from federation.controllers.propagation.load_policy import api_ref
from federation.hub import bindings, status
from federation.placement import decision as decision_

RECORD_KEYS = bindings.BEHAVIOUR_KEYS
"""Binding spec fields the behaviour transformers own (:attr:`~.build.Build.record`)."""


def behaviour(build: Build) -> bindings.Behaviour:
    """The behaviour fields for the binding's record: what this round's transformers
    decided, else (a round stopped early by bad input) what the binding had, so a problem
    never makes the record forget copies it must still clean up."""
    own = build.own_record
    previous = own.behaviour.to_obj() if own is not None else {}
    found: JSON = {}
    for key in RECORD_KEYS:
        value = build.record[key] if key in build.record else previous.get(key)
        if value not in (None, False, [], {}):
            found[key] = value
    return bindings.Behaviour.from_obj(found)


def placed(clusters: Mapping[str, int]) -> tuple[bindings.Placed, ...]:
    return tuple(bindings.Placed(name, replicas) for name, replicas in clusters.items())


def copies_after(build: Build, report: plan.Report | None) -> dict[str, ReadOnly | None]:
    """Each target's copy as it is now: the server's answer to our write when there was
    one (the cache has not seen it yet), else the cached copy."""
    copies: dict[str, ReadOnly | None] = {}
    for name in build.targets:
        desired = build.desired.get(name)
        outcome = report.outcomes.get(plan.vertex_key(name, desired)) \
            if report is not None and desired is not None else None
        if name in build.unreachable or (outcome is not None and not outcome.ok):
            copies[name] = None
        elif outcome is not None and outcome.result is not None:
            copies[name] = outcome.result
        else:
            copies[name] = build.live.get(name)
    return copies


def conditions(build: Build, failed: Mapping[str, str], pending: Sequence[str],
               copies: Mapping[str, ReadOnly | None],
               observed: observations.Observations | None = None) -> list[JSON]:
    """Our conditions after a round; each copy's health as ``observed`` says (the
    interpreter's answer), else by the built-in rule."""
    previous = build.previous_conditions
    decision = build.decision
    assert decision is not None
    placed = decision_.counts_text(decision.clusters) if decision.clusters else "no cluster"
    problems = {**build.unreachable, **failed,
                **{c: f"conflict: {m}" for c, m in build.conflicts.items()}}
    applied_ok = not problems
    held = rollouts.held_clusters(build)
    dispatched = [c for c in build.targets if c not in build.suspended and c not in held
                  and not build.report_only]
    applied_message = "applied to " + (", ".join(dispatched) or "no cluster") if applied_ok \
        else "; ".join(f"{c}: {m}" for c, m in sorted(problems.items()))
    if build.report_only:
        applied_message += "; report only (applyStrategy ReportDiff): nothing written"
    if held:  # a held copy is not applied: its old content stays until released
        applied_message += "; held by ReconfigurePolicy: " + ", ".join(
            f"{c} ({p})" for c, p in sorted(held.items()))
    refused = any(m.startswith(plan.REFUSED) for m in failed.values())
    health = observed.health if observed is not None else \
        {c: status.health(copy) for c, copy in copies.items()}
    unhealthy = {c: h for c, h in health.items() if h != "Healthy"}
    result = [
        status.condition("Scheduled", True, "Scheduled", f"placed {placed}", previous),
        status.condition("Applied", applied_ok, "Applied" if applied_ok else
                         "OverrideRefused" if refused else "ApplyFailed",
                         applied_message, previous),
        status.condition("Healthy", not unhealthy and applied_ok,
                         "Healthy" if not unhealthy else "NotHealthy",
                         "all copies healthy" if not unhealthy else ", ".join(
                             f"{c}: {h}" for c, h in sorted(unhealthy.items())), previous),
    ]
    interpreted = observed.condition(previous) if observed is not None else None
    if interpreted is not None:
        result.append(interpreted)
    if build.conflicts:
        result.append(status.condition("Conflict", True, "ObjectNotManaged", "; ".join(
            f"{c}: {m}" for c, m in sorted(build.conflicts.items())), previous))
    if build.report_only:
        reported = build.record.get("reportedDifferences") or {}
        result.append(status.condition(
            "Drifted", bool(reported), "Differs" if reported else "NoDifference",
            "; ".join(f"{c}: {', '.join(paths)}" for c, paths in sorted(reported.items()))
            or "every member's object equals its copy", previous))
    if pending:
        result.append(pending_condition(pending, previous))
    if build.suspended:
        result.append(status.condition(
            "Dispatching", False, "SuspendDispatching",
            f"dispatching suspended by {api_ref(build.policy)} to "
            f"{', '.join(build.suspended)}: nothing written there (deletions still happen)",
            previous))
    return result


def pending_condition(pending: Sequence[str], previous: Sequence[Mapping[str, Any]],
                      message: str | None = None) -> JSON:
    return status.condition("CleanupPending", True, "MemberUnreachable",
                            message or "copies still to delete in " + ", ".join(pending),
                            previous)


def add_binding(writes: plan.Plan, hub: str, wanted: JSON, current: ReadOnly | None,
                same: bool | None = None) -> None:
    """Create the binding, replace it (a PUT with the cached version: a concurrent change is
    a 409 and a retry), or nothing when it would say the same (``same``: already known)."""
    if current is None:
        writes.add(plan.Vertex(hub, plan.Action.CREATE, wanted, reason="record"))
    elif not (same if same is not None else bindings.same_record(current, wanted)):
        version = current["metadata"].get("resourceVersion")
        replacement = {**wanted, "metadata": {**wanted["metadata"], "resourceVersion": version}}
        writes.add(plan.Vertex(hub, plan.Action.UPDATE, replacement, reason="record"))


def template_status_write(template: ReadOnly, copies: Mapping[str, ReadOnly | None],
                          conds: Sequence[JSON],
                          aggregated: Mapping[str, Any] | None = None) -> JSON | None:
    """The template's new status when it must be written, else None.

    Coalesced: written when readiness turns (the Healthy condition; a template without
    our conditions counts as not ready, so a new template is first written when its
    copies are ready), when a problem condition (Scheduled or Applied False, Conflict,
    CleanupPending) appears, goes or changes reason, and while ready when the summed
    counts or observedGeneration change (a scale), or the status a customization's
    AggregateStatus gave (``aggregated``). Not per member event."""
    wanted = status.template_status(template, copies, conds, aggregated)
    if wanted is None:
        return None
    current = template.get("status") or {}
    if _shape(current) != _shape(wanted):
        return wanted
    ready = _ready(wanted)
    # Nulls apart: a merge patch's null removes the field, so a status the API server
    # stored without it is the one this write would leave (no write, no echo to process).
    if ready and without_nulls({k: v for k, v in wanted.items() if k != "conditions"}) != \
            without_nulls({k: v for k, v in current.items() if k != "conditions"}):
        return wanted
    return None


def without_nulls(value: Any) -> Any:
    """``value`` without the null fields of its objects (at every depth)."""
    if isinstance(value, Mapping):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def _ready(state: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Healthy" and c.get("status") == "True"
               for c in state.get("conditions") or [] if isinstance(c, dict))


def _shape(state: Mapping[str, Any]) -> tuple[object, ...]:
    problems = sorted((str(c.get("type")), c.get("status"), c.get("reason"))
                      for c in state.get("conditions") or []
                      if isinstance(c, dict) and c.get("type") in status.OUR_CONDITIONS
                      and c.get("type") != "Healthy" and _is_problem(c))
    return _ready(state), tuple(problems)


def _is_problem(condition: Mapping[str, Any]) -> bool:
    bad_when_true = condition.get("type") in ("Conflict", "CleanupPending")
    return (condition.get("status") == "True") == bad_when_true


def add_template_status(writes: plan.Plan, hub: str, template: ReadOnly,
                        wanted: JSON) -> None:
    meta = template["metadata"]
    body: JSON = {"apiVersion": template["apiVersion"], "kind": template["kind"],
                  "metadata": {"name": meta["name"]}, "status": wanted}
    if meta.get("namespace"):
        body["metadata"]["namespace"] = meta["namespace"]
    writes.add(plan.Vertex(hub, plan.Action.STATUS, body, reason="template status",
                           replacing=meta.get("resourceVersion")))


async def emit_transitions(recorder: events.EventSink, build: Build,
                           conds: Sequence[JSON]) -> None:
    before = {c.get("type"): c for c in build.previous_conditions}
    decision = build.decision
    assert decision is not None
    if build.previous and decision.clusters != build.previous:
        await recorder.emit(build.template, "Normal", "Scheduled",
                            f"placed {decision_.counts_text(decision.clusters)} "
                            f"by {api_ref(build.policy)}")
    for condition in conds:
        old = before.get(condition["type"])
        changed = old is None or old.get("status") != condition["status"] \
            or old.get("message") != condition["message"]
        if not changed:
            continue
        if condition["type"] == "Dispatching":
            await recorder.emit(build.template, "Normal", condition["reason"],
                                condition["message"])  # asked for, not a fault
        elif condition["type"] == "Applied" and condition["status"] == "True" and old:
            await recorder.emit(build.template, "Normal", "Applied", condition["message"])
        elif _is_problem(condition) and condition["type"] != "Healthy":
            await recorder.emit(build.template, "Warning", condition["reason"],
                                condition["message"])
