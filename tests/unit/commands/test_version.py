"""``fedctl version``: one line with the installed version, the one User-Agents carry."""

from __future__ import annotations

import importlib.metadata
import platform
import tomllib
from pathlib import Path

from click.testing import CliRunner

import federation
from federation import cli

ROOT = Path(__file__).resolve().parents[3]


def test_version_prints_one_line_with_the_package_version() -> None:
    """The line names fedctl, the version and the Python running it."""
    result = CliRunner().invoke(cli.cli, ["version"])
    assert result.exit_code == 0, result.output
    assert result.output.count("\n") == 1
    assert result.output.startswith(f"fedctl {federation.__version__} (Python ")
    assert platform.python_version() in result.output


def test_the_version_is_the_project_version() -> None:
    """__version__ (User-Agent, `fedctl version`) is pyproject's, and the installed one."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert federation.__version__ == project["version"]
    assert importlib.metadata.version("federation") == project["version"]
