"""Step 3, user requests: ``fedctl app restart``, ``rollback`` and ``resume``; and the
restart a ``restart-workflow`` step scheduled, once its time came and the workflow ended.

Each request is an annotation with a nonce; the status records the nonce once handled
(``status.handledRequests``), so each is acted on exactly once. The workflow state comes
from ``status.workflow``, and starts afresh for a new revision or a restart (which also
ends a rollback). A rollback request names a revision (0: the last that succeeded); with
none to go back to, a ``RollbackFailed`` Warning follows the status write.

KubeVela's own ``app.oam.dev/restart-workflow`` annotation (``true``, a time, a duration:
:mod:`federation.applications.restarts`) goes through the same schedule as a
``restart-workflow`` step: the state's restart time, shown as
``status.workflowRestartScheduledAt``; the value acted on is recorded with the nonces.
"""

from __future__ import annotations

import dataclasses

from federation.applications import model, restarts, workflow
from federation.controllers.applications.build import JSON, Build, last_good
from federation.controllers.applications.compilation import invalid
from federation.controllers.applications.settings import (
    RESTART,
    RESUME,
    ROLLBACK,
    VELA_RESTART,
    stamp,
)
from federation.controllers.applications.view import ApplicationView
from federation.controllers.kit.chain import Verdict


async def take_requests(view: ApplicationView, build: Build) -> Verdict | None:
    assert build.compiled is not None
    now = view.now()
    handled = build.handled = dict(build.status.get("handledRequests") or {})
    annotations = build.annotations
    vela = vela_restart(build)
    state = workflow.from_status(build.status.get("workflow"))
    restart = annotations.get(RESTART)
    due = state.restart_due() if state is not None else None
    fresh = state is None or state.revision != build.number
    asked = vela.value if vela is not None and vela.now and \
        vela.value != handled.get(VELA_RESTART) else None
    if fresh or (restart and restart != handled.get(RESTART)) or \
            (due is not None and now >= due) or \
            (asked is not None and state is not None and state.end is not None):
        # a new revision, fedctl app restart, a schedule that came (a restart-workflow
        # step's or the annotation's) or ``true`` on an ended run: from the first step
        state = _restarted(state, build, now, fresh)
        build.status.pop("rollback", None)
        if asked is not None:  # ``true``: the run starting now is the restart it asks for
            handled[VELA_RESTART] = asked
    assert state is not None
    build.state = _scheduled(state, vela, handled)
    build.restart_asked = asked is not None and handled.get(VELA_RESTART) != asked
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


def vela_restart(build: Build) -> restarts.Request | None:
    """KubeVela's restart annotation (:mod:`federation.applications.restarts`); a value it
    does not take refuses the Application (renderFailed, naming the annotation)."""
    assert build.compiled is not None
    try:
        return restarts.request(build.annotations, [s.type for s in build.compiled.steps])
    except model.AppError as exc:
        raise invalid(exc) from None


def _restarted(state: workflow.State | None, build: Build, now: float, fresh: bool
               ) -> workflow.State:
    """The workflow from its first step; a new revision keeps a one-time restart not due
    yet (KubeVela keeps ``workflowRestartScheduledAt`` across revisions)."""
    assert build.compiled is not None
    new = workflow.initial(build.number, build.compiled.steps, now)
    if fresh and state is not None and state.restart_at is not None and \
            state.restart_at > now:
        return dataclasses.replace(new, restart_at=state.restart_at)
    return new


def _scheduled(state: workflow.State, vela: restarts.Request | None, handled: JSON
               ) -> workflow.State:
    """The state with the annotation's schedule: a time once (when first seen), a
    duration for as long as it stays (KubeVela keeps that annotation); without the
    annotation, what it asked for is forgotten, so setting it again asks again."""
    if vela is None:
        handled.pop(VELA_RESTART, None)
        return state
    if vela.at is not None and vela.value != handled.get(VELA_RESTART):
        handled[VELA_RESTART] = vela.value
        return dataclasses.replace(state, restart_at=vela.at, restart_every=None)
    if vela.every is not None and state.restart_every != vela.every:
        return dataclasses.replace(state, restart_at=None, restart_every=vela.every)
    return state


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
