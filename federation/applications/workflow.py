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
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from federation.applications import expressions, http_steps
from federation.applications.expressions import ExpressionError
from federation.applications.render import COMPONENT_LABEL

JSON = dict[str, Any]
Phase = Literal["pending", "running", "suspended", "succeeded", "failed", "skipped"]
HealthState = Literal["healthy", "progressing", "failed"]
FINISHED = ("succeeded", "failed", "skipped")


DEPLOYING = ("deploy", "apply-component", "apply-object", "apply-deployment",
             "apply-application", "apply-remaining", "deploy2runtime", "export2config",
             "export2secret", "deploy2env", "export-data", "apply-terraform-config",
             "apply-terraform-provider", "deploy-cloud-resource", "share-cloud-resource",
             "export-service", "vela-cli", "build-push-image")
"""Step types that put a revision's objects on clusters and wait for them to be healthy
(``apply-component``: one component to one cluster, the same machine)."""


TEMPLATE_ROOTS = {"collect-service-endpoints": ("collect", "outputs", "value"),
                  "depends-on-app": ("dependsOn",), "request": ("req", "response"),
                  "webhook": ("webhook", "data"), "check-metrics": ("check",)}
"""Step types whose outputs name the fields of their KubeVela template (``value.url``)
rather than ``output``: the controller observes them under those names."""


@dataclasses.dataclass(frozen=True)
class DataInput:
    """An input: output ``source`` (``from``, maybe ``out.field``), at ``key``."""

    source: str
    key: str = ""


@dataclasses.dataclass(frozen=True)
class DataOutput:
    name: str
    value_from: str


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
    group: str = ""
    """The step group this sub-step belongs to ("" for a step of the workflow)."""
    dag: bool = False
    """Its level runs as a DAG: it does not wait for the step before it."""
    depends_on: tuple[str, ...] = ()
    """Steps it waits for (``dependsOn``); it is skipped unless they all succeeded."""
    condition: str = ""
    """An ``if`` expression (other than ``always``): skipped when it is false."""
    inputs: tuple[DataInput, ...] = ()
    outputs: tuple[DataOutput, ...] = ()
    properties: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Its properties as run (inputs written in): ``parameter`` in its expressions."""
    unrendered: bool = False
    """Its inputs were not known when compiled: it runs once compiled with them."""
    rendered_inputs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The input values it was compiled with (``from`` -> value): it runs only with the
    values the state holds (a compile from a stale state renders it again)."""
    failure: str = ""
    """Why compiling it with its inputs failed: it fails when it would start."""
    approval: bool = False
    """A deploy step's ``auto: false``: it waits for a resume before it deploys anything
    (KubeVela's deploy suspends first, "Waiting approval to the deploy step")."""
    component_deps: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    """deploy: component -> the components it waits for in each cluster (``dependsOn``);
    empty: a started cluster gets every component at once."""
    components: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    """deploy with ``component_deps``: cluster -> the components placed there."""
    restart: tuple[float | None, float | None] = (None, None)
    """restart-workflow: (``at`` as epoch seconds, or ``after`` in seconds; ``every``)."""
    restart_relative: bool = False
    """restart-workflow: the first of :attr:`restart` is ``after`` (from the step's run)."""
    metrics: http_steps.MetricsCheck | None = None
    """check-metrics: its condition and durations (the query is the controller's call)."""
    template: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Fields of its KubeVela template the compile knows, which its outputs' ``valueFrom``
    read (generate-jdbc-connection: ``env``)."""


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
    group: str = ""
    """The step group of a sub-step."""
    waiting_for: tuple[str, ...] = ()
    """A pending step: the steps and inputs it waits for (``step NAME``, ``input NAME``)."""
    released: tuple[tuple[str, str], ...] = ()
    """deploy with components ordered: (cluster, component) put there so far."""
    calls: int = 0
    """HTTP steps: the calls asked for so far; the controller makes call number ``calls``
    (once) and observes its answer."""
    due: float | None = None
    """HTTP steps: when the next call is asked for (a retry, the next query)."""
    held_since: float | None = None
    """check-metrics: when the condition was first seen holding, in the current run."""
    failing_since: float | None = None
    """check-metrics: when it was first seen failing, in the current run."""


@dataclasses.dataclass(frozen=True)
class State:
    revision: int
    steps: tuple[StepState, ...]
    phase: Literal["running", "suspended", "succeeded", "failed"] = "running"
    start: float = 0.0
    end: float | None = None
    values: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Output name -> its value, set when the producing step ended (None: no value)."""
    restart_at: float | None = None
    """A ``restart-workflow`` step's ``at``/``after``: the workflow restarts then, once it
    has ended (KubeVela's ``status.workflowRestartScheduledAt``)."""
    restart_every: float | None = None
    """A ``restart-workflow`` step's ``every``: it restarts that long after it ended."""

    def restart_due(self) -> float | None:
        """When this ended run restarts (KubeVela: only a time after its end counts)."""
        if self.end is None:
            return None
        due = self.end + self.restart_every if self.restart_every is not None \
            else self.restart_at
        return due if due is not None and due > self.end else None

    @property
    def current(self) -> StepState | None:
        return next((s for s in self.steps if s.phase not in FINISHED and not s.group), None)


