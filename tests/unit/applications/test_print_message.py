"""vela-core's ``print-message-in-status`` step (its def-doc example, re-typed): it succeeds
at once with its message in the step's status."""

from __future__ import annotations

from typing import Any

import pytest

from federation.applications import compile as compile_
from federation.applications import model, workflow
from federation.placement import clusters as clusters_

JSON = dict[str, Any]
MESSAGE = ("All addons have been enabled successfully, you can use 'vela addon list' to "
           "check them.")


def spec(props: JSON) -> JSON:
    return {"components": [{"name": "express-server", "type": "webservice",
                            "properties": {"image": "oamdev/hello-world", "port": 8000}}],
            "workflow": {"steps": [
                {"name": "express-server", "type": "apply-component",
                 "properties": {"component": "express-server"}},
                {"name": "message", "type": "print-message-in-status", "properties": props}]}}


def test_the_step_succeeds_with_its_message() -> None:
    compiled = compile_.compile_app(spec({"message": MESSAGE}), "app", "default", {},
                                    [clusters_.Cluster(name="local")], "local")
    step = compiled.steps[1]
    assert (step.type, step.message) == ("print-message-in-status", MESSAGE)
    state = workflow.initial(1, compiled.steps[1:], 0.0)
    state, actions = workflow.evaluate(state, compiled.steps[1:], workflow.Observations(), 1.0)
    [done] = state.steps
    assert (done.phase, done.reason, done.message) == ("succeeded", "Message", MESSAGE)
    assert not any(isinstance(a, workflow.Notify) for a in actions)  # no POST, no Event


@pytest.mark.parametrize(("props", "message"), [
    ({}, "properties.message: required, a string of at most 4000 characters"),
    ({"message": 3}, "properties.message: required, a string"),
    ({"message": "x" * 4001}, "of at most 4000 characters"),
    ({"message": "hi", "level": "info"}, "properties.level: not supported for a "
     "print-message-in-status step"),
])
def test_a_bad_message_is_refused_by_name(props: JSON, message: str) -> None:
    with pytest.raises(model.AppError, match=message):
        compile_.compile_app(spec(props), "app", "default", {},
                             [clusters_.Cluster(name="local")], "local")
