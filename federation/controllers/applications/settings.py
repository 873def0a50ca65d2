"""The applications controller's settings and the names it shares with ``fedctl app``.

Nothing here reads or writes: plain values, so every step and the CLI can import them.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from federation.applications import restarts
from federation.applications.definitions import SYSTEM_NAMESPACES
from federation.applications.export_service import Allow
from federation.controllers.applications import charts, notifications
from federation.hub import api, manifests
from federation.runtime.reconcile import group_kind

JSON = dict[str, Any]

APP_KIND = group_kind(api.APPLICATIONS)
APP_ANNOTATION = manifests.APPLICATION_ANNOTATION
"""On member objects: ``namespace/name`` of the Application that placed them."""
RESUME = "federation.io/resume"
RESTART = "federation.io/restart"
ROLLBACK = "federation.io/rollback"
"""``N@nonce``: go back to revision N (``fedctl app rollback``)."""
VELA_RESTART = restarts.ANNOTATION
"""KubeVela's own restart request (``true``, a time, a duration): :mod:`.requests`."""


@dataclasses.dataclass(frozen=True)
class ApplicationSettings:
    local_cluster: str | None = None
    """The member KubeVela's ``local`` names (``--app-local-cluster``). None: the hub is
    KubeVela's local cluster, but ours runs no workloads, so ``local`` is refused."""
    pending_retry: float = 5.0
    """Seconds between the first retries of a deletion a member that is away keeps
    pending (a member coming back is also retried at once, from its availability event)."""
    pending_backoff: float = 60.0
    """The longest wait between retries of a deleted Application's pending clean-up: the
    wait grows with how long it has been pending (a quarter of it), so a member away for a
    day costs a retry a minute per tracker, not twelve."""
    workers: int = 4
    """Applications reconciled at once: each waits mostly on member API servers."""
    cleanup_wait: float = 30.0
    """Seconds a deleted Application's objects may stay pending on an away member before
    a Warning event says so (``--cleanup-wait``, as for propagated templates): a member
    restarting is not news, one gone for half a minute is."""
    sender: notifications.SenderSettings = dataclasses.field(
        default_factory=notifications.SenderSettings)
    """The notification sender's concurrency and backlogs (see its module)."""
    remembered_steps: int = 10_000
    definition_namespaces: tuple[str, ...] = SYSTEM_NAMESPACES
    """Where ComponentDefinitions and TraitDefinitions count (``--definition-namespaces``):
    namespaces only administrators write. A definition elsewhere is a tenant's: never
    used, and reported."""
    cue_workers: int = 2
    """Worker processes evaluating definitions' CUE templates (shared by every
    Application; each evaluation is memoised, so a steady fleet asks none)."""
    cue_timeout: float = 10.0
    """Seconds one evaluation may take in its worker before it is killed and the
    Application refused (renderFailed): KubeVela's templates evaluate in milliseconds."""
    cue_memory: int = 1 << 30
    """Address space of one worker (RLIMIT_AS), on top of the evaluator's own budget."""
    charts: charts.ChartSettings = dataclasses.field(default_factory=charts.ChartSettings)
    """``helmchart`` components: the Helm binary, where charts may be fetched from
    (``--helm``, ``--chart-allow``), the fetch and render limits."""
    export_allow: Allow = dataclasses.field(default_factory=Allow)
    """The addresses export-service steps may point a Service at (``--export-service-allow``;
    default none: every export-service step is refused)."""
    """Notification step executions remembered as submitted (a few hundred bytes each):
    enough for every step a busy hub runs between two cache resyncs."""

    def backoff(self, pending_for: float) -> float:
        """Seconds until the next retry of a clean-up pending for ``pending_for`` seconds:
        a quarter of that, between ``pending_retry`` and ``pending_backoff``."""
        return min(max(self.pending_retry, pending_for / 4), self.pending_backoff)


def stamp(value: float) -> str:
    """Epoch seconds as the RFC 3339 text our status and trackers carry."""
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
