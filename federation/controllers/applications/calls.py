"""The HTTP steps' calls (webhook, request, check-metrics): made off the reconcile, their
answers kept for the workflow.

The workflow asks for call number ``calls`` of a running step
(:attr:`federation.applications.workflow.StepState.calls`); once the status recording it
is written, :meth:`Caller.ensure` hands it to the sender of its purpose (the
notifications' for a webhook, the requests' for request and check-metrics: each with
its outbound policy, its per-namespace share and its timeouts) and returns at once. When
the answer comes, it is kept under the call's key, (Application uid, revision, workflow
start, step, call number), and the Application is requeued; the next evaluation reads it
through the view (:meth:`Caller.answered`, as the step's observation) and the step goes
on. So the reconcile never waits on the network, and a namespace whose endpoints never
answer holds its own share of the sender only.

A call is made at most once per key in one process: a reconcile on a cache behind our
status write asks for the same key again and is recognised. Answers live in memory (at
most :attr:`Caller.remembered`, the oldest forgotten first): after a restart or a change
of leader, a running step's call is made again (at least once over restarts). Nothing
here logs or shows the URL.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Mapping
from typing import Any

from federation.applications import http_steps, workflow
from federation.controllers.applications import notifications
from federation.untrusted.text import one_line

JSON = dict[str, Any]
Key = tuple[str, int, float, str, int]
"""(Application uid, revision, workflow start, step, call number)."""
NO_SENDER = "not sent: this control plane makes no calls of this kind"
FULL = ("not sent: too many calls of this namespace are waiting to be sent (the step "
        "tries again)")
REDIRECT = "the destination answered with a redirect, which is not followed"


def key_of(app: Mapping[str, Any], state: workflow.State, step: workflow.StepState) -> Key:
    return (str((app.get("metadata") or {}).get("uid")), state.revision, state.start,
            step.name, step.calls)


def waiting(state: workflow.State) -> list[workflow.StepState]:
    """The running HTTP steps that asked for a call."""
    return [s for s in state.steps if s.type in http_steps.STEP_TYPES
            and s.phase == "running" and s.calls > 0]


class Caller:
    def __init__(self, outboxes: Mapping[http_steps.Purpose, notifications.CallOutbox],
                 clock: Callable[[], float], remembered: int = 1024) -> None:
        self.outboxes = outboxes
        self.clock = clock
        self.remembered = remembered
        """Answers kept: each at most ``MAX_ANSWER`` bytes of body, so 64 MiB at most."""
        self.wake: Callable[[str, str], None] = lambda namespace, name: None
        """Requeues an Application (namespace, name) once an answer of it has come."""
        self._answers: collections.OrderedDict[Key, tuple[float, notifications.Answer | str]
                                               ] = collections.OrderedDict()
        self._asked: set[Key] = set()

    def answered(self, key: Key, step_type: str) -> JSON | None:
        """The step's observation of call ``key`` (None: no answer yet)."""
        found = self._answers.get(key)
        if found is None:
            return None
        at, result = found
        return observation(step_type, at, result)

    def ensure(self, app: Mapping[str, Any], key: Key, call: http_steps.HttpCall) -> None:
        """Call ``key`` made, or being made: else handed to its sender (never waits)."""
        if key in self._answers or key in self._asked:
            return
        outbox = self.outboxes.get(call.purpose)
        if outbox is None:
            self._keep(app, key, NO_SENDER)
            return
        body = _application(app) if call.send_app else call.body
        if body is not None and len(body.encode()) > http_steps.MAX_BODY:
            self._keep(app, key, f"not sent: the Application is larger than "
                                 f"{http_steps.MAX_BODY} bytes as JSON")
            return
        self._asked.add(key)
        admission = outbox.submit_call(notifications.Call(
            _reference(app), key[3], call.method, call.url, call.headers, body,
            lambda result: self._keep(app, key, result)))
        if not admission.queued:
            self._keep(app, key, FULL)

    def _keep(self, app: Mapping[str, Any], key: Key,
              result: notifications.Answer | str) -> None:
        self._asked.discard(key)
        self._answers[key] = (self.clock(), result)
        while len(self._answers) > self.remembered:
            self._answers.popitem(last=False)
        meta = app.get("metadata") or {}
        self.wake(str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def observation(step_type: str, at: float, result: notifications.Answer | str) -> JSON:
    """What the workflow reads of an answer (:func:`federation.applications.workflow.
    _calling`): ``at``, then ``error`` (tenant-safe), or the template's fields KubeVela's
    definition has (request: ``req.$returns``, ``response``; webhook:
    ``webhook.req.$returns``; check-metrics: ``value``), ``invalid`` saying why the
    answer fails the step."""
    if isinstance(result, str):
        return {"at": at, "error": result}
    if 300 <= result.status < 400:
        return {"at": at, "error": REDIRECT} if step_type == "check-metrics" else \
            {"at": at, "statusCode": result.status, "invalid": REDIRECT}
    if step_type == "check-metrics":
        if result.status >= 400:
            return {"at": at, "error": _prometheus_error(result)}
        try:
            return {"at": at, "value": http_steps.prometheus_value(result.body)}
        except http_steps.AnswerError as exc:
            return {"at": at, "error": str(exc)}
    returns = {"body": result.body, "statusCode": result.status,
               "header": {k: list(v) for k, v in result.headers.items()}}
    if step_type == "webhook":
        return {"at": at, "statusCode": result.status, "webhook": {"req": {"$returns":
                                                                            returns}}}
    found: JSON = {"at": at, "statusCode": result.status, "req": {"$returns": returns}}
    if result.status <= 400:  # KubeVela's step fails above 400 before reading the body
        try:
            found["response"] = http_steps.json_answer(result.body)
        except http_steps.AnswerError as exc:
            found["invalid"] = str(exc)
    return found


def _prometheus_error(answer: notifications.Answer) -> str:
    """``Prometheus answered 400: parse error...``: its own ``error`` field when it has one
    (the query's mistake, which the tenant needs), one line and short."""
    try:
        doc = http_steps.json_answer(answer.body)
    except http_steps.AnswerError:
        doc = None
    error = doc.get("error") if isinstance(doc, dict) else None
    detail = f": {one_line(error, 200)}" if isinstance(error, str) and error else ""
    return f"Prometheus answered {answer.status}{detail}"


def _application(app: Mapping[str, Any]) -> str:
    """The webhook's default body: the Application as read (KubeVela's ``kube.#Read`` of
    it), without ``managedFields``."""
    doc = dict(app)
    doc["metadata"] = {k: v for k, v in (app.get("metadata") or {}).items()
                       if k != "managedFields"}
    return json.dumps(doc, sort_keys=True, default=_plain)


def _plain(value: Any) -> Any:
    """The cache's read-only maps and lists as JSON (they are Mappings and Sequences)."""
    if isinstance(value, Mapping):
        return dict(value)
    return list(value)


def _reference(app: Mapping[str, Any]) -> JSON:
    meta = app.get("metadata") or {}
    return {"apiVersion": app.get("apiVersion"), "kind": app.get("kind"),
            "metadata": {k: meta.get(k) for k in ("name", "namespace", "uid")}}
