"""Data between steps (``outputs``/``inputs``) and ``if`` conditions, KubeVela's way, on the
compile and the pure state machine with the real CUE evaluator.

Fixtures marked *KubeVela docs* are the examples of kubevela/kubevela.io
(``docs/end-user/workflow/if-condition.md``, ``inputs-outputs.md``,
``component-dependency-parameter.md``; Apache-2.0), shortened to what the behaviour needs
(Slack URLs are example hosts; ``read-object`` is not built in here, so the producer is an
``apply-component`` step).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from federation.applications import compile as compile_
from federation.applications import expressions, model, workflow
from federation.applications.workflow import Observations
from federation.controllers.applications.evaluation import readable
from federation.placement import clusters as clusters_

FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2")]
SLACK = {"url": {"value": "https://hooks.example.com/x"}}
CONTEXT = {"name": "custom-if", "namespace": "ns", "appName": "custom-if"}


@dataclasses.dataclass
class Driver:
    """The controller's loop in small: compile with the state's values, evaluate."""

    doc: dict[str, Any]
    app: str = "custom-if"
    now: float = 0.0
    state: workflow.State | None = None
    compiled: compile_.Compiled | None = None
    sent: list[workflow.Notify] = dataclasses.field(default_factory=list)

    def step(self, obs: Observations | None = None) -> workflow.State:
        values = self.state.values if self.state is not None else {}
        self.compiled = compile_.compile_app(self.doc, self.app, "ns", {}, FLEET, "member1",
                                             values=values)
        if self.state is None:
            self.state = workflow.initial(1, self.compiled.steps, self.now)
        self.now += 1
        obs = dataclasses.replace(obs or Observations(), context={**CONTEXT,
                                                                  "name": self.app})
        self.state, actions = workflow.evaluate(self.state, self.compiled.steps, obs,
                                                self.now)
        self.sent.extend(a for a in actions if isinstance(a, workflow.Notify))
        return self.state

    def phases(self) -> dict[str, str]:
        assert self.state is not None
        return {s.name: s.phase for s in self.state.steps}

    def spec(self, name: str) -> workflow.StepSpec:
        assert self.compiled is not None
        return next(s for s in self.compiled.steps if s.name == name)


def healthy(*steps: str) -> Observations:
    return Observations(health={(s, "member1"): ("healthy", "") for s in steps})


def application(steps: list[dict[str, Any]], components: list[dict[str, Any]] | None = None,
                mode: dict[str, str] | None = None) -> dict[str, Any]:
    flow: dict[str, Any] = {"steps": steps}
    if mode:
        flow["mode"] = mode
    return {"components": components or [
        {"name": "comp-custom-if", "type": "webservice",
         "properties": {"image": "crccheck/hello-world", "port": 8000}}], "workflow": flow}


def test_kubevela_docs_custom_if() -> None:
    """KubeVela docs, if-condition.md ``custom-if``: an output of ``context.name``, an
    input into ``slack.message.text``, conditions over ``inputs`` and ``status``."""
    driver = Driver(application([
        {"name": "apply", "type": "apply-component",
         "properties": {"component": "comp-custom-if"},
         "outputs": [{"name": "comp-output", "valueFrom": "context.name"}]},
        {"name": "notification", "type": "notification",
         "inputs": [{"from": "comp-output", "parameterKey": "slack.message.text"}],
         "if": 'inputs["comp-output"] == "custom-if"', "properties": {"slack": SLACK}},
        {"name": "notification-skip", "type": "notification",
         "if": "status.notification.failed",
         "properties": {"slack": {**SLACK, "message": {"text": "should be skipped"}}}},
        {"name": "notification-succeeded", "type": "notification",
         "if": "status.notification.succeeded",
         "properties": {"slack": {**SLACK, "message": {"text": "succeeded"}}}}]))
    driver.step()
    assert driver.spec("notification").unrendered  # its input is not there yet
    driver.step(healthy("apply"))
    assert driver.state is not None and driver.state.values == {"comp-output": "custom-if"}
    assert driver.phases()["notification"] == "pending"  # rendered by the next compile
    driver.step(healthy("apply"))
    assert driver.phases() == {"apply": "succeeded", "notification": "succeeded",
                               "notification-skip": "skipped",
                               "notification-succeeded": "succeeded"}
    assert [n.message for n in driver.sent] == ["custom-if", "succeeded"]
    assert driver.compiled is not None
    assert driver.compiled.notifications["notification"].message == "custom-if"


def deployment_with(conditions: list[dict[str, str]]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "invalid", "namespace": "ns"},
            "status": {"conditions": conditions}}


def test_kubevela_docs_err_with_always_passes_a_failed_steps_output() -> None:
    """KubeVela docs, if-condition.md ``err-with-always``: the component times out, its
    output (from the applied Deployment's status) still reaches the ``if: always`` step."""
    driver = Driver(application([
        {"name": "comp", "type": "apply-component", "timeout": "5s",
         "properties": {"component": "invalid"},
         "outputs": [{"name": "status", "valueFrom": "output.status.conditions[0].type + "
                                                     "output.status.conditions[0].status"}]},
        {"name": "notification", "type": "notification", "if": "always",
         "inputs": [{"from": "status", "parameterKey": "slack.message.text"}],
         "properties": {"slack": SLACK}}],
        [{"name": "invalid", "type": "webservice", "properties": {"image": "invalid"}}]),
        app="err-with-always")
    live = Observations(outputs={"comp": deployment_with(
        [{"type": "Available", "status": "False"}])})
    for _ in range(6):
        driver.step(live)
    assert driver.phases()["comp"] == "failed"
    assert driver.state is not None and driver.state.values == {"status": "AvailableFalse"}
    driver.step(live)
    assert driver.phases()["notification"] == "succeeded"
    assert [n.message for n in driver.sent] == ["AvailableFalse"]


def test_an_output_flows_into_a_component_and_the_order_holds() -> None:
    """Step B applies a component whose data takes A's output; C waits for B (DAG)."""
    components = [{"name": "a", "type": "config", "properties": {"data": {"greeting": "hi"}}},
                  {"name": "b", "type": "config", "properties": {"data": {"fixed": "1"}}},
                  {"name": "c", "type": "config", "properties": {"data": {"x": "y"}}}]
    driver = Driver(application([
        {"name": "step-a", "type": "apply-component", "properties": {"component": "a"},
         "outputs": [{"name": "greeting", "valueFrom": 'output.data.greeting + " from a"'}]},
        {"name": "step-b", "type": "apply-component", "properties": {"component": "b"},
         "dependsOn": ["step-a"],
         "inputs": [{"from": "greeting", "parameterKey": "properties.data.copied"}]},
        {"name": "step-c", "type": "apply-component", "properties": {"component": "c"},
         "dependsOn": ["step-b"]}], components, mode={"steps": "DAG"}), app="io")
    live = {"step-a": {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "a"}, "data": {"greeting": "hi"}}}
    driver.step(Observations(outputs=live))
    assert driver.phases() == {"step-a": "running", "step-b": "pending", "step-c": "pending"}
    assert driver.state is not None and driver.state.steps[1].waiting_for == (
        "step step-a", "input greeting")
    driver.step(Observations(outputs=live, health={("step-a", "member1"): ("healthy", "")}))
    assert driver.phases()["step-b"] == "pending" and "step-b" not in (
        driver.compiled.targets if driver.compiled else {})
    driver.step(healthy("step-a"))
    assert driver.phases()["step-b"] == "running"
    assert driver.compiled is not None
    (config_map,) = driver.compiled.targets["step-b"].clusters["member1"]
    assert config_map["data"] == {"fixed": "1", "copied": "hi from a"}
    driver.step(healthy("step-a", "step-b"))
    driver.step(healthy("step-a", "step-b", "step-c"))
    steps = {s.name: s for s in driver.state.steps}
    assert driver.state.phase == "succeeded"
    assert steps["step-a"].finished is not None and steps["step-b"].first_execute is not None
    assert steps["step-a"].finished < steps["step-b"].first_execute
    assert steps["step-b"].finished is not None and steps["step-c"].first_execute is not None
    assert steps["step-b"].finished <= steps["step-c"].first_execute


