"""fedctl interpret: karmadactl interpret's flags and output, offline."""

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

pytest.importorskip("lupa")

from federation.cli import cli
from tests.unit.interpreter.test_lua import WIDGETS, widget


def files(tmp_path: Path, script: str = WIDGETS) -> tuple[Path, Path]:
    customization = tmp_path / "customization.yaml"
    customization.write_text(yaml.safe_dump({
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": "widgets"},
        "spec": {"target": {"apiVersion": "example.io/v1", "kind": "Widget"},
                 "customizations": {"replicaResource": {"luaScript": script},
                                    "healthInterpretation": {"luaScript": script}}}}))
    observed = tmp_path / "observed.yaml"
    observed.write_text(yaml.safe_dump(widget(7)))
    return customization, observed


def test_each_result_is_a_numbered_yaml_document(tmp_path: Path) -> None:
    customization, observed = files(tmp_path)
    result = CliRunner().invoke(cli, ["interpret", "-f", str(customization), "--operation",
                                      "interpretReplica", "--observed-file", str(observed)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "---", "# [1/2] replica:", "7", "---", "# [2/2] requires:",
        "resourceRequest:", "  cpu: 250m"]


def test_check_lists_each_operation(tmp_path: Path) -> None:
    customization, _ = files(tmp_path, "function InterpretHealth(obj) return (")
    result = CliRunner().invoke(cli, ["interpret", "-f", str(customization), "--check"])
    assert result.exit_code == 1
    assert "TARGET: example.io/v1 Widget" in result.output
    assert "InterpretHealth:\tERROR:" in result.output
    assert "Retain:\tUNSET" in result.output


def test_a_script_out_of_budget_is_one_line_naming_it(tmp_path: Path) -> None:
    customization, observed = files(tmp_path, "function InterpretHealth(o) while 1 do end end")
    result = CliRunner().invoke(cli, ["interpret", "-f", str(customization), "--operation",
                                      "InterpretHealth", "--observed-file", str(observed)])
    assert result.exit_code == 1
    assert result.output.strip() == ("Execute InterpretHealth error: customization widgets, "
                                     "InterpretHealth: instruction budget exhausted")
