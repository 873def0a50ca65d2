"""The workflow state machine: (state, observations, clock) -> (new state, intended actions).

Steps run one after another (KubeVela's StepByStep mode). Each has a phase: ``pending``,
``running``, ``suspended``, ``succeeded``, ``failed`` or ``skipped`` (a step after a
failure, unless it says ``if: always``), with the times it first and last ran and
finished.

- **deploy** rolls its targets (clusters, in the topology's order) ``parallelism`` at a
  time: a cluster is *started* (the controller puts the revision there) and counts as
  done once it is observed healthy (for the health policy's window); the next cluster
  starts only when fewer than ``parallelism`` are in flight. A cluster observed failed, or
  the step's ``timeout`` passing, fails the step; with ``rollbackOnFailure`` the step then
  asks for the clusters it started to go back (:class:`Rollback`).
- **suspend** / **approve** wait for a resume (``fedctl app resume``) or the optional
  ``duration``; **notification** asks for a message to be sent and succeeds.

Nothing here reads a clock or writes: the controller passes ``now`` and what it observed,
applies the actions and stores the state (in the Application's ``status.workflow``). The
controller derives what each cluster must hold from :func:`assignments`, so a restart
resumes exactly where the stored state says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal

JSON = dict[str, Any]
Phase = Literal["pending", "running", "suspended", "succeeded", "failed", "skipped"]
HealthState = Literal["healthy", "progressing", "failed"]
FINISHED = ("succeeded", "failed", "skipped")


DEPLOYING = ("deploy", "apply-component", "apply-object", "apply-deployment",
             "apply-application", "apply-remaining", "deploy2runtime")
"""Step types that put a revision's objects on clusters and wait for them to be healthy
(``apply-component``: one component to one cluster, the same machine)."""


@dataclasses.dataclass(frozen=True)
class StepSpec:
    """One step as the state machine needs it (targets resolved by the controller)."""

    name: str
    type: str
    targets: tuple[str, ...] = ()
    parallelism: int = 5
    timeout: float | None = None
    always: bool = False
    duration: float | None = None
    message: str = ""
    rollback_on_failure: bool = False


@dataclasses.dataclass(frozen=True)
class StepState:
    name: str
    type: str
    phase: Phase = "pending"
    reason: str = ""
    message: str = ""
    first_execute: float | None = None
    last_execute: float | None = None
    finished: float | None = None
    started: tuple[str, ...] = ()
    """deploy: clusters the revision was put on, in order."""
    done: tuple[str, ...] = ()
    """deploy: clusters observed healthy (for the window)."""
    healthy_since: tuple[tuple[str, float], ...] = ()


@dataclasses.dataclass(frozen=True)
class State:
    revision: int
    steps: tuple[StepState, ...]
    phase: Literal["running", "suspended", "succeeded", "failed"] = "running"
    start: float = 0.0
    end: float | None = None

    @property
    def current(self) -> StepState | None:
        return next((s for s in self.steps if s.phase not in FINISHED), None)


@dataclasses.dataclass(frozen=True)
class Observations:
    health: Mapping[tuple[str, str], tuple[HealthState, str]] = dataclasses.field(
        default_factory=dict)
    """(step, cluster) -> health of what that step put there, with a message."""
    resume: bool = False
    """A resume was asked for since the last evaluation."""
    window: float = 0.0
    probe_interval: float = 5.0


@dataclasses.dataclass(frozen=True)
class Deploy:
    step: str
    clusters: tuple[str, ...]
    """Clusters newly started by this evaluation."""


@dataclasses.dataclass(frozen=True)
class Notify:
    step: str
    message: str


@dataclasses.dataclass(frozen=True)
class Rollback:
    step: str
    clusters: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Wait:
    seconds: float


Action = Deploy | Notify | Rollback | Wait


def initial(revision: int, specs: Sequence[StepSpec], now: float) -> State:
    return State(revision, tuple(StepState(s.name, s.type) for s in specs), "running", now)


def evaluate(state: State, specs: Sequence[StepSpec], obs: Observations, now: float
             ) -> tuple[State, list[Action]]:
    """One evaluation: advance every step that can advance now; say what to do."""
    if [s.name for s in specs] != [s.name for s in state.steps]:
        raise ValueError("the state's steps are not the workflow's")
    steps = list(state.steps)
    actions: list[Action] = []
    resume = obs.resume
    for index, spec in enumerate(specs):
        step = steps[index]
        if step.phase in FINISHED:
            continue
        failed_before = any(s.phase == "failed" for s in steps[:index])
        if failed_before and not spec.always:
            steps[index] = dataclasses.replace(step, phase="skipped", finished=now,
                                               reason="Skipped",
                                               message="an earlier step failed")
            continue
        before = step
        if step.first_execute is None:
            step = dataclasses.replace(step, first_execute=now, last_execute=now,
                                       phase="running")
        step, more, resume = _advance(step, spec, obs, now, resume)
        if step != before:
            # lastExecuteTime moves when the step did something, not on every look: an
            # unchanged step costs no status write
            step = dataclasses.replace(step, last_execute=now)
        steps[index] = step
        actions.extend(more)
        if step.phase not in FINISHED:
            break
    new = dataclasses.replace(state, steps=tuple(steps))
    current = new.current
    if current is None:
        failed = any(s.phase == "failed" for s in steps)
        end = state.end if state.end is not None else now
        return dataclasses.replace(new, phase="failed" if failed else "succeeded",
                                   end=end), actions
    phase: Literal["running", "suspended"] = \
        "suspended" if current.phase == "suspended" else "running"
    return dataclasses.replace(new, phase=phase, end=None), actions


def _timed_out(step: StepState, spec: StepSpec, now: float) -> bool:
    return spec.timeout is not None and step.first_execute is not None and \
        now - step.first_execute >= spec.timeout


def _fail(step: StepState, spec: StepSpec, now: float, reason: str, message: str
          ) -> tuple[StepState, list[Action]]:
    failed = dataclasses.replace(step, phase="failed", reason=reason, message=message,
                                 finished=now)
    actions: list[Action] = []
    if spec.rollback_on_failure and step.started:
        actions.append(Rollback(spec.name, step.started))
    return failed, actions


def _advance(step: StepState, spec: StepSpec, obs: Observations, now: float, resume: bool
             ) -> tuple[StepState, list[Action], bool]:
    if spec.type in DEPLOYING:
        new, actions = _deploy(step, spec, obs, now)
        return new, actions, resume
    if spec.type in ("suspend", "approve"):
        if resume:
            return dataclasses.replace(step, phase="succeeded", finished=now,
                                       reason="Resumed", message=""), [], False
        if spec.duration is not None and step.first_execute is not None:
            left = step.first_execute + spec.duration - now
            if left <= 0:
                return dataclasses.replace(step, phase="succeeded", finished=now,
                                           reason="DurationElapsed", message=""), [], resume
            waiting: StepState = dataclasses.replace(
                step, phase="suspended", reason="Suspended",
                message=spec.message or f"resumes in {left:.0f}s or at fedctl app resume")
            return waiting, [Wait(left)], resume
        if _timed_out(step, spec, now):
            new, actions = _fail(step, spec, now, "Timeout",
                                 f"not resumed within {spec.timeout:.0f}s")
            return new, actions, resume
        message = spec.message or "waiting for fedctl app resume"
        return dataclasses.replace(step, phase="suspended", reason="Suspended",
                                   message=message), [], resume
    if spec.type == "notification":
        return dataclasses.replace(step, phase="succeeded", finished=now, reason="Sent"), \
            [Notify(spec.name, spec.message)], resume
    raise ValueError(f"unknown step type {spec.type!r}")


def _deploy(step: StepState, spec: StepSpec, obs: Observations, now: float
            ) -> tuple[StepState, list[Action]]:
    since = dict(step.healthy_since)
    done = list(step.done)
    for cluster in step.started:
        if cluster in done:
            continue
        state, message = obs.health.get((spec.name, cluster), ("progressing", ""))
        if state == "failed":
            return _fail(dataclasses.replace(step, healthy_since=tuple(sorted(since.items()))),
                         spec, now, "Unhealthy", f"{cluster}: {message or 'unhealthy'}")
        if state == "healthy":
            since.setdefault(cluster, now)
            if now - since[cluster] >= obs.window:
                done.append(cluster)
        else:
            since.pop(cluster, None)
    started = list(step.started)
    new_clusters: list[str] = []
    for cluster in spec.targets:
        in_flight = len([c for c in started if c not in done])
        if in_flight >= spec.parallelism:
            break
        if cluster not in started:
            started.append(cluster)
            new_clusters.append(cluster)
    step = dataclasses.replace(step, started=tuple(started), done=tuple(done),
                               healthy_since=tuple(sorted(since.items())))
    if not spec.targets:  # e.g. its topologies say allowEmpty and select no member
        return dataclasses.replace(step, phase="succeeded", finished=now,
                                   reason="NothingToDeploy",
                                   message="no cluster to deploy to; nothing placed"), []
    if set(done) >= set(spec.targets):
        return dataclasses.replace(step, phase="succeeded", finished=now, reason="Healthy",
                                   message=f"healthy in {len(done)} cluster(s)"), []
    waiting = [c for c in started if c not in done]
    if _timed_out(step, spec, now):
        return _fail(step, spec, now, "Timeout",
                     f"not healthy within {spec.timeout:.0f}s: {', '.join(waiting)}")
    actions: list[Action] = []
    if new_clusters:
        actions.append(Deploy(spec.name, tuple(new_clusters)))
    wait = obs.probe_interval
    if spec.timeout is not None and step.first_execute is not None:
        wait = min(wait, max(step.first_execute + spec.timeout - now, 0.01))
    actions.append(Wait(wait))
    running: StepState = dataclasses.replace(
        step, phase="running", reason="Deploying",
        message=f"waiting for {', '.join(waiting)} ({len(done)}/{len(spec.targets)} healthy)")
    return running, actions


def assignments(state: State) -> dict[str, tuple[str, ...]]:
    """Per deploy step, the clusters the revision has been put on (what they must hold)."""
    return {s.name: s.started for s in state.steps if s.type in DEPLOYING and s.started}


# -- status (the Application's status.workflow) ---------------------------------------------


def to_status(state: State, clock_text: Any) -> JSON:
    """``status.workflow``: KubeVela's field names; times through ``clock_text``."""
    def t(value: float | None) -> str | None:
        return clock_text(value) if value is not None else None

    current = state.current
    return {
        "appRevision": state.revision, "phase": state.phase,
        "suspend": state.phase == "suspended", "finished": state.end is not None,
        "startTime": t(state.start), "endTime": t(state.end),
        "currentStep": current.name if current else "",
        "steps": [{"name": s.name, "type": s.type, "phase": s.phase, "reason": s.reason,
                   "message": s.message, "firstExecuteTime": t(s.first_execute),
                   "lastExecuteTime": t(s.last_execute), "finishedTime": t(s.finished),
                   "clusters": list(s.started), "healthyClusters": list(s.done)}
                  for s in state.steps],
        "_state": _raw(state),
    }


def _raw(state: State) -> JSON:
    return {"revision": state.revision, "phase": state.phase, "start": state.start,
            "end": state.end, "steps": [dataclasses.asdict(s) for s in state.steps]}


def from_status(workflow: Mapping[str, Any] | None) -> State | None:
    """The state stored by :func:`to_status` (None when there is none or it is unreadable)."""
    raw = (workflow or {}).get("_state")
    if not isinstance(raw, dict):
        return None
    try:
        steps = tuple(StepState(**{**s, "started": tuple(s.get("started") or ()),
                                   "done": tuple(s.get("done") or ()),
                                   "healthy_since": tuple((str(p[0]), float(p[1])) for p in
                                                          s.get("healthy_since") or ())})
                      for s in raw["steps"])
        # a merge patch drops null fields: an absent "end" (or step time) is None
        end = raw.get("end")
        return State(int(raw["revision"]), steps, raw["phase"], float(raw["start"]),
                     float(end) if end is not None else None)
    except (KeyError, TypeError, ValueError):
        return None
