"""``fedctl app dry-run -f`` on hostile files (finding 13): exit 1 and one ``error:`` line
naming the file, never a traceback or a hang.

As ``fedctl plan`` is fuzzed (tests/unit/placement/test_plan_fuzz.py): each case runs the
real command in process under a bound (pytest-timeout: a bound, not a timing assertion);
the cases are the audit's (invalid UTF-8, NUL, YAML syntax errors, ``!!python/`` tags,
100k nesting, a 100,000-digit integer, a Policy without metadata, a 50 MB file) and their
cousins, then random bytes, random structures and random Application-shaped documents.
The assertions are the contract (exit status, one line, the file, the reason's class),
not one layer's wording.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from federation.cli import cli

APP = """\
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: shop, namespace: shop}
spec:
  components:
  - {name: web, type: webservice, properties: {image: web:1}}
  policies:
  - {name: canary, type: topology, properties: {clusters: [member1]}}
"""
POLICY = """\
apiVersion: core.oam.dev/v1alpha1
kind: Policy
metadata: {name: eu, namespace: shop}
type: topology
properties: {clusters: [member2]}
"""


def dry_run(tmp_path: Path, content: bytes | str, *extra: str) -> Result:
    path = tmp_path / "app.yaml"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path), *extra])


def refused(result: Result, *words: str) -> None:
    """Exit 1 by SystemExit (no exception escaped), nothing on stdout, and on stderr one
    ``error:`` line naming the file (before it at most the ``# namespaces`` comment)."""
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, (result.output, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert result.stderr.endswith("\n") and lines, result.stderr
    assert all(line.startswith("# namespaces: ") for line in lines[:-1]), result.stderr
    assert lines[-1].startswith("error: ") and "app.yaml" in lines[-1], result.stderr
    for word in words:
        assert word in lines[-1], result.stderr


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


BILLION_LAUGHS = "\n".join(
    ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    + ["b: *a9"])


# -- the audit's cases -------------------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("content", "words"), [
    (b"kind: \xff\xfe\n", ("not UTF-8",)),
    (APP.encode() + b"\xc3\x28\n", ("not UTF-8",)),
    (b"kind: Application\0\n", ("NUL byte",)),
    (APP.encode("utf-16"), ("UTF-16",)),
    (APP.encode("utf-16-le"), ("NUL byte",)),
    (b"\x89PNG\r\n\x1a\n" + bytes(range(1, 200)), ("not UTF-8",)),
    (b"a: \x1b[31mred\n", ("malformed YAML",)),
])
def test_bad_encodings(tmp_path: Path, content: bytes, words: tuple[str]) -> None:
    refused(dry_run(tmp_path, content), *words)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("text", [
    "kind: [Application\n", "a: b: c\n", "key: 'unclosed\n", "- a\nb: c\n", "\t- x\n",
    "a: *undefined\n", "{a: 1, a: [\n", APP + "  - {name: x\n",
])
def test_yaml_syntax_errors(tmp_path: Path, text: str) -> None:
    refused(dry_run(tmp_path, text), "malformed YAML")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("tag", [
    "!!python/object/apply:os.system ['touch /tmp/pwned']",
    "!!python/name:os.system", "!!python/object:__main__.X {}", "!!binary AAAA",
    "!custom 3",
])
def test_python_and_unknown_tags(tmp_path: Path, tag: str) -> None:
    """The safe loader constructs no Python object (``!!binary`` is a safe tag: its bytes
    are no valid spec value, refused by path)."""
    result = dry_run(tmp_path, APP + f"  extra: {tag}\n")
    refused(result)
    assert not Path("/tmp/pwned").exists()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("depth", [101, 1_000, 100_000])
def test_deep_nesting(tmp_path: Path, depth: int) -> None:
    """Refused for its depth, whichever layer says so first (our limit, or a libyaml that
    has its own: the reason class, not one layer's words)."""
    refused(dry_run(tmp_path, APP + "  x: " + nested(depth) + "\n"), "nest")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("digits", [5_000, 100_000])