def test_component_inputs_and_outputs_through_the_default_workflow() -> None:
    """KubeVela docs, component-dependency-parameter.md (types ours): ``wordpress`` takes
    ``mysql``'s service address from its output; without a workflow or policies each
    component is its own apply-component step, run as a DAG."""
    components = [
        {"name": "mysql", "type": "webservice", "properties": {"image": "mysql:8"},
         "outputs": [{"name": "mysql-svc",
                      "valueFrom": 'output.metadata.name + ".default.svc.cluster.local"'}]},
        {"name": "wordpress", "type": "webservice", "properties": {"image": "wordpress:6",
                                                                    "env": []},
         "inputs": [{"from": "mysql-svc", "parameterKey": "labels.db"}]}]
    driver = Driver({"components": components}, app="wordpress-with-mysql")
    live = {"mysql": {"apiVersion": "apps/v1", "kind": "Deployment",
                      "metadata": {"name": "mysql"}}}
    driver.step(Observations(outputs=live))
    assert driver.phases() == {"mysql": "running", "wordpress": "pending"}
    driver.step(Observations(outputs=live, health={("mysql", "member1"): ("healthy", "")}))
    driver.step(healthy("mysql"))
    assert driver.compiled is not None
    deployment = driver.compiled.targets["wordpress"].clusters["member1"][0]
    assert deployment["spec"]["template"]["metadata"]["labels"]["db"] == \
        "mysql.default.svc.cluster.local"


