"""Failover rules: when the replicas of a NotReady cluster move, and when old copies go.

The health controller (:mod:`federation.controllers.health`) marks a member
that stops answering ``Ready=False`` and taints it twice, both keyed
``cluster.federation.io/not-ready``: ``NoSchedule`` (nothing new goes there)
and ``NoExecute`` with ``timeAdded`` (the clock failover runs on). This module's
pure rules decide, per template, what the placement engine is shown:

- **ready**: the cluster as it is;
- **held**: not ready, but its replicas stay: the engine sees it ready with a
  NoSchedule taint, so it keeps what it has and gets nothing new;
- **evicted**: not ready for longer than the policy tolerates: the engine sees
  it not ready and places its replicas elsewhere.

Failover is opt-in per policy, as Karmada's cluster tolerations are: a policy
whose ``clusterTolerations`` tolerate the ``not-ready`` NoExecute taint with
``tolerationSeconds: S`` moves its replicas S seconds after ``timeAdded``.
Without such a toleration (or with one that has no ``tolerationSeconds``:
"forever") replicas stay where they are, however long the outage. That is the
one place we differ from Kubernetes taint semantics, on purpose: moving a
workload is a decision its owner opts into, and a control plane that moved
everything whenever it lost sight of a cluster would turn a network blip on
its own side into a fleet-wide reshuffle. Other NoExecute taints (a user's)
keep Kubernetes semantics in the engine.

Moving is bounded fleet-wide by the disruption budget
(:mod:`federation.controllers.propagation.disruption`, the one piece of failover that
keeps state): a template whose move does not fit waits, held.

Graceful eviction: the old copies on an evicted cluster are deleted only when
the new copies elsewhere are ready, or ``gracePeriodSeconds`` after the
eviction (policy ``spec.failover.cluster``: ``purgeMode: Gracefully``, the
default, or ``Directly`` to delete at once; Karmada's field names). While
held, the cluster stays in the template's pending-cleanup list, so the copy
is found again on every reconcile, and when the cluster returns.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from federation.hub import status
from federation.placement import clusters as clusters_
from federation.placement import policy as policy_
from federation.placement import selection

JSON = dict[str, Any]

NOT_READY_TAINT = "cluster.federation.io/not-ready"
"""The key of both taints the health controller puts on a NotReady cluster."""
FOREVER = -1.0


class State(enum.Enum):
    READY = "ready"
    HELD = "held"
    EVICTED = "evicted"


@dataclasses.dataclass(frozen=True)
class Judgement:
    """What one cluster is, for one policy, at one moment."""

    state: State
    reason: str = ""
    deadline: float | None = None
    """Epoch seconds at which a held cluster is evicted (None: never, as things stand)."""
    evicted_at: float | None = None


@dataclasses.dataclass
class Outcome:
    """What the failover transformers decided for one template (kept on the Build)."""

    judgements: dict[str, Judgement] = dataclasses.field(default_factory=dict)
    behaviour: policy_.ClusterFailoverBehavior = dataclasses.field(
        default_factory=policy_.ClusterFailoverBehavior)
    """The policy's ``spec.failover.cluster`` (Karmada's defaults when it has none)."""
    held: dict[str, str] = dataclasses.field(default_factory=dict)
    """Clusters whose old copy is kept for now (graceful eviction) -> why."""

    @property
    def evicted(self) -> dict[str, float]:
        return {name: j.evicted_at or 0.0 for name, j in self.judgements.items()
                if j.state is State.EVICTED}


def parse_time(value: Any) -> float | None:
    """An RFC 3339 ``timeAdded`` as epoch seconds (None when absent or malformed)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()


