"""The HTTP workflow steps, pure: their properties as KubeVela's definitions take them (and
what a tenant may not put in them), and the state machine on a fake clock: a step asks
for a call, waits for its answer, retries, fails above 400; check-metrics' duration and
failDuration."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from federation.applications import compile as compile_
from federation.applications import http_steps, model, workflow
from federation.placement import clusters as clusters_

# -- properties -------------------------------------------------------------------------------


def test_request_takes_kubevelas_parameters_with_its_defaults() -> None:
    call = http_steps.request({"url": "https://api.example/x"}, "p")
    assert (call.purpose, call.method, call.url, call.body) == \
        ("request", "GET", "https://api.example/x", None)
    assert call.headers == (("Content-Type", "application/json"),)
    call = http_steps.request({"url": "https://api.example/x", "method": "POST",
                               "body": {"a": 1}, "header": {"X-Token": "t"}}, "p")
    assert (call.method, call.body, call.headers) == ("POST", '{"a": 1}', (("X-Token", "t"),))


@pytest.mark.parametrize(("props", "words"), [
    ({"url": "https://a.example/", "method": "PATCH"}, r"p\.method"),
    ({"url": "https://a.example/", "header": {"X-A": "1\r\nHost: evil"}},
     r"p\.header\.X-A: holds a line break"),
    ({"url": "https://a.example/", "header": {"X-A": "v\nX-Injected: 1"}},
     r"p\.header\.X-A: holds a line break"),
    ({"url": "https://a.example/", "header": {"Host": "internal"}}, r"p\.header\.Host: not sent"),
    ({"url": "https://a.example/", "header": {"transfer-encoding": "chunked"}},
     r"not sent"),
    ({"url": "https://a.example/", "header": {"Proxy-Foo": "x"}}, r"not sent"),
    ({"url": "https://a.example/", "header": {"Bad Name": "x"}}, r"not an HTTP token"),
    ({"url": "https://a.example/", "header": {f"X-{n}": "v" for n in range(40)}},
     r"40 headers; at most 32"),
    ({"url": "https://a.example/", "body": {"big": "x" * 300_000}}, r"p\.body: .* at most"),
    ({"url": "file:///etc/passwd"}, r"p\.url: only http and https"),
    ({"url": "http://u:p@a.example/"}, r"user name or password"),
    ({"url": "https://a.example/", "extra": 1}, r"p\.extra"),
])
def test_a_request_a_tenant_may_not_make_is_refused_by_field(props: dict[str, Any],
                                                             words: str) -> None:
    with pytest.raises(model.AppError, match=words) as caught:
        http_steps.request(props, "p")
    assert "evil" not in str(caught.value) and "\n" not in str(caught.value)


def test_webhook_sends_data_or_the_application_and_refuses_a_secret_ref() -> None:
    call = http_steps.webhook({"url": {"value": "https://hooks.example/T"}}, "p")
    assert (call.purpose, call.method, call.send_app, call.body) == \
        ("notification", "POST", True, None)
    call = http_steps.webhook({"url": {"value": "https://hooks.example/T"},
                               "data": {"x": 1}}, "p")
    assert (call.send_app, call.body) == (False, '{"x": 1}')
    with pytest.raises(model.AppError, match=r"p\.url\.secretRef: not supported: the control "
                                             "plane reads no Secret"):
        http_steps.webhook({"url": {"secretRef": {"name": "s", "key": "k"}}}, "p")
    with pytest.raises(model.AppError, match=r"p\.url\.value: required"):
        http_steps.webhook({"url": {}}, "p")


def test_check_metrics_queries_the_prometheus_api_with_kubevelas_defaults() -> None:
    call, check = http_steps.check_metrics({"query": 'sum(up{job="a b"})',
                                            "condition": ">=0.95"}, "shop", "p")
    assert call.purpose == "request" and call.method == "GET"
    assert call.url == ("http://prometheus-server.o11y-system.svc:9090/api/v1/query?query="
                        "sum%28up%7Bjob%3D%22a%20b%22%7D%29&namespace=shop")
    assert (check.condition.operator, check.condition.operand) == (">=", 0.95)
    assert (check.duration, check.fail_duration) == (300.0, 120.0)


@pytest.mark.parametrize(("text", "value", "holds"), [
    (">=0.95", 0.95, True), (">= 3", 2.0, False), ("<5", 4.0, True), ("==1", 1.0, True),
    ("!=0", 0.0, False), (">1e3", 1001.0, True), (" <= -2.5 ", -3.0, True),
])
def test_a_condition_is_parsed_and_compared(text: str, value: float, holds: bool) -> None:
    assert http_steps.condition(text, "c").holds(value) is holds


@pytest.mark.parametrize("text", ["", "0.95", ">= x", ">=1 && <5", "; import os", ">=1)",
                                  "=~ 'a'"])
def test_a_condition_that_is_no_comparison_is_refused_not_evaluated(text: str) -> None:
    with pytest.raises(model.AppError, match=r"c: an operator"):
        http_steps.condition(text, "c")


@pytest.mark.parametrize(("body", "value"), [
    ('{"status":"success","data":{"resultType":"scalar","result":[1,"10"]}}', 10.0),
    ('{"status":"success","data":{"resultType":"vector","result":[{"metric":{},'
     '"value":[1,"0.5"]}]}}', 0.5),
])
def test_a_prometheus_answer_gives_one_value(body: str, value: float) -> None:
    assert http_steps.prometheus_value(body) == value


@pytest.mark.parametrize(("body", "words"), [
    ('{"status":"success","data":{"resultType":"vector","result":[]}}',
     "returning 0 results when it should only return one"),
    ('{"status":"success","data":{"resultType":"matrix","result":[]}}', "cannot handle"),
    ('{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}', "finite"),
    ('{"status":"error"}', "not a successful"),
    ("<html>", "not JSON"),
])
def test_an_unusable_prometheus_answer_is_one_line(body: str, words: str) -> None:
    with pytest.raises(http_steps.AnswerError, match=words):
        http_steps.prometheus_value(body)


def compiled(steps: list[dict[str, Any]]) -> compile_.Compiled:
    spec = {"components": [{"name": "web", "type": "webservice",
                             "properties": {"image": "web:1"}}],
            "policies": [{"name": "one", "type": "topology",
                          "properties": {"clusters": ["m1"]}}],
            "workflow": {"steps": steps}}
    return compile_.compile_app(spec, "shop", "shop", {},
                                [clusters_.Cluster(name="m1")])


def test_the_compile_keeps_each_steps_call_and_check() -> None:
    found = compiled([
        {"name": "hook", "type": "webhook", "properties": {"url": {"value": "https://h.example/"}}},
        {"name": "ask", "type": "request", "properties": {"url": "https://a.example/"},
         "outputs": [{"name": "n", "valueFrom": "response.n"}]},
        {"name": "check", "type": "check-metrics",
         "properties": {"query": "up", "condition": ">0", "duration": "1m"}}])
    assert set(found.calls) == {"hook", "ask", "check"}
    check = next(s for s in found.steps if s.name == "check").metrics
    assert check is not None and check.duration == 60.0


def test_a_refusal_in_a_step_names_the_step_and_never_the_url() -> None:
    with pytest.raises(model.AppError, match=r"spec\.workflow\.steps\[0\]\.properties\.header"
                                             r"\.X-A: holds a line break") as caught:
        compiled([{"name": "ask", "type": "request", "properties": {
            "url": "https://a.example/?token=SECRET", "header": {"X-A": "a\r\nb"}}}])
    assert "SECRET" not in str(caught.value)


# -- the state machine, on a fake clock --------------------------------------------------------


def spec(kind: str = "request", **extra: Any) -> workflow.StepSpec:
    return workflow.StepSpec("s", kind, **extra)


def run(specs: list[workflow.StepSpec], state: workflow.State, now: float,
        outputs: dict[str, Any] | None = None) -> tuple[workflow.State, list[workflow.Action]]:
    return workflow.evaluate(state, specs, workflow.Observations(outputs=outputs or {}), now)


def step(state: workflow.State) -> workflow.StepState:
    return state.steps[0]


def test_a_request_asks_waits_and_succeeds_with_its_response_as_output() -> None:
    specs = [spec(outputs=(workflow.DataOutput("n", "response.count"),))]
    state = workflow.initial(1, specs, 0.0)
    state, actions = run(specs, state, 0.0)
    assert (step(state).phase, step(state).calls) == ("running", 1)
    assert any(isinstance(a, workflow.Wait) for a in actions)
    state, _ = run(specs, state, 5.0)
    assert (step(state).phase, step(state).message) == ("running", "waiting for the answer")
    assert step(state).calls == 1  # no answer yet: no second call
    answer = {"at": 6.0, "statusCode": 200, "response": {"count": 7},
              "req": {"$returns": {"body": '{"count": 7}', "statusCode": 200}}}
    state, _ = run(specs, state, 6.0, {"s": answer})
    assert (step(state).phase, step(state).message) == ("succeeded", "answered 200")
    assert state.values == {"n": 7}


@pytest.mark.parametrize(("answer", "reason", "message"), [
    ({"statusCode": 404}, "Execute", "the request failed: answered 404"),
    ({"statusCode": 200, "invalid": "the answer is not JSON (x)"}, "Execute",
     "the answer is not JSON (x)"),
])
def test_a_request_answered_with_an_error_fails(answer: dict[str, Any], reason: str,
                                                message: str) -> None:
    specs = [spec()]
    state, _ = run(specs, workflow.initial(1, specs, 0.0), 0.0)
    state, _ = run(specs, state, 1.0, {"s": {"at": 1.0, **answer}})
    assert (step(state).phase, step(state).reason, step(state).message) == \
        ("failed", reason, message)


def test_400_itself_is_no_failure_as_in_kubevelas_definition() -> None:
    specs = [spec()]
    state, _ = run(specs, workflow.initial(1, specs, 0.0), 0.0)
    state, _ = run(specs, state, 1.0, {"s": {"at": 1.0, "statusCode": 400, "response": {}}})
    assert step(state).phase == "succeeded"


def test_a_failed_call_is_tried_three_times_then_fails() -> None:
    specs = [spec("webhook")]
    state, _ = run(specs, workflow.initial(1, specs, 0.0), 0.0)
    now = 0.0
    for tries in (1, 2):
        now += 1
        state, _ = run(specs, state, now, {"s": {"at": now, "error": "destination unreachable"}})
        assert (step(state).calls, step(state).phase) == (tries, "running")
        assert "trying again" in step(state).message
        now = step(state).due or now
        state, _ = run(specs, state, now, {"s": {"at": now, "error": "x"}})
        assert step(state).calls == tries + 1  # the next call, once the wait passed
    state, _ = run(specs, state, now + 1, {"s": {"at": now, "error": "destination unreachable"}})
    assert (step(state).phase, step(state).reason) == ("failed", "FailedAfterRetries")
    assert step(state).message == "destination unreachable (3 tries)"


def test_a_step_without_an_answer_times_out() -> None:
    specs = [spec(timeout=30.0)]
    state, _ = run(specs, workflow.initial(1, specs, 0.0), 0.0)
    state, actions = run(specs, state, 28.0)
    assert step(state).phase == "running"
    assert [a.seconds for a in actions if isinstance(a, workflow.Wait)] == [2.0]
    state, _ = run(specs, state, 30.0)
    assert (step(state).phase, step(state).reason) == ("failed", "Timeout")


def metrics(duration: float = 300.0, fail: float = 120.0) -> workflow.StepSpec:
    return spec("check-metrics", metrics=http_steps.MetricsCheck(
        http_steps.condition(">=3", "c"), duration, fail))


def query(specs: list[workflow.StepSpec], state: workflow.State, now: float,
          answer: dict[str, Any]) -> workflow.State:
    """The answer to the current call at ``now``, then (once due) the next call."""
    state, _ = run(specs, state, now, {"s": {"at": now, **answer}})
    due = step(state).due
    if step(state).phase == "running" and due is not None:
        state, _ = run(specs, state, due, {"s": {"at": now, **answer}})
    return state


def test_check_metrics_passes_once_the_condition_held_for_its_duration() -> None:
    specs = [metrics()]
    state, _ = run(specs, workflow.initial(1, specs, 0.0), 0.0)
    state = query(specs, state, 10.0, {"value": 10.0})
    assert step(state).held_since == 10.0 and step(state).phase == "running"
    assert "indicating success" in step(state).message
    state = query(specs, state, 200.0, {"value": 5.0})
    assert step(state).phase == "running"
    state = query(specs, state, 310.0, {"value": 4.0})
    assert (step(state).phase, step(state).message) == \
        ("succeeded", "The metric check has passed successfully.")


def test_a_failing_check_restarts_the_duration() -> None:
    specs = [metrics()]
    state, _ = run(specs, workflow.initial(1, specs, 0.0), 0.0)
    state = query(specs, state, 10.0, {"value": 10.0})
    state = query(specs, state, 100.0, {"value": 1.0})
    assert (step(state).held_since, step(state).failing_since) == (None, 100.0)
    state = query(specs, state, 150.0, {"value": 10.0})
    state = query(specs, state, 320.0, {"value": 10.0})
    assert step(state).phase == "running"  # held since 150 only
    state = query(specs, state, 450.0, {"value": 10.0})
    assert step(state).phase == "succeeded"


def test_check_metrics_fails_once_the_condition_failed_for_its_fail_duration() -> None:
    specs = [metrics()]
    state, _ = run(specs, workflow.initial(1, specs, 0.0), 0.0)
    state = query(specs, state, 10.0, {"value": 1.0})
    state = query(specs, state, 100.0, {"error": "destination unreachable"})
    assert step(state).phase == "running"
    assert "the query failed: destination unreachable" in step(state).message
    state = query(specs, state, 130.0, {"value": 2.0})
    assert (step(state).phase, step(state).reason) == ("failed", "Failed")
    assert step(state).message.endswith("The check has terminated.")


def test_the_same_answer_seen_twice_counts_once() -> None:
    """A reconcile for another reason sees the same answer again: nothing moves."""
    specs = [metrics()]
    state, _ = run(specs, workflow.initial(1, specs, 0.0), 0.0)
    answer = {"s": {"at": 10.0, "value": 10.0}}
    first, _ = run(specs, state, 10.0, answer)
    again, _ = run(specs, first, 12.0, answer)
    assert dataclasses.replace(again.steps[0], last_execute=None) == \
        dataclasses.replace(first.steps[0], last_execute=None)


def test_the_step_state_survives_the_status_round_trip() -> None:
    specs = [metrics()]
    state, _ = run(specs, workflow.initial(1, specs, 0.0), 0.0)
    state = query(specs, state, 10.0, {"value": 10.0})
    restored = workflow.from_status(workflow.to_status(state, str))
    assert restored is not None and restored.steps == state.steps