Evaluator = Callable[[str, Mapping[str, Any]], Any]
"""An expression (``if``, ``valueFrom``) over a scope -> its value; raises
:class:`ExpressionError` (one line) when it has none."""


@dataclasses.dataclass(frozen=True)
class Observations:
    health: Mapping[tuple[str, str], tuple[HealthState, str]] = dataclasses.field(
        default_factory=dict)
    """(step, cluster) -> health of what that step put there, with a message."""
    resume: bool = False
    """A resume was asked for since the last evaluation."""
    window: float = 0.0
    probe_interval: float = 5.0
    outputs: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """step -> the object it applied, as read back (``output`` in its ``valueFrom``)."""
    context: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """KubeVela's ``context`` in expressions (the Application's name, namespace...)."""
    component_health: Mapping[tuple[str, str, str], tuple[HealthState, str]] = \
        dataclasses.field(default_factory=dict)
    """(step, cluster, component) -> health of that component there (ordered deploys)."""
    evaluator: Evaluator = expressions.evaluate
    """KubeVela's CUE (:mod:`.expressions`); tests may pass another."""
    stores: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    """config-store step -> (outcome, message) of its decision over the cached store
    (:func:`federation.applications.config_store.decide`: done, write, failed, waiting)."""


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


@dataclasses.dataclass(frozen=True)
class ScheduleRestart:
    """A ``restart-workflow`` step ran: the state records it (not for the controller)."""

    at: float | None
    every: float | None


Action = Deploy | Notify | Rollback | Wait | ScheduleRestart


def initial(revision: int, specs: Sequence[StepSpec], now: float) -> State:
    return State(revision, tuple(StepState(s.name, s.type, group=s.group) for s in specs),
                 "running", now)


def evaluate(state: State, specs: Sequence[StepSpec], obs: Observations, now: float
             ) -> tuple[State, list[Action]]:
    """One evaluation: advance every step that can advance now; say what to do."""
    if [s.name for s in specs] != [s.name for s in state.steps]:
        raise ValueError("the state's steps are not the workflow's")
    run = _Run(state, specs, obs, now)
    run.all()
    return run.result()


