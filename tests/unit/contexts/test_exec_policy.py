"""Exec plugins: what a kubeconfig may make this process run (the allowlist bypass of issue 14).

Each attack plants an executable ``aws`` that would write a marker file, and checks that
the kubeconfig is refused with one line naming the rule and that the marker never appears.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.contexts import client as kube
from federation.contexts import clusters, credentials, kubeconfig, minify
from federation.contexts.credentials import ExecAllowlist, ExecRefused

V1 = "client.authentication.k8s.io/v1"
DEFAULT = ExecAllowlist.of()


def script(path: Path, marker: Path, token: str = "tok") -> Path:
    """An executable that writes ``marker`` and prints an ExecCredential."""
    credential = json.dumps({"apiVersion": V1, "kind": "ExecCredential",
                             "status": {"token": token}})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho ran >> '{marker}'\necho '{credential}'\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """The attacker's directory with an ``aws`` in it, and the marker it would write."""
    marker = tmp_path / "PWNED"
    script(tmp_path / "evil" / "aws", marker)
    return tmp_path / "evil", marker


def exec_context(config: dict[str, Any], name: str = "edge") -> kubeconfig.Context:
    return kubeconfig.Context(name=name, server="https://127.0.0.1:1", exec_config=config)


def aws(*env: tuple[str, str], command: str = "aws",
        args: tuple[str, ...] = ("eks", "get-token", "--cluster-name", "c")) -> dict[str, Any]:
    return {"apiVersion": V1, "command": command, "args": list(args),
            "env": [{"name": n, "value": v} for n, v in env]}


def attacks(evil: Path) -> list[tuple[dict[str, Any], str]]:
    """(exec config, what the refusal must name) for each way in."""
    link = evil.parent / "bin" / "aws"
    link.parent.mkdir(exist_ok=True)
    if not link.exists():
        link.symlink_to(evil / "aws")
    return [
        (aws(("PATH", str(evil))), "may not set PATH"),
        (aws(("Path", str(evil))), "may not set Path"),
        (aws(("LD_PRELOAD", str(evil / "x.so"))), "may not set LD_PRELOAD"),
        (aws(("ld_audit", str(evil / "x.so"))), "may not set ld_audit"),
        (aws(("PYTHONPATH", str(evil))), "may not set PYTHONPATH"),
        (aws(("HOME", str(evil))), "may not set HOME"),
        (aws(("AWS_CONFIG_FILE", str(evil / "config"))), "may not set AWS_CONFIG_FILE"),
        (aws(("HTTP_PROXY", "http://evil:3128")), "may not set HTTP_PROXY"),
        (aws(("BASH_FUNC_aws%%", "() { id; }")), "env[0] has no valid name"),
        (aws(command="./aws"), "relative or unnormalized path"),
        (aws(command="../x/aws"), "relative or unnormalized path"),
        (aws(command="evil/aws"), "relative or unnormalized path"),
        (aws(command=str(evil / "aws")), "which is not on the allowlist"),
        (aws(command=str(link)), "which is not on the allowlist"),
        (aws(command=f"{evil}/../evil/aws"), "relative or unnormalized path"),
        (aws(args=("iam", "create-access-key")), "may only run `aws eks get-token`"),
        (aws(args=("--debug", "eks", "get-token")), "may only run `aws eks get-token`"),
        ({**aws(), "args": "eks get-token"}, "exec args is not a list of strings"),
        ({**aws(), "env": {"PATH": str(evil)}}, "exec env is not a list"),
        ({**aws(), "interactiveMode": "Always"}, "needs a terminal"),
        ({"apiVersion": V1, "command": "sh", "args": ["-c", "id"]}, "not on the allowlist"),
    ]


def test_every_attack_is_refused_by_the_control_plane_and_nothing_runs(
        planted: tuple[Path, Path]) -> None:
    """With the control plane's allowlist each hostile exec config is refused before any
    client exists, with one line naming the rule; the planted command never runs."""
    evil, marker = planted
    for config, reason in attacks(evil):
        with pytest.raises(ExecRefused) as refused:
            credentials.for_context(exec_context(config), DEFAULT)
        message = str(refused.value)
        assert reason in message and "\n" not in message, (config, message)
        assert message.startswith("context 'edge'")
    assert not marker.exists()


def test_env_and_path_rules_hold_for_a_users_own_kubeconfig_too(
        planted: tuple[Path, Path]) -> None:
    """Without an allowlist (the CLI, trusting the kubeconfig as kubectl does) any command
    may run, but the env deny list and the path rules still apply."""
    evil, marker = planted
    for config, reason in attacks(evil):
        if "allowlist" in reason or "may only run" in reason:
            continue
        with pytest.raises(ExecRefused) as refused:
            credentials.for_context(exec_context(config), None)
        assert reason in str(refused.value)
    assert not marker.exists()


