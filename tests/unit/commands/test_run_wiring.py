"""`fedctl run`'s flags reach the controllers as one settings value, not module globals."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from federation.commands import run as run_command
from federation.controllers import setup
from federation.runtime import manager


def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "hub",
        "clusters": [{"name": "hub", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "u"}},
                     {"name": "member1", "context": {"cluster": "hub", "user": "u"}}]}))
    return path


def test_flags_become_the_settings_setup_receives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers, clean-up wait, deny list and exec allowlist arrive in `setup`'s argument,
    and the module keeps no state a second manager in the same process would inherit."""
    received: list[tuple[manager.Manager, setup.Settings]] = []

    async def serve(mgr: manager.Manager, *args: object) -> None:
        await mgr.close()

    monkeypatch.setattr(setup, "setup", lambda mgr, settings: received.append((mgr, settings)))
    monkeypatch.setattr(run_command, "serve", serve)
    result = CliRunner().invoke(run_command.run, [
        "--kubeconfig", str(kubeconfig(tmp_path)), "--hub-context", "hub",
        "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
        "--workers", "3", "--cleanup-wait", "4.5", "--allow-exec-command", "my-plugin",
        "--propagation-deny", "example.com/Widget"])
    assert result.exit_code == 0, result.output
    [(_, settings)] = received
    assert settings.propagation.workers == 3
    assert settings.propagation.cleanup_wait == 4.5
    assert settings.allowed_exec == ("my-plugin",)
    assert settings.propagation.deny_list.kind_rule("example.com", "Widget") is not None
    assert settings.propagation.deny_list.kind_rule("apps", "Deployment") is None
    assert not [name for name in vars(setup) if name.isupper()]


def run_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 *flags: str) -> tuple[setup.Settings, list[object]]:
    """`fedctl run` with ``flags``, stopped at `serve`: the settings `setup` got and what
    `serve` was handed."""
    received: list[setup.Settings] = []
    served: list[object] = []

    async def serve(mgr: manager.Manager, *args: object) -> None:
        served.extend(args)
        await mgr.close()

    monkeypatch.setattr(setup, "setup", lambda mgr, settings: received.append(settings))
    monkeypatch.setattr(run_command, "serve", serve)
    result = CliRunner().invoke(run_command.run, [
        "--kubeconfig", str(kubeconfig(tmp_path)), "--hub-context", "hub",
        "--metrics-bind-address", "0", "--health-probe-bind-address", "0", *flags])
    assert result.exit_code == 0, result.output
    [settings] = received
    return settings, served


def test_work_bind_address_gives_membership_a_work_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings, served = run_recorded(tmp_path, monkeypatch, "--work-bind-address",
                                    "127.0.0.1:0", "--work-hosts", "hub.example.com")
    assert settings.work is not None and settings.work.hosts == ["hub.example.com"]
    assert served == [settings.work, "127.0.0.1:0", settings.reconfigure.caller]


def test_the_rollout_controller_gets_the_reloader_caller_serve_prepares(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One ReloaderCaller: the controller's settings hold it, `serve` loads its CA."""
    settings, served = run_recorded(tmp_path, monkeypatch)
    assert isinstance(settings.reconfigure.caller, run_command.ReloaderCaller)
    assert served[-1] is settings.reconfigure.caller