class _Run:
    """One evaluation in progress: passes over the steps until none changes (a step that
    ends may let others start at once); each step advances at most once."""

    def __init__(self, state: State, specs: Sequence[StepSpec], obs: Observations,
                 now: float) -> None:
        self.state = state
        self.specs = {s.name: s for s in specs}
        self.order = [s.name for s in specs]
        self.steps = {s.name: s for s in state.steps}
        self.obs = obs
        self.now = now
        self.values = dict(state.values)
        self.actions: list[Action] = []
        self.advanced: set[str] = set()
        suspended = [s.name for s in state.steps if s.phase == "suspended"]
        # a resume releases every suspended step; with none, the first to suspend now
        self.resume_all = obs.resume and bool(suspended)
        self.resume_one = obs.resume and not suspended
        self.restart = (state.restart_at, state.restart_every)

    def all(self) -> None:
        for _ in range(2 * len(self.order) + 2):
            if not any([self.visit(self.specs[name]) for name in self.order]):
                return

    def set(self, name: str, step: StepState) -> bool:
        if step == self.steps[name]:
            return False
        # lastExecuteTime moves when the step did something, not on every look: an
        # unchanged step costs no status write
        self.steps[name] = dataclasses.replace(step, last_execute=self.now) \
            if step.first_execute is not None else step
        return True

    def visit(self, spec: StepSpec) -> bool:
        step = self.steps[spec.name]
        if step.phase in FINISHED:
            return False
        if spec.type == "step-group" and step.first_execute is not None:
            return self.set(spec.name, self._group(step, spec))
        if spec.name in self.advanced:
            return False
        parent = self.steps.get(spec.group)
        if parent is not None and parent.phase == "failed" and parent.reason == "Timeout":
            return self._end(spec, *_fail(step, spec, self.now, "Timeout",
                                           "its step group timed out"))
        waits = self._waits(spec)
        if waits is not None:
            if not waits:
                return False  # the step before it at its level has not ended yet
            return self.set(spec.name, dataclasses.replace(
                step, phase="pending", reason="", waiting_for=waits,
                message=_waiting(waits)))
        skip = self._skip(spec)
        if skip is not None:
            return self._end(spec, dataclasses.replace(
                step, phase="skipped", finished=self.now, reason="Skipped", message=skip,
                waiting_for=()), [])
        if spec.inputs and (spec.unrendered or dict(spec.rendered_inputs) != self._inputs(
                spec)):
            # its inputs are known now: the next compile renders it with them
            self.actions.append(Wait(0.0))
            return self.set(spec.name, dataclasses.replace(
                step, phase="pending", waiting_for=(), message="rendering with its inputs"))
        self.advanced.add(spec.name)
        if step.first_execute is None:
            step = dataclasses.replace(step, first_execute=self.now, last_execute=self.now,
                                       phase="running", waiting_for=(), message="")
        if spec.failure:
            return self._end(spec, *_fail(step, spec, self.now, "Rendering", spec.failure))
        if spec.type == "step-group":
            return self.set(spec.name, self._group(step, spec))
        resume = self.resume_all or self.resume_one
        step, more, left = _advance(step, spec, self.obs, self.now, resume)
        if resume and not left and not self.resume_all:
            self.resume_one = False
        return self._end(spec, step, more)

    def _end(self, spec: StepSpec, step: StepState, actions: list[Action]) -> bool:
        """Record the step and its actions; a step that ended sets its outputs."""
        for action in actions:
            if isinstance(action, ScheduleRestart):
                self.restart = (action.at, action.every)
        self.actions.extend(a for a in actions if not isinstance(a, ScheduleRestart))
        if step.phase in FINISHED:
            step = self._outputs(spec, step)
        return self.set(spec.name, step)

    def _waits(self, spec: StepSpec) -> tuple[str, ...] | None:
        """What the step waits for: None when nothing; ``()`` for its group to start or,
        in StepByStep mode, the step before it to end (said by those steps); else its
        ``dependsOn`` and inputs not there yet (``step NAME``, ``input NAME``)."""
        if spec.group and self.steps[spec.group].first_execute is None:
            return None if self.steps[spec.group].phase == "skipped" else ()
        before = self._previous(spec)
        if before is not None and self.steps[before].phase not in FINISHED:
            return ()
        waits = [f"step {name}" for name in spec.depends_on
                 if self.steps[name].phase not in FINISHED]
        for input_ in spec.inputs:
            name = input_.source.split(".", 1)[0]
            if name not in self.values and f"input {name}" not in waits:
                waits.append(f"input {name}")
        return tuple(waits) or None

    def _previous(self, spec: StepSpec) -> str | None:
        """The step before this one at its level (StepByStep mode), if any."""
        if spec.dag:
            return None
        level = [n for n in self.order if self.specs[n].group == spec.group]
        index = level.index(spec.name)
        return level[index - 1] if index else None

    def _skip(self, spec: StepSpec) -> str | None:
        """Why the step is skipped (KubeVela's pre-check), or None to run it."""
        if spec.group and self.steps[spec.group].phase == "skipped":
            return "its step group was skipped"
        if spec.always:
            return None
        if spec.condition:
            return self._condition(spec)
        if spec.depends_on:
            failed = [n for n in self._all_depends(spec) if self.steps[n].phase != "succeeded"]
            return f"step {failed[0]} did not succeed" if failed else None
        if spec.dag:
            return None
        level = [n for n in self.order if self.specs[n].group == spec.group]
        earlier = level[:level.index(spec.name)]
        if any(self.steps[n].phase == "failed" for n in earlier):
            return "an earlier step failed"
        return None

    def _all_depends(self, spec: StepSpec) -> list[str]:
        """``dependsOn``, transitively (KubeVela skips when any of them did not succeed)."""
        found: list[str] = []
        todo = list(spec.depends_on)
        while todo:
            name = todo.pop(0)
            if name not in found:
                found.append(name)
                todo.extend(self.specs[name].depends_on)
        return found

    def _condition(self, spec: StepSpec) -> str | None:
        scope = {"status": self._status_scope(), "inputs": self._inputs(spec),
                 "context": self._context(spec), "parameter": dict(spec.properties)}
        try:
            value = self.obs.evaluator(spec.condition, scope)
        except ExpressionError as exc:
            return f"if: {exc}"
        if not isinstance(value, bool):
            return "if: the expression is not a boolean"
        return None if value else "if: false"

    def _status_scope(self) -> dict[str, Any]:
        """KubeVela's ``status.<step>``: phase, reason, message and the booleans."""
        return {s.name: {"phase": s.phase, "reason": s.reason, "message": s.message,
                         "succeeded": s.phase == "succeeded", "failed": s.phase == "failed",
                         "skipped": s.phase == "skipped", "timeout": s.reason == "Timeout"}
                for s in self.steps.values()}

    def _inputs(self, spec: StepSpec) -> dict[str, Any]:
        return {i.source: input_value(self.values, i.source) for i in spec.inputs}

    def _context(self, spec: StepSpec) -> dict[str, Any]:
        return {**self.obs.context, "stepName": spec.name}

    def _outputs(self, spec: StepSpec, step: StepState) -> StepState:
        """Each output's ``valueFrom`` over the step's ``context``, ``parameter`` and (for
        an apply-component step) ``output``; a skipped step's outputs have no value. An
        output that cannot be evaluated has none, and fails the step if it succeeded
        (KubeVela's reason ``Output``; a failed step keeps its own reason)."""
        scope: dict[str, Any] = {"context": self._context(spec),
                                 "parameter": dict(spec.properties)}
        if spec.name in self.obs.outputs and spec.type in TEMPLATE_ROOTS:
            scope.update({root: self.obs.outputs[spec.name].get(root)
                          for root in TEMPLATE_ROOTS[spec.type]})
        elif spec.name in self.obs.outputs:
            scope["output"] = dict(self.obs.outputs[spec.name])
        scope.update(spec.template)
        for output in spec.outputs:
            self.values[output.name] = None
            if step.phase == "skipped":
                continue
            try:
                self.values[output.name] = bounded(self.obs.evaluator(output.value_from,
                                                                      scope))
            except ExpressionError as exc:
                if step.phase == "succeeded":
                    step = dataclasses.replace(step, phase="failed", reason="Output",
                                               message=f"output {output.name}: {exc}")
        return step

    def _group(self, step: StepState, spec: StepSpec) -> StepState:
        """A started step group: its phase follows its sub-steps (KubeVela's
        getStepGroupStatus); its own timeout fails it and its unfinished sub-steps."""
        subs = [self.steps[n] for n in self.order if self.specs[n].group == spec.name]
        phases = {s.phase for s in subs}
        if _timed_out(step, spec, self.now) and not phases <= set(FINISHED):
            return dataclasses.replace(step, phase="failed", reason="Timeout",
                                       finished=self.now,
                                       message=f"not done within {spec.timeout:.0f}s")
        if "suspended" in phases:
            return dataclasses.replace(step, phase="suspended", reason="Suspended")
        if not phases <= set(FINISHED):
            waiting = [s.name for s in subs if s.phase not in FINISHED]
            return dataclasses.replace(step, phase="running", reason="",
                                       message=f"waiting for {', '.join(waiting)}")
        failed = next((s for s in subs if s.phase == "failed"), None)
        if failed is not None:
            end: StepState = dataclasses.replace(
                step, phase="failed", reason=failed.reason, finished=self.now,
                message=f"sub-step {failed.name} failed")
        elif subs and phases == {"skipped"}:
            end = dataclasses.replace(step, phase="skipped", reason="Skipped",
                                      finished=self.now, message="")
        else:
            end = dataclasses.replace(step, phase="succeeded", reason="", message="",
                                      finished=self.now)
        return self._outputs(spec, end)

    def result(self) -> tuple[State, list[Action]]:
        steps = tuple(self.steps[name] for name in self.order)
        new = dataclasses.replace(self.state, steps=steps, values=self.values,
                                  restart_at=self.restart[0], restart_every=self.restart[1])
        if all(s.phase in FINISHED for s in steps):
            failed = any(s.phase == "failed" for s in steps)
            end = self.state.end if self.state.end is not None else self.now
            return dataclasses.replace(new, phase="failed" if failed else "succeeded",
                                       end=end), self.actions
        phase: Literal["running", "suspended"] = \
            "suspended" if any(s.phase == "suspended" for s in steps) else "running"
        return dataclasses.replace(new, phase=phase, end=None), self.actions


