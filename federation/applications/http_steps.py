"""vela-core's HTTP workflow steps, ``webhook``, ``request`` and ``check-metrics``, as
checked values the controller's sender runs (vela-templates/definitions/internal/
workflowstep/{webhook,request,check-metrics}.cue, the kubevela/workflow providers
``http.#HTTPDo`` and ``metrics.#PromCheck``).

- ``webhook``: a POST of ``data`` as JSON (default: the Application itself) to ``url.value``;
  ``url.secretRef`` is refused by name (the control plane reads no Secret an
  Application names). It succeeds on any answer (KubeVela reads none of it).
- ``request``: ``method`` (GET, POST, PUT or DELETE) of ``url``, ``body`` (a map, sent as
  JSON) and ``header``; without ``header``, ``Content-Type: application/json`` as
  KubeVela's provider sets. It fails when the answer's status is above 400, and its
  template's ``response`` is the answer's body as JSON (``req.$returns`` has ``body``,
  ``header`` and ``statusCode``), which the step's outputs read.
- ``check-metrics``: ``query`` to the Prometheus HTTP API ``/api/v1/query`` of
  ``metricEndpoint`` (default KubeVela's ``http://prometheus-server.o11y-system.svc:9090``),
  one value (a scalar, or a vector of one sample) compared by ``condition`` (an operator
  and a number, ``>=0.95``: KubeVela compiles ``<value> <condition>`` as CUE; here it is
  parsed, never evaluated); the condition must hold for ``duration`` (5m) and the step
  fails once it has failed for ``failDuration`` (2m).

What a tenant may not do with them is refused here, by field and without quoting the URL:
a header that would override what the control plane frames the request with (``Host``,
hop-by-hop and framing headers) or that holds a line break, a body over
:data:`MAX_BODY` bytes. Where a URL may lead is the outbound policy's to decide, at connect
time (:mod:`federation.contexts.egress`). Pure: nothing here dials.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal

from federation.applications import model, shapes
from federation.untrusted import documents

JSON = dict[str, Any]
Purpose = Literal["notification", "request"]
"""Which outbound allowlist a call goes through: ``webhook`` POSTs (nothing of the answer
is shown) with the notifications', ``request`` and ``check-metrics`` (whose answer the
tenant reads) with ``fedctl run --request-allow``."""

STEP_TYPES = ("webhook", "request", "check-metrics")
METHODS = ("GET", "POST", "PUT", "DELETE")
"""request's ``method`` (KubeVela's definition: these four, GET by default)."""
DEFAULT_METRICS = "http://prometheus-server.o11y-system.svc:9090"
MAX_BODY = 256 * 1024
"""Bytes of a request body (a webhook's Application included): it waits in the sender's
backlog until sent, and the Applications KubeVela's examples send are a few KiB."""
MAX_ANSWER = 64 * 1024
"""Bytes of an answer read: more is a failed call (``answer too large``), not a truncated
one; an output kept from it is bounded again (``workflow.MAX_VALUE``)."""
MAX_HEADERS = 32
MAX_HEADER_BYTES = 8192
"""Headers of one request, and their names and values together: a token and a few
custom headers fit many times over; a proxy refuses much more."""
MAX_QUERY = 4096
"""Characters of a PromQL query (it goes in the URL)."""
REQUEST_CALLS = 3
"""Tries of a webhook or request whose call failed (unreachable, refused, timed out):
KubeVela retries a failing step 10 times; three POSTs of one step is enough to ride out
a restart of the destination without hammering it."""
METRICS_CALLS = 1000
"""Queries of one check-metrics step: one per health probe interval, so more than an
hour at 5 s; a condition that flips for longer fails the step rather than query for
ever."""
RETRY_SECONDS = 5.0
"""Wait before trying a failed call again (times the tries so far)."""

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")
"""An HTTP header name (RFC 9110 token)."""
_FRAMING = frozenset({"host", "connection", "keep-alive", "proxy-authenticate",
                      "proxy-authorization", "proxy-connection", "te", "trailer",
                      "transfer-encoding", "upgrade", "content-length", "expect"})
"""Headers the control plane's HTTP client frames a request with: a tenant's value
would change where or how the request goes (a second Host, a smuggled body), not what it
says."""
_CONDITION = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
                        r"\s*$")