def test_huge_integers(tmp_path: Path, digits: int) -> None:
    """Python refuses to convert them: malformed YAML, not a ValueError traceback."""
    refused(dry_run(tmp_path, APP.replace("image: web:1", "image: web:1, replicas: "
                                          + "9" * digits)), "malformed YAML")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("policy", [
    "apiVersion: core.oam.dev/v1alpha1\nkind: Policy\ntype: topology\n",
    "kind: Policy\nmetadata: 3\n",
    "kind: Policy\nmetadata: {name: [a]}\n",
    "kind: Policy\nmetadata: {name: ''}\n",
])
def test_a_policy_without_a_name(tmp_path: Path, policy: str) -> None:
    refused(dry_run(tmp_path, APP + "---\n" + policy), "Policy (document 2): metadata.name")


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("app", "words"), [
    (APP.replace("metadata: {name: shop, namespace: shop}", "metadata: 3"),
     ("Application (document 1): metadata.name",)),
    (APP.replace("metadata: {name: shop, namespace: shop}", "metadata: {namespace: x}"),
     ("metadata.name",)),
    (APP.replace("namespace: shop", "namespace: [a]"), ("metadata.namespace",)),
    (APP.split("spec:")[0] + "spec: 3\n", ("spec",)),
    (APP.split("spec:")[0] + "spec: [1, 2]\n", ("spec",)),
    (APP + "---\n" + APP, ("expected one Application, found 2",)),
    (POLICY, ("expected one Application, found 0",)),
    (APP + "---\n" + POLICY + "---\n" + POLICY, ("a second Policy named 'eu'",)),
])
def test_documents_of_the_wrong_shape(tmp_path: Path, app: str, words: tuple[str]) -> None:
    refused(dry_run(tmp_path, app), *words)


@pytest.mark.timeout(30)
def test_a_namespace_document_of_the_wrong_shape(tmp_path: Path) -> None:
    """A Namespace whose metadata is no map is not the Application's; one whose
    annotations are no map is refused by path, not read as no grant."""
    text = APP + "---\nkind: Namespace\nmetadata: 7\n---\nkind: Namespace\nmetadata: " \
                 "{name: shop, annotations: 5}\n"
    refused(dry_run(tmp_path, text), "Namespace shop metadata.annotations: must be a map")


@pytest.mark.timeout(30)
def test_fifty_megabytes_is_refused_by_size_without_being_read(tmp_path: Path) -> None:
    """The 50 MB file that took more than 20 s: at most 4 MiB + 1 byte is read."""
    big = tmp_path / "app.yaml"
    with big.open("wb") as out:
        out.write(APP.encode())
        out.truncate(50 * 2**20)
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(big)])
    refused(result, "larger than the limit")


@pytest.mark.timeout(30)
def test_billion_laughs_and_recursive_aliases(tmp_path: Path) -> None:
    refused(dry_run(tmp_path, APP + "  " + BILLION_LAUGHS.replace("\n", "\n  ") + "\n"),
            "after expanding aliases")
    refused(dry_run(tmp_path, APP + "  loop: &a [*a]\n"), "recursive alias")


@pytest.mark.timeout(30)
def test_too_many_documents(tmp_path: Path) -> None:
    refused(dry_run(tmp_path, APP + "---\n" * 20_000), "YAML documents")


@pytest.mark.timeout(30)
def test_a_missing_file_and_a_directory(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(tmp_path / "app.yaml")])
    refused(result, "cannot read")
    (tmp_path / "dir").mkdir()
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(tmp_path / "dir")])
    assert result.exit_code == 1 and "cannot read" in result.stderr


@pytest.mark.timeout(30)
def test_an_error_quoting_input_is_still_one_line(tmp_path: Path) -> None:
    """A component type holding a newline and a terminal escape: escaped, one line."""
    refused(dry_run(tmp_path, APP.replace("type: webservice", 'type: "web\\n\\e[2Jservice"')),
            "spec.components[0].type")


@pytest.mark.timeout(30)
def test_a_bad_clusters_file_is_one_line(tmp_path: Path) -> None:
    clusters = tmp_path / "clusters.yaml"
    clusters.write_bytes(b"clusters: " + nested(1000).encode())
    result = dry_run(tmp_path, APP, "--clusters", str(clusters))
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "clusters.yaml" in result.stderr


@pytest.mark.timeout(30)
def test_a_valid_file_still_renders(tmp_path: Path) -> None:
    result = dry_run(tmp_path, b"\xef\xbb\xbf" + (APP + "---\n" + POLICY).encode())
    assert result.exit_code == 0, result.stderr
    assert "# step deploy (deploy): member1" in result.stdout