MAX_VALUE = 4096
"""Characters of one output value as JSON: it is kept in the Application's status."""


def bounded(value: Any) -> Any:
    """An output's value, JSON data of at most :data:`MAX_VALUE` characters."""
    try:
        text = json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        raise ExpressionError("the value is not JSON data") from None
    if len(text) > MAX_VALUE:
        raise ExpressionError(f"the value takes {len(text)} characters as JSON; at most "
                              f"{MAX_VALUE} are kept")
    return value


def input_value(values: Mapping[str, Any], source: str) -> Any:
    """``out`` or ``out.field.sub`` of the values (None where a field is missing)."""
    name, *path = source.split(".")
    value = values.get(name)
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _waiting(waits: Sequence[str]) -> str:
    """KubeVela's words: ``Pending on DependsOn: X`` / ``Pending on Input: X``."""
    first = waits[0]
    kind, _, name = first.partition(" ")
    return f"Pending on {'Input' if kind == 'input' else 'DependsOn'}: {name}"


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
        if spec.approval and not step.started and step.reason != "Approved":
            if not resume:
                return _awaiting_approval(step, spec, now), [], resume
            step, resume = dataclasses.replace(step, reason="Approved"), False
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
            until = _utc(step.first_execute + spec.duration)
            waiting: StepState = dataclasses.replace(
                step, phase="suspended", reason="Suspended",
                message=spec.message or f"resumes at {until} or at fedctl app resume")
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
    if spec.type in STORE_STEPS:
        new, actions = _store(step, spec, obs, now)
        return new, actions, resume
    own = _STEPS.get(spec.type)
    if own is not None:
        new, actions = own(step, spec, obs, now)
        return new, actions, resume
    if spec.type == "read-object":
        if spec.name not in obs.outputs:  # not read yet: looked at again
            return dataclasses.replace(step, phase="running", reason="Reading",
                                       message="reading the object"), \
                [Wait(obs.probe_interval)], resume
        error = ((obs.outputs[spec.name].get("$returns") or {}).get("err") or "")
        return dataclasses.replace(step, phase="succeeded", finished=now, reason="Read",
                                   message=str(error)), [], resume
    if spec.type == "restart-workflow":
        at, every = spec.restart
        at = now + at if at is not None and spec.restart_relative else at
        what = f"every {every:.0f}s after it ends" if every is not None else \
            "at the scheduled time, once it has ended"
        return dataclasses.replace(step, phase="succeeded", finished=now, reason="Scheduled",
                                   message=f"the workflow restarts {what}"), \
            [ScheduleRestart(at, every)], resume
    raise ValueError(f"unknown step type {spec.type!r}")