def test_a_value_that_cannot_go_where_its_input_says_fails_that_step_only() -> None:
    components = [{"name": "a", "type": "config", "properties": {"data": {"k": "v"}}}]
    driver = Driver(application([
        {"name": "make", "type": "notification", "properties": {"message": "x"},
         "outputs": [{"name": "d", "valueFrom": '"not-a-duration"'}]},
        {"name": "wait", "type": "suspend",
         "inputs": [{"from": "d", "parameterKey": "duration"}]}], components))
    driver.step()
    driver.step()
    assert driver.phases() == {"make": "succeeded", "wait": "failed"}
    assert driver.state is not None
    assert driver.state.steps[1].reason == "Rendering"
    assert "duration" in driver.state.steps[1].message


def test_a_stale_compile_does_not_run_a_step_with_other_values() -> None:
    """The compile read an older state than the one evaluated: the step waits."""
    spec = workflow.StepSpec("b", "notification", dag=True,
                             inputs=(workflow.DataInput("x", "message"),),
                             rendered_inputs={"x": 1})
    producer = workflow.StepSpec("a", "notification", dag=True)
    state = dataclasses.replace(workflow.initial(1, (producer, spec), 0.0), values={"x": 2})
    state, actions = workflow.evaluate(state, (producer, spec), Observations(), 1.0)
    assert state.steps[1].phase == "pending" and workflow.Wait(0.0) in actions
    assert not any(isinstance(a, workflow.Notify) and a.step == "b" for a in actions)


def test_values_round_trip_through_status_with_nulls_dropped() -> None:
    """A null value (a skipped step's output) survives the API server dropping nulls."""
    state = workflow.State(1, (workflow.StepState("a", "notification", "skipped"),),
                           "succeeded", 0.0, 1.0, {"out": None, "n": {"a": [1, None]}})
    raw = workflow.to_status(state, str)["_state"]
    assert workflow.from_status({"_state": raw}) == state
    assert raw["values"] == [["n", '{"a": [1, null]}'], ["out", "null"]]