def test_refusals_never_quote_env_values_or_args(planted: tuple[Path, Path]) -> None:
    """A refused env value or argument may be a secret: messages name the variable only."""
    config = aws(("AWS_SECRET_ACCESS_KEY", "s3cr3t-value"), ("LD_PRELOAD", "s3cr3t-lib"),
                 args=("iam", "--token", "s3cr3t-arg"))
    with pytest.raises(ExecRefused) as refused:
        credentials.check_exec("edge", config, DEFAULT)
    assert "LD_PRELOAD" in str(refused.value) and "s3cr3t" not in str(refused.value)
    with pytest.raises(ExecRefused) as refused:
        credentials.check_exec("edge", aws(args=("iam", "--token", "s3cr3t-arg")), DEFAULT)
    assert "s3cr3t" not in str(refused.value)


async def test_the_command_is_resolved_on_our_own_path_before_the_kubeconfig_env(
        tmp_path: Path, planted: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """An allowed bare name is found on this process's PATH (set here through os.environ,
    as an operator would) and run by that absolute path; the kubeconfig's own (allowed)
    env reaches the plugin but has no say in what runs."""
    evil, marker = planted
    legit_marker = tmp_path / "legit-ran"
    bindir = tmp_path / "operator-bin"
    script(bindir / "kubelogin", legit_marker, token="legit-token")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    config = {"apiVersion": V1, "command": "kubelogin", "args": ["get-token"],
              "env": [{"name": "AZURE_TENANT", "value": str(evil)}]}
    found = credentials.for_context(exec_context(config), DEFAULT)
    assert isinstance(found, credentials.ExecCredentials)
    assert found.executable == str(bindir / "kubelogin")
    assert found.spec.env == (("AZURE_TENANT", str(evil)),)
    assert (await found.get()).token == "legit-token"
    assert legit_marker.exists() and not marker.exists()


async def test_an_allowlisted_plugin_on_the_real_path_still_works(
        tmp_path: Path, planted: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The legitimate case: an operator-allowed command on the process's PATH runs (by its
    absolute path) and its token is used; the planted one is not touched."""
    _, marker = planted
    legit_marker = tmp_path / "legit-ran"
    bindir = tmp_path / "operator-bin"
    script(bindir / "fed-test-plugin", legit_marker, token="legit-token")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    config = {"apiVersion": V1, "command": "fed-test-plugin", "args": ["anything", "at all"],
              "env": [{"name": "PLUGIN_MODE", "value": "x"}]}
    found = credentials.for_context(exec_context(config), ExecAllowlist.of(["fed-test-plugin"]))
    assert (await found.get()).token == "legit-token"
    assert legit_marker.read_text() == "ran\n" and not marker.exists()


def test_an_allowlisted_absolute_path_is_matched_exactly(tmp_path: Path) -> None:
    """An absolute command runs only when exactly that path is allowed; a bare name may
    also be allowed through its own entry; neither a symlink nor a spelling variant of an
    allowed path passes."""
    marker = tmp_path / "ran"
    plugin = script(tmp_path / "opt" / "plugin", marker)
    allowlist = ExecAllowlist.of([str(plugin)])
    found = credentials.for_context(exec_context({"apiVersion": V1, "command": str(plugin)}),
                                    allowlist)
    assert isinstance(found, credentials.ExecCredentials) and found.executable == str(plugin)
    link = tmp_path / "link"
    link.symlink_to(plugin)
    for variant in (str(link), f"{tmp_path}/opt/./plugin", f"{tmp_path}/opt//plugin",
                    f"{tmp_path}/x/../opt/plugin", "plugin"):
        with pytest.raises(ExecRefused):
            credentials.for_context(exec_context({"apiVersion": V1, "command": variant}),
                                    allowlist)
    assert not marker.exists()


def test_relative_path_entries_are_never_searched(tmp_path: Path, planted: tuple[Path, Path],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """'.', empty and relative PATH entries would search the working directory: skipped."""
    evil, marker = planted
    monkeypatch.chdir(evil)
    spec = credentials.check_exec("edge", aws(), DEFAULT)
    for search in (".", "", "evil", f".{os.pathsep}{os.pathsep}bin"):
        with pytest.raises(ExecRefused, match="not on the control plane's PATH"):
            credentials.resolve_command("edge", spec, {"PATH": search})
    assert credentials.resolve_command("edge", spec, {"PATH": f".{os.pathsep}{evil}"}) == \
        str(evil / "aws")  # an absolute entry the operator put there is theirs
    assert not marker.exists()


def test_cloud_clis_are_held_to_their_token_subcommand() -> None:
    """aws/oci/doctl/kubelogin/aws-iam-authenticator only with their token command, after
    the few global options their own kubeconfig generators write."""
    def allowed(command: str, *args: str) -> bool:
        try:
            credentials.check_exec("c", {"apiVersion": V1, "command": command,
                                         "args": list(args)}, DEFAULT)
        except ExecRefused:
            return False
        return True

    assert allowed("aws", "--region", "eu-west-1", "eks", "get-token", "--cluster-name", "x")
    assert allowed("aws", "--profile=p", "eks", "get-token")
    assert not allowed("aws", "--region", "eks", "get-token")
    assert not allowed("aws", "s3", "cp", "s3://b/k", "/tmp/x")
    assert not allowed("aws")
    assert allowed("oci", "ce", "cluster", "generate-token", "--cluster-id", "x")
    assert not allowed("oci", "os", "object", "get")
    assert allowed("doctl", "kubernetes", "cluster", "kubeconfig", "exec-credential", "id")
    assert not allowed("doctl", "compute", "droplet", "delete", "x")
    assert allowed("kubelogin", "get-token", "--login", "azurecli")
    assert not allowed("kubelogin", "convert-kubeconfig")
    assert allowed("aws-iam-authenticator", "token", "-i", "x")
    assert not allowed("aws-iam-authenticator", "server")
    assert allowed("gke-gcloud-auth-plugin")
    trusted = ExecAllowlist.of(["aws"])  # the operator takes the risk explicitly
    credentials.check_exec("c", {"apiVersion": V1, "command": "aws", "args": ["s3", "ls"]},
                           trusted)


def test_allowlist_entries_are_names_or_exact_absolute_paths() -> None:
    """--allow-exec-command takes a bare name or a normalized absolute path, nothing else."""
    assert ExecAllowlist.of(["my-plugin", "/opt/bin/plugin"]).extra == {
        "my-plugin", "/opt/bin/plugin"}
    for bad in ("./plugin", "bin/plugin", "/opt/../bin/plugin", "//opt/plugin", ""):
        with pytest.raises(ValueError, match="bare command name or a normalized absolute"):
            ExecAllowlist.of([bad])


def test_install_hint_is_one_clean_line_and_only_for_a_users_own_kubeconfig() -> None:
    """installHint is the kubeconfig author's text: control characters and extra lines are
    dropped, and the control plane does not repeat it at all."""
    config = {"apiVersion": V1, "command": "no-such-plugin-here",
              "installHint": "install it\x1b[31m from\nhttps://evil.example | sh"}
    with pytest.raises(ExecRefused) as trusted:
        credentials.for_context(exec_context(config), None)
    assert str(trusted.value).endswith("not on the control plane's PATH (install it?[31m from)")
    with pytest.raises(ExecRefused) as controlled:
        credentials.for_context(exec_context(config), ExecAllowlist.of(["no-such-plugin-here"]))
    assert "install it" not in str(controlled.value)


def test_the_deny_list_covers_the_documented_variables() -> None:
    """The documented names and prefixes, case-insensitively; ordinary plugin settings pass."""
    for name in ("PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES",
                 "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PERL5LIB", "RUBYLIB",
                 "NODE_OPTIONS", "BASH_ENV", "ENV", "IFS", "HOME", "SHELL", "path",
                 "KUBERNETES_EXEC_INFO", "https_proxy", "AWS_ENDPOINT_URL_STS",
                 # gcloud's interpreter and its options, OpenSSL's engines, Google
                 # credential files that may name a program
                 "CLOUDSDK_PYTHON", "CLOUDSDK_PYTHON_ARGS", "OPENSSL_CONF", "OPENSSL_ENGINES",
                 "GOOGLE_APPLICATION_CREDENTIALS",
                 "GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES"):
        assert credentials.env_denied(name), name
    for name in ("AWS_PROFILE", "AWS_REGION", "AZURE_TENANT_ID", "GOOGLE_CLOUD_PROJECT",
                 "CLOUDSDK_CORE_PROJECT", "USE_GKE_GCLOUD_AUTH_PLUGIN"):
        assert not credentials.env_denied(name), name


# -- the same rule wherever the kubeconfig comes from ----------------------------------


def hostile_kubeconfig(evil: Path) -> dict[str, Any]:
    """What an attacker with write access to the join Secret's namespace would store."""
    return {"apiVersion": "v1", "kind": "Config", "current-context": "edge",
            "clusters": [{"name": "edge", "cluster": {"server": "https://127.0.0.1:1"}}],
            "users": [{"name": "edge", "user": {"exec": aws(("PATH", str(evil)))}}],
            "contexts": [{"name": "edge", "context": {"cluster": "edge", "user": "edge"}}]}


def test_join_refuses_the_kubeconfig_before_storing_it(tmp_path: Path,
                                                       planted: tuple[Path, Path]) -> None:
    """fedctl join's minify applies the same rule (it writes nothing when it raises)."""
    evil, marker = planted
    path = tmp_path / "member.yaml"
    path.write_text(yaml.safe_dump(hostile_kubeconfig(evil)))
    with pytest.raises(minify.MinifyError, match="exec env may not set PATH"):
        minify.minify(kubeconfig.load(path), "edge", "edge", allowed=["aws"])
    assert not marker.exists()


def test_a_stored_secret_is_refused_when_loaded(planted: tuple[Path, Path]) -> None:
    """The control plane loading a joined cluster's Secret: refused, nothing run."""
    evil, marker = planted
    text = yaml.safe_dump(hostile_kubeconfig(evil))
    with pytest.raises(minify.MinifyError, match="exec env may not set PATH"):
        minify.load(text, "edge", "Secret federation-system/edge-kubeconfig")
    assert not marker.exists()


def control_plane_settings() -> clusters.ClusterSettings:
    return clusters.ClusterSettings(client=kube.ClientSettings(exec_allowlist=DEFAULT))


async def test_a_joined_client_refuses_it_too(planted: tuple[Path, Path]) -> None:
    """Defence in depth: ClusterSet.join with the control plane's settings records the
    member as misconfigured, with the reason, and builds no client."""
    evil, marker = planted
    hub = {"name": "hub", "cluster": {"server": "https://127.0.0.1:2"}}
    document = hostile_kubeconfig(evil)
    document["clusters"].append(hub)
    document["users"].append({"name": "hub", "user": {"token": "t"}})
    document["contexts"].append({"name": "hub", "context": {"cluster": "hub", "user": "hub"}})
    config = kubeconfig.merge([(Path("test"), document)])
    cluster_set = clusters.ClusterSet.from_kubeconfig(config, hub_context="hub", contexts=[],
                                                      settings=control_plane_settings())
    joined = cluster_set.join("edge", config)
    assert joined.state == "misconfigured" and joined.client is None
    assert "exec env may not set PATH" in (joined.error or "")
    await cluster_set.close()
    assert not marker.exists()


async def test_fedctl_run_static_contexts_follow_the_same_rule(
        planted: tuple[Path, Path]) -> None:
    """A static member context with the hostile exec is misconfigured (the others run); a
    hub context with it stops the start with the reason."""
    evil, marker = planted
    document = hostile_kubeconfig(evil)
    document["clusters"].append({"name": "hub", "cluster": {"server": "https://127.0.0.1:2"}})
    document["users"].append({"name": "hub", "user": {"token": "t"}})
    document["contexts"].append({"name": "hub", "context": {"cluster": "hub", "user": "hub"}})
    config = kubeconfig.merge([(Path("test"), document)])
    cluster_set = clusters.ClusterSet.from_kubeconfig(config, hub_context="hub",
                                                      settings=control_plane_settings())
    edge = cluster_set.clusters["edge"]
    assert edge.state == "misconfigured" and "may not set PATH" in (edge.error or "")
    await cluster_set.close()
    with pytest.raises(kubeconfig.KubeconfigError, match="may not set PATH"):
        clusters.ClusterSet.from_kubeconfig(config, hub_context="edge",
                                            settings=control_plane_settings())
    assert not marker.exists()


async def test_a_refused_join_is_recorded_with_its_reason() -> None:
    """ClusterSet.refuse: known, never engaged, the reason as its detail; leave removes it."""
    document = {"clusters": [{"name": "hub", "cluster": {"server": "https://127.0.0.1:2"}}],
                "users": [{"name": "hub", "user": {"token": "t"}}],
                "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "hub"}}]}
    cluster_set = clusters.ClusterSet.from_kubeconfig(
        kubeconfig.merge([(Path("test"), document)]), hub_context="hub")
    refused = cluster_set.refuse("edge", "not joined: context 'edge': exec env may not set PATH")
    assert refused.joined and not refused.engaged and refused.state == "misconfigured"
    assert refused.detail.endswith("may not set PATH")
    with pytest.raises(ValueError, match="already"):
        cluster_set.refuse("edge", "again")
    await cluster_set.leave("edge")
    assert "edge" not in cluster_set.clusters
    await cluster_set.close()