@dataclasses.dataclass(frozen=True)
class HttpCall:
    """One request a step makes (the controller's sender sends it)."""

    purpose: Purpose
    method: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    body: str | None = None
    """The body as sent (JSON text); None: none, or the Application (:attr:`send_app`)."""
    send_app: bool = False
    """webhook without ``data``: the Application, as the controller reads it, is the body."""


@dataclasses.dataclass(frozen=True)
class Condition:
    """``>=0.95``: a comparison of the query's value with a number."""

    operator: str
    operand: float
    text: str

    def holds(self, value: float) -> bool:
        return {">=": value >= self.operand, "<=": value <= self.operand,
                ">": value > self.operand, "<": value < self.operand,
                "==": value == self.operand, "!=": value != self.operand}[self.operator]


@dataclasses.dataclass(frozen=True)
class MetricsCheck:
    """check-metrics' verdict rules (the query itself is its :class:`HttpCall`)."""

    condition: Condition
    duration: float
    fail_duration: float
    duration_text: str = "5m"
    fail_duration_text: str = "2m"


def webhook(props: Mapping[str, Any], where: str) -> HttpCall:
    """vela-core's ``webhook``: ``url`` (``{value: URL}``; ``secretRef`` refused),
    ``data`` (a map; default the Application)."""
    found = shapes.check(props, {"url": shapes.OPEN_MAP, "data?": shapes.OPEN_MAP}, where)
    url = _webhook_url(found["url"], f"{where}.url")
    headers = (("Content-Type", "application/json"),)
    if "data" not in found:
        return HttpCall("notification", "POST", url, headers, send_app=True)
    return HttpCall("notification", "POST", url, headers, body(found["data"],
                                                               f"{where}.data"))


def _webhook_url(raw: Mapping[str, Any], where: str) -> str:
    if "secretRef" in raw:
        raise model.AppError(f"{where}.secretRef: not supported: the control plane reads no "
                             "Secret an Application names; give the URL as value")
    extra = sorted(k for k in raw if k != "value")
    if extra:
        raise model.AppError(f"{where}.{extra[0]}: not supported (value)")
    if "value" not in raw:
        raise model.AppError(f"{where}.value: required")
    return model.check_url(raw["value"], f"{where}.value")


REQUEST = {"url": str, "method": shapes.Default(shapes.Enum(*METHODS), "GET"),
           "body?": shapes.OPEN_MAP, "header?": shapes.STRINGS_MAP}


def request(props: Mapping[str, Any], where: str) -> HttpCall:
    """vela-core's ``request``: ``url``, ``method``, ``body``, ``header``."""
    found = shapes.check(props, REQUEST, where)
    url = model.check_url(found["url"], f"{where}.url")
    given = found.get("header")
    headers = checked_headers(given, f"{where}.header") if given else \
        (("Content-Type", "application/json"),)
    sent = body(found["body"], f"{where}.body") if "body" in found else None
    return HttpCall("request", found["method"], url, headers, sent)


def body(data: Any, where: str) -> str:
    """``data`` as the JSON text sent, at most :data:`MAX_BODY` bytes."""
    text = json.dumps(data, sort_keys=True)
    if len(text.encode()) > MAX_BODY:
        raise model.AppError(f"{where}: {len(text.encode())} bytes as JSON; at most "
                             f"{MAX_BODY} are sent")
    return text


def checked_headers(raw: Mapping[str, str], where: str) -> tuple[tuple[str, str], ...]:
    """The request's headers: names that are HTTP tokens and none the client frames the
    request with, values without line breaks or control characters, within the caps.
    Refusals name the header, never quote a value (it may be a token)."""
    if len(raw) > MAX_HEADERS:
        raise model.AppError(f"{where}: {len(raw)} headers; at most {MAX_HEADERS}")
    total = 0
    for name, value in raw.items():
        if not _TOKEN.match(name):
            raise model.AppError(f"{where}: a header name is not an HTTP token (letters, "
                                 "digits and !#$%&'*+.^_`|~-)")
        if name.lower() in _FRAMING or name.lower().startswith("proxy-"):
            raise model.AppError(f"{where}.{name}: not sent: the control plane's client "
                                 "sets Host, hop-by-hop and framing headers")
        if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in value):
            raise model.AppError(f"{where}.{name}: holds a line break or control character "
                                 "(the value is not repeated here)")
        total += len(name.encode()) + len(value.encode())
    if total > MAX_HEADER_BYTES:
        raise model.AppError(f"{where}: {total} bytes of names and values; at most "
                             f"{MAX_HEADER_BYTES}")
    return tuple(raw.items())


