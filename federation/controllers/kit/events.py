"""Kubernetes Events on hub objects, for decisions and failures.

Events are emitted when something changes (a new decision, a condition
turning), not on every reconcile: a recorder remembers the last message per
(object, reason) and repeats nothing. Its memory starts empty at each start, so
the first event per (object, reason) is looked up on the hub first (one list in
the object's namespace, by field selector): a restarted control plane does not
repeat what the last one said. An event that cannot be written is logged and
dropped; events are advice, never part of a reconcile's outcome.
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
MESSAGE_LIMIT = 1024


def _when(event: Mapping[str, Any]) -> tuple[str, int]:
    """An event's order: RFC 3339 stamps in UTC compare as strings, but only to the
    second; within one second the resourceVersion decides (etcd's revision: a number that
    grows with every write, though the API calls it opaque; one that is not a number
    counts as oldest)."""
    version = str((event.get("metadata") or {}).get("resourceVersion") or "")
    return (str(event.get("lastTimestamp") or ""), int(version) if version.isdigit() else -1)


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
        "reason": reason, "message": message[:MESSAGE_LIMIT], "type": kind,
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
        message = message[:MESSAGE_LIMIT]
        key = (str(obj.get("metadata", {}).get("uid")), reason)
        if key not in self._last:
            said = await self._said_last(obj, reason)
            if said is not None:
                self._remember(key, said)
        if self._last.get(key) == message:
            return
        try:
            await self.mc.cluster(self.hub).create(event_body(obj, kind, reason, message),
                                                   resource=api.EVENTS)
        except ClientError as exc:
            log.warning("event %s for %s not recorded: %s", reason,
                        obj.get("metadata", {}).get("name"), exc)
            return
        self._remember(key, message)

    def _remember(self, key: tuple[str, str], message: str) -> None:
        if key not in self._last and len(self._last) >= self.memory:
            self._last.clear()
        self._last[key] = message

    async def _said_last(self, obj: Mapping[str, Any], reason: str) -> str | None:
        """The message of the newest event we posted about ``obj`` for ``reason``, read from
        the hub (None when there is none or it cannot be read: then the event is posted)."""
        meta = obj.get("metadata", {})
        if not meta.get("uid"):
            return None
        try:
            found = await self.mc.cluster(self.hub).list(
                api.EVENTS, meta.get("namespace") or "default",
                fieldSelector=f"involvedObject.uid={meta['uid']},reason={reason}")
        except ClientError as exc:
            log.debug("events about %s not read: %s", meta.get("name"), exc)
            return None
        ours = [e for e in found.get("items") or []
                if (e.get("involvedObject") or {}).get("uid") == meta["uid"]
                and e.get("reason") == reason
                and (e.get("source") or {}).get("component") == COMPONENT]
        if not ours:
            return None
        newest = max(ours, key=_when)
        return str(newest.get("message", ""))

    def forget(self, obj: Mapping[str, Any]) -> None:
        uid = str(obj.get("metadata", {}).get("uid"))
        for key in [k for k in self._last if k[0] == uid]:
            del self._last[key]