STORE_STEPS = {"create-config": "Written", "read-config": "Read", "list-config": "Listed",
               "delete-config": "Deleted"}
"""The config-store steps and the reason of each once done."""


def _store(step: StepState, spec: StepSpec, obs: Observations, now: float
           ) -> tuple[StepState, list[Action]]:
    """A config-store step: done once the cached store shows what it asked for (a write
    is planned by the controller while it runs, and counts once read back); failed by its
    decision; otherwise it waits, within its timeout."""
    outcome, message = obs.stores.get(spec.name, ("waiting", "reading the config store"))
    if outcome == "done":
        if spec.type == "delete-config" and step.reason == "Writing":  # gone: our delete
            message = "config deleted"
        return dataclasses.replace(step, phase="succeeded", finished=now,
                                   reason=STORE_STEPS[spec.type], message=message), []
    if outcome == "failed":
        return _fail(step, spec, now, "Execute", message)
    if _timed_out(step, spec, now):
        return _fail(step, spec, now, "Timeout", f"not done within {spec.timeout:.0f}s: "
                     f"{message}")
    return dataclasses.replace(step, phase="running",
                               reason="Writing" if outcome == "write" else "Wait",
                               message=message), [Wait(obs.probe_interval)]


def _collecting(step: StepState, spec: StepSpec, obs: Observations, now: float
                ) -> tuple[StepState, list[Action]]:
    """KubeVela's ``builtin.#ConditionalWait``: the step waits until the Application's
    Services and Ingresses show an endpoint its filters keep (or its timeout)."""
    found = len(((obs.outputs.get(spec.name) or {}).get("outputs") or {}).get(
        "endpoints") or ())
    if found:
        return dataclasses.replace(step, phase="succeeded", finished=now, reason="Collected",
                                   message=f"{found} endpoint(s)"), []
    if _timed_out(step, spec, now):
        return _fail(step, spec, now, "Timeout", f"no endpoint within {spec.timeout:.0f}s")
    return dataclasses.replace(step, phase="running", reason="Wait",
                               message="waiting for an endpoint of the Application's "
                                       "Services and Ingresses"), [Wait(obs.probe_interval)]


def _generated(step: StepState, spec: StepSpec, obs: Observations, now: float
               ) -> tuple[StepState, list[Action]]:
    """generate-jdbc-connection: its ``env`` is known from its properties (references to
    the connection Secret, resolved by the kubelet): done at once, nothing read."""
    return dataclasses.replace(step, phase="succeeded", finished=now, reason="Generated",
                               message="env references the connection Secret's keys "
                                       "(secretKeyRef)"), []


def _depending(step: StepState, spec: StepSpec, obs: Observations, now: float
               ) -> tuple[StepState, list[Action]]:
    """KubeVela's ``depends-on-app``: the step waits until the Application it names is
    ``running`` (its ``status.status``), or its timeout. One that does not exist is waited
    for too, while the controller creates it from the ConfigMap of its name, as KubeVela's
    step does (:mod:`federation.applications.depends_on_app`)."""
    returns = ((obs.outputs.get(spec.name) or {}).get("dependsOn") or {}).get("$returns") or {}
    phase = ((returns.get("value") or {}).get("status") or {}).get("status")
    if phase == "running":
        return dataclasses.replace(step, phase="succeeded", finished=now, reason="Running",
                                   message=""), []
    if _timed_out(step, spec, now):
        return _fail(step, spec, now, "Timeout", f"not running within {spec.timeout:.0f}s")
    message = returns.get("err") or f"waiting for it to be running (it is {phase or 'new'})"
    return dataclasses.replace(step, phase="running", reason="Wait", message=str(message)), \
        [Wait(obs.probe_interval)]


