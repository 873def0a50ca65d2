"""The Application's status, built from one reconcile's outcome: pure.

KubeVela's fields (``status``, ``healthy``, ``latestRevision``, ``workflow``, ``services``,
``appliedResources``, ``conditions``) and ours (``clusters``, ``handledRequests``,
``rollback``). Written by the reconciler only when it differs from what the Application
shows, so a reconcile that changes nothing writes nothing: :func:`status_patch` compares
in the form the hub keeps (JSON data, no null field) and sends only what changed, with a
null for each field that went away (the write is a merge patch: an absent field would be
kept).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from federation.applications import revision, tracker, workflow
from federation.controllers.applications.build import JSON, Build, Health
from federation.controllers.applications.compilation import INVALID, RENDERED
from federation.controllers.applications.settings import stamp

PHASES = {"running": "runningWorkflow", "suspended": "workflowSuspending",
          "failed": "workflowFailed", "succeeded": "running"}


def refused(status: Mapping[str, object], message: str) -> JSON:
    """An Application that cannot be honoured: ``renderFailed`` and the condition."""
    return {**status, "status": "renderFailed",
            "conditions": [{"type": RENDERED, "status": "False", "reason": INVALID,
                            "message": message}]}


def status_of(build: Build, entries: Sequence[tracker.Entry],
              unknown: Sequence[tracker.Entry]) -> JSON:
    state = build.state
    assert state is not None
    phase = "rolledBack" if build.status.get("rollback") else PHASES[state.phase]
    found = {k: v for k, v in build.status.items() if k != "workflowRestartScheduledAt"}
    due = state.restart_due()
    if due is not None:  # KubeVela's field: when a restart-workflow step restarts it
        found["workflowRestartScheduledAt"] = stamp(due)
    return {**found, "status": phase, "healthy": healthy(build.health),
            "latestRevision": {"name": revision.revision_name(build.name, build.number),
                               "revision": build.number, "revisionHash": build.digest},
            "workflow": workflow.to_status(state, stamp),
            # components first: a reader keying entries by (step, cluster) keeps the step's
            "services": component_services(build) + services(build.health),
            "clusters": ",".join(sorted({e.cluster for e in entries})),
            "appliedResources": [e.as_json() for e in entries],
            "handledRequests": build.handled,
            "conditions": conditions(state, build.problems, unknown)}


def status_patch(stored: Mapping[str, Any], new: Mapping[str, Any]) -> JSON | None:
    """The merge patch that makes the Application's ``stored`` status ``new``, or None
    when it shows ``new`` already: ``new`` as the hub would keep it (:func:`kept`)
    compared with what it keeps; a field ``new`` lacks is deleted (null)."""
    wanted = kept(new)
    if wanted == stored:
        return None
    patch: JSON = _difference(stored, wanted)
    return patch


def kept(value: Any) -> Any:
    """``value`` as the API server keeps it after a merge patch: tuples are JSON arrays,
    and a null field is no field, at every depth (in arrays' objects too)."""
    if isinstance(value, Mapping):
        return {str(k): kept(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [kept(v) for v in value]
    return value


def _difference(stored: Any, wanted: Any) -> Any:
    """RFC 7386 from ``stored`` to ``wanted`` (both as kept): maps key by key, a null for
    each key gone, anything else (arrays too) whole."""
    if not isinstance(stored, Mapping) or not isinstance(wanted, dict):
        return wanted
    patch: JSON = {k: None for k in stored if k not in wanted}
    for key, value in wanted.items():
        if key not in stored or stored[key] != value:
            patch[key] = _difference(stored.get(key), value)
    return patch


def healthy(health: Health) -> bool:
    return bool(health) and all(h[0] == "healthy" for h in health.values())


def services(health: Health) -> list[JSON]:
    return [{"step": step, "cluster": cluster, "healthy": h[0] == "healthy",
             "message": h[1]} for (step, cluster), h in sorted(health.items())]


def component_services(build: Build) -> list[JSON]:
    """KubeVela's per-component entries (``name``, ``healthy``, ``message``, ``traits``)
    of the components whose definitions have a status, in each deploy step and cluster."""
    found: list[JSON] = []
    for (step, cluster, component), status in sorted(build.component_status.items()):
        entry: JSON = {"name": component, "namespace": build.namespace, "cluster": cluster,
                       "step": step, "healthy": status.healthy, "message": status.message}
        if status.traits:
            entry["traits"] = [{"type": t, "healthy": h, "message": m}
                               for t, h, m in status.traits]
        found.append(entry)
    return found


def conditions(state: workflow.State, problems: Sequence[str],
               unknown: Sequence[tracker.Entry]) -> list[JSON]:
    found = [{"type": RENDERED, "status": "True", "reason": RENDERED},
             {"type": "Applied", "status": "False" if problems else "True",
              "reason": "ApplyFailed" if problems else "Applied",
              "message": "; ".join(problems[:5])},
             workflow_condition(state)]
    if unknown:
        found.append({"type": "UnknownClusters", "status": "True",
                      "reason": "UnknownCluster", "message": unknown_message(unknown)})
    return found


def workflow_condition(state: workflow.State) -> JSON:
    failed = failed_step(state)
    if failed is not None:
        return {"type": "WorkflowFailed", "status": "True", "reason": failed.reason,
                "message": f"step {failed.name}: {failed.message}"}
    return {"type": "Workflow", "status": "True" if state.phase == "succeeded" else "False",
            "reason": state.phase, "message": ""}


def failed_step(state: workflow.State) -> workflow.StepState | None:
    return next((s for s in state.steps if s.phase == "failed"), None)


def newly_failed(stored: Mapping[str, Any], state: workflow.State) -> bool:
    """``state`` failed, and the workflow run the Application showed had not: another
    revision, another start (a restart), or not failed. Read from the stored workflow,
    not ``status.status``: a failure that asked for a rollback shows ``rolledBack``."""
    if state.phase != "failed":
        return False
    shown = workflow.from_status(stored.get("workflow"))
    return shown is None or shown.phase != "failed" or \
        (shown.revision, shown.start) != (state.revision, state.start)


def unknown_message(unknown: Sequence[tracker.Entry]) -> str:
    """The Warning and condition about tracked objects in clusters that are no member:
    a few names (tenant text, shortened), how many, and what will happen."""
    names = sorted({e.cluster for e in unknown})
    shown = ", ".join(repr(n[:63]) for n in names[:5]) + (", ..." if len(names) > 5 else "")
    return (f"{len(unknown)} tracked object(s) in {len(names)} cluster(s) that are not "
            f"members ({shown}): kept, and deleted if a member of that name joins")
