"""vela-core's ``generate-jdbc-connection``: the same container env as KubeVela's, as
references the kubelet resolves (``valueFrom.secretKeyRef`` of the connection Secret's
five keys, ``url`` built from them with ``$(VAR)``), so the control plane reads no Secret
and no password is in the Application's status or the member's pod template. KubeVela's
example (docs/examples/terraform/app-jdbc.yaml): the output into an apply-component
step's ``env``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from federation.applications import jdbc, model, workflow
from federation.cli import cli
from tests.unit.applications.test_workflow_data import Driver, healthy

JSON = dict[str, Any]


def ref(name: str, key: str) -> JSON:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": "db-conn", "key": key}}}


ENV = [ref("DB_HOST", "DB_HOST"), ref("DB_PORT", "DB_PORT"), ref("DB_NAME", "DB_NAME"),
       ref("DB_USER", "DB_USER"), ref("DB_PASSWORD", "DB_PASSWORD"),
       {"name": "url",
        "value": "jdbc://$(DB_HOST):$(DB_PORT)/$(DB_NAME)?characterEncoding=utf8&useSSL=false"},
       ref("username", "DB_USER"), ref("password", "DB_PASSWORD")]


def application(**props: Any) -> JSON:
    """KubeVela's example, its database component left out (an addon's), the output's
    ``valueFrom`` the template's ``env``."""
    return {"components": [{"name": "express-server", "type": "webservice",
                            "properties": {"image": "crccheck/hello-world", "port": 8000}}],
            "workflow": {"steps": [
                {"name": "jdbc", "type": "generate-jdbc-connection",
                 "outputs": [{"name": "jdbc", "valueFrom": "env"}],
                 "properties": {"name": "db-conn", "namespace": "ns", **props}},
                {"name": "apply", "type": "apply-component",
                 "inputs": [{"from": "jdbc", "parameterKey": "env"}],
                 "properties": {"component": "express-server", "cluster": "member1"}}]}}


def test_the_env_references_the_secret_and_builds_the_url_from_earlier_entries() -> None:
    """Every variable ``url`` expands is defined before it (the kubelet expands only
    those)."""
    step = model.Step(name="jdbc", type="generate-jdbc-connection",
                      properties={"name": "db-conn"})
    env = jdbc.env(step, "ns", "spec.workflow.steps[0].properties")
    assert env == ENV
    names = [e["name"] for e in env]
    assert all(names.index(var) < names.index("url") for var in ("DB_HOST", "DB_PORT",
                                                                  "DB_NAME"))


def test_the_output_lands_in_the_components_env_and_nothing_is_read() -> None:
    """The step succeeds at once (nothing to read); its output is the env; the
    apply-component step renders the Deployment with it: references only."""
    driver = Driver(application(), app="jdbc")
    state = driver.step()
    assert driver.phases()["jdbc"] == "succeeded"
    [jdbc_state] = [s for s in state.steps if s.name == "jdbc"]
    assert jdbc_state.reason == "Generated"
    assert state.values["jdbc"] == ENV
    driver.step(healthy("apply"))
    assert driver.compiled is not None
    [deployment] = [o for o in driver.compiled.targets["apply"].clusters["member1"]
                    if o["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["env"] == ENV
    said = json.dumps(workflow.to_status(state, str))
    assert "secretKeyRef" in said and '"value": "' not in said.replace(
        '"value": "jdbc://', "")


@pytest.mark.parametrize(("props", "words"), [
    ({"namespace": "bank"}, r"steps\[0\]\.properties\.namespace: not supported \(the step "
                            r"writes or reads the Application's own namespace only"),
    ({"name": "../kube-system/x"}, r"properties\.name: not a Kubernetes object name"),
    ({"name": 3}, r"properties\.name"),
    ({"cluster": "member2"}, r"properties\.cluster: not supported for a "
                             r"generate-jdbc-connection step"),
])
def test_attack_refused_by_path(props: JSON, words: str) -> None:
    """Another namespace's Secret (a secretKeyRef reads the pod's own namespace only),
    path characters, a field it does not have: refused by name."""
    with pytest.raises(model.AppError, match=words):
        Driver(application(**props), app="jdbc").step()


def test_dry_run_says_what_the_step_references(tmp_path: Any) -> None:
    app = tmp_path / "app.yaml"
    app.write_text("apiVersion: core.oam.dev/v1beta1\nkind: Application\n"
                   "metadata: {name: shop, namespace: shop}\nspec:\n  components: []\n"
                   "  workflow:\n    steps:\n    - {name: jdbc, type: generate-jdbc-connection, "
                   "properties: {name: db-conn}}\n")
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(app)])
    assert result.exit_code == 0, result.output
    assert "# step jdbc (generate-jdbc-connection): its output env references the keys of " \
        "Secret db-conn (secretKeyRef), which the kubelet resolves in the member; nothing " \
        "is read" in result.stdout
