"""Minified join kubeconfigs: one context only, files inlined, exec plugins checked."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.contexts import kubeconfig, minify


def two_contexts(tmp_path: Path, exec_command: str | None = None) -> kubeconfig.KubeConfig:
    (tmp_path / "ca.crt").write_bytes(b"CA-ONE")
    (tmp_path / "token").write_text("tok-one\n")
    user_one: dict[str, Any] = {"tokenFile": "token"}
    if exec_command:
        user_one = {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                             "command": exec_command, "args": ["get-token"]}}
    document = {
        "apiVersion": "v1", "kind": "Config", "current-context": "one",
        "clusters": [{"name": "c1", "cluster": {"server": "https://one:6443",
                                                "certificate-authority": "ca.crt"}},
                     {"name": "c2", "cluster": {"server": "https://two:6443"}}],
        "users": [{"name": "u1", "user": user_one},
                  {"name": "u2", "user": {"token": "secret-two"}}],
        "contexts": [{"name": "one", "context": {"cluster": "c1", "user": "u1"}},
                     {"name": "two", "context": {"cluster": "c2", "user": "u2"}}],
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(document))
    return kubeconfig.load(path)


def test_only_the_chosen_context_is_kept_and_files_are_inlined(tmp_path: Path) -> None:
    """The document holds one cluster, user and context (renamed); CA and token inlined."""
    found = minify.minify(two_contexts(tmp_path), "one", "edge")
    assert [c["name"] for c in found["clusters"]] == ["edge"]
    assert [u["name"] for u in found["users"]] == ["edge"]
    assert [c["name"] for c in found["contexts"]] == ["edge"]
    assert found["current-context"] == "edge"
    assert base64.b64decode(found["clusters"][0]["cluster"]["certificate-authority-data"]) \
        == b"CA-ONE"
    assert found["users"][0]["user"] == {"token": "tok-one"}
    text = minify.dump(found)
    assert "secret-two" not in text and "two:6443" not in text


def test_stored_kubeconfig_loads_back(tmp_path: Path) -> None:
    """What join stores is what the control plane loads: a usable context of that name."""
    text = minify.dump(minify.minify(two_contexts(tmp_path), "one", "edge"))
    context = minify.load(text, "edge", "Secret x/y").context("edge")
    assert context.server == "https://one:6443"
    assert context.token == "tok-one"
    assert context.ca_data == b"CA-ONE"


def test_exec_plugin_not_on_the_allowlist_is_refused(tmp_path: Path) -> None:
    """An unknown exec command is refused with what to do; an allowed one passes."""
    config = two_contexts(tmp_path, exec_command="/tmp/steal-everything")
    with pytest.raises(minify.MinifyError, match=r"not on the allowlist.*--allow-exec-command"):
        minify.minify(config, "one", "edge")
    allowed = minify.minify(config, "one", "edge", allowed=["/tmp/steal-everything"])
    assert allowed["users"][0]["user"]["exec"]["command"] == "/tmp/steal-everything"
    ok = minify.minify(two_contexts(tmp_path, exec_command="kubelogin"), "one", "edge")
    assert ok["users"][0]["user"]["exec"]["command"] == "kubelogin"


def test_control_plane_checks_the_allowlist_again(tmp_path: Path) -> None:
    """A Secret edited on the hub to run another command is refused when loaded."""
    document = minify.minify(two_contexts(tmp_path, exec_command="kubelogin"), "one", "edge")
    document["users"][0]["user"]["exec"]["command"] = "sh"
    with pytest.raises(minify.MinifyError, match="'sh'"):
        minify.load(minify.dump(document), "edge", "Secret x/y")


def test_stored_kubeconfig_may_not_point_at_files(tmp_path: Path) -> None:
    """A stored kubeconfig naming files on the control plane's disk is refused."""
    document = minify.minify(two_contexts(tmp_path), "one", "edge")
    document["users"][0]["user"] = {"tokenFile": "/etc/shadow"}
    with pytest.raises(minify.MinifyError, match="refers to files"):
        minify.load(minify.dump(document), "edge", "Secret x/y")


def test_auth_provider_is_refused() -> None:
    """Legacy auth-provider users are refused."""
    with pytest.raises(minify.MinifyError, match="auth-provider"):
        minify.check_exec("c", {"auth-provider": {"name": "gcp"}})


def test_secret_data_and_string_data() -> None:
    """A Secret's kubeconfig is read from data (base64) or stringData."""
    encoded = base64.b64encode(b"apiVersion: v1").decode()
    assert minify.secret_kubeconfig({"data": {"kubeconfig": encoded}}) == b"apiVersion: v1"
    assert minify.secret_kubeconfig({"stringData": {"kubeconfig": "x"}}) == b"x"
    with pytest.raises(minify.MinifyError, match="is not base64"):
        minify.secret_kubeconfig({"data": {"kubeconfig": "%%%"}})
    with pytest.raises(minify.MinifyError, match="no key"):
        minify.secret_kubeconfig({"metadata": {"name": "s", "namespace": "n"}})
