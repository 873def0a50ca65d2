"""Kubeconfig loading and merging, checked rule by rule against kubectl itself."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.contexts import kubeconfig

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")


def write(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def config(clusters: dict[str, Any] | None = None, users: dict[str, Any] | None = None,
           contexts: dict[str, Any] | None = None, current: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": n, "cluster": c} for n, c in (clusters or {}).items()],
        "users": [{"name": n, "user": u} for n, u in (users or {}).items()],
        "contexts": [{"name": n, "context": c} for n, c in (contexts or {}).items()],
    }


def kubectl_view(env: dict[str, str], *args: str, cwd: Path) -> dict[str, Any]:
    assert KUBECTL is not None
    result = subprocess.run([KUBECTL, *args, "config", "view", "--merge", "--raw", "-o", "json"],
                            env=env, cwd=cwd, capture_output=True, text=True, timeout=30,
                            check=True)
    return normalise(json.loads(result.stdout))


def normalise(view: dict[str, Any]) -> dict[str, Any]:
    """Drop empty values kubectl prints for unset fields, so views compare by content."""

    def clean(entry: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in entry.items() if v not in ("", None, [], {})}

    out: dict[str, Any] = {"current-context": view.get("current-context") or ""}
    for kind in ("cluster", "user", "context"):
        out[f"{kind}s"] = sorted(({"name": e["name"], kind: clean(e.get(kind) or {})}
                                  for e in view.get(f"{kind}s") or []), key=lambda e: e["name"])
    return out


@pytest.fixture
def two_files(tmp_path: Path) -> tuple[Path, Path]:
    first = write(tmp_path / "a" / "first.yaml", config(
        clusters={"c1": {"server": "https://a1"}, "shared": {"server": "https://a-shared"}},
        users={"u": {"token": "token-from-a"}},
        contexts={"x": {"cluster": "c1", "user": "u"}, "both": {"cluster": "shared"}},
        current="",
    ))
    second = write(tmp_path / "b" / "second.yaml", config(
        clusters={"shared": {"server": "https://b-shared", "insecure-skip-tls-verify": True},
                  "c2": {"server": "https://b2"}},
        users={"u": {"token": "token-from-b"}, "v": {"username": "v", "password": "p"}},
        contexts={"both": {"cluster": "c2", "namespace": "nb"}, "z": {"cluster": "c2"}},
        current="z",
    ))
    return first, second


@needs_kubectl
def test_two_file_kubeconfig_merges_like_kubectl(tmp_path: Path,
                                                 two_files: tuple[Path, Path]) -> None:
    """KUBECONFIG=a:b: the first file to define a name wins whole; current-context likewise."""
    first, second = two_files
    env = {"KUBECONFIG": f"{first}:{second}", "HOME": str(tmp_path)}
    ours = kubeconfig.load(env=env)
    assert normalise(ours.view()) == kubectl_view(env, cwd=tmp_path)
    assert ours.current_context == "z"  # first file's current-context is empty
    assert ours.clusters["shared"]["server"] == "https://a-shared"
    assert ours.contexts["both"] == {"cluster": "shared"}  # no field-level merging


@needs_kubectl
def test_order_of_kubeconfig_list_decides(tmp_path: Path, two_files: tuple[Path, Path]) -> None:
    """Swapping the files swaps which definitions win, for kubectl and for us."""
    first, second = two_files
    env = {"KUBECONFIG": f"{second}:{first}", "HOME": str(tmp_path)}
    ours = kubeconfig.load(env=env)
    assert normalise(ours.view()) == kubectl_view(env, cwd=tmp_path)
    assert ours.users["u"]["token"] == "token-from-b"


@needs_kubectl
def test_first_non_empty_current_context_wins(tmp_path: Path) -> None:
    """current-context comes from the first file that sets it."""
    one = write(tmp_path / "one.yaml", config(current="first"))
    two = write(tmp_path / "two.yaml", config(current="second"))
    env = {"KUBECONFIG": f"{one}:{two}", "HOME": str(tmp_path)}
    assert kubeconfig.load(env=env).current_context == "first"
    assert kubectl_view(env, cwd=tmp_path)["current-context"] == "first"


@needs_kubectl
def test_explicit_kubeconfig_ignores_environment(tmp_path: Path,
                                                 two_files: tuple[Path, Path]) -> None:
    """--kubeconfig FILE alone is read, whatever KUBECONFIG says."""
    first, second = two_files
    env = {"KUBECONFIG": str(second), "HOME": str(tmp_path)}
    ours = kubeconfig.load(first, env=env)
    assert normalise(ours.view()) == kubectl_view(env, "--kubeconfig", str(first), cwd=tmp_path)
    assert "z" not in ours.contexts


@needs_kubectl
def test_missing_and_repeated_entries_in_list_are_skipped(tmp_path: Path,
                                                          two_files: tuple[Path, Path]) -> None:
    """Files in KUBECONFIG that do not exist, empty entries and repeats are ignored."""
    first, second = two_files
    env = {"KUBECONFIG": f"{tmp_path / 'nope.yaml'}::{first}:{second}:{first}",
           "HOME": str(tmp_path)}
    ours = kubeconfig.load(env=env)
    assert normalise(ours.view()) == kubectl_view(env, cwd=tmp_path)
    assert kubeconfig.default_paths(env=env) == [tmp_path / "nope.yaml", first, second]


@needs_kubectl
def test_home_kube_config_is_the_fallback(tmp_path: Path) -> None:
    """Without --kubeconfig or KUBECONFIG, ~/.kube/config is read."""
    write(tmp_path / ".kube" / "config", config(clusters={"h": {"server": "https://home"}},
                                                contexts={"h": {"cluster": "h"}}, current="h"))
    env = {"HOME": str(tmp_path)}
    ours = kubeconfig.load(env=env)
    assert normalise(ours.view()) == kubectl_view(env, cwd=tmp_path)
    assert ours.context().server == "https://home"


def test_explicit_kubeconfig_must_exist(tmp_path: Path) -> None:
    """A --kubeconfig that does not exist is an error naming it (kubectl: stat ... no such file)."""
    with pytest.raises(kubeconfig.KubeconfigError, match=r"missing\.yaml"):
        kubeconfig.load(tmp_path / "missing.yaml", env={})


@needs_kubectl
def test_duplicate_name_in_one_file_is_an_error(tmp_path: Path) -> None:
    """A name defined twice in one file is rejected, as kubectl rejects it."""
    document = config(clusters={"c": {"server": "https://one"}})
    document["clusters"].append({"name": "c", "cluster": {"server": "https://two"}})
    path = write(tmp_path / "dup.yaml", document)
    with pytest.raises(kubeconfig.KubeconfigError, match="duplicate cluster name 'c'"):
        kubeconfig.load(path)
    assert KUBECTL is not None
    result = subprocess.run([KUBECTL, "--kubeconfig", str(path), "config", "view"],
                            capture_output=True, text=True, timeout=30, check=False)
    assert "duplicate name" in result.stderr


@needs_kubectl
def test_relative_paths_resolve_against_the_file_that_names_them(tmp_path: Path) -> None:
    """certificate-authority etc. are relative to their own file; kubectl --flatten agrees."""
    (tmp_path / "b" / "certs").mkdir(parents=True)
    (tmp_path / "b" / "certs" / "ca.pem").write_bytes(b"ca-bytes")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "token").write_text("tok")
    first = write(tmp_path / "a" / "first.yaml", config(
        users={"u": {"client-key": "key.pem", "tokenFile": "token"}},
        contexts={"ctx": {"cluster": "c", "user": "u"}}, current="ctx"))
    (tmp_path / "a" / "key.pem").write_bytes(b"key-bytes")
    second = write(tmp_path / "b" / "second.yaml", config(
        clusters={"c": {"server": "https://c", "certificate-authority": "certs/ca.pem"}}))
    env = {"KUBECONFIG": f"{first}:{second}", "HOME": str(tmp_path)}
    context = kubeconfig.load(env=env).context("ctx")
    assert context.ca_data == b"ca-bytes"
    assert context.client_key_data == b"key-bytes"
    assert context.token_file == tmp_path / "a" / "token"
    assert KUBECTL is not None
    flat = json.loads(subprocess.run(
        [KUBECTL, "config", "view", "--merge", "--raw", "--flatten", "-o", "json"], env=env,
        cwd=tmp_path, capture_output=True, text=True, timeout=30, check=True).stdout)
    cluster = flat["clusters"][0]["cluster"]
    assert base64.b64decode(cluster["certificate-authority-data"]) == context.ca_data


def test_missing_context_names_it(tmp_path: Path) -> None:
    """Asking for a context the files lack names the context and the files."""
    path = write(tmp_path / "k.yaml", config(contexts={"a": {"cluster": "c"}}))
    with pytest.raises(kubeconfig.KubeconfigError, match=r"context 'zz' not found in .*k\.yaml"):
        kubeconfig.load(path).context("zz")


def test_unreadable_certificate_file_names_the_context(tmp_path: Path) -> None:
    """A certificate path that cannot be read is one clear error naming the context."""
    path = write(tmp_path / "k.yaml", config(
        clusters={"c": {"server": "https://c", "certificate-authority": "gone.pem"}},
        contexts={"ctx": {"cluster": "c"}}))
    with pytest.raises(kubeconfig.KubeconfigError, match=r"context .ctx.: cannot read .*gone\.pem"):
        kubeconfig.load(path).context("ctx")


def test_context_repr_hides_secrets() -> None:
    """Tokens, passwords and keys never show in a Context's repr (and so in logs)."""
    context = kubeconfig.Context(name="c", server="https://c", token="s3cret-token",
                                 password="pw-secret", client_key_data=b"key-secret")
    text = repr(context)
    assert "s3cret" not in text and "pw-secret" not in text and "key-secret" not in text


