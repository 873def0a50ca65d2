"""After the member writes: what happened, and the hub records that follow from it.

:func:`outcome` reads the executor's report: which tracked objects were written, which
deleted (a delete that found nothing counts), and a problem for each write that failed.
:func:`plan_record` then plans the second, small hub plan: the ResourceTracker (every
object placed, and under ``pendingCleanup`` what could not be deleted yet), and once the
tracker is written, the revision's outcome (succeeded or failed, when the workflow ended)
and the deletion of revisions past the garbage-collect limit (never the current one nor
one a cluster still runs: only known once the writes are done, hence here). The tracker
must be written (its failure fails the reconcile); a revision mark or prune the hub
refuses is left for the next reconcile.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from federation.applications import revision, tracker, workflow
from federation.applications.render import APP_LABEL
from federation.contexts import client as kube
from federation.contexts.cache import ReadOnly
from federation.controllers.applications.build import JSON, Build, revision_number
from federation.controllers.kit import plan
from federation.hub import api


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What the member plan did to the tracked objects."""

    entries: list[tracker.Entry]
    """The tracker's entries after the writes."""
    pending: list[tracker.Entry]
    """Entries to delete that are not deleted yet."""


def not_found(outcome: plan.Outcome) -> bool:
    return isinstance(outcome.exception, kube.ApiError) and outcome.exception.status == 404


def outcome(build: Build, report: plan.Report) -> Outcome:
    """The tracked objects after ``report``; a failed write becomes a problem."""
    assert build.diff is not None
    written: list[tracker.Entry] = []
    deleted = list(build.gone)
    removing = set(build.diff.delete)  # deleted, or a shared one handed to its heir
    for key, result in report.outcomes.items():
        entry = build.by_vertex.get(key)
        if entry is None:
            continue
        if result.vertex.action is plan.Action.DELETE or entry in removing:
            if result.ok or not_found(result):
                deleted.append(entry)
        elif result.ok:
            written.append(entry)
        else:
            build.problems.append(f"{entry}: {result.error}")
    entries = tracker.record([e for e in build.entries() if e not in deleted], written,
                             deleted)
    return Outcome(entries, [e for e in build.diff.delete if e not in deleted])


def plan_record(hub: str, build: Build, report: plan.Report, done: Outcome) -> plan.Plan:
    dag = plan.Plan()
    vertex = tracker_vertex(hub, build.tracker, build.namespace, build.name,
                            tracker_spec(build.name, build.uid, done.entries, done.pending))
    first = dag.add(vertex) if vertex is not None else None
    revisions = kept_revisions(build, report)
    for after in (mark_vertex(hub, build, revisions),
                  *prune_vertices(hub, build, revisions, done.entries)):
        if after is not None:
            after = dag.add(after)
            if first is not None:
                dag.depend(after, first)
    return dag


def tracker_spec(name: str, uid: str, entries: Sequence[tracker.Entry],
                 pending: Sequence[tracker.Entry], deleted_app: bool = False,
                 since: str | None = None) -> JSON:
    spec: JSON = {"application": name, "applicationUID": uid,
                  "resources": [e.as_json() for e in entries], "count": len(entries),
                  "pendingCleanup": [e.as_json() for e in pending],
                  "applicationDeleted": deleted_app}
    if since is not None:
        spec["pendingSince"] = since  # when the deleted Application's clean-up stalled
    return spec


def tracker_vertex(hub: str, rt: ReadOnly | None, namespace: str, name: str, spec: JSON
                   ) -> plan.Vertex | None:
    """The tracker's create or update, only when its content changes (and no tracker at
    all for an Application that placed nothing)."""
    if rt is not None and rt.get("spec") == spec:
        return None
    if rt is None and not spec["resources"]:
        return None
    body: JSON = {"apiVersion": api.RESOURCE_TRACKERS.api_version, "kind": "ResourceTracker",
                  "metadata": {"name": name, "namespace": namespace,
                               "labels": {APP_LABEL: name}},
                  "spec": spec}
    if rt is None:
        return plan.Vertex(hub, plan.Action.CREATE, body, reason="first placement")
    body["metadata"]["resourceVersion"] = rt["metadata"]["resourceVersion"]
    return plan.Vertex(hub, plan.Action.UPDATE, body, reason="placement changed")


def kept_revisions(build: Build, report: plan.Report) -> list[Mapping[str, Any]]:
    """The revisions as they are now: a revision created by this reconcile as the server
    answered (with the resourceVersion a later update needs)."""
    created = build.revision_vertex
    answer = report.result(created) if created is not None else None
    if created is None or answer is None:
        return list(build.revisions)
    return [answer if r is created.obj else r for r in build.revisions]


def mark_vertex(hub: str, build: Build, revisions: Sequence[Mapping[str, Any]]
                ) -> plan.Vertex | None:
    """The current revision's outcome, once its workflow ended and when it changed."""
    state = build.state
    if state is None or state.end is None or state.phase not in ("succeeded", "failed"):
        return None
    ok = state.phase == "succeeded"
    doc = next((r for r in revisions if revision_number(r) == build.number), None)
    if doc is None or (doc.get("status") or {}).get("succeeded") == ok or \
            not (doc.get("metadata") or {}).get("resourceVersion"):
        return None
    body = copy.deepcopy(dict(doc))
    body["status"] = {**(body.get("status") or {}), "succeeded": ok, "workflowFinished": True}
    if state.values:
        # the outputs its steps produced: a rollback to it renders the steps taking inputs
        body["status"]["outputValues"] = workflow.encode_values(state.values)
    return plan.Vertex(hub, plan.Action.UPDATE, body, reason="workflow ended")


def prune_vertices(hub: str, build: Build, revisions: Sequence[Mapping[str, Any]],
                   entries: Sequence[tracker.Entry]) -> list[plan.Vertex]:
    assert build.compiled is not None
    keep = {build.number} | {e.revision for e in entries}
    numbers = [revision_number(r) for r in revisions]
    doomed = set(revision.to_prune(numbers, build.compiled.gc.revision_limit, sorted(keep)))
    return [plan.Vertex(hub, plan.Action.DELETE, revision_reference(r), reason="past the limit")
            for r in revisions if revision_number(r) in doomed]


def revision_reference(doc: Mapping[str, Any]) -> JSON:
    """A revision's delete: by name, with its UID as the precondition (no version: a
    revision marked since it was read is still to go)."""
    meta = doc.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "namespace", "uid") if meta.get(k)}
    return {"apiVersion": api.APPLICATION_REVISIONS.api_version,
            "kind": "ApplicationRevision", "metadata": kept}


def raise_for_tracker(report: plan.Report) -> None:
    """The tracker must be written; a revision mark or prune the hub refused (an API
    error) waits for the next reconcile, any other failure fails this one."""
    for result in report.outcomes.values():
        if result.ok or not result.attempted:
            continue
        if result.vertex.obj.get("kind") == "ResourceTracker" or \
                not isinstance(result.exception, kube.ApiError):
            raise result.exception or RuntimeError(result.error)