def _message(step: StepState, spec: StepSpec, obs: Observations, now: float
             ) -> tuple[StepState, list[Action]]:
    """KubeVela's ``builtin.#Message``: the step's message in its status."""
    return dataclasses.replace(step, phase="succeeded", finished=now, reason="Message",
                               message=spec.message), []


def _cleaned(step: StepState, spec: StepSpec, obs: Observations, now: float
             ) -> tuple[StepState, list[Action]]:
    """clean-jobs: the controller takes them away (:func:`cleaning`)."""
    return dataclasses.replace(step, phase="succeeded", finished=now, reason="Cleaned",
                               message="this Application's Jobs and Pods it selects are "
                                       "deleted from where earlier steps put them"), []


def _calling(step: StepState, spec: StepSpec, obs: Observations, now: float
             ) -> tuple[StepState, list[Action]]:
    """webhook, request and check-metrics (:mod:`.http_steps`): the step asks the
    controller for call number :attr:`StepState.calls` and waits for its answer in
    ``obs.outputs`` (the reconcile never waits on the network; the answer requeues it)."""
    if step.calls == 0:
        return _ask(step), [Wait(obs.probe_interval)]
    answer = obs.outputs.get(spec.name)
    if _timed_out(step, spec, now):
        return _fail(step, spec, now, "Timeout", f"not done within {spec.timeout:.0f}s")
    if answer is None:
        return dataclasses.replace(step, phase="running", reason="Wait"), \
            [Wait(_until_timeout(step, spec, now, obs.probe_interval))]
    if spec.type == "check-metrics":
        return _checking(step, spec, answer, obs, now)
    error = answer.get("error")
    if error:
        if step.calls >= http_steps.REQUEST_CALLS:
            return _fail(step, spec, now, "FailedAfterRetries",
                         f"{error} ({step.calls} tries)")
        return _again(step, spec, now, http_steps.RETRY_SECONDS * step.calls,
                      f"{error}; trying again")
    status = int(answer.get("statusCode") or 0)
    if spec.type == "request" and status > 400:
        return _fail(step, spec, now, "Execute", f"the request failed: answered {status}")
    if answer.get("invalid"):
        return _fail(step, spec, now, "Execute", str(answer["invalid"]))
    return dataclasses.replace(step, phase="succeeded", finished=now, reason="Answered",
                               message=f"answered {status}", due=None), []


def _ask(step: StepState, message: str = "waiting for the answer") -> StepState:
    """The next call asked for (the controller makes it once the status records it); the
    message of the last answer stays until the next one comes."""
    return dataclasses.replace(step, phase="running", reason="Wait", calls=step.calls + 1,
                               due=None, message=message)


def _again(step: StepState, spec: StepSpec, now: float, wait: float, message: str
           ) -> tuple[StepState, list[Action]]:
    """Another call once ``wait`` has passed since the answer was first seen."""
    due = step.due if step.due is not None else now + wait
    if now >= due:
        retry = _until_timeout(step, spec, now, http_steps.RETRY_SECONDS)
        return _ask(step, message), [Wait(retry)]
    waiting = dataclasses.replace(step, phase="running", reason="Wait", message=message,
                                  due=due)
    return waiting, [Wait(_until_timeout(step, spec, now, due - now))]


def _until_timeout(step: StepState, spec: StepSpec, now: float, wait: float) -> float:
    if spec.timeout is not None and step.first_execute is not None:
        return min(wait, max(step.first_execute + spec.timeout - now, 0.01))
    return wait


def _checking(step: StepState, spec: StepSpec, answer: Mapping[str, Any],
              obs: Observations, now: float) -> tuple[StepState, list[Action]]:
    """check-metrics on one answer, KubeVela's ``#PromCheck``: the condition must hold
    for ``duration`` (from the first answer it held in, to this one), and the step fails
    once it has not held for ``failDuration``. Times are when answers came (the
    controller's clock). An answer the step cannot use (unreachable, not one number)
    counts as the condition not holding (KubeVela retries the step instead)."""
    check = spec.metrics
    assert check is not None
    at, value, error = float(answer["at"]), answer.get("value"), answer.get("error")
    should = f"The healthy condition should be {check.condition.text}"
    if not error and isinstance(value, (int, float)) and check.condition.holds(value):
        held = step.held_since if step.held_since is not None else at
        step = dataclasses.replace(step, held_since=held, failing_since=None)
        if at - held >= check.duration:
            return dataclasses.replace(step, phase="succeeded", finished=now,
                                       reason="Passed", due=None,
                                       message="The metric check has passed successfully."), []
        message = (f"{should}, and the query result is {http_steps.shown(value)}, indicating "
                   f"success. The success has persisted for {at - held:.0f}s, with success "
                   f"duration being {check.duration_text}.")
    else:
        failing = step.failing_since if step.failing_since is not None else at
        step = dataclasses.replace(step, held_since=None, failing_since=failing)
        result = f"the query failed: {error}" if error else \
            f"the query result is {http_steps.shown(float(value or 0))}"
        message = (f"{should}, but {result}, indicating failure. The failure has persisted "
                   f"for {at - failing:.0f}s, with the failure duration being "
                   f"{check.fail_duration_text}.")
        if at - failing >= check.fail_duration:
            return _fail(step, spec, now, "Failed", f"{message} The check has terminated.")
    if step.calls >= http_steps.METRICS_CALLS:
        return _fail(step, spec, now, "Failed", f"{message} No more queries: "
                     f"{http_steps.METRICS_CALLS} were made.")
    return _again(step, spec, now, obs.probe_interval, message)


