"""``fedctl plan`` on hostile files: exit 1 and one line on stderr, never a traceback or a hang.

Every case runs the real command (click's runner, in process) under a 5 s
bound (pytest-timeout; a bound, not a timing assertion). The files are what an
attacker or a fuzzer would hand it: deep nesting, numbers beyond int32 or
floats, alias bombs, bad encodings, files over the size limit, booleans as
counts, many errors at once; then random bytes and random YAML structures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from federation.cli import cli
from federation.untrusted import documents

POLICY = """\
apiVersion: policy.federation.io/v1alpha1
kind: PropagationPolicy
metadata: {name: p}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  placement:
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference: {dynamicWeight: AvailableReplicas}
"""
CLUSTERS = """\
clusters:
- {name: a, availableReplicas: 333333333}
- {name: b}
- {name: c}
"""
PREVIOUS = {
    "placements": [
        {
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment",
                         "namespace": "default", "name": "web"},
            "clusters": [{"name": "a", "replicas": 3}],
        }
    ]
}


def deployment(replicas: str = "3", name: str = "web") -> str:
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec: {{replicas: {replicas}}}
"""


def run(tmp_path: Path, manifest: bytes | str | None = None, clusters: bytes | str | None = None,
        previous: bytes | str | None = None) -> Result:
    """``fedctl plan`` with the given file contents (the valid defaults for the others)."""

    def write(name: str, content: bytes | str) -> str:
        path = tmp_path / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return str(path)

    args = ["plan", "-f", write("manifest.yaml", POLICY + "---\n" + deployment()
                                 if manifest is None else manifest),
            "--clusters", write("clusters.yaml", CLUSTERS if clusters is None else clusters)]
    if previous is not None:
        args += ["--previous", write("previous.json", previous)]
    return CliRunner().invoke(cli, args)


#: The reason classes of :mod:`federation.untrusted.documents`: what the contract promises
#: (one line, exit 1, the file, the class), whichever layer found the problem; never one
#: parser library's own words, which change between its releases.
DEPTH = documents.Reason.DEPTH.value
VALUES = documents.Reason.VALUES.value
SIZE = documents.Reason.SIZE.value
SYNTAX = documents.Reason.SYNTAX.value


def refused(result: Result, file: str, *words: str) -> None:
    """Exit 1, no exception escaped, one stderr line naming ``file`` and containing ``words``
    (a reason class's phrase, or a field path the loader names)."""
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, (result.output, result.stderr)
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), result.stderr
    assert result.stderr.startswith("error: ") and file in result.stderr, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def nested(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


def block_nested(depth: int) -> str:
    return "".join(f"{'  ' * i}k{i}:\n" for i in range(depth)) + "  " * depth + "v\n"


BILLION_LAUGHS = "\n".join(
    ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    + ["spec: *a9"]
)


# -- deep nesting ---------------------------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("depth", [101, 1_000, 100_000, 1_000_000])
def test_deep_flow_yaml_is_refused(tmp_path: Path, depth: int) -> None:
    """Flow sequences nested beyond 100 levels (up to a million) are refused, not recursed."""
    refused(run(tmp_path, manifest=deployment() + "x: " + nested(depth)),
            "manifest.yaml", DEPTH)


@pytest.mark.timeout(30)
def test_deep_block_yaml_in_the_clusters_file_is_refused(tmp_path: Path) -> None:
    """Indentation nesting 1,000 deep in the clusters file is refused too."""
    refused(run(tmp_path, clusters=CLUSTERS + block_nested(1_000)),
            "clusters.yaml", DEPTH)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("depth", [101, 1_000, 1_000_000])
def test_deep_previous_json_is_refused(tmp_path: Path, depth: int) -> None:
    """--previous JSON nested beyond 100 levels is refused (below and above Python's stack)."""
    refused(run(tmp_path, previous=json.dumps({"placements": []})[:-1] + ', "x": '
                + nested(depth) + "}"),
            "previous.json", DEPTH)


@pytest.mark.timeout(30)
def test_deep_json_objects_are_refused(tmp_path: Path) -> None:
    """Nested objects, not only arrays."""
    refused(run(tmp_path, previous='{"a":' * 50_000 + "1" + "}" * 50_000),
            "previous.json", DEPTH)


@pytest.mark.timeout(30)
def test_nesting_at_the_limit_is_accepted(tmp_path: Path) -> None:
    """Exactly 100 levels loads (the limit is inclusive); 101 does not."""
    def manifest(depth: int) -> str:  # the document's own mapping is level 1
        return POLICY + "---\n" + deployment() + "status: " + nested(depth - 2, "{a: 1}") + "\n"

    assert run(tmp_path, manifest=manifest(100)).exit_code == 0
    refused(run(tmp_path, manifest=manifest(101)), "manifest.yaml", DEPTH)


# -- numbers -------------------------------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("replicas", ["2147483648", str(2**63), str(10**30), "1.5", "1.0e+309",
                                      ".inf", ".nan", "-1", "'3'", "true", "1" * 5000])
