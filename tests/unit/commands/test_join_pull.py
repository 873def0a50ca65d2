"""`fedctl join --mode pull`: its flags, the agent's files and the printed command."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from federation.commands import join
from federation.deploy import apply as deploy_apply
from federation.deploy import manifests
from federation.work import identity


def test_pull_takes_no_member_credentials() -> None:
    result = CliRunner().invoke(join.join, ["edge", "--mode", "pull", "--kubeconfig", "x.yaml"])
    assert result.exit_code == 1
    assert "--mode pull takes --kubeconfig and --context only with --apply-agent" in \
        result.output
    result = CliRunner().invoke(join.join, ["edge", "--mode", "pull", "--context", "edge"])
    assert result.exit_code == 1 and "--context only with --apply-agent" in result.output


@pytest.mark.parametrize(("args", "error"), [
    (["--apply-agent", "--hub-address", "h:9443"], "--apply-agent needs --kubeconfig"),
    (["--apply-agent", "--kubeconfig", "x.yaml"], "--apply-agent needs --hub-address"),
    (["--apply-agent", "--kubeconfig", "x.yaml", "--hub-address", "h:9443", "--out-dir", "d"],
     "--apply-agent writes no file"),
    (["--apply-agent", "--create-service-account", "--kubeconfig", "x.yaml"],
     "--mode pull takes no --create-service-account"),
])
def test_apply_agent_refuses_what_it_would_ignore(args: list[str], error: str) -> None:
    """Every flag --apply-agent cannot honour is refused by name, before anything is read."""
    result = CliRunner().invoke(join.join, ["edge", "--mode", "pull", *args])
    assert result.exit_code == 1, result.output
    assert error in result.output


def test_apply_agent_is_for_pull_mode() -> None:
    result = CliRunner().invoke(join.join, ["edge", "--apply-agent", "--kubeconfig", "x.yaml"])
    assert result.exit_code == 1
    assert "--apply-agent is for --mode pull" in result.output


def test_the_agent_for_a_member_is_config_agent_with_its_config_and_certificate() -> None:
    """What --apply-agent applies: config/agent's objects in order, unchanged but for the
    ConfigMap (the member's name, the hub address) and the Secret (certificate, key, CA)."""
    ca = identity.new_ca()
    cert, key = identity.issue_agent(ca, "edge")
    options = manifests.Options()
    filled = manifests.agent_for_member(options, manifests.AgentIdentity(
        "edge", "hub.example.com:9443", cert, key, ca.cert_pem))
    shipped = manifests.agent_objects(options)
    assert [(o["kind"], o["metadata"]["name"]) for o in filled] == \
        [(o["kind"], o["metadata"]["name"]) for o in shipped]
    changed = [o for o, s in zip(filled, shipped, strict=True) if o != s]
    assert [o["kind"] for o in changed] == ["ConfigMap", "Secret"]
    assert changed[0]["data"] == {"cluster-name": "edge", "hub-address": "hub.example.com:9443"}
    data = {k: base64.b64decode(v) for k, v in changed[1]["data"].items()}
    assert data == {"tls.crt": cert, "tls.key": key, "ca.crt": ca.cert_pem}
    assert [o for o in filled if o["kind"] != "Secret" and
            "PRIVATE KEY" in json.dumps(o)] == []
    assert {deploy_apply.resource(o).kind for o in filled} == {o["kind"] for o in filled}


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