_STEPS: dict[str, Callable[[StepState, StepSpec, Observations, float],
                           tuple[StepState, list[Action]]]] = {
    "print-message-in-status": _message, "collect-service-endpoints": _collecting,
    "depends-on-app": _depending, "clean-jobs": _cleaned,
    "generate-jdbc-connection": _generated,
    **dict.fromkeys(http_steps.STEP_TYPES, _calling)}
"""Steps that advance on what was observed alone (no resume, no deploy)."""


def _utc(seconds: float) -> str:
    """A moment as RFC 3339 text: a message names when, not how long from now (which
    would change the status at every look, and at a restart)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _awaiting_approval(step: StepState, spec: StepSpec, now: float) -> StepState:
    if _timed_out(step, spec, now):
        return _fail(step, spec, now, "Timeout", f"not approved within {spec.timeout:.0f}s")[0]
    return dataclasses.replace(step, phase="suspended", reason="Suspended",
                               message=f'Waiting approval to the deploy step "{spec.name}"')


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
        if state == "healthy" and not _unreleased(step, spec, cluster):
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
                               healthy_since=tuple(sorted(since.items())),
                               released=_release(step, spec, obs, started))
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
        message=f"waiting for {', '.join(waiting)} ({len(done)}/{len(spec.targets)} healthy)"
                f"{_ordering(step, spec, waiting)}")
    return running, actions


def _unreleased(step: StepState, spec: StepSpec, cluster: str) -> list[str]:
    """The components placed in ``cluster`` not put there yet (ordered deploys)."""
    if not spec.component_deps:
        return []
    return [c for c in spec.components.get(cluster, ()) if (cluster, c) not in step.released]


def _release(step: StepState, spec: StepSpec, obs: Observations, started: Sequence[str]
             ) -> tuple[tuple[str, str], ...]:
    """KubeVela's deploy: in each started cluster, a component goes there once every
    component it depends on that is placed there is healthy there."""
    if not spec.component_deps:
        return step.released
    released = list(step.released)
    for cluster in started:
        placed = spec.components.get(cluster, ())
        for component in _unreleased(step, spec, cluster):
            deps = [d for d in spec.component_deps.get(component, ()) if d in placed]
            if all(obs.component_health.get((spec.name, cluster, d), ("progressing", ""))[0]
                   == "healthy" for d in deps):
                released.append((cluster, component))
    return tuple(released)


def _ordering(step: StepState, spec: StepSpec, waiting: Sequence[str]) -> str:
    """What an ordered deploy still holds back, for the message (KubeVela: "is waiting
    dependents")."""
    for cluster in waiting:
        left = _unreleased(step, spec, cluster)
        if left:
            deps = [d for d in spec.component_deps.get(left[0], ())
                    if d in spec.components.get(cluster, ())]
            return f"; {cluster}: {left[0]} waits for {', '.join(deps)}"
    return ""


def held(spec: StepSpec, step: StepState, cluster: str, objects: Sequence[JSON]
         ) -> tuple[list[JSON], list[JSON]]:
    """A started cluster's objects for the step: those it holds now, and those of
    components not put there yet (ordered deploys: what the cluster has of them stays)."""
    if not spec.component_deps:
        return list(objects), []
    released = {c for name, c in step.released if name == cluster}
    now = [o for o in objects if component_of(o) in released]
    return now, [o for o in objects if component_of(o) not in released]


def component_of(obj: Mapping[str, Any]) -> str:
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(COMPONENT_LABEL, ""))


