"""KubeVela's ``app.oam.dev/restart-workflow`` annotation on an Application, read (vela-core's
pkg/controller/core.oam.dev/v1beta1/application/workflow.go: handleWorkflowRestartAnnotation
turns it into ``status.workflowRestartScheduledAt``, checkWorkflowRestart restarts the
workflow once that time has come and the workflow has ended, if the time is after the
run's end).

Its value is one of:

- ``true``: restart now. KubeVela schedules "now" and restarts only a workflow that has
  ended (a running one ends after "now", so the request is lost there); here the request
  waits for the run to end and restarts it then, once.
- an RFC 3339 time: restart once, at that time, if it is after the run's end (the rule
  the ``restart-workflow`` step follows).
- a Go duration (``5m``, ``1h30m``, ``1.5h``): restart that long after each run ends, for
  as long as the annotation stays.

KubeVela deletes a ``true`` or time annotation once it has read it and keeps a duration.
This control plane writes no Application but its status, so it keeps every value and
remembers the one it acted on in ``status.handledRequests`` (as it does for ``fedctl app
restart``): a value acts once; to ask again, set another value (a new time) or remove the
annotation and set it again. A value that is none of these is refused by name
(KubeVela logs a warning and ignores it), and so is a duration under
:data:`~.model.RESTART_FLOOR_SECONDS` (KubeVela takes any, ``1ms`` or ``0s`` included,
and restarts an ended workflow again as soon as it ends: without pause, for ever).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from federation.applications.model import RESTART_FLOOR_SECONDS, AppError, rfc3339

ANNOTATION = "app.oam.dev/restart-workflow"
WHERE = f"metadata.annotations.{ANNOTATION}"
_GO_DURATION = re.compile(r"(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|h|m|s))+")
_GO_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|h|m|s)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
          "h": 3600.0}


@dataclasses.dataclass(frozen=True)
class Request:
    """The annotation as read: ``at`` a one-time restart, ``every`` a recurring one,
    neither: ``true`` (restart once the workflow has ended)."""

    value: str
    at: float | None = None
    every: float | None = None

    @property
    def now(self) -> bool:
        return self.at is None and self.every is None


def request(annotations: Any, step_types: Iterable[str] = ()
            ) -> Request | None:
    """The Application's restart annotation (None without one); :class:`AppError` naming
    it when its value is no restart KubeVela takes, or when a duration would fight a
    ``restart-workflow`` step of the workflow over the same schedule."""
    if annotations is not None and not isinstance(annotations, Mapping):
        raise AppError("metadata.annotations: must be a map")
    value = (annotations or {}).get(ANNOTATION)
    if value is None:
        return None
    if not isinstance(value, str):
        raise AppError(f"{WHERE}: a string")
    text = value.strip()
    if text == "true":
        return Request(value)
    if text[:1].isdigit() and "T" in text:
        return Request(value, at=rfc3339(text, WHERE))
    seconds = go_duration(text)
    if seconds is None:
        shown = f"{value!r} is" if len(value) <= 64 else "the value is"
        raise AppError(f"{WHERE}: {shown} not 'true', an RFC 3339 time such as "
                       "2025-01-20T15:00:00Z or a duration such as 5m or 1h")
    if seconds < RESTART_FLOOR_SECONDS:
        raise AppError(f"{WHERE}: a duration of at least {RESTART_FLOOR_SECONDS:g}s (it "
                       "restarts the workflow that long after each run ends; shorter would "
                       "restart it without pause)")
    if "restart-workflow" in set(step_types):
        raise AppError(f"{WHERE}: a duration schedules a restart after each run, and the "
                       "workflow's restart-workflow step schedules them too: keep one")
    return Request(value, every=seconds)


def go_duration(text: str) -> float | None:
    """Go's ``time.ParseDuration`` for positive values (``300ms``, ``1h30m``, ``1.5h``),
    in seconds; None when ``text`` is not one."""
    if not _GO_DURATION.fullmatch(text):
        return None
    return sum(float(number) * _UNITS[unit] for number, unit in _GO_PART.findall(text))
