"""The rollout as a value: per-cluster states, their transitions, and the status they make.

A :class:`Rollout` is read from the policy's status, changed by pure functions, and
written back as a whole (the status is the controller's only memory, so a restart of
the control plane resumes where it stopped). Its life, for one config version V and one
policy generation:

- :func:`begin`: every cluster of the placement, in order, ``Pending``, with the action
  its diff calls for; a refusal in any cluster refuses the whole rollout (nothing is
  released). The versions each cluster was released and restarted with before are kept:
  dropping a ``restartVersion`` would restart the workloads there.
- :func:`start`: in order, while fewer than ``maxUnavailableClusters`` are ``Updating``
  and none has failed, the next ``Pending`` cluster is released (``releasedVersion`` = V)
  and becomes ``Updating`` with ``startedAt``; a restart sets ``restartVersion`` = V only
  once the cluster's copy shows V (:func:`restart`). An
  ``unchanged`` cluster is released and ``Done`` at once and takes no slot.
- :func:`finish` / :func:`fail`: an ``Updating`` cluster ends ``Done`` (``finishedAt``,
  per-workload config version) or ``Failed`` (its message says why); once one has failed
  no further cluster starts. The phase is derived: Refused, Failed, Complete or Rolling.

Timestamps are RFC 3339 with microseconds, so the order of two clusters' intervals can be
checked from the status alone.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from federation.controllers.rollouts.changes import ClusterPlan, strongest
from federation.controllers.rollouts.load import Refusal
from federation.hub import status as conditions_
from federation.rollouts.diff import Action

JSON = dict[str, Any]
PENDING, UPDATING, DONE, FAILED = "Pending", "Updating", "Done", "Failed"
ROLLING, COMPLETE, PHASE_FAILED, REFUSED = "Rolling", "Complete", "Failed", "Refused"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def stamp(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime(TIME_FORMAT)


def parse_stamp(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    for layout in (TIME_FORMAT, "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.datetime.strptime(text, layout).replace(tzinfo=datetime.UTC)
        except ValueError:
            continue
    return None


@dataclasses.dataclass(frozen=True)
class WorkloadVersion:
    kind: str
    name: str
    config_version: str


@dataclasses.dataclass(frozen=True)
class ClusterState:
    name: str
    state: str = PENDING
    action: str = ""
    released_version: str | None = None
    restart_version: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    message: str = ""
    workloads: tuple[WorkloadVersion, ...] = ()

    def to_json(self) -> JSON:
        body: JSON = {"name": self.name, "state": self.state, "action": self.action}
        for key, value in (("releasedVersion", self.released_version),
                           ("restartVersion", self.restart_version),
                           ("startedAt", self.started_at), ("finishedAt", self.finished_at)):
            if value:
                body[key] = value
        if self.message:
            body["message"] = self.message
        body["workloads"] = [{"kind": w.kind, "name": w.name, "configVersion": w.config_version}
                             for w in self.workloads]
        return body

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> ClusterState:
        def text(key: str) -> str | None:
            value = entry.get(key)
            return str(value) if value else None

        workloads = tuple(
            WorkloadVersion(str(w.get("kind")), str(w.get("name")), str(w.get("configVersion")))
            for w in entry.get("workloads") or [] if isinstance(w, Mapping))
        return cls(str(entry.get("name")), str(entry.get("state") or PENDING),
                   str(entry.get("action") or ""), text("releasedVersion"),
                   text("restartVersion"), text("startedAt"), text("finishedAt"),
                   str(entry.get("message") or ""), workloads)


@dataclasses.dataclass(frozen=True)
class Rollout:
    version: str | None
    generation: int
    action: str = Action.UNCHANGED.value
    changed: tuple[str, ...] = ()
    clusters: tuple[ClusterState, ...] = ()
    refusal: Refusal | None = None

    @property
    def phase(self) -> str:
        if self.refusal is not None:
            return REFUSED
        if any(c.state == FAILED for c in self.clusters):
            return PHASE_FAILED
        if all(c.state == DONE for c in self.clusters):
            return COMPLETE
        return ROLLING

    def names(self, *states: str) -> list[str]:
        return [c.name for c in self.clusters if c.state in states]

    def cluster(self, name: str) -> ClusterState | None:
        return next((c for c in self.clusters if c.name == name), None)

    def replace(self, updated: ClusterState) -> Rollout:
        clusters = tuple(updated if c.name == updated.name else c for c in self.clusters)
        return dataclasses.replace(self, clusters=clusters)


def from_status(status: Mapping[str, Any] | None) -> Rollout:
    """The rollout recorded in a policy's status (a refusal is not carried over: it is
    re-derived by every reconcile)."""
    status = status or {}
    clusters = tuple(ClusterState.from_json(c) for c in status.get("clusters") or []
                     if isinstance(c, Mapping) and c.get("name"))
    generation = status.get("observedGeneration")
    return Rollout(str(status["configVersion"]) if status.get("configVersion") else None,
                   generation if isinstance(generation, int) else 0,
                   str(status.get("action") or Action.UNCHANGED.value),
                   tuple(str(n) for n in status.get("changedParameters") or []), clusters)


def ordered(clusters: Sequence[str], cluster_order: Sequence[str]) -> list[str]:
    """``clusterOrder`` first (the names the placement has), then the rest by name."""
    placed = set(clusters)
    first = [name for name in dict.fromkeys(cluster_order) if name in placed]
    return first + sorted(placed - set(first))


def refused(version: str | None, generation: int, refusal: Refusal, previous: Rollout,
            changed: Sequence[str] = ()) -> Rollout:
    """Nothing released: the clusters keep exactly what they were released before."""
    return Rollout(version, generation, Action.REFUSED.value, tuple(sorted(set(changed))),
                   previous.clusters, refusal)


def begin(version: str, generation: int, plans: Mapping[str, ClusterPlan],
          order: Sequence[str], previous: Rollout) -> Rollout:
    """A new rollout of ``version`` over the clusters in ``order`` (``plans`` for each)."""
    changed = sorted({name for plan in plans.values() for name in plan.changed})
    refusal = next((plans[c].refusal for c in order if plans[c].refusal is not None), None)
    if refusal is not None:
        return refused(version, generation, refusal, previous, changed)
    clusters = tuple(_pending(name, plans[name], previous.cluster(name)) for name in order)
    action = strongest([plans[name].action for name in order])
    return Rollout(version, generation, action.value, tuple(changed), clusters)


def _pending(name: str, plan: ClusterPlan, before: ClusterState | None) -> ClusterState:
    return ClusterState(name, PENDING, plan.action.value,
                        before.released_version if before else None,
                        before.restart_version if before else None)


def reshape(rollout: Rollout, order: Sequence[str],
            new_plans: Mapping[str, ClusterPlan]) -> Rollout:
    """The rollout over the placement's clusters now: clusters no longer placed are
    dropped, new ones (planned in ``new_plans``) join as Pending, in order."""
    refusal = next((new_plans[c].refusal for c in order if c in new_plans
                    and new_plans[c].refusal is not None), None)
    if refusal is not None:
        extra = [n for plan in new_plans.values() for n in plan.changed]
        return refused(rollout.version, rollout.generation, refusal, rollout,
                       [*rollout.changed, *extra])
    clusters = []
    for name in order:
        known = rollout.cluster(name)
        clusters.append(known if known is not None else _pending(name, new_plans[name], None))
    changed = set(rollout.changed) | {n for p in new_plans.values() for n in p.changed}
    actions = [Action(c.action) for c in clusters if c.action in Action.__members__.values()]
    return dataclasses.replace(rollout, clusters=tuple(clusters), changed=tuple(sorted(changed)),
                               action=strongest(actions).value)


def start(rollout: Rollout, max_unavailable: int, now: datetime.datetime) -> Rollout:
    """Release the next clusters in order, at most ``max_unavailable`` Updating at once."""
    if rollout.refusal is not None or rollout.names(FAILED) or rollout.version is None:
        return rollout
    slots = max_unavailable - len(rollout.names(UPDATING))
    for cluster in rollout.clusters:
        if cluster.state != PENDING:
            continue
        if cluster.action == Action.UNCHANGED.value:
            rollout = rollout.replace(dataclasses.replace(
                cluster, state=DONE, released_version=rollout.version, started_at=stamp(now),
                finished_at=stamp(now), message="no parameter changed"))
            continue
        if slots <= 0:
            break  # strictly in order: a later cluster never overtakes a waiting one
        slots -= 1
        rollout = rollout.replace(dataclasses.replace(
            cluster, state=UPDATING, released_version=rollout.version, started_at=stamp(now),
            finished_at=None, message="released"))
    return rollout


def restart(cluster: ClusterState, version: str) -> ClusterState:
    """The new config is in the cluster: stamp its workloads (which restarts them). Never
    together with the release: the copy and the workloads are written by separate
    reconciles, and a pod that restarted first would read the old file."""
    return dataclasses.replace(cluster, restart_version=version,
                               message="config in place: restarting the workloads")


def finish(cluster: ClusterState, now: datetime.datetime,
           workloads: Sequence[WorkloadVersion], message: str) -> ClusterState:
    return dataclasses.replace(cluster, state=DONE, finished_at=stamp(now),
                               workloads=tuple(workloads), message=message)


def fail(cluster: ClusterState, now: datetime.datetime, message: str) -> ClusterState:
    return dataclasses.replace(cluster, state=FAILED, finished_at=stamp(now), message=message)


def waiting(cluster: ClusterState, message: str) -> ClusterState:
    return dataclasses.replace(cluster, message=message)


def overdue(cluster: ClusterState, now: datetime.datetime, deadline_seconds: int) -> bool:
    started = parse_stamp(cluster.started_at)
    return started is not None and (now - started).total_seconds() > deadline_seconds


def seconds_left(cluster: ClusterState, now: datetime.datetime, deadline_seconds: int) -> float:
    started = parse_stamp(cluster.started_at)
    if started is None:
        return float(deadline_seconds)
    return deadline_seconds - (now - started).total_seconds()


# -- the status ---------------------------------------------------------------------------

def conditions(rollout: Rollout, previous: Sequence[Mapping[str, Any]],
               now: datetime.datetime) -> list[JSON]:
    phase = rollout.phase
    accepted = (True, "Accepted", "the policy and its constraints are valid") \
        if rollout.refusal is None else (False, rollout.refusal.reason, rollout.refusal.message)
    failed_cluster = next((c for c in rollout.clusters if c.state == FAILED), None)
    progressing = {
        ROLLING: (True, "Rolling", _progress_message(rollout)),
        COMPLETE: (False, "Complete", f"config version {rollout.version} runs in every "
                                      "cluster"),
        PHASE_FAILED: (False, "RolloutStopped", "the rollout stopped: a cluster failed"),
        REFUSED: (False, "Refused", "nothing is rolled: the change is refused"),
    }[phase]
    failed = (True, "ClusterFailed", f"cluster {failed_cluster.name}: {failed_cluster.message}"
              f"; done: {_listed(rollout.names(DONE))}; pending: "
              f"{_listed(rollout.names(PENDING, UPDATING, FAILED))}") \
        if failed_cluster is not None else (False, "NoFailure", "")
    return [condition(kind, *values, previous, now) for kind, values in
            (("Accepted", accepted), ("Progressing", progressing), ("Failed", failed))]


def _progress_message(rollout: Rollout) -> str:
    updating = rollout.names(UPDATING)
    return (f"updating {_listed(updating)}; done {len(rollout.names(DONE))} of "
            f"{len(rollout.clusters)}")


def _listed(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "none"


def condition(kind: str, ok: bool, reason: str, message: str,
              previous: Sequence[Mapping[str, Any]], now: datetime.datetime) -> JSON:
    """A condition whose lastTransitionTime moves only when its status changes (at the
    controller's clock)."""
    return conditions_.condition(kind, ok, reason, message, previous, at=now)


def to_status(rollout: Rollout, previous: Mapping[str, Any] | None,
              now: datetime.datetime) -> JSON:
    previous = previous or {}
    status: JSON = {
        "observedGeneration": rollout.generation,
        "configVersion": rollout.version,
        "action": rollout.action,
        "phase": rollout.phase,
        "changedParameters": list(rollout.changed),
        "done": rollout.names(DONE) if rollout.refusal is None else [],
        "pending": rollout.names(PENDING, UPDATING, FAILED) if rollout.refusal is None else [],
        "conditions": conditions(rollout, previous.get("conditions") or [], now),
        "clusters": [c.to_json() for c in rollout.clusters],
    }
    return status


def same(current: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    """Equal apart from condition timestamps: no write needed."""
    def strip(status: Mapping[str, Any] | None) -> JSON:
        body = {k: v for k, v in (status or {}).items() if v is not None}
        body["conditions"] = [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                              for c in body.get("conditions") or []]
        return body
    return strip(current) == strip(wanted)


def patch(current: Mapping[str, Any] | None, wanted: JSON) -> JSON:
    """A merge patch of ``/status`` making it ``wanted``: top-level keys we no longer set
    are nulled (lists are replaced whole by a merge patch)."""
    body = dict(wanted)
    for key in (current or {}):
        body.setdefault(key, None)
    return {"status": body}
