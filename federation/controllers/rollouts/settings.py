"""Settings of the rollout controller."""

from __future__ import annotations

import dataclasses

from federation.contexts import egress
from federation.controllers.rollouts.view import OnlineUpgrade


@dataclasses.dataclass(frozen=True)
class ReconfigureSettings:
    workers: int = 4
    """Concurrent reconciles. A reconcile is a few cache reads, one status patch and, for
    an online step, calls to reloaders bounded by :attr:`call_timeout`; policies are few
    (one per configuration file set), so four keep a slow reloader from holding up the
    others without making the rollout order of one policy any less strict (one key is
    never reconciled twice at once)."""
    poll_interval: float = 2.0
    """Seconds between looks at a cluster that is Updating. Member readiness is polled
    rather than watched: member workloads and EndpointSlices change all the time for
    reasons that concern no rollout, and two seconds is well under any restart."""
    call_timeout: float = 10.0
    """Seconds one OnlineUpgradeParams call may take. The reloader runs its action with a
    timeout of its own (30 s by default), so this bounds only a reloader that accepts the
    connection and then says nothing; a failed call fails the cluster, which the user can
    retry by changing the config or the policy."""
    caller: OnlineUpgrade | None = None
    """How reloaders are called (``fedctl run`` injects the gRPC client of
    :mod:`federation.reloader.client`). None: an online step fails, saying no reloader
    client is configured, rather than being reported done."""
    egress: egress.EgressPolicy = dataclasses.field(default_factory=egress.EgressPolicy)
    """Which reloader addresses may be dialled (``fedctl run --reloader-allow``, given by
    :func:`federation.controllers.setup.setup`): an EndpointSlice is tenant data, so every
    address is resolved and checked before the call (public addresses only by default;
    reloaders live on pod IPs, which the operator lists)."""
    parse_workers: int = 2
    """Worker processes that parse, diff and validate config files (:mod:`.sandbox`): one
    per core of a small control plane; a tenant's slowest file holds one of them for at
    most :attr:`parse_timeout`, and the event loop never."""
    parse_timeout: float = 30.0
    """Seconds one file's parse, diff and checks may take in a worker before it is killed
    and the file refused (``InvalidFile``, timed out). A diff of two 900 KiB YAML files (the
    largest a ConfigMap holds) took 10 s on a loaded two-core machine, in a worker that
    yields the CPU (``nice``); a backtracking pattern or a quadratic line would take hours."""