def cleaning(state: State, cleans: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Per deploying step, the selectors of the clean-jobs steps that succeeded after it
    ended in this run (KubeVela's clean-jobs deletes what is there when it runs: a step
    that deploys later keeps its Jobs)."""
    ended = [s for s in state.steps if s.name in cleans and s.phase == "succeeded"
             and s.finished is not None]
    found: dict[str, list[Any]] = {}
    for step in state.steps:
        if step.type not in DEPLOYING or step.finished is None:
            continue
        for clean in ended:
            if step.finished <= (clean.first_execute or clean.finished or 0.0):
                found.setdefault(step.name, []).append(cleans[clean.name])
    return found


def assignments(state: State) -> dict[str, tuple[str, ...]]:
    """Per deploy step, the clusters the revision has been put on (what they must hold)."""
    return {s.name: s.started for s in state.steps if s.type in DEPLOYING and s.started}


# -- status (the Application's status.workflow) ---------------------------------------------


def to_status(state: State, clock_text: Any) -> JSON:
    """``status.workflow``: KubeVela's field names; times through ``clock_text``. A step
    group's sub-steps are under its ``subStepsStatus``; a pending step names what it
    waits for (``waitingFor``).

    JSON data exactly as the hub gives it back: lists, never tuples, and a time not
    there yet is absent, never null (KubeVela's ``omitempty``; the API server's merge
    patch deletes a null field). Equal inputs give what the Application already shows,
    so a reconcile that changes nothing writes nothing, after a restart too."""
    def times(**found: float | None) -> JSON:
        return {name: clock_text(value) for name, value in found.items() if value is not None}

    def entry(s: StepState) -> JSON:
        found: JSON = {"name": s.name, "type": s.type, "phase": s.phase, "reason": s.reason,
                       "message": s.message,
                       **times(firstExecuteTime=s.first_execute,
                               lastExecuteTime=s.last_execute, finishedTime=s.finished),
                       "clusters": list(s.started), "healthyClusters": list(s.done)}
        if s.waiting_for:
            found["waitingFor"] = list(s.waiting_for)
        subs = [entry(sub) for sub in state.steps if sub.group == s.name]
        if subs:
            found["subStepsStatus"] = subs
        return found

    current = state.current
    return {
        "appRevision": state.revision, "phase": state.phase,
        "suspend": state.phase == "suspended", "finished": state.end is not None,
        **times(startTime=state.start, endTime=state.end),
        "currentStep": current.name if current else "",
        "steps": [entry(s) for s in state.steps if not s.group],
        "_state": _raw(state),
    }


def _raw(state: State) -> JSON:
    """The state as :func:`from_status` reads it back, in JSON data (see :func:`to_status`)."""
    raw: JSON = {"revision": state.revision, "phase": state.phase, "start": state.start,
                 "steps": [_raw_step(s) for s in state.steps],
                 "values": encode_values(state.values)}
    if state.end is not None:
        raw["end"] = state.end
    restart = {k: v for k, v in (("at", state.restart_at), ("every", state.restart_every))
               if v is not None}  # no null: a merge patch would drop it from a map
    if restart:
        raw["restart"] = restart
    return raw


def _raw_step(step: StepState) -> JSON:
    """A step's fields: tuples as lists, pairs as two-item lists, unset times absent."""
    found: JSON = {}
    for field in dataclasses.fields(step):
        value = getattr(step, field.name)
        if isinstance(value, tuple):
            found[field.name] = [list(v) if isinstance(v, tuple) else v for v in value]
        elif value is not None:
            found[field.name] = value
    return found


def encode_values(values: Mapping[str, Any]) -> list[list[str]]:
    """Output values as stored: ``[name, JSON text]`` pairs (the API server drops a null
    from a map, and the step waiting for it would wait for ever)."""
    return [[name, json.dumps(value, sort_keys=True)] for name, value in sorted(values.items())]


def decode_values(raw: Any) -> dict[str, Any]:
    """What :func:`encode_values` stored (ValueError or TypeError when it is not that)."""
    return {str(name): json.loads(text) for name, text in raw or ()}


def from_status(workflow: Mapping[str, Any] | None) -> State | None:
    """The state stored by :func:`to_status` (None when there is none or it is unreadable)."""
    raw = (workflow or {}).get("_state")
    if not isinstance(raw, dict):
        return None
    try:
        steps = tuple(StepState(**{**s, "started": tuple(s.get("started") or ()),
                                   "done": tuple(s.get("done") or ()),
                                   "waiting_for": tuple(s.get("waiting_for") or ()),
                                   "released": tuple((str(p[0]), str(p[1])) for p in
                                                     s.get("released") or ()),
                                   "healthy_since": tuple((str(p[0]), float(p[1])) for p in
                                                          s.get("healthy_since") or ())})
                      for s in raw["steps"])
        values = decode_values(raw.get("values"))
        # a merge patch drops null fields: an absent "end" (or step time) is None
        end = raw.get("end")
        restart = raw.get("restart") or {}
        at, every = restart.get("at"), restart.get("every")
        return State(int(raw["revision"]), steps, raw["phase"], float(raw["start"]),
                     float(end) if end is not None else None, values,
                     float(at) if at is not None else None,
                     float(every) if every is not None else None)
    except (KeyError, TypeError, ValueError):
        return None