def format_time(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def toleration_time(tolerations: Sequence[policy_.Toleration]) -> float | None:
    """Seconds the policy tolerates the not-ready NoExecute taint; None = not opted in.

    Kubernetes' rule over the matching tolerations: the smallest
    ``tolerationSeconds`` wins, and matching tolerations without one mean forever
    (:data:`FOREVER`) when no other sets a time.
    """
    taint = clusters_.Taint(key=NOT_READY_TAINT, effect="NoExecute")
    matching = [t for t in tolerations if selection.tolerates(t, taint)]
    if not matching:
        return None
    seconds = [t.toleration_seconds for t in matching if t.toleration_seconds is not None]
    return float(max(min(seconds), 0)) if seconds else FOREVER


def not_ready_since(taints: Iterable[Mapping[str, Any]]) -> float | None:
    """``timeAdded`` of the not-ready NoExecute taint, if the cluster carries one."""
    for taint in taints:
        if taint.get("key") == NOT_READY_TAINT and taint.get("effect") == "NoExecute":
            return parse_time(taint.get("timeAdded"))
    return None


def judge(ready: bool, taints: Iterable[Mapping[str, Any]], tolerate: float | None,
          now: float) -> Judgement:
    """Ready, held or evicted: see the module docstring."""
    taints = list(taints)
    since = not_ready_since(taints)
    if ready and since is None:
        return Judgement(State.READY)
    if since is None:
        return Judgement(State.HELD, "not ready; not tainted NoExecute yet")
    if tolerate is None:
        return Judgement(State.HELD, "not ready; the policy does not opt into failover "
                                     f"(no toleration of {NOT_READY_TAINT}:NoExecute)")
    if tolerate == FOREVER:
        return Judgement(State.HELD, "not ready; tolerated without tolerationSeconds")
    deadline = since + tolerate
    if now < deadline:
        return Judgement(State.HELD, f"not ready since {format_time(since)}; tolerated "
                                     f"{tolerate:.0f}s", deadline=deadline)
    return Judgement(State.EVICTED, f"not ready since {format_time(since)}, longer than "
                                    f"tolerationSeconds {tolerate:.0f}", evicted_at=deadline)


def engine_view(cluster: clusters_.Cluster, judgement: Judgement,
                holds_copy: bool = False) -> clusters_.Cluster:
    """The cluster as the placement engine should see it under ``judgement``.

    ``holds_copy``: the template has a replica-less copy there (a ConfigMap, a
    Service): the engine keeps NoSchedule-held clusters only for workloads with
    replicas there, so such a copy is kept by showing the cluster untainted.
    """
    taints = tuple(t for t in cluster.taints
                   if not (t.key == NOT_READY_TAINT and t.effect == "NoExecute"))
    if judgement.state is State.EVICTED:
        return cluster.model_copy(update={"ready": False, "taints": taints})
    if judgement.state is State.HELD and holds_copy:
        taints = tuple(t for t in taints if t.key != NOT_READY_TAINT)
        return cluster.model_copy(update={"ready": True, "taints": taints})
    if judgement.state is State.HELD:
        hold = clusters_.Taint(key=NOT_READY_TAINT, effect="NoSchedule")
        if hold not in taints:
            taints = (*taints, hold)
        return cluster.model_copy(update={"ready": True, "taints": taints})
    return cluster.model_copy(update={"taints": taints})


def behaviour(policy: policy_.Policy) -> policy_.ClusterFailoverBehavior:
    """``spec.failover.cluster`` of a policy, defaults filled (validated when loaded)."""
    failover = policy.spec.failover
    if failover is None or failover.cluster is None:
        return policy_.ClusterFailoverBehavior()
    return failover.cluster


def copies_ready(desired: Mapping[str, Mapping[str, Any]],
                 live: Mapping[str, Mapping[str, Any] | None]) -> bool:
    """Every target's copy exists with the desired replica count ready (old copies may go)."""
    for cluster, wanted in desired.items():
        copy = live.get(cluster)
        if copy is None:
            return False
        if copy.get("kind") not in status.WORKLOAD_KINDS:
            continue
        replicas = (wanted.get("spec") or {}).get("replicas", 1)
        if (copy.get("spec") or {}).get("replicas", 1) != replicas \
                or status.health(copy) != "Healthy":
            return False
    return True