@pytest.mark.timeout(20)
def test_the_real_process_prints_one_line(tmp_path: Path) -> None:
    """``python -m federation app dry-run`` on a 100k-deep file: one line, no traceback."""
    path = tmp_path / "app.yaml"
    path.write_text(APP + "  x: " + nested(100_000) + "\n")
    done = subprocess.run([sys.executable, "-m", "federation", "app", "dry-run", "-f",
                           str(path)], capture_output=True, text=True, timeout=20, check=False)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "app.yaml" in done.stderr


# -- random input ---------------------------------------------------------------------------

#: FEDERATION_FUZZ_EXAMPLES=5000 for a longer hunt (the unit suite keeps it short).
EXAMPLES = int(os.environ.get("FEDERATION_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
FUZZ_TIMEOUT = 5 * EXAMPLES


def accepted_or_refused(result: Result) -> None:
    """Random input may be valid; if not, exit 1 and one ``error:`` line, never a raise."""
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    assert result.exit_code in (0, 1), result.exit_code
    if result.exit_code == 1:
        refused(result)


@pytest.mark.timeout(FUZZ_TIMEOUT)
@FUZZ
@given(content=st.binary(max_size=400))
def test_random_bytes(tmp_path: Path, content: bytes) -> None:
    accepted_or_refused(dry_run(tmp_path, content))


scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
           | st.sampled_from(["webservice", "worker", "config", "k8s-objects", "topology",
                              "override", "deploy", "notification", "member1", "web"]))
structures = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["name", "type", "properties", "traits", "policies",
                                       "clusters", "image", "replicas", "objects", "steps",
                                       "workflow", "metadata", "kind", "url", "webhook"])
                      | st.text(max_size=6), children, max_size=4),
    max_leaves=30)


def either(*values: Any) -> st.SearchStrategy[Any]:
    """One of ``values`` or any structure: near-valid input, so the fuzz gets past the start."""
    return st.sampled_from(values) | structures


components = st.fixed_dictionaries(
    {"name": either("web", "db"), "type": either("webservice", "worker", "config",
                                                  "k8s-objects")},
    optional={"properties": st.fixed_dictionaries(
        {}, optional={"image": either("web:1"), "replicas": structures, "ports": structures,
                      "objects": structures, "data": structures, "env": structures})
        | structures,
        "traits": st.lists(st.fixed_dictionaries(
            {"type": either("scaler", "labels", "env", "expose", "storage")},
            optional={"properties": structures}) | structures, max_size=2)})
policies = st.fixed_dictionaries(
    {"name": either("canary", "rest"), "type": either("topology", "override", "health",
                                                      "garbage-collect")},
    optional={"properties": st.fixed_dictionaries(
        {}, optional={"clusters": either(["member1"], ["member2", "local"]),
                      "placement": structures, "components": structures,
                      "overrideRules": structures, "namespace": structures})
        | structures})
steps = st.fixed_dictionaries(
    {"name": either("a", "b"), "type": either("deploy", "suspend", "notification")},
    optional={"properties": st.fixed_dictionaries(
        {}, optional={"policies": either(["canary"]), "webhook": structures,
                      "message": structures, "parallelism": structures})
        | structures, "timeout": structures, "if": structures})
applications = st.fixed_dictionaries(
    {"apiVersion": either("core.oam.dev/v1beta1"), "kind": st.just("Application"),
     "metadata": st.fixed_dictionaries({"name": either("shop")},
                                       optional={"namespace": either("shop")}) | structures,
     "spec": st.fixed_dictionaries(
         {"components": st.lists(components, max_size=3)},
         optional={"policies": st.lists(policies, max_size=3),
                   "workflow": st.fixed_dictionaries(
                       {"steps": st.lists(steps, max_size=3)}) | structures})
     | structures})


@pytest.mark.timeout(FUZZ_TIMEOUT)
@FUZZ
@given(data=structures)
def test_random_structures(tmp_path: Path, data: Any) -> None:
    accepted_or_refused(dry_run(tmp_path, yaml.safe_dump(data)))


@pytest.mark.timeout(FUZZ_TIMEOUT)
@FUZZ
@given(app=applications, extra=st.lists(st.fixed_dictionaries(
    {"kind": either("Policy", "Namespace")}, optional={"metadata": structures,
                                                       "type": structures,
                                                       "properties": structures}),
    max_size=2))
def test_random_application_shaped_files(tmp_path: Path, app: Any, extra: list[Any]) -> None:
    """Applications with random fields: what the controller compiles too, so a crash found
    here would also be a reconcile failing for ever."""
    accepted_or_refused(dry_run(tmp_path, yaml.safe_dump_all([app, *extra])))