def test_if_that_does_not_evaluate_skips_with_its_reason() -> None:
    driver = Driver(application([
        {"name": "a", "type": "notification", "properties": {"message": "x"},
         "if": "status.nope.succeeded"},
        {"name": "b", "type": "notification", "properties": {"message": "x"},
         "if": '"yes"'}]))
    driver.step()
    assert driver.phases() == {"a": "skipped", "b": "skipped"}
    assert driver.state is not None
    assert "nope" in driver.state.steps[0].message
    assert driver.state.steps[1].message == "if: the expression is not a boolean"


def test_a_skipped_steps_output_is_null_and_its_consumer_runs() -> None:
    driver = Driver(application([
        {"name": "a", "type": "notification", "properties": {"message": "x"},
         "if": "false", "outputs": [{"name": "o", "valueFrom": '"v"'}]},
        {"name": "b", "type": "notification", "properties": {"message": "x"},
         "if": "inputs.o == null", "inputs": [{"from": "o"}]}]))
    driver.step()
    driver.step()
    assert driver.phases() == {"a": "skipped", "b": "succeeded"}


@pytest.mark.parametrize(("steps", "words"), [
    ([{"name": "a", "type": "notification", "properties": {"message": "x"}},
      {"name": "b", "type": "notification", "properties": {"message": "x"},
       "inputs": [{"from": "elsewhere", "parameterKey": "message"}]}],
     "steps[1].inputs[0].from: 'elsewhere' is no output of a step of this workflow"),
    ([{"name": "a", "type": "deploy", "outputs": [{"name": "o", "valueFrom": '"v"'}]},
      {"name": "b", "type": "deploy", "inputs": [{"from": "o", "parameterKey": "parallelism"}]}],
     "steps[1].inputs: not supported for a deploy step"),
    ([{"name": "a", "type": "notification", "properties": {"message": "x"},
       "outputs": [{"name": "o", "valueFrom": '"v"'}]},
      {"name": "b", "type": "notification", "outputs": [{"name": "o", "valueFrom": '"w"'}]}],
     "steps[1].outputs[0].name: 'o' is also an output of step 'a'"),
    ([{"name": "a", "type": "notification", "properties": {"message": "x"},
       "outputs": [{"name": "o", "valueFrom": '"v"'}]},
      {"name": "b", "type": "notification", "inputs": [{"from": "o",
                                                        "parameterKey": "a..b"}]}],
     "steps[1].inputs[0].parameterKey: not a field path"),
    ([{"name": "a", "type": "notification", "properties": {"message": "x"},
       "inputs": [{"from": "o"}]},
      {"name": "b", "type": "notification", "outputs": [{"name": "o", "valueFrom": '"v"'}]}],
     "steps[0].inputs[0]: waits for ever: step 'b'"),
])
def test_data_passing_refused_by_path(steps: list[dict[str, Any]], words: str) -> None:
    with pytest.raises(model.AppError) as caught:
        compile_.compile_app(application(steps), "app", "ns", {}, FLEET, "member1")
    assert words in str(caught.value)