def test_replicas_that_are_not_int32_are_refused(tmp_path: Path, replicas: str) -> None:
    """Replicas beyond int32, negative, floats, strings, booleans, 5000 digits: one line."""
    refused(run(tmp_path, manifest=POLICY + "---\n" + deployment(replicas)), "manifest.yaml")


@pytest.mark.timeout(30)
def test_a_boolean_is_not_an_integer(tmp_path: Path) -> None:
    """``replicas: true`` is not 1."""
    refused(run(tmp_path, manifest=POLICY + "---\n" + deployment("true")),
            "manifest.yaml", "spec.replicas", "not a boolean")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("field", ["availableReplicas: 2147483648", "availableReplicas: true",
                                   "availableReplicas: 1.0", "ready: 1", "ready: 'yes'"])
def test_cluster_counts_and_flags_are_strict(tmp_path: Path, field: str) -> None:
    """availableReplicas is an int32 and ready a real boolean."""
    refused(run(tmp_path, clusters=f"clusters:\n- {{name: a, {field}}}\n"),
            "clusters.yaml", "clusters[0].")


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("rule", "path"),
    [
        ("replicaBounds: [{minReplicas: 2147483648}]", "replicaBounds[0].minReplicas"),
        ("replicaBounds: [{maxReplicas: 99999999999}]", "replicaBounds[0].maxReplicas"),
        ("replicaBounds: [{minReplicas: true}]", "replicaBounds[0].minReplicas"),
        ("allowPartial: 1", "allowPartial"),
        ("weightPreference: {staticWeightList: [{targetCluster: {}, weight: "
         + str(2**63) + "}]}", "staticWeightList[0].weight"),
        ("weightPreference: {staticWeightList: [{targetCluster: {}, weight: true}]}",
         "staticWeightList[0].weight"),
    ],
)
def test_policy_counts_are_strict(tmp_path: Path, rule: str, path: str) -> None:
    """Bounds are int32, weights int64 (Karmada's types), none of them a boolean."""
    policy = POLICY.replace("      weightPreference: {dynamicWeight: AvailableReplicas}\n",
                            f"      {rule}\n")
    refused(run(tmp_path, manifest=policy + "---\n" + deployment()), "manifest.yaml", path)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("replicas", [2**31, 2**63, -1, 1.0, True, "3"])
def test_previous_replicas_are_strict(tmp_path: Path, replicas: Any) -> None:
    """A previous decision's replicas are int32 counts too."""
    previous = json.loads(json.dumps(PREVIOUS))
    previous["placements"][0]["clusters"][0]["replicas"] = replicas
    refused(run(tmp_path, previous=json.dumps(previous)),
            "previous.json", "placements[0].clusters[0].replicas")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("replicas", [10**8, 5 * 10**8, 10**9, 2**31 - 1])
def test_huge_valid_replicas_divide_at_once(tmp_path: Path, replicas: int) -> None:
    """The case that spun forever: 1e8-1e9 replicas over room 333333333 / unlimited / unlimited."""
    result = run(tmp_path, manifest=POLICY + "---\n" + deployment(str(replicas)),
                 clusters=CLUSTERS)
    assert result.exit_code == 0, result.stderr
    planned = run_json(tmp_path, replicas)
    assert sum(c["replicas"] for c in planned["clusters"]) == replicas


def run_json(tmp_path: Path, replicas: int) -> dict[str, Any]:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(POLICY + "---\n" + deployment(str(replicas)))
    clusters = tmp_path / "c.yaml"
    clusters.write_text(CLUSTERS)
    result = CliRunner().invoke(cli, ["plan", "-f", str(manifest), "--clusters", str(clusters),
                                      "-o", "json"])
    placement: dict[str, Any] = json.loads(result.stdout)["placements"][0]
    return placement