CHECK_METRICS = {"query": str, "metricEndpoint": shapes.Default(str, DEFAULT_METRICS),
                 "condition": str, "duration": shapes.Default(str, "5m"),
                 "failDuration": shapes.Default(str, "2m")}


def check_metrics(props: Mapping[str, Any], namespace: str, where: str
                  ) -> tuple[HttpCall, MetricsCheck]:
    """vela-core's ``check-metrics``: the query's call and the verdict's rules.

    The query goes to ``<metricEndpoint>/api/v1/query`` with ``query`` and, beside it, the
    Application's ``namespace`` (Prometheus ignores it; a label-enforcing proxy in front of
    a shared Prometheus, prom-label-proxy ``-label namespace``, restricts the query to it)."""
    found = shapes.check(props, CHECK_METRICS, where)
    endpoint = model.check_url(found["metricEndpoint"], f"{where}.metricEndpoint")
    if "?" in endpoint or "#" in endpoint:
        raise model.AppError(f"{where}.metricEndpoint: a query or fragment is not supported "
                             "(the address and port of the Prometheus server)")
    query = found["query"]
    if not query.strip() or len(query) > MAX_QUERY:
        raise model.AppError(f"{where}.query: a PromQL query of 1 to {MAX_QUERY} characters")
    url = f"{endpoint.rstrip('/')}/api/v1/query?query={_escaped(query)}" \
          f"&namespace={_escaped(namespace)}"
    check = MetricsCheck(condition(found["condition"], f"{where}.condition"),
                         model.duration_seconds(found["duration"], f"{where}.duration"),
                         model.duration_seconds(found["failDuration"],
                                                f"{where}.failDuration"),
                         found["duration"], found["failDuration"])
    return HttpCall("request", "GET", url), check


_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _escaped(value: str) -> str:
    """``value`` percent-encoded for a query string (every byte but RFC 3986's unreserved
    ones: this package does no I/O and imports no URL library)."""
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in value.encode())


def condition(text: str, where: str) -> Condition:
    """``>=0.95``, ``<5``, ``==1``, ``!=0``: what KubeVela's examples write after the value
    (it compiles ``if: <value> <condition>`` as CUE). Anything else is refused by name
    rather than evaluated."""
    match = _CONDITION.match(text)
    if match is None:
        raise model.AppError(f"{where}: an operator (>=, <=, >, <, == or !=) and a number, "
                             "such as >=0.95")
    return Condition(match[1], float(match[2]), f"{match[1]}{match[2]}")


class AnswerError(ValueError):
    """An answer the step cannot use; one line, shown to the tenant."""


def json_answer(text: str) -> Any:
    """The answer's body as JSON data (KubeVela's ``json.Unmarshal``), through the capped
    loader."""
    try:
        return documents.json_document(text, quote=False)
    except documents.TextError as exc:
        raise AnswerError(f"the answer is not JSON ({exc})") from None


def prometheus_value(text: str) -> float:
    """The one value of a Prometheus ``/api/v1/query`` answer: a scalar, or a vector of
    exactly one sample (KubeVela's words when it has another count)."""
    doc = json_answer(text)
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, dict) or doc.get("status") != "success":
        raise AnswerError("the answer is not a successful Prometheus query result")
    result, kind = data.get("result"), data.get("resultType")
    if kind == "vector" and isinstance(result, list):
        if len(result) != 1:
            raise AnswerError(f"the query is returning {len(result)} results when it should "
                              "only return one")
        result = result[0].get("value") if isinstance(result[0], dict) else None
    elif kind != "scalar":
        raise AnswerError(f"cannot handle a query result of type {str(kind)[:32]!r}")
    if not isinstance(result, list) or len(result) != 2:
        raise AnswerError("the query result has no value")
    try:
        value = float(str(result[1]))
    except ValueError:
        raise AnswerError("the query result is not a number") from None
    if not math.isfinite(value):
        raise AnswerError("the query result is not a finite number")
    return value


def shown(value: float) -> str:
    """A value as Prometheus writes it (``10``, ``0.95``)."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def compiled(step_type: str, props: Mapping[str, Any], namespace: str, where: str
             ) -> tuple[HttpCall, MetricsCheck | None]:
    """A step of :data:`STEP_TYPES`: its call, and check-metrics' rules."""
    if step_type == "webhook":
        return webhook(props, where), None
    if step_type == "request":
        return request(props, where), None
    return check_metrics(props, namespace, where)
