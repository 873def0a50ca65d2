"""`fedctl join --mode pull`: its flags, the agent's files and the printed command."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from federation.commands import join
from federation.work import identity


def test_pull_takes_no_member_credentials() -> None:
    result = CliRunner().invoke(join.join, ["edge", "--mode", "pull", "--kubeconfig", "x.yaml"])
    assert result.exit_code == 1
    assert "--mode pull takes no --kubeconfig" in result.output


def test_push_still_needs_the_kubeconfig() -> None:
    result = CliRunner().invoke(join.join, ["edge"])
    assert result.exit_code == 1 and "--kubeconfig is required in push mode" in result.output


def test_agent_files_keep_the_key_private_and_the_command_names_no_secret(tmp_path: Path
                                                                          ) -> None:
    ca = identity.new_ca()
    cert, key = identity.issue_agent(ca, "edge")
    paths = join.write_agent_files(tmp_path / "edge-agent", cert, key, ca.cert_pem)
    assert paths["key"].stat().st_mode & 0o077 == 0
    assert identity.common_name(paths["cert"].read_bytes()) == "edge"
    command = join.agent_command("edge", paths, "hub.example.com:9443")
    assert command.startswith("fedctl agent --hub-address hub.example.com:9443 "
                              "--cluster-name edge ")
    assert "PRIVATE KEY" not in command and key.decode() not in command
    # Joining again (a new certificate) replaces the files, the key still private.
    again = join.write_agent_files(tmp_path / "edge-agent", cert, key, ca.cert_pem)
    assert again["key"].stat().st_mode & 0o077 == 0


def test_pull_member_has_no_secret_reference() -> None:
    member = join.pull_member("edge", {"tier": "edge"}, {"region": "eu", "zone": ""})
    assert member["spec"] == {"mode": "Pull", "region": "eu"}