@pytest.mark.timeout(30)
def test_impossible_dates_and_long_integers_in_yaml(tmp_path: Path) -> None:
    """Values PyYAML's constructor raises plain ValueErrors for are malformed YAML."""
    refused(run(tmp_path, manifest=deployment() + "when: 2001-02-30\n"),
            "manifest.yaml", SYNTAX)


@pytest.mark.timeout(30)
def test_a_5000_digit_integer_in_json(tmp_path: Path) -> None:
    """Python refuses to convert it; that is malformed JSON, not a traceback."""
    refused(run(tmp_path, previous='{"placements": [], "x": ' + "9" * 5000 + "}"),
            "previous.json", SYNTAX)


# -- bombs and sizes ------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_billion_laughs_is_refused(tmp_path: Path) -> None:
    """Nested anchors expanding to 10**10 values are refused before anything is built."""
    refused(run(tmp_path, manifest=deployment() + BILLION_LAUGHS),
            "manifest.yaml", VALUES)


@pytest.mark.timeout(30)
def test_billion_laughs_in_the_clusters_file(tmp_path: Path) -> None:
    refused(run(tmp_path, clusters=CLUSTERS + BILLION_LAUGHS),
            "clusters.yaml", VALUES)


@pytest.mark.timeout(30)
def test_deep_alias_counts_the_anchor_depth(tmp_path: Path) -> None:
    """An alias to a deep anchor, placed deep, is as deep as its expansion."""
    text = deployment() + "a: &a " + nested(60) + "\nb: " + nested(50, "*a") + "\n"
    refused(run(tmp_path, manifest=text), "manifest.yaml", DEPTH)


@pytest.mark.timeout(30)
def test_recursive_alias_is_refused(tmp_path: Path) -> None:
    """``&a [*a]`` would build a list containing itself."""
    refused(run(tmp_path, manifest=deployment() + "loop: &a [*a]\n"),
            "manifest.yaml", VALUES)


@pytest.mark.timeout(30)
def test_ten_megabytes_of_flow_yaml_is_refused_by_size(tmp_path: Path) -> None:
    """The 10 MB flow-style file that took minutes is refused without being parsed."""
    big = "[" + ",".join(["{a: 1, b: [x, y]}"] * 600_000) + "]"
    assert len(big) > 10 * 10**6
    refused(run(tmp_path, manifest=big), "manifest.yaml", SIZE)


@pytest.mark.timeout(30)
def test_many_values_within_the_size_limit_are_refused(tmp_path: Path) -> None:
    """3 MB of ``[0,0,...]`` is within 4 MiB but holds 1.5 million values."""
    refused(run(tmp_path, manifest="[" + ",".join(["0"] * 1_500_000) + "]"),
            "manifest.yaml", VALUES)


@pytest.mark.timeout(30)
def test_too_many_documents_are_refused(tmp_path: Path) -> None:
    refused(run(tmp_path, manifest="---\n" * 20_000), "manifest.yaml",
            documents.Reason.DOCUMENTS.value)


@pytest.mark.timeout(30)
def test_a_large_previous_file_is_refused_by_size(tmp_path: Path) -> None:
    refused(run(tmp_path, previous=" " * (5 * 2**20)), "previous.json", SIZE)


# -- encodings ------------------------------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"kind: \xff\xfe\n", ("not UTF-8", "offset 6")),
        (deployment().encode("utf-16-le"), ("NUL byte",)),
        (deployment().encode("utf-16"), ("UTF-16",)),
        (deployment().encode("utf-32"), ("UTF-32",)),
        (b"kind: Deployment\0\n", ("NUL byte at offset 16",)),
        (bytes(range(256)) * 4, ("NUL byte",)),
        (b"\x89PNG\r\n\x1a\n" + bytes(range(1, 200)), ("not UTF-8",)),
        (b"a: \x1b[31mred\n", (SYNTAX,)),
        (b"a: \x01\n", (SYNTAX,)),
    ],
)
def test_bad_encodings_are_one_line(tmp_path: Path, content: bytes, words: tuple[str]) -> None:
    """Invalid UTF-8, UTF-16/32 with or without BOM, NUL bytes, binary, control characters."""
    refused(run(tmp_path, manifest=content), "manifest.yaml", *words)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("content", [b"\xc3\x28", deployment().encode("utf-16-le"), b"\0" * 10])