def test_an_apply_component_steps_input_goes_under_its_components_properties() -> None:
    """KubeVela's generator: ``parameterKey: image`` of an apply-component step is
    ``properties.image`` of its component (KubeVela's read-object example passes ``cpu``
    so)."""
    steps = [{"name": "a", "type": "notification", "properties": {"message": "x"},
              "outputs": [{"name": "o", "valueFrom": '"v"'}]},
             {"name": "b", "type": "apply-component", "properties": {
                 "component": "comp-custom-if"},
              "inputs": [{"from": "o", "parameterKey": "image"}]}]
    result = compile_.compile_app(application(steps), "app", "ns", {}, FLEET, "member1",
                                  values={"o": "nginx:2"})
    [deployment] = [o for objects in result.targets["b"].clusters.values() for o in objects
                    if o["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"


# -- attacks: what a tenant's expression can reach ---------------------------------------------


@pytest.mark.parametrize("value_from", [
    '__import__("os").system("touch /tmp/pwned")',
    "output.__class__.__mro__",
    "parameter.__dict__",
    "status",            # the other steps' status is for if, not valueFrom
    "otherApp.outputs",  # another Application's data is in no scope
    "os.environ",
])
def test_attack_value_from_reaches_nothing_but_its_own_scope(value_from: str) -> None:
    """A tenant's valueFrom is CUE over this step's own scope: Python's names, other
    Applications and the process are not in it; the step fails naming the output."""
    spec = workflow.StepSpec("a", "notification", message="x",
                             outputs=(workflow.DataOutput("o", value_from),))
    state, _ = workflow.evaluate(workflow.initial(1, (spec,), 0.0), (spec,),
                                 Observations(context=CONTEXT), 1.0)
    assert state.steps[0].phase == "failed" and state.steps[0].reason == "Output"
    assert state.steps[0].message.startswith("output o: ")
    assert state.values == {"o": None}


def test_attack_if_reaches_nothing_but_its_own_scope() -> None:
    spec = workflow.StepSpec("a", "notification", condition='__import__("os") != null')
    state, actions = workflow.evaluate(workflow.initial(1, (spec,), 0.0), (spec,),
                                       Observations(), 1.0)
    assert state.steps[0].phase == "skipped" and not actions


def test_attack_a_costly_expression_is_stopped_by_its_budget() -> None:
    with pytest.raises(expressions.ExpressionError, match="budget"):
        expressions.evaluate('strings.Repeat("x", 100000000)', {})


def test_attack_a_huge_output_is_not_kept_in_the_status() -> None:
    spec = workflow.StepSpec("a", "notification", outputs=(
        workflow.DataOutput("o", 'strings.Repeat("x", 5000)'),))
    state, _ = workflow.evaluate(workflow.initial(1, (spec,), 0.0), (spec,), Observations(),
                                 1.0)
    assert state.steps[0].reason == "Output" and "at most 4096" in state.steps[0].message
    assert state.values == {"o": None}


def test_attack_a_secret_read_back_shows_no_data() -> None:
    """A member's token controller fills a Secret the author asked for (type
    service-account-token): its data must not reach an output, hence the hub's status."""
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
              "metadata": {"name": "t", "managedFields": [{"manager": "x"}]},
              "data": {"token": "c2VjcmV0"}}
    seen = readable(secret)
    assert "data" not in seen and "managedFields" not in seen["metadata"]
    spec = workflow.StepSpec("a", "apply-component", ("member1",), outputs=(
        workflow.DataOutput("token", "output.data.token"),))
    obs = Observations(health={("a", "member1"): ("healthy", "")}, outputs={"a": seen})
    state, _ = workflow.evaluate(workflow.initial(1, (spec,), 0.0), (spec,), obs, 1.0)
    state, _ = workflow.evaluate(state, (spec,), obs, 2.0)
    assert state.values == {"token": None} and state.steps[0].reason == "Output"
    assert "c2VjcmV0" not in str(workflow.to_status(state, str))


def test_a_failed_step_keeps_its_reason_when_an_output_has_no_value() -> None:
    spec = workflow.StepSpec("a", "suspend", timeout=1.0, outputs=(
        workflow.DataOutput("o", "nope"),))
    state = workflow.initial(1, (spec,), 0.0)
    state, _ = workflow.evaluate(state, (spec,), Observations(), 0.0)
    state, _ = workflow.evaluate(state, (spec,), Observations(), 2.0)
    assert state.steps[0].reason == "Timeout" and state.values == {"o": None}


def test_a_bug_in_the_evaluator_fails_the_step_not_the_controller(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from federation import cue

    def broken(*args: Any) -> Any:
        raise AssertionError("a bug")

    monkeypatch.setattr(cue, "evaluate_expression", broken)
    with pytest.raises(expressions.ExpressionError, match="could not be evaluated"):
        expressions.evaluate("x", {})
