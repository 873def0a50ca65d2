"""Settings of the propagation controller."""

from __future__ import annotations

import dataclasses

from federation.hub import deny


@dataclasses.dataclass(frozen=True)
class PropagationSettings:
    cleanup_wait: float = 30.0
    """Seconds a deleted template's copies on unreachable members may stay pending before
    a ``CleanupPending`` Warning event says so. Templates carry no finalizer: ``kubectl
    delete`` returns at once and the binding records what is pending from the first
    moment (``CleanupPending`` condition); the event is for an outage that lasts, not for
    an API server restart, which this outlasts."""
    retry_pending: float = 5.0
    """Seconds between attempts to clean copies on a member that was unreachable."""
    max_backoff: float = 60.0
    """Cap on a failing template's retry backoff (controller-runtime's 1000 s is for keys
    that fail for their own reasons). Propagation mostly fails because a member is away;
    an outage of minutes would otherwise push retries to tens of minutes after it ends.
    The MemberCluster Ready event requeues at once anyway; this bounds every other case."""
    workers: int = 64
    """Concurrent reconciles. A reconcile spends nearly all its time waiting on API
    servers (member writes, then the binding), so throughput grows with workers until the
    API servers, not this process, are the limit: a 500-template burst on the local fleet
    went from 0.24 to 0.33 of the raw member write rate from 16 to 64 workers, with the
    machine's two cores then saturated by the API servers. Workers are coroutines, so an
    idle one costs nothing. The clean-up controller uses as many: after an outage it has as
    many bindings to finish as propagation has templates to fix."""
    schedule_budget: float = 5.0
    """Seconds one placement may compute (in a worker thread, off the event loop). The
    engine places a template of a large fleet in milliseconds; one that needs seconds is a
    hostile or broken policy. Past the budget the template is Scheduled=False
    (ScheduleTimeout) and not retried until it or its policy changes."""
    schedule_threads: int = 2
    """Placements computing at once. Placement is CPU-bound and Python runs one thread at
    a time, so more threads place nothing faster; two let a slow placement (which keeps
    its thread until it returns, even past its budget) not stall every other one."""
    deny_list: deny.DenyList = dataclasses.field(default_factory=deny.DenyList)
    """Kinds and objects never propagated. The default list keeps our own API, a
    cluster's records about itself and credentials on the hub, whatever a policy selects
    (``fedctl run --propagation-deny`` changes it; docs/propagation.md lists it)."""
