"""vela-core's remaining workflow steps, with KubeVela's semantics and narrowed for a
tenant: ``print-message-in-status`` (its message as the step's status message)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from federation.applications import compile as compile_
from federation.applications import model, workflow
from federation.cli import cli
from federation.placement import clusters as clusters_
from tests.unit.applications.test_workflow_data import Driver, healthy

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2", "member3")]


def spec_of(*steps: JSON) -> JSON:
    return {"components": [{"name": "web", "type": "webservice",
                            "properties": {"image": "nginx"}}],
            "workflow": {"steps": list(steps)}}


def compiled(*steps: JSON) -> compile_.Compiled:
    return compile_.compile_app(spec_of(*steps), "shop", "shop", {}, FLEET,
                                local_cluster="member1")


def dry_run(tmp_path: Path, steps: str) -> Any:
    app = tmp_path / "app.yaml"
    app.write_text("apiVersion: core.oam.dev/v1beta1\nkind: Application\n"
                   "metadata: {name: shop, namespace: shop}\nspec:\n"
                   "  components: [{name: web, type: webservice, properties: {image: nginx}}]\n"
                   "  workflow:\n    steps:\n" + steps)
    return CliRunner().invoke(cli, ["app", "dry-run", "-f", str(app)])


# -- print-message-in-status ----------------------------------------------------------------


def test_print_message_in_status_succeeds_with_its_message() -> None:
    """KubeVela's docs example: the message shows in the step's status, the step succeeds."""
    result = compiled({"name": "message", "type": "print-message-in-status",
                       "properties": {"message": "All addons have been enabled."}})
    [spec] = result.steps
    state = workflow.initial(1, result.steps, 0.0)
    state, actions = workflow.evaluate(state, result.steps, workflow.Observations(), 1.0)
    [step] = state.steps
    assert (spec.message, step.phase, step.reason, step.message, actions) == (
        "All addons have been enabled.", "succeeded", "Message",
        "All addons have been enabled.", [])


def test_print_message_in_status_takes_its_message_from_an_input() -> None:
    driver = Driver({"components": [{"name": "web", "type": "webservice",
                                     "properties": {"image": "nginx"}}],
                     "workflow": {"steps": [
                         {"name": "apply", "type": "apply-component",
                          "properties": {"component": "web"},
                          "outputs": [{"name": "who", "valueFrom": '"hello " + context.name'}]},
                         {"name": "say", "type": "print-message-in-status",
                          "inputs": [{"from": "who", "parameterKey": "message"}]}]}})
    driver.step()
    driver.step(healthy("apply"))
    driver.step(healthy("apply"))
    assert driver.state is not None
    assert {s.name: (s.phase, s.message) for s in driver.state.steps}["say"] == (
        "succeeded", "hello custom-if")


@pytest.mark.parametrize(("props", "words"), [
    ({}, r"steps\[0\]\.properties\.message: required, a string"),
    ({"message": {"text": "x"}}, r"properties\.message: required, a string"),
    ({"message": "x" * 4001}, r"properties\.message: 4001 characters; at most 4000"),
    ({"message": "x", "level": "info"}, r"properties\.level: not supported"),
])
def test_print_message_in_status_refused_by_path(props: JSON, words: str) -> None:
    with pytest.raises(model.AppError, match=words):
        compiled({"name": "m", "type": "print-message-in-status", "properties": props})


def test_dry_run_says_what_print_message_in_status_shows(tmp_path: Path) -> None:
    result = dry_run(tmp_path, "    - {name: say, type: print-message-in-status, "
                               "properties: {message: all done}}\n")
    assert result.exit_code == 0, result.output
    assert '# step say (print-message-in-status): its status message will be "all done"' \
        in result.output
