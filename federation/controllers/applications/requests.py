"""Step 3, user requests: ``fedctl app restart``, ``rollback`` and ``resume``; and the
restart a ``restart-workflow`` step scheduled, once its time came and the workflow ended.

Each request is an annotation with a nonce; the status records the nonce once handled
(``status.handledRequests``), so each is acted on exactly once. The workflow state comes
from ``status.workflow``, and starts afresh for a new revision or a restart (which also
ends a rollback). A rollback request names a revision (0: the last that succeeded); with
none to go back to, a ``RollbackFailed`` Warning follows the status write.
"""

from __future__ import annotations

from federation.applications import workflow
from federation.controllers.applications.build import Build, last_good
from federation.controllers.applications.settings import RESTART, RESUME, ROLLBACK, stamp
from federation.controllers.applications.view import ApplicationView
from federation.controllers.kit.chain import Verdict


async def take_requests(view: ApplicationView, build: Build) -> Verdict | None:
    assert build.compiled is not None
    now = view.now()
    handled = build.handled = dict(build.status.get("handledRequests") or {})
    annotations = build.annotations
    state = workflow.from_status(build.status.get("workflow"))
    restart = annotations.get(RESTART)
    due = state.restart_due() if state is not None else None
    if state is None or state.revision != build.number or \
            (restart and restart != handled.get(RESTART)) or (due is not None and now >= due):
        # a restart-workflow step's schedule came: the ended workflow runs again
        state = workflow.initial(build.number, build.compiled.steps, now)
        build.status.pop("rollback", None)
    build.state = state
    if restart:
        handled[RESTART] = restart
    target = rollback_request(annotations.get(ROLLBACK), handled.get(ROLLBACK))
    if target is not None:
        handled[ROLLBACK] = annotations[ROLLBACK]
        roll_back_to(build, target or last_good(build.revisions, build.number), now)
    resume = annotations.get(RESUME)
    build.resume = bool(resume) and resume != handled.get(RESUME)
    if resume:
        handled[RESUME] = resume
    return None


def roll_back_to(build: Build, target: int | None, now: float) -> None:
    """Record a rollback to ``target`` in the status (the next steps deploy it), or a
    Warning when there is no revision to go back to."""
    if target is None:
        build.events.append(("Warning", "RollbackFailed", "no earlier revision succeeded"))
        return
    build.status["rollback"] = {"revision": target, "from": build.number, "time": stamp(now)}


def rollback_request(value: str | None, handled: str | None) -> int | None:
    """A new rollback request: its revision (0 = the last good one), or None."""
    if not value or value == handled:
        return None
    number, _, _ = value.partition("@")
    return int(number) if number.isdigit() else 0
