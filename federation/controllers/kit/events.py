"""Kubernetes Events on hub objects, for decisions and failures.

Events are emitted when something changes (a new decision, a condition
turning), not on every reconcile: a recorder remembers the last message per
(object, reason) and repeats nothing. An event that cannot be written is
logged and dropped; events are advice, never part of a reconcile's outcome.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from typing import Any, Literal, Protocol

from federation.contexts.client import ClientError
from federation.contexts.multicluster import MultiClusterWriter
from federation.hub import api, status

log = logging.getLogger("federation.events")
EventType = Literal["Normal", "Warning"]
COMPONENT = "federation-controller"


def event_body(obj: Mapping[str, Any], kind: EventType, reason: str,
               message: str) -> dict[str, Any]:
    meta = obj.get("metadata", {})
    namespace = meta.get("namespace") or "default"
    stamp = status.now()
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta.get('name')}.{secrets.token_hex(8)}",
                     "namespace": namespace},
        "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                           "name": meta.get("name"), "namespace": meta.get("namespace"),
                           "uid": meta.get("uid"),
                           "resourceVersion": meta.get("resourceVersion")},
        "reason": reason, "message": message[:1024], "type": kind,
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
    }


def overdue_once(since: float | None, now: float, wait: float, retry: float) -> bool:
    """Whether a Warning about something pending since ``since`` (epoch seconds) is due at
    ``now``: once ``wait`` seconds have passed, and only in the few retries (``retry``
    apart) after that moment, so a restart long after it does not repeat it (the
    recorder's memory covers the retries themselves)."""
    return since is not None and wait <= now - since < wait + 3 * retry


class EventSink(Protocol):
    """What a controller asks of the :class:`Recorder` (a test passes a list of its own)."""

    async def emit(self, obj: Mapping[str, Any], kind: EventType, reason: str,
                   message: str) -> None: ...

    def forget(self, obj: Mapping[str, Any]) -> None: ...


class Recorder:
    """Writes events on the hub, each (object, reason, message) once (an :class:`EventSink`)."""

    def __init__(self, mc: MultiClusterWriter, hub: str, memory: int = 10000) -> None:
        self.mc = mc
        self.hub = hub
        self.memory = memory
        self._last: dict[tuple[str, str], str] = {}

    async def emit(self, obj: Mapping[str, Any], kind: EventType, reason: str,
                   message: str) -> None:
        key = (str(obj.get("metadata", {}).get("uid")), reason)
        if self._last.get(key) == message:
            return
        if len(self._last) >= self.memory:
            self._last.clear()
        try:
            await self.mc.cluster(self.hub).create(event_body(obj, kind, reason, message),
                                                   resource=api.EVENTS)
        except ClientError as exc:
            log.warning("event %s for %s not recorded: %s", reason,
                        obj.get("metadata", {}).get("name"), exc)
            return
        self._last[key] = message

    def forget(self, obj: Mapping[str, Any]) -> None:
        uid = str(obj.get("metadata", {}).get("uid"))
        for key in [k for k in self._last if k[0] == uid]:
            del self._last[key]