def test_bad_encodings_in_the_other_files(tmp_path: Path, content: bytes) -> None:
    refused(run(tmp_path, clusters=content), "clusters.yaml")
    refused(run(tmp_path, previous=content), "previous.json")


@pytest.mark.timeout(30)
def test_a_utf8_byte_order_mark_is_fine(tmp_path: Path) -> None:
    """UTF-8 with a BOM (as some editors save) loads, in YAML and JSON."""
    result = run(tmp_path, manifest=b"\xef\xbb\xbf" + (POLICY + "---\n" + deployment()).encode(),
                 previous=b"\xef\xbb\xbf" + json.dumps(PREVIOUS).encode())
    assert result.exit_code == 0, result.stderr


# -- error messages -------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_many_errors_are_one_line(tmp_path: Path) -> None:
    """Eleven problems in one policy: the first with its path, then how many more."""
    placement = (
        "    clusterAffinity: {clusterNames: 1, exclude: 2, labelSelector: 3, x: 4}\n"
        "    clusterTolerations: 5\n"
        "    spreadConstraints: 6\n"
        "    replicaScheduling: {replicaSchedulingType: 7, replicaDivisionPreference: 8,"
        " weightPreference: 9, allowPartial: 10, y: 11, replicaBounds: 12}\n"
    )
    policy = POLICY.split("  placement:")[0] + "  placement:\n" + placement
    result = run(tmp_path, manifest=policy + "---\n" + deployment())
    refused(result, "manifest.yaml", "spec.placement.", "more problems)")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", ['"a\\nb"', '"a\\e[2Jb"', '"a\\u2028b"'])
def test_control_characters_from_the_input_are_escaped(tmp_path: Path, name: str) -> None:
    """A duplicate resource whose name holds a newline or a terminal escape: still one line."""
    twice = deployment(name=name) + "---\n" + deployment(name=name)
    refused(run(tmp_path, manifest=POLICY + "---\n" + twice), "manifest.yaml", "duplicate")


@pytest.mark.timeout(30)
def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    """A bad option is bad input too: one line, exit 1."""
    result = CliRunner().invoke(cli, ["plan", "-o", "xml", "-f", "x", "--clusters", "y"])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "'xml' is not one of" in result.stderr


@pytest.mark.timeout(30)
def test_a_directory_is_not_a_file(tmp_path: Path) -> None:
    refused(CliRunner().invoke(cli, ["plan", "-f", str(tmp_path), "--clusters", str(tmp_path)]),
            str(tmp_path), "cannot read")


@pytest.mark.timeout(30)
def test_the_real_process_prints_one_line(tmp_path: Path) -> None:
    """``python -m federation plan`` on a deep file: one line on stderr, no traceback."""
    manifest = tmp_path / "deep.yaml"
    manifest.write_text("x: " + nested(100_000))
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(CLUSTERS)
    done = subprocess.run(
        [sys.executable, "-m", "federation", "plan", "-f", str(manifest),
         "--clusters", str(clusters)],
        capture_output=True, text=True, timeout=10, check=False,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert DEPTH in done.stderr


# -- random input ---------------------------------------------------------------------------

#: FEDERATION_FUZZ_EXAMPLES=5000 for a longer hunt (the unit suite keeps it short).
EXAMPLES = int(os.environ.get("FEDERATION_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
#: 5 s per example, bounding the whole test (pytest-timeout cannot bound one example).
FUZZ_TIMEOUT = 5 * EXAMPLES


def accepted_or_one_line(result: Result) -> None:
    """Random input may be valid; if not, the answer is exit 1 with one stderr line."""
    # A clean exit 0 leaves no exception in click's result; anything else must be an exit.
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.exception
    assert result.exit_code in (0, 1, 2), result.exit_code
    if result.exit_code == 1:
        assert result.stderr.count("\n") == 1, result.stderr


@pytest.mark.timeout(FUZZ_TIMEOUT)
@FUZZ
@given(content=st.binary(max_size=400), which=st.sampled_from(["manifest", "clusters",
                                                                "previous"]))
def test_random_bytes(tmp_path: Path, content: bytes, which: str) -> None:
    """Arbitrary bytes as any of the three files."""
    result = run(tmp_path, **{which: content})
    accepted_or_one_line(result)


scalars = (st.none() | st.booleans() | st.integers() | st.floats()
           | st.text(max_size=8) | st.sampled_from(["Deployment", "apps/v1", "a", "b", "c"]))
structures = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["name", "replicas", "spec", "metadata", "kind",
                                       "clusters", "availableReplicas", "placements",
                                       "resource", "taints", "labels", "ready"]) | st.text(
                                           max_size=6), children, max_size=4),
    max_leaves=30,
)


@pytest.mark.timeout(FUZZ_TIMEOUT)
@FUZZ
@given(data=structures, which=st.sampled_from(["manifest", "clusters", "previous"]))
def test_random_structures(tmp_path: Path, data: Any, which: str) -> None:
    """Random nested values, serialised as each file expects (YAML or JSON)."""
    dump: Callable[[Any], str] = json.dumps if which == "previous" else yaml.safe_dump
    accepted_or_one_line(run(tmp_path, **{which: dump(data)}))


def either(*values: Any) -> st.SearchStrategy[Any]:
    """One of ``values`` or any structure: near-valid input, so the fuzz gets past the start."""
    return st.sampled_from(values) | structures


kubernetes_objects = st.fixed_dictionaries(
    {
        "apiVersion": either("apps/v1", "v1", "batch/v1", "policy.federation.io/v1alpha1",
                             "policy.karmada.io/v1alpha1"),
        "kind": either("Deployment", "Job", "Pod", "ConfigMap", "List", "PropagationPolicy",
                       "ClusterPropagationPolicy", "Namespace"),
        "metadata": st.fixed_dictionaries(
            {"name": either("web", "a")},
            optional={"namespace": either("default", None), "labels": structures},
        )
        | structures,
    },
    optional={
        "spec": st.fixed_dictionaries(
            {},
            optional={"replicas": structures, "parallelism": structures,
                      "resourceSelectors": structures, "placement": structures,
                      "priority": structures},
        )
        | structures,
        "items": structures,
    },
)
cluster_files = st.fixed_dictionaries(
    {"clusters": st.lists(st.fixed_dictionaries(
        {"name": either("a", "b", "c")},
        optional={"availableReplicas": structures, "ready": structures, "labels": structures,
                  "taints": structures, "region": structures, "zone": structures},
    ) | structures, max_size=4)}
)
previous_files = st.fixed_dictionaries(
    {"placements": st.lists(st.fixed_dictionaries(
        {"resource": st.fixed_dictionaries(
            {"apiVersion": either("apps/v1"), "kind": either("Deployment"),
             "name": either("web")},
            optional={"namespace": either("default", None)}) | structures},
        optional={"clusters": st.lists(st.fixed_dictionaries(
            {"name": either("a", "b"), "replicas": structures}) | structures, max_size=3)},
    ) | structures, max_size=3)}
)


@pytest.mark.timeout(FUZZ_TIMEOUT)
@FUZZ
@given(manifests=st.lists(kubernetes_objects, min_size=1, max_size=3),
       clusters=cluster_files, previous=st.none() | previous_files)
def test_random_kubernetes_shaped_files(tmp_path: Path, manifests: list[Any], clusters: Any,
                                        previous: Any) -> None:
    """Objects shaped like policies, workloads, clusters and decisions, with random fields."""
    result = run(tmp_path, manifest=yaml.safe_dump_all(manifests),
                 clusters=yaml.safe_dump(clusters),
                 previous=None if previous is None else json.dumps(previous))
    accepted_or_one_line(result)


@pytest.mark.timeout(FUZZ_TIMEOUT)
@FUZZ
@given(replicas=st.integers(0, 2**31 - 1),
       rooms=st.lists(st.none() | st.integers(0, 2**31 - 1), min_size=1, max_size=6))
def test_random_big_numbers_plan_quickly(tmp_path: Path, replicas: int,
                                         rooms: list[int | None]) -> None:
    """Any int32 replicas over any int32 rooms: a plan or an unschedulable (exit 2), at once."""
    clusters = "clusters:\n" + "".join(
        f"- {{name: c{i}}}\n" if room is None else f"- {{name: c{i}, availableReplicas: {room}}}\n"
        for i, room in enumerate(rooms)
    )
    result = run(tmp_path, manifest=POLICY + "---\n" + deployment(str(replicas)),
                 clusters=clusters)
    assert result.exit_code in (0, 2), result.stderr


def test_limits_are_the_documented_ones() -> None:
    """docs/placement.md and `fedctl plan --help` quote these numbers."""
    documented = documents.Limits(
        max_bytes=4 * 2**20, max_depth=100, max_nodes=100_000, max_documents=10_000
    )
    assert documented == documents.LIMITS