def test_disable_compression_is_read_as_kubectl_reads_it(tmp_path: Path) -> None:
    """kubectl's ``disable-compression`` cluster field is honoured, and a value that is not
    true or false is refused naming the field, never ignored."""
    path = write(tmp_path / "k.yaml", config(
        clusters={"plain": {"server": "https://p", "disable-compression": True},
                  "gzip": {"server": "https://g"},
                  "typo": {"server": "https://t", "disable-compression": "yes"}},
        contexts={"p": {"cluster": "plain"}, "g": {"cluster": "gzip"}, "t": {"cluster": "typo"}}))
    loaded = kubeconfig.load(path)
    assert loaded.context("p").disable_compression
    assert not loaded.context("g").disable_compression
    with pytest.raises((kubeconfig.KubeconfigError, ValueError),
                       match="disable-compression is not true or false"):
        loaded.context("t")
    if KUBECTL is not None:  # the field is kubectl's own (which refuses "yes" as well)
        good = write(tmp_path / "good.yaml", config(
            clusters={"plain": {"server": "https://p", "disable-compression": True}},
            contexts={"p": {"cluster": "plain"}}))
        view = kubectl_view({"KUBECONFIG": str(good)}, cwd=tmp_path)
        plain = next(c for c in view["clusters"] if c["name"] == "plain")
        assert plain["cluster"]["disable-compression"] is True


