"""`fedctl reloader-cert` with a hub it cannot use: one clear error line, nothing written.
(The files it writes are checked against a real hub in tests/e2e/test_simulated_reloader.py.)"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from federation.cli import cli


def test_a_missing_hub_context_is_one_clear_error_and_nothing_is_written(
        tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig.yaml"
    config.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    out = tmp_path / "tls"
    result = CliRunner().invoke(cli, ["reloader-cert", "--out-dir", str(out),
                                       "--hub-kubeconfig", str(config), "--hub-context", "hub"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and "hub" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not out.exists()


def test_an_unreachable_hub_is_one_clear_error_and_nothing_is_written(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig.yaml"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: hub\n"
        "clusters: [{name: hub, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: hub, context: {cluster: hub, user: admin}}]\n"
        "users: [{name: admin, user: {token: not-a-secret-but-never-printed}}]\n")
    out = tmp_path / "tls"
    result = CliRunner().invoke(cli, ["reloader-cert", "--out-dir", str(out),
                                       "--hub-kubeconfig", str(config)])
    assert result.exit_code == 1
    assert "the reloaders' CA on the hub" in result.output
    assert "not-a-secret-but-never-printed" not in result.output
    assert not out.exists()
