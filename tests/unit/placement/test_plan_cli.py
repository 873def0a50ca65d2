"""``fedctl plan``: the JSON contract, the table, --previous, --fail and exit statuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from federation.cli import cli

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "placement"
DIVISION = str(EXAMPLES / "division.yaml")
MEMBERS = str(EXAMPLES / "members.yaml")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["plan", *args])


def placement(
    name: str, policy: str, replicas: int, clusters: dict[str, int], explanation: list[str]
) -> dict[str, Any]:
    return {
        "resource": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "namespace": "default",
            "name": name,
        },
        "policy": policy,
        "replicas": replicas,
        "clusters": [{"name": n, "replicas": r} for n, r in clusters.items()],
        "explanation": explanation,
        "error": None,
    }


EXPECTED = {
    "placements": [
        placement(
            "static-a",
            "static-3-2-1",
            14,
            {"member1": 7, "member2": 5, "member3": 2},
            [
                "policy static-3-2-1 (ClusterPropagationPolicy, priority 0)",
                "candidates: member1, member2, member3",
                "mode: Divided/Weighted (static weights)",
                "availableReplicas is not considered in this mode (as in Karmada)",
                "weights (largest matching staticWeightList rule): member1=3, member2=2, member3=1",
                "divided 14 replicas by Webster: member1=7, member2=5, member3=2",
            ],
        ),
        placement(
            "static-b",
            "static-170-110-60",
            5,
            {"member1": 2, "member2": 2, "member3": 1},
            [
                "policy static-170-110-60 (ClusterPropagationPolicy, priority 0)",
                "candidates: member1, member2, member3",
                "mode: Divided/Weighted (static weights)",
                "availableReplicas is not considered in this mode (as in Karmada)",
                "weights (largest matching staticWeightList rule): "
                "member1=170, member2=110, member3=60",
                "divided 5 replicas by Webster: member1=2, member2=2, member3=1",
            ],
        ),
        placement(
            "dynamic",
            "dynamic",
            12,
            {"member1": 3, "member2": 4, "member3": 5},
            [
                "policy dynamic (ClusterPropagationPolicy, priority 0)",
                "candidates: member1, member2, member3",
                "mode: Divided/Weighted (dynamic weight: AvailableReplicas)",
                "weights = available replicas: "
                "member1=6, member2=8, member3=10",
                "divided 12 replicas by Webster: member1=3, member2=4, member3=5",
            ],
        ),
        placement(
            "aggregated",
            "aggregated",
            12,
            {"member2": 5, "member3": 7},
            [
                "policy aggregated (ClusterPropagationPolicy, priority 0)",
                "candidates: member1, member2, member3",
                "mode: Divided/Aggregated",
                "aggregated onto member2, member3",
                "weights = available replicas: member2=8, member3=10",
                "divided 12 replicas by Webster: member2=5, member3=7",
            ],
        ),
    ]
}


def test_json_output_is_exactly_the_contract() -> None:
    """-o json prints the documented shape with the issue's numbers, exit 0."""
    result = run("-f", DIVISION, "--clusters", MEMBERS, "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == EXPECTED
    assert result.stderr == ""


def test_json_keys_are_in_contract_order() -> None:
    """The keys of each placement come in the documented order."""
    result = run("-f", DIVISION, "--clusters", MEMBERS, "-o", "json")
    first = json.loads(result.stdout)["placements"][0]
    assert list(first) == ["resource", "policy", "replicas", "clusters", "explanation", "error"]
    assert list(first["resource"]) == ["apiVersion", "kind", "namespace", "name"]


def test_table_is_the_default() -> None:
    """Without -o the output is a table with one row per resource."""
    result = run("-f", DIVISION, "--clusters", MEMBERS)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["RESOURCE", "POLICY", "REPLICAS", "CLUSTERS", "STATUS"]
    assert "member1=7 member2=5 member3=2" in lines[1]
    assert lines[4].split()[-1] == "ok"


def test_explain_prints_each_decision_explanation() -> None:
    """--explain adds every explanation line under the table."""
    result = run("-f", DIVISION, "--clusters", MEMBERS, "--explain")
    assert "Deployment default/aggregated:" in result.stdout
    assert "  - aggregated onto member2, member3" in result.stdout


def test_a_failed_placement_exits_2_and_still_prints_everything(tmp_path: Path) -> None:
    """Any placement error gives exit 2 with every placement printed."""
    extra = tmp_path / "orphan.yaml"
    extra.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: orphan}\n")
    result = run("-f", DIVISION, "-f", str(extra), "--clusters", MEMBERS, "-o", "json")
    assert result.exit_code == 2
    placements = json.loads(result.stdout)["placements"]
    assert len(placements) == 5
    assert placements[-1]["policy"] is None
    assert (
        placements[-1]["error"]
        == "no PropagationPolicy or ClusterPropagationPolicy matches this resource"
    )


