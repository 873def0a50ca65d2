"""Notification steps: the Event, then one message per URL to the notification sender.

Called once the status recording the step as done is written: a status write that fails
sends nothing (the retried reconcile takes the step again and sends then). The sender
(:mod:`.notifications`) POSTs off the reconcile, at most once, best effort. Each step
execution (Application uid, revision, workflow start, step) is submitted once: a reconcile
that read a cache behind our own status write takes the step again, and is recognised here.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

from federation.applications import compile as compile_
from federation.applications import workflow
from federation.controllers.applications import notifications
from federation.controllers.applications.build import JSON
from federation.controllers.applications.view import Recorder

Execution = tuple[str, int, float, str]


class Notifier:
    def __init__(self, recorder: Recorder, outbox: notifications.Outbox,
                 remembered: int) -> None:
        self.recorder = recorder
        self.outbox = outbox
        self.remembered = remembered
        self._submitted: collections.OrderedDict[Execution, None] = collections.OrderedDict()
        """Step executions already submitted (oldest first, at most ``remembered``)."""

    def first_time(self, execution: Execution) -> bool:
        """Whether ``execution`` is new (and remember it)."""
        if execution in self._submitted:
            return False
        self._submitted[execution] = None
        while len(self._submitted) > self.remembered:
            self._submitted.popitem(last=False)
        return True

    async def notify(self, app: Mapping[str, Any], compiled: compile_.Compiled,
                     state: workflow.State, action: workflow.Notify) -> None:
        meta = app.get("metadata") or {}
        if not self.first_time((str(meta.get("uid")), state.revision, state.start,
                                action.step)):
            return
        text = action.message or f"Application {meta.get('name')}: step {action.step}"
        await self.recorder.emit(app, "Normal", "Notification", text)
        found = compiled.notifications.get(action.step)
        for url in found.urls if found is not None else ():
            admission = self.outbox.submit(
                notifications.Message(reference(app), action.step, url, text))
            if admission.warn:
                await self.recorder.emit(
                    app, "Warning", "NotificationDropped",
                    f"step {action.step}: not sent: too many notifications of this "
                    "namespace are waiting to be sent (later ones are dropped until "
                    "they are)")


def reference(app: Mapping[str, Any]) -> JSON:
    """What a later Event on ``app`` needs (not the whole object: it waits in a queue)."""
    meta = app.get("metadata") or {}
    return {"apiVersion": app.get("apiVersion"), "kind": app.get("kind"),
            "metadata": {k: meta.get(k) for k in ("name", "namespace", "uid")}}


async def notification_failed(recorder: Recorder, message: notifications.Message,
                              why: str) -> None:
    """The sender's report of a message not delivered: a Warning on the Application,
    worded for the tenant (``why`` names no address, port or server text)."""
    await recorder.emit(message.app, "Warning", "NotificationFailed",
                        f"step {message.step}: not delivered: {why}")