@pytest.mark.parametrize(("section", "field", "value"), [
    ("user", "as", "system:admin"), ("user", "as-groups", ["system:masters"]),
    ("user", "as-uid", "1"), ("user", "as-user-extra", {"scope": ["x"]}),
    ("user", "auth-provider", {"name": "gcp"}), ("cluster", "proxy-url", "http://proxy:3128"),
])
def test_kubectl_fields_this_client_does_not_honour_are_refused_by_name(
        tmp_path: Path, section: str, field: str, value: Any) -> None:
    """Impersonation, legacy auth providers and proxies are kubectl's, not ours: a context
    that uses one is refused naming the field, never loaded without it (an ignored ``as``
    would run every request as the broader identity behind it)."""
    cluster: dict[str, Any] = {"server": "https://c"}
    user: dict[str, Any] = {"token": "t"}
    (cluster if section == "cluster" else user)[field] = value
    path = write(tmp_path / "k.yaml", config(clusters={"c": cluster}, users={"u": user},
                                             contexts={"x": {"cluster": "c", "user": "u"}}))
    with pytest.raises((kubeconfig.KubeconfigError, ValueError),
                       match=rf"{section} '[cu]': {field} is not supported") as refused:
        kubeconfig.load(path).context("x")
    assert str(value) not in str(refused.value)  # named, never quoted