def test_unschedulable_exits_2_with_the_shortfall_in_the_table(tmp_path: Path) -> None:
    """The table shows the error of an unschedulable placement."""
    small = tmp_path / "small.yaml"
    small.write_text("clusters:\n- {name: member1, availableReplicas: 1}\n")
    result = run("-f", DIVISION, "--clusters", str(small))
    assert result.exit_code == 2
    assert "error: unschedulable: 12 replicas" in result.stdout


def test_previous_round_trip_moves_nothing(tmp_path: Path) -> None:
    """A former -o json output fed to --previous yields the same placements."""
    first = run("-f", DIVISION, "--clusters", MEMBERS, "-o", "json")
    previous = tmp_path / "prev.json"
    previous.write_text(first.stdout)
    again = run("-f", DIVISION, "--clusters", MEMBERS, "--previous", str(previous), "-o", "json")
    assert again.exit_code == 0
    before = [p["clusters"] for p in json.loads(first.stdout)["placements"]]
    after = [p["clusters"] for p in json.loads(again.stdout)["placements"]]
    assert after == before
    assert (
        "kept the current placement (12 replicas; nothing to change)"
        in json.loads(again.stdout)["placements"][2]["explanation"]
    )


def test_fail_moves_only_the_failed_clusters_replicas(tmp_path: Path) -> None:
    """--fail NAME marks a cluster not ready: its replicas move, the rest stay."""
    previous = tmp_path / "prev.json"
    previous.write_text(run("-f", DIVISION, "--clusters", MEMBERS, "-o", "json").stdout)
    result = run(
        "-f",
        DIVISION,
        "--clusters",
        MEMBERS,
        "--previous",
        str(previous),
        "--fail",
        "member3",
        "-o",
        "json",
    )
    dynamic = json.loads(result.stdout)["placements"][2]
    clusters = {c["name"]: c["replicas"] for c in dynamic["clusters"]}
    assert "member3" not in clusters
    assert clusters["member1"] >= 3 and clusters["member2"] >= 4 and sum(clusters.values()) == 12
    assert "filtered (not ready): member3" in dynamic["explanation"]


def test_malformed_yaml_is_one_line_naming_the_file(tmp_path: Path) -> None:
    """Bad YAML: exit 1, one stderr line with the file and position, nothing on stdout."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: [\n")
    result = run("-f", str(bad), "--clusters", MEMBERS)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {bad}: malformed YAML: line 2, column 1: ")


def test_invalid_field_names_file_and_path(tmp_path: Path) -> None:
    """An invalid policy field: exit 1 and a line naming file, document and path."""
    bad = tmp_path / "policy.yaml"
    bad.write_text(Path(DIVISION).read_text().replace("weight: 3", "weight: 0"))
    result = run("-f", str(bad), "--clusters", MEMBERS)
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {bad} (document 1): spec.placement.replicaScheduling.weightPreference."
        "staticWeightList[0].weight: input should be greater than or equal to 1\n"
    )


def test_invalid_clusters_file(tmp_path: Path) -> None:
    """A bad clusters file: exit 1 naming its field path."""
    bad = tmp_path / "clusters.yaml"
    bad.write_text("clusters:\n- {name: a, ready: maybe}\n")
    result = run("-f", DIVISION, "--clusters", str(bad))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {bad}: clusters[0].ready: ")


def test_missing_file_and_missing_option_exit_1() -> None:
    """Unreadable files and usage errors are bad input (exit 1), without tracebacks."""
    missing = run("-f", "/nonexistent.yaml", "--clusters", MEMBERS)
    assert (missing.exit_code, missing.stderr) == (
        1,
        "error: /nonexistent.yaml: cannot read: No such file or directory\n",
    )
    usage = run("-f", DIVISION)
    assert usage.exit_code == 1
    assert "Missing option '--clusters'" in usage.stderr


def test_fail_with_an_unknown_cluster_is_bad_input() -> None:
    """--fail must name a known cluster."""
    result = run("-f", DIVISION, "--clusters", MEMBERS, "--fail", "nope")
    assert result.exit_code == 1
    assert "no cluster named nope" in result.stderr


def test_bad_previous_file(tmp_path: Path) -> None:
    """A malformed --previous file is bad input naming the file."""
    previous = tmp_path / "prev.json"
    previous.write_text("{not json")
    result = run("-f", DIVISION, "--clusters", MEMBERS, "--previous", str(previous))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {previous}: malformed JSON: line 1, column 2")


def test_files_without_resources_are_bad_input(tmp_path: Path) -> None:
    """Policies alone give nothing to plan."""
    only = tmp_path / "only.yaml"
    only.write_text(Path(DIVISION).read_text().split("---\napiVersion: apps/v1")[0])
    result = run("-f", str(only), "--clusters", MEMBERS)
    assert result.exit_code == 1
    assert "no resources to place" in result.stderr


def test_help_documents_exit_statuses() -> None:
    """The command help explains the exit codes."""
    result = run("--help")
    assert result.exit_code == 0
    assert "Exit status:" in result.stdout and "2  the plan was printed" in result.stdout
