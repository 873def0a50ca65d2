"""The notification sender: Application notification POSTs, off the reconcile, fair between
namespaces, through the outbound policy.

A notification step's POSTs used to run inside the reconcile, 5 s each, so one tenant's
slow webhooks held the applications controller's workers and every other namespace's
Applications waited. Here the reconcile only *submits* a :class:`Message` (a synchronous,
bounded append that never waits) and a small pool of sender workers delivers it:

- **Delivery**: at most once, best effort. The workflow does not wait for the POST (the
  step is ``succeeded`` once its messages are submitted); a message is never retried;
  what is queued when the control plane stops or loses leadership is lost. A failure is
  a log line for the operator and a ``NotificationFailed`` Warning Event for the tenant,
  worded by :func:`federation.contexts.egress.tenant_message` (refused by the outbound
  policy, or unreachable: no address, port, TLS or server text), or "not accepted" when
  the destination answered with a status of 300 or more (redirects are not followed).
- **Fairness**: at most :attr:`SenderSettings.workers` POSTs in flight in all, and
  :attr:`SenderSettings.namespace_in_flight` of one namespace; workers take namespaces in
  turn (round robin), so one tenant's slow endpoints hold at most that many workers and
  never delay the reconcile of anyone.
- **Bounds**: at most :attr:`SenderSettings.namespace_backlog` messages of one namespace
  wait, :attr:`SenderSettings.backlog` in all. A message submitted beyond either is dropped
  (the newest: what waits keeps its order); the first drop of a run is reported once
  (:attr:`Admission.warn`: the controller emits one ``NotificationDropped`` Warning and
  this module logs one line) and the run's count is logged when the namespace's backlog
  has drained.
- **Outbound policy**: every POST goes through the policy's connector (the destination is
  resolved and each address checked at connect time: see :mod:`federation.contexts.egress`),
  with ``allow_redirects=False``, no cookie jar (one tenant's webhook must not set what is
  sent to another's), no proxy from the environment and a total timeout.

**Calls** (:class:`Call`: the webhook, request and check-metrics workflow steps) go
through the same queues, limits and policy: a call is a request whose answer (status,
headers, at most :data:`~federation.applications.http_steps.MAX_ANSWER` bytes of body)
or tenant-safe failure is handed to the call's ``done`` callback (:mod:`.calls` keeps it
for the step and requeues the Application); nothing is retried here.

This module never raises into the controller: :meth:`Sender.submit` only appends, and a
worker turns any failure of a POST into a report.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import aiohttp

from federation.applications import http_steps
from federation.contexts import egress

log = logging.getLogger("federation.notifications")

NOT_ACCEPTED = "not accepted by the destination (it answered with a status of 300 or more)"
TOO_LARGE = f"the answer is larger than {http_steps.MAX_ANSWER} bytes"
MAX_ANSWER_HEADERS = 64
"""Header names of an answer kept (the step's ``req.$returns.header``)."""


@dataclasses.dataclass(frozen=True)
class SenderSettings:
    workers: int = 8
    """POSTs in flight at once, all namespaces together: a webhook answers in well under a
    second, so eight keep up with hundreds of notifications a minute; each holds one
    connection at most :attr:`timeout` seconds."""
    namespace_in_flight: int = 2
    """POSTs of one namespace in flight at once: a namespace whose endpoints never answer
    holds two workers for :attr:`timeout` seconds each, and the other six serve the rest."""
    namespace_backlog: int = 32
    """Messages of one namespace waiting to be sent: 16 notification steps of two URLs each
    in one go (adjacent notification steps are submitted by one reconcile)."""
    backlog: int = 1024
    """Messages waiting in all: with :data:`~federation.applications.model.MAX_MESSAGE` and
    :data:`~federation.applications.model.MAX_URL_LENGTH` characters each, a few MiB at most."""
    timeout: float = 5.0
    """Seconds one POST may take from connect to the answer's status line."""


class _Owned:
    """A message or call of a step of an Application (its namespace takes turns)."""

    app: Mapping[str, Any]
    step: str

    @property
    def namespace(self) -> str:
        return str((self.app.get("metadata") or {}).get("namespace") or "")

    @property
    def owner(self) -> str:
        meta = self.app.get("metadata") or {}
        return f"{meta.get('namespace')}/{meta.get('name')}"


@dataclasses.dataclass(frozen=True)
class Message(_Owned):
    """One POST of ``{"text": text}`` to ``url`` for a step of an Application."""

    app: Mapping[str, Any]
    """The Application (its kind, apiVersion and metadata): what a report's Event is on."""
    step: str
    url: str
    text: str


@dataclasses.dataclass(frozen=True)
class Answer:
    """What a destination answered a call: status, headers (at most
    :data:`MAX_ANSWER_HEADERS` names) and body (text, at most ``MAX_ANSWER`` bytes)."""

    status: int
    headers: Mapping[str, tuple[str, ...]]
    body: str


@dataclasses.dataclass(frozen=True)
class Call(_Owned):
    """One request of a step whose answer the step waits for."""

    app: Mapping[str, Any]
    step: str
    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: str | None
    done: Callable[[Answer | str], None]
    """Called once with the answer, or the tenant-safe reason there is none; it must not
    raise or wait."""


@dataclasses.dataclass(frozen=True)
class Admission:
    """What :meth:`Sender.submit` did with a message."""

    queued: bool
    warn: bool = False
    """Dropped, and the first drop since this namespace's backlog was last below its limit:
    the caller tells the tenant once."""


class Transport(Protocol):
    """How a POST is made (aiohttp through the outbound policy; a fake in unit tests)."""

    async def post(self, url: str, body: Mapping[str, Any]) -> int:
        """POST ``body`` as JSON; the answer's status (any failure raises)."""
        ...

    async def close(self) -> None: ...


class CallTransport(Protocol):
    """How a call is made (aiohttp through the outbound policy; a fake in unit tests)."""

    async def call(self, method: str, url: str, headers: tuple[tuple[str, str], ...],
                   body: str | None) -> Answer:
        """The answer (any failure raises; an answer over ``MAX_ANSWER`` bytes raises
        :class:`AnswerTooLarge`)."""
        ...

    async def close(self) -> None: ...


class AnswerTooLarge(Exception):
    """The answer's body is longer than the step may read."""


class Outbox(Protocol):
    """What the applications controller needs of the sender."""

    def submit(self, message: Message) -> Admission: ...


class CallOutbox(Protocol):
    """What the HTTP steps need of a sender."""

    def submit_call(self, call: Call) -> Admission: ...


Report = Callable[[Message, str], Awaitable[None]]
"""Called with a message that was not delivered and the tenant-safe reason."""


class HttpTransport:
    """aiohttp through ``policy``: connect-time address checks, no redirects, no cookies."""

    def __init__(self, policy: egress.EgressPolicy, settings: SenderSettings) -> None:
        self.policy = policy
        self.settings = settings
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=self.policy.connector(limit=self.settings.workers),
                timeout=aiohttp.ClientTimeout(total=self.settings.timeout),
                cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
                headers={"User-Agent": "federation-notifications"})
        return self._session

    async def post(self, url: str, body: Mapping[str, Any]) -> int:
        async with self._open().post(url, json=dict(body), allow_redirects=False) as answer:
            return answer.status

    async def call(self, method: str, url: str, headers: tuple[tuple[str, str], ...],
                   body: str | None) -> Answer:
        data = body.encode() if body is not None else None
        async with self._open().request(method, url, headers=list(headers), data=data,
                                        allow_redirects=False) as answer:
            if (answer.content_length or 0) > http_steps.MAX_ANSWER:
                raise AnswerTooLarge()
            raw = await answer.content.read(http_steps.MAX_ANSWER + 1)
            if len(raw) > http_steps.MAX_ANSWER:
                raise AnswerTooLarge()
            found: dict[str, tuple[str, ...]] = {}
            for name in list(dict.fromkeys(answer.headers.keys()))[:MAX_ANSWER_HEADERS]:
                found[name] = tuple(answer.headers.getall(name))
            return Answer(answer.status, found, raw.decode("utf-8", errors="replace"))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class Sender:
    """The bounded, fair background sender (see the module's docstring)."""

    def __init__(self, policy: egress.EgressPolicy, report: Report,
                 settings: SenderSettings | None = None,
                 transport: Transport | None = None,
                 calls: CallTransport | None = None) -> None:
        self.settings = settings or SenderSettings()
        self.report = report
        http = HttpTransport(policy, self.settings)
        self.transport: Transport = transport or http
        self.calls: CallTransport = calls or http
        self._waiting: dict[str, collections.deque[Message | Call]] = {}
        """Per namespace, its messages in order; the dict's order is the namespaces' turn."""
        self._in_flight: collections.Counter[str] = collections.Counter()
        self._dropped: collections.Counter[str] = collections.Counter()
        """Per namespace, drops since its backlog was last below the limit."""
        self._total = 0
        self._wake = asyncio.Event()

    # -- the reconcile's side: append or drop, never wait -----------------------------------

    def submit(self, message: Message) -> Admission:
        return self._append(message)

    def submit_call(self, call: Call) -> Admission:
        return self._append(call)

    def _append(self, message: Message | Call) -> Admission:
        ns = message.namespace
        queue = self._waiting.get(ns)
        if (queue is not None and len(queue) >= self.settings.namespace_backlog) or \
                self._total >= self.settings.backlog:
            return self._drop(message)
        if queue is None:
            queue = self._waiting[ns] = collections.deque()
        queue.append(message)
        self._total += 1
        self._wake.set()
        return Admission(True)

    def _drop(self, message: Message | Call) -> Admission:
        ns = message.namespace
        self._dropped[ns] += 1
        first = self._dropped[ns] == 1
        if first:
            log.warning("notifications of namespace %s: backlog full (%d of its own, %d in "
                        "all); dropping new ones until it drains (Application %s, step %s)",
                        ns, len(self._waiting.get(ns, ())), self._total, message.owner,
                        message.step)
        return Admission(False, warn=first)

    @property
    def waiting(self) -> int:
        """Messages submitted and not yet taken by a worker."""
        return self._total

    # -- the workers -------------------------------------------------------------------------

    async def run(self) -> None:
        """The workers, until cancelled (the manager runs this while leading)."""
        try:
            async with asyncio.TaskGroup() as group:
                for number in range(self.settings.workers):
                    group.create_task(self._work(), name=f"notification sender {number}")
        finally:
            await self.transport.close()
            if id(self.calls) != id(self.transport):
                await self.calls.close()

    async def _work(self) -> None:
        while True:
            message = self._take()
            if message is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                if isinstance(message, Call):
                    await self._call(message)
                else:
                    await self._deliver(message)
            finally:
                self._in_flight[message.namespace] -= 1
                if self._in_flight[message.namespace] <= 0:
                    del self._in_flight[message.namespace]
                self._wake.set()  # this namespace may have a turn again

    def _take(self) -> Message | Call | None:
        """The next namespace in turn with a message and room in flight: its oldest."""
        for ns, queue in self._waiting.items():
            if self._in_flight[ns] >= self.settings.namespace_in_flight:
                continue
            message = queue.popleft()
            self._total -= 1
            del self._waiting[ns]
            if queue:
                self._waiting[ns] = queue  # back of the line
            else:
                self._drained(ns)
            self._in_flight[ns] += 1
            return message
        return None

    def _drained(self, ns: str) -> None:
        dropped = self._dropped.pop(ns, 0)
        if dropped:
            log.warning("notifications of namespace %s: %d dropped while its backlog was "
                        "full", ns, dropped)

    async def _deliver(self, message: Message) -> None:
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a
            # cancellation that arrives as the POST completes, and a worker must stop
            async with asyncio.timeout(self.settings.timeout):
                status = await self.transport.post(message.url, {"text": message.text})
        except Exception as exc:  # best effort: any failure is a report, never a raise
            why = egress.tenant_message(exc)
            # the operator's line: the error's type, never its text (it may quote the URL)
            log.warning("notification of %s step %s not delivered: %s (%s)", message.owner,
                        message.step, why, type(exc).__name__)
            await self._report(message, why)
            return
        if status >= 300:
            log.warning("notification of %s step %s not delivered: answered %d",
                        message.owner, message.step, status)
            await self._report(message, NOT_ACCEPTED)

    async def _call(self, call: Call) -> None:
        """One call; its answer or the tenant-safe reason there is none to ``call.done``."""
        result: Answer | str
        try:
            async with asyncio.timeout(self.settings.timeout):
                result = await self.calls.call(call.method, call.url, call.headers, call.body)
        except AnswerTooLarge:
            result = TOO_LARGE
        except Exception as exc:  # any failure is the step's to report, never a raise
            result = egress.tenant_message(exc)
            # the operator's line: the error's type, never its text (it may quote the URL)
            log.warning("call of %s step %s failed: %s (%s)", call.owner, call.step, result,
                        type(exc).__name__)
        try:
            call.done(result)
        except Exception as exc:
            log.warning("answer of %s step %s not kept: %s", call.owner, call.step,
                        type(exc).__name__)

    async def _report(self, message: Message, why: str) -> None:
        try:
            await self.report(message, why)
        except Exception as exc:
            log.warning("notification failure of %s step %s not reported: %s",
                        message.owner, message.step, type(exc).__name__)
