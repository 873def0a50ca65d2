"""The first hour (issue 28): kubectl's --context is accepted for the hub, and fedctl
prints shell completion scripts that complete its own commands and options."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from federation.cli import cli

KUBECONFIG = """apiVersion: v1
kind: Config
current-context: elsewhere
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: elsewhere, context: {cluster: c, user: u}}]
"""


@pytest.mark.parametrize("argv", [
    ["get", "clusters"], ["app", "status", "x"], ["install"], ["run"],
    ["plan", "--live"], ["reloader-cert", "--out-dir", "out"],
])
def test_context_names_the_hub_as_kubectl_spells_it(tmp_path: Path, argv: list[str]) -> None:
    """`--context hub` reaches the hub lookup (an unknown context is named), where it
    used to be "No such option"."""
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG)
    option = ["--hub-kubeconfig"] if argv[0] == "reloader-cert" else ["--kubeconfig"]
    result = CliRunner().invoke(cli, [*argv, *option, str(config), "--context", "hub"])
    assert "No such option" not in result.output
    assert "hub" in result.output and result.exit_code != 0, result.output


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_hook_for_the_shell(shell: str) -> None:
    result = CliRunner().invoke(cli, ["completion", shell])
    assert result.exit_code == 0 and "_FEDCTL_COMPLETE" in result.output


def test_completion_refuses_an_unknown_shell() -> None:
    result = CliRunner().invoke(cli, ["completion", "tcsh"])
    assert result.exit_code == 2 and "'tcsh' is not one of" in result.output


@pytest.mark.parametrize(("words", "cword", "expected"), [
    ("fedctl ge", 1, "get"), ("fedctl get clusters --con", 3, "--context"),
    ("fedctl local st", 2, "status"),
])
def test_the_hook_completes_commands_and_options(words: str, cword: int,
                                                 expected: str) -> None:
    """What the bash hook asks fedctl (click's protocol), answered by the real program."""
    env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(cword),
           "_FEDCTL_COMPLETE": "bash_complete"}
    program = Path(sys.executable).with_name("fedctl")  # the installed entry point
    found = subprocess.run([str(program)], env=env, capture_output=True, text=True,
                           timeout=60, check=False)
    assert f"plain,{expected}" in found.stdout.splitlines(), found.stdout
