"""fedctl join/unjoin pieces: the objects join writes, labels, what unjoin waits for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from federation.commands import join
from tests.unit.clients import Unserved


def test_objects_reference_the_secret_and_hold_one_context() -> None:
    """The MemberCluster points at the Secret; the Secret holds the minified kubeconfig."""
    document = {"apiVersion": "v1", "kind": "Config", "contexts": [{"name": "edge"}]}
    secret, member = join.objects("edge", document, {"tier": "gold"},
                                  {"region": "eu", "zone": "", "provider": "aws"})
    assert secret["metadata"] == {"name": "edge-kubeconfig", "namespace": "federation-system",
                                  "labels": {"federation.io/member-cluster": "edge"}}
    assert yaml.safe_load(secret["stringData"]["kubeconfig"]) == document
    assert member["spec"] == {"kubeconfigSecretRef": {"name": "edge-kubeconfig",
                                                      "namespace": "federation-system",
                                                      "key": "kubeconfig"},
                              "region": "eu", "provider": "aws"}
    assert member["metadata"]["labels"] == {"tier": "gold"}


def test_labels_are_parsed_strictly() -> None:
    """k=v pairs, comma-separated; anything else is a one-line error naming --labels."""
    assert join.parse_labels("a=1, b=two") == {"a": "1", "b": "two"}
    assert join.parse_labels(None) == {}
    with pytest.raises(join.BadInput, match="--labels: 'novalue' is not key=value"):
        join.parse_labels("novalue")


def test_placed_on_reads_decisions_and_pending_cleanup() -> None:
    """A binding holds a member while its decision or its pending clean-up names it (in the
    spec, where the one-record binding keeps it, or in the status, where earlier versions
    did), and so does one nobody can read."""
    bindings: list[dict[str, Any]] = [
                {"spec": {"clusters": [{"name": "edge", "replicas": 2}],
                          "resource": {"kind": "Deployment", "namespace": "a", "name": "w"}}},
                {"spec": {"clusters": [{"name": "member1"}]},
                 "status": {"pendingCleanup": ["edge"]}},
                {"spec": {"clusters": [{"name": "member1"}]}},
                {"spec": {"templateDeleted": True, "pendingCleanup": ["edge"],
                          "resource": {"kind": "ConfigMap", "namespace": "a", "name": "c"}}},
                {"kind": "ResourceBinding", "metadata": {"name": "x", "namespace": "a"},
                 "spec": {"pendingCleanup": "edge"}}]
    found = join.placed_on(bindings, "edge")
    assert [binding for binding, _ in found] == [bindings[0], bindings[1], bindings[3],
                                                 bindings[4]]
    assert [join.describe(held) for held in found] == [
        "Deployment a/w", "template-less binding ?", "ConfigMap a/c",
        "unreadable ResourceBinding a/x"]


def test_unjoin_waits_for_a_copy_pending_clean_up_in_the_spec() -> None:
    """The attack on the old reader: a deleted template's copy on the member still pending
    clean-up (spec.pendingCleanup, the one-record binding) did not hold the member, so
    unjoin let it go and the copy stayed behind, ours and unmanaged, for ever."""
    leftover = {"spec": {"templateDeleted": True, "pendingCleanup": ["edge"],
                         "resource": {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}}}
    assert len(join.placed_on([leftover], "edge")) == 1


def one_line_error(args: list[str], command: click.Command = join.join) -> str:
    """Run a command that must fail with one ``error:`` line, exit 1, no usage text."""
    result = CliRunner().invoke(command, args)
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Usage:" not in result.output
    return lines[0]


@pytest.mark.parametrize("name", ["../x", "x/../y", "..", "Bad_Name", "", "a" * 64, "edge\n",
                                  "edge-", "edge.example"])
def test_bad_name_is_one_line_before_anything_is_read(name: str) -> None:
    """A NAME that is not a DNS label (a path, upper case, too long...) is refused in one
    line, exit 1, before the kubeconfig (or the missing --kubeconfig) is looked at."""
    line = one_line_error([name, "--kubeconfig", "/nonexistent"])
    assert "is not a DNS label" in line
    assert "is not a DNS label" in one_line_error([name])  # not "Missing option"


def test_unjoin_checks_the_name_the_same_way() -> None:
    """unjoin puts NAME in a URL path: '../x' is refused before any request."""
    assert "is not a DNS label" in one_line_error(["../x"], join.unjoin)


def test_bad_paths_and_options_are_one_line(tmp_path: Path) -> None:
    """A missing or unreadable kubeconfig, bad labels, a relative allowlist entry."""
    missing = str(tmp_path / "missing")
    assert "does not exist" in one_line_error(["edge", "--kubeconfig", missing])
    assert "Is a directory" in one_line_error(["edge", "--kubeconfig", str(tmp_path)])
    assert "--labels" in one_line_error(["edge", "--kubeconfig", "/x", "--labels", "a"])
    assert "--allow-exec-command" in one_line_error(
        ["edge", "--kubeconfig", "/x", "--allow-exec-command", "./aws"])


def test_a_yaml_error_does_not_quote_the_file(tmp_path: Path) -> None:
    """PyYAML's message quotes the offending line, which may hold a token: we give the
    position and the problem only."""
    path = tmp_path / "bad.yaml"
    path.write_text("users:\n- name: u\n  user:\n    token: [SUPERSECRET\n")
    line = one_line_error(["edge", "--kubeconfig", str(path)])
    assert "malformed YAML: line 5" in line and "SUPERSECRET" not in line


def test_a_hostile_exec_kubeconfig_is_refused_before_the_hub_is_contacted(
        tmp_path: Path) -> None:
    """exec.command aws with exec.env PATH=<dir>: one line naming PATH; the planted aws
    never runs and the hub (an unreachable address here) is never contacted."""
    marker = tmp_path / "PWNED"
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "aws").write_text(f"#!/bin/sh\necho ran >> '{marker}'\n")
    (evil / "aws").chmod(0o755)
    document = {"apiVersion": "v1", "kind": "Config", "current-context": "m",
                "clusters": [{"name": "m", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "m", "user": {"exec": {
                    "apiVersion": "client.authentication.k8s.io/v1", "command": "aws",
                    "args": ["eks", "get-token"],
                    "env": [{"name": "PATH", "value": str(evil)}]}}}],
                "contexts": [{"name": "m", "context": {"cluster": "m", "user": "m"}}]}
    path = tmp_path / "member.yaml"
    path.write_text(yaml.safe_dump(document))
    line = one_line_error(["edge", "--kubeconfig", str(path), "--hub-kubeconfig",
                           str(tmp_path / "no-hub.yaml")])
    assert "exec env may not set PATH" in line and str(evil) not in line
    assert not marker.exists()


# -- join --create-service-account --------------------------------------------------------------


def test_the_stored_kubeconfig_keeps_server_and_ca_and_only_the_token() -> None:
    """with_token drops every admin credential (certificate, key, exec, password)."""
    user = {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5",
            "exec": {"command": "aws"}, "password": "p"}
    document: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config", "current-context": "edge",
        "clusters": [{"name": "edge", "cluster": {"server": "https://x",
                                                  "certificate-authority-data": "Q0E="}}],
        "users": [{"name": "edge", "user": user}],
        "contexts": [{"name": "edge", "context": {"cluster": "edge", "user": "edge"}}]}
    stored = join.with_token(document, "sa-token")
    assert stored["users"] == [{"name": "edge", "user": {"token": "sa-token"}}]
    assert stored["clusters"] == document["clusters"]
    assert stored["contexts"] == document["contexts"]
    assert "client-key-data" in document["users"][0]["user"]  # the input is left alone


class FakeMember(Unserved):
    """Records what install_service_account asks of a member; answers TokenRequest."""

    name = "edge"

    def __init__(self, token: str | None = "t0ken") -> None:
        self.calls: list[tuple[str, str]] = []
        self.token = token
        self.body: Any = None

    async def create(self, resource: Any, body: dict[str, Any], namespace: str | None = None
                     ) -> dict[str, Any]:
        self.calls.append(("create", f"{body['kind']}/{body['metadata']['name']}"))
        return body

    async def apply(self, resource: Any, body: dict[str, Any], field_manager: str, *,
                    force: bool = False, subresource: str | None = None) -> dict[str, Any]:
        self.calls.append(("apply", f"{body['kind']}/{body['metadata']['name']}"))
        return body

    async def request(self, method: str, path: str, *, body: Any = None,
                      **_: Any) -> dict[str, Any]:
        self.calls.append((method, path))
        self.body = body
        status = {"expirationTimestamp": "2027-01-01T00:00:00Z"}
        if self.token:
            status["token"] = self.token
        return {"status": status}


async def test_service_account_setup_asks_for_a_bound_token_after_the_rbac() -> None:
    """Namespace, ServiceAccount, member role and binding, then a TokenRequest with the
    asked lifetime; the token and the server's expiry come back."""
    from federation.controllers import install
    from federation.rbac import roles

    member = FakeMember()
    token, expires = await install.install_service_account(
        member, roles.Settings(), 86400)
    assert (token, expires) == ("t0ken", "2027-01-01T00:00:00Z")
    assert member.calls == [
        ("create", "Namespace/federation-system"),
        ("apply", "ServiceAccount/federation-control-plane"),
        ("apply", f"ClusterRole/{roles.MEMBER_ROLE}"),
        ("apply", f"ClusterRoleBinding/{roles.MEMBER_ROLE}"),
        ("POST", "/api/v1/namespaces/federation-system/serviceaccounts/"
                 "federation-control-plane/token")]
    assert member.body["spec"] == {"expirationSeconds": 86400}


async def test_a_token_request_without_a_token_is_an_error_not_an_empty_credential() -> None:
    from federation.contexts import client as kube
    from federation.controllers import install
    from federation.rbac import roles

    with pytest.raises(kube.ApiError, match="returned no token"):
        await install.install_service_account(FakeMember(token=None),
                                              roles.Settings(), 3600)


def test_a_wildcard_kind_is_refused_before_anything_is_written(tmp_path: Any) -> None:
    """--propagate-kinds '*' with --create-service-account: one line, exit 1, no call made
    (the hub and member in this kubeconfig do not exist)."""
    kubeconfig = tmp_path / "k.yaml"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "m",
        "clusters": [{"name": "m", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "m", "user": {"token": "x"}}],
        "contexts": [{"name": "m", "context": {"cluster": "m", "user": "m"}}]}))
    result = CliRunner().invoke(join.join, [
        "edge", "--kubeconfig", str(kubeconfig), "--create-service-account",
        "--propagate-kinds", "*", "--hub-kubeconfig", str(kubeconfig)])
    assert result.exit_code == 1
    assert result.output.strip() == (
        "error: --propagate-kinds: '*': wildcards are never granted; list the kinds")
