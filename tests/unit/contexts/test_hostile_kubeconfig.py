"""Hostile kubeconfigs (finding 13): every load is one line naming the file, never a
traceback, a hang or a quote of the file.

The corpus is what a fuzzer or an attacker hands ``--kubeconfig`` (or writes into a
joined cluster's Secret): bad encodings, YAML syntax errors, Python tags, deep nesting,
huge numbers and files, alias bombs, devices, wrong shapes. Before the capped loader,
five of these gave tracebacks or hangs in every command. Every case runs under a 5 s
bound (pytest-timeout: a bound, not a timing assertion), and the file always holds the
marker :data:`TOKEN`, which no error may quote.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from federation.cli import cli
from federation.contexts import kubeconfig, minify

TOKEN = "S3cretTokenValue42"
GOOD = f"""\
apiVersion: v1
kind: Config
current-context: c
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:1"}}}}]
users: [{{name: u, user: {{token: {TOKEN}}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
"""


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


BILLION_LAUGHS = "\n".join(
    [f"a0: &a0 [{TOKEN}, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    + ["users: *a9"])

Case = tuple[str, Callable[[Path], bytes | None], str]
"""(id, the file's content (None: the case makes the path itself), a word of the reason)."""

CASES: list[Case] = [
    ("invalid-utf8", lambda _: GOOD.encode() + b"x: \xff\xfe" + TOKEN.encode(), "UTF-8"),
    ("nul-byte", lambda _: GOOD.encode() + b"\0" + TOKEN.encode(), "NUL byte"),
    ("utf16-bom", lambda _: GOOD.encode("utf-16"), "UTF-16"),
    ("syntax-error", lambda _: f"users:\n- name: u\n  user:\n    token: [{TOKEN}\n".encode(),
     "malformed YAML"),
    ("python-object-tag", lambda _: f"users: !!python/object/apply:os.system "
                                    f"['echo {TOKEN}']\n".encode(), "malformed YAML"),
    ("python-name-tag", lambda _: f"x: !!python/name:os.system {TOKEN}\n".encode(),
     "malformed YAML"),
    ("undefined-alias", lambda _: f"users: *{TOKEN}\n".encode(), "malformed YAML"),
    ("nesting-100k", lambda _: f"x: {TOKEN}\ny: {nested(100_000)}\n".encode(), "nest"),
    ("block-nesting-1000", lambda _: ("".join(f"{'  ' * i}k{i}:\n" for i in range(1000))
                                      + "  " * 1000 + TOKEN + "\n").encode(), "nest"),
    ("integer-100k-digits", lambda _: f"t: {TOKEN}\nx: {'9' * 100_000}\n".encode(),
     "malformed YAML"),
    ("alias-bomb", lambda _: BILLION_LAUGHS.encode(), "values after expanding aliases"),
    ("file-50mb", lambda path: _big(path), "larger than the limit"),
    ("dev-zero", lambda path: _link(path, "/dev/zero"), "larger than the limit"),
    ("directory", lambda path: _directory(path), "Is a directory"),
    ("random-bytes", lambda _: bytes(range(256)) * 4 + TOKEN.encode(), "byte"),
    ("two-documents", lambda _: (GOOD + "---\n" + GOOD).encode(), "YAML documents"),
    ("not-a-mapping", lambda _: f"- {TOKEN}\n".encode(), "not a mapping"),
    ("clusters-not-a-list", lambda _: f"clusters: {{{TOKEN}: 1}}\n".encode(), "not a list"),
    ("cluster-not-a-mapping", lambda _: f"clusters: [{{name: c, cluster: {TOKEN}}}]\n"
                                        .encode(), "not a mapping"),
    ("current-context-not-a-string", lambda _: f"current-context: [{TOKEN}]\n".encode(),
     "not a string"),
]


def _big(path: Path) -> None:
    with path.open("wb") as file:
        file.write(GOOD.encode())
        file.truncate(50 * 2**20)
    return None


def _link(path: Path, target: str) -> None:
    path.symlink_to(target)
    return None


def _directory(path: Path) -> None:
    path.mkdir()
    return None


def hostile(tmp_path: Path, case: Case) -> Path:
    path = tmp_path / f"{case[0]}.yaml"
    content = case[1](path)
    if content is not None:
        path.write_bytes(content)
    return path


def one_line(error: BaseException | str, *words: str) -> str:
    text = str(error)
    assert "\n" not in text and TOKEN not in text, text
    for word in words:
        assert word in text, text
    return text


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_kubeconfig_file_is_one_line_naming_it(tmp_path: Path, case: Case) -> None:
    """`kubeconfig.load` (what every --kubeconfig goes through): a KubeconfigError naming
    the file and the reason; nothing of the file quoted; no Python tag ever constructed."""
    path = hostile(tmp_path, case)
    with pytest.raises(kubeconfig.KubeconfigError) as error:
        kubeconfig.load(path)
    one_line(error.value, str(path), case[2])


FIELD_CASES = [
    ("server-not-a-string", {"server": {"token": TOKEN}}, {}, "server is not a string"),
    ("token-not-a-string", {"server": "https://h"}, {"token": [TOKEN]},
     "token is not a string"),
    ("skip-tls-not-a-bool", {"server": "https://h", "insecure-skip-tls-verify": TOKEN}, {},
     "insecure-skip-tls-verify is not true or false"),
    ("exec-not-a-mapping", {"server": "https://h"}, {"exec": TOKEN}, "exec is not a mapping"),
    ("bad-base64", {"server": "https://h", "certificate-authority-data": f"%{TOKEN}"}, {},
     "is not valid base64"),
    ("cert-file-dev-zero", {"server": "https://h"}, {"client-certificate": "/dev/zero"},
     "larger than the limit"),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", FIELD_CASES, ids=[c[0] for c in FIELD_CASES])
def test_a_hostile_field_of_a_context_is_one_line_naming_it(
        tmp_path: Path, case: tuple[str, dict[str, object], dict[str, object], str]) -> None:
    """A context whose fields have the wrong type (a mapping where the server goes, a
    token that is a list...) or name /dev/zero: one line, the field named, no value."""
    _, cluster, user, reason = case
    document = {"clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}
    config = kubeconfig.merge([(tmp_path / "k.yaml", document)])
    with pytest.raises(kubeconfig.KubeconfigError) as error:
        config.context("c")
    one_line(error.value, reason)


COMMANDS = [
    ["run", "--kubeconfig"], ["install", "--kubeconfig"],
    ["get", "deployments", "--kubeconfig"], ["join", "edge", "--kubeconfig"],
    ["unjoin", "edge", "--kubeconfig"], ["app", "status", "shop", "--kubeconfig"],
    ["plan", "--live", "--kubeconfig"], ["dashboard", "--kubeconfig"],
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", [c for c in CASES if c[0] in (
    "invalid-utf8", "python-object-tag", "nesting-100k", "integer-100k-digits", "file-50mb")],
    ids=lambda c: c[0])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_refuses_a_hostile_kubeconfig_in_one_line(
        tmp_path: Path, case: Case, command: list[str]) -> None:
    """The five cases that gave tracebacks or hangs, through each command taking a
    --kubeconfig: exit status 1, one `error:` line naming the file, no traceback."""
    path = hostile(tmp_path, case)
    result = CliRunner().invoke(cli, [*command, str(path)])
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    one_line(result.stderr.strip(), str(path))


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", [c for c in CASES if c[0] not in (
    "file-50mb", "dev-zero", "directory")], ids=lambda c: c[0])
def test_a_hostile_kubeconfig_secret_is_one_line_naming_the_secret(tmp_path: Path,
                                                                 case: Case) -> None:
    """The same corpus stored in a joined cluster's Secret, as the membership controller
    reads it: a MinifyError naming the Secret; nothing quoted."""
    content = case[1](tmp_path / "unused")
    assert content is not None
    origin = "Secret federation-system/edge-kubeconfig"
    with pytest.raises(kubeconfig.KubeconfigError) as error:
        minify.load(content, "edge", origin)
    one_line(error.value, origin, case[2])


def test_a_secret_over_the_size_limit_is_refused_too() -> None:
    with pytest.raises(kubeconfig.KubeconfigError) as error:
        minify.load(b"x" * (kubeconfig.LIMITS.max_bytes + 1), "edge", "Secret a/b")
    one_line(error.value, "Secret a/b", "larger than the limit")


def test_the_good_file_loads(tmp_path: Path) -> None:
    """The corpus' base file is a valid kubeconfig: each case fails for its own reason."""
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    assert kubeconfig.load(path).context().token == TOKEN
    assert os.path.getsize(path) < 1000
