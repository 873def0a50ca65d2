"""bench/scale_bench.py's pure parts: metrics, /proc, replica logs, audit lines, the table."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"


def _load() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # it imports propagation_bench, as when run as a script
    try:
        spec = importlib.util.spec_from_file_location("scale_bench", BENCH / "scale_bench.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses resolve annotations through it
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


scale = _load()

IDENTITY_A = "host_4242_0123abcd"
IDENTITY_B = "host_4343_89abcdef"


def audit_line(name: str, writer: str, *, verb: str = "create", code: int = 201,
               namespace: str = "ns", agent: str = "fedctl/0.1", subresource: str = "",
               stamp: str = "2026-11-26T22:00:00.500000Z") -> str:
    ref = {"resource": "deployments", "namespace": namespace, "name": name,
           "apiGroup": "apps", "apiVersion": "v1"}
    if subresource:
        ref["subresource"] = subresource
    return json.dumps({"kind": "Event", "verb": verb, "objectRef": ref,
                       "userAgent": f"{agent} ({writer})",
                       "responseStatus": {"code": code},
                       "requestReceivedTimestamp": stamp})


def test_keys_held_reads_the_propagation_controllers_series() -> None:
    text = "\n".join([
        "# HELP federation_shard_keys_held Keys seen by a sharded controller",
        'federation_shard_keys_held{controller="cleanup"} 12.0',
        'federation_shard_keys_held{controller="propagation"} 171.0',
    ])
    assert scale.keys_held(text) == 171.0
    assert scale.keys_held(text, "cleanup") == 12.0
    assert scale.keys_held("federation_reconcile_total 3.0") is None


def test_rss_is_read_in_bytes_from_proc_status() -> None:
    status = "Name:\tpython\nVmPeak:\t  900000 kB\nVmRSS:\t  524288 kB\nThreads:\t4\n"
    assert scale.rss_bytes(status) == 512 * 1024**2
    assert scale.rss_bytes("Name:\tzombie\n") is None


@pytest.mark.parametrize(("lines", "shards", "expected"), [
    (["x: shard b-shard-0, live shards b-shard-0 (waiting to claim)"], 1, False),
    (["x: shard b-shard-0, live shards b-shard-0 (waiting to claim)",
      "x: shard b-shard-0, live shards b-shard-0"], 1, True),
    # claimed, but the second replica's shard is not live yet: keys will still move
    (["x: shard b-shard-0, live shards b-shard-0"], 2, False),
    (["x: shard b-shard-0, live shards b-shard-0",
      "x: shard b-shard-0, live shards b-shard-0, b-shard-1 (waiting to claim)",
      "x: shard b-shard-0, live shards b-shard-0, b-shard-1"], 2, True),
    ([], 1, False),
])
def test_claimed_reads_the_last_shard_line(lines: list[str], shards: int,
                                           expected: bool) -> None:
    text = "".join(f"2026-11-26 22:00:0{i} INFO federation.runtime.peers: {line}\n"
                   for i, line in enumerate(lines))
    assert scale.claimed(text, shards) is expected


def test_took_shard_and_identity_pid() -> None:
    line = (f"2026-11-26 INFO federation.runtime.peers: {IDENTITY_A}: took shard "
            "bench-1-shard-2; claiming its keys in 15s\n")
    assert scale.took_shard(line) == (IDENTITY_A, "bench-1-shard-2")
    assert scale.took_shard("nothing here") is None
    assert scale.identity_pid(IDENTITY_A) == 4242
    assert scale.identity_pid("not-an-identity") is None


def test_copy_writes_keeps_only_the_control_planes_writes_of_the_namespaces_copies() -> None:
    lines = [
        audit_line("d0", IDENTITY_A),
        audit_line("d1", IDENTITY_A, agent="kubectl/v1.31"),  # not ours
        audit_line("d2", IDENTITY_A, namespace="other"),
        audit_line("d3", "simulator", subresource="status", verb="patch", code=200),
        "{truncated",
        audit_line("d4", IDENTITY_B, verb="update", code=409),
    ]
    writes = scale.copy_writes("m1", lines, "ns")
    assert [(w.name, w.writer, w.verb, w.code) for w in writes] == [
        ("d0", IDENTITY_A, "create", 201), ("d4", IDENTITY_B, "update", 409)]
    assert writes[0].member == "m1"
    assert writes[0].received == pytest.approx(1795730400.5)


def test_count_writes_finds_extra_writes_two_writers_and_lost_copies() -> None:
    def write(member: str, name: str, writer: str, at: float, code: int = 201
              ) -> object:
        return scale.CopyWrite(received=at, member=member, name=name, verb="create",
                               code=code, writer=writer)

    writes = [
        write("m1", "d0", IDENTITY_A, 1.0),
        write("m2", "d0", IDENTITY_A, 1.1),
        write("m1", "d1", IDENTITY_A, 1.2),  # the victim's create landed...
        write("m1", "d1", IDENTITY_B, 9.0, code=200),  # ...and another wrote it again
        write("m2", "d1", IDENTITY_B, 9.1, code=409),  # a refused write: extra, not written
    ]
    expected = [(m, n) for m in ("m1", "m2") for n in ("d0", "d1")]
    counts = scale.count_writes(writes, expected)
    assert counts.writes == 5
    assert counts.written == 3
    assert counts.extra == 1  # m1/d1 written twice; the 409 is m2/d1's only write
    assert counts.by_two == 1
    assert counts.lost == 1  # m2/d1: only a 409
    assert counts.per_writer == {IDENTITY_A: 3}


def test_count_writes_of_a_clean_burst() -> None:
    writes = [scale.CopyWrite(float(i), m, f"d{i}", "create", 201, w)
              for i, (m, w) in enumerate([("m1", IDENTITY_A), ("m1", IDENTITY_B)])]
    counts = scale.count_writes(writes, [("m1", "d0"), ("m1", "d1")])
    assert (counts.extra, counts.by_two, counts.lost) == (0, 0, 0)
    assert counts.per_writer == {IDENTITY_A: 1, IDENTITY_B: 1}


def test_net_cpu_subtracts_the_idle_rate_and_never_goes_negative() -> None:
    assert scale.net_cpu(3.0, 0.05, 20.0) == pytest.approx(2.0)
    assert scale.net_cpu(0.5, 0.05, 20.0) == 0.0


def _result(name: str, replicas: int, shard_count: int, elapsed: float,
            cpu_ms: list[float], gross_ms: list[float] | None = None) -> object:
    return scale.ConfigResult(
        name=name, replicas=replicas, shards=shard_count, templates=500, members=3,
        ready_s=2.0, claimed_s=math.nan if not shard_count else 17.5, elapsed=elapsed,
        cpu_ms=cpu_ms, gross_ms=gross_ms if gross_ms is not None else cpu_ms,
        keys=[None] if not shard_count else [250.0, 250.0],
        writes=scale.WriteCounts(1000, 1000, 0, 0, 0, {IDENTITY_A: 500, IDENTITY_B: 500}),
        complete=True)


def test_replicas_table_gives_ratios_to_raw_and_to_the_first_configuration() -> None:
    results = [_result("1", 1, 0, 10.0, [6.0]),
               _result("2", 2, 2, 5.0, [3.5, 3.0], gross_ms=[4.0, 3.5])]
    table = scale.replicas_table(results, raw=600.0)
    lines = table.splitlines()
    assert len(lines) == 4
    plain = [cell.strip() for cell in lines[2].split("|")[1:-1]]
    sharded = [cell.strip() for cell in lines[3].split("|")[1:-1]]
    assert plain[:5] == ["1 (plain `fedctl run`)", "50.0", "150", "0.25", "1.00"]
    assert plain[-1] == "-"  # no claim wait without shards
    assert sharded[:5] == ["2 x `--shards 2`", "100.0", "300", "0.50", "2.00"]
    assert sharded[5:8] == ["4.0 (3.5) / 3.5 (3.0)", "7.5 (6.5)", "250 / 250"]
    assert sharded[-1] == "17.5"


def test_cpu_cells_print_gross_beside_net_so_a_zero_net_is_visible() -> None:
    assert scale.cpu_cells([12.5, 9.0], [0.0, 3.25]) == "12.5 (0.0) / 9.0 (3.2)"


def test_arguments_measure_idle_over_a_longer_window_than_the_quiet() -> None:
    args = scale.parse_args([])
    assert args.idle_window > args.quiet


def test_without_background_leaves_out_heartbeats_and_leases() -> None:
    import collections

    counts = collections.Counter({"PATCH memberclusters/status": 7, "PUT leases": 30,
                                  "POST resourcebindings": 2})
    assert scale.without_background(counts) == 2


@pytest.mark.parametrize("argv", [["--configs", "4"], ["--restarts", "1,x"],
                                  ["--scenarios", "wide"], ["--templates", "0"]])
def test_arguments_refuse_unknown_names_and_sizes(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        scale.parse_args(argv)


def test_arguments_default_to_the_issue_sizes() -> None:
    args = scale.parse_args([])
    assert args.scenarios == ["replicas", "scale", "handover"]
    assert args.configs == ["1", "1s", "2", "3"]
    assert (args.templates, args.scale_templates, args.restarts) == (500, 10_000, ["1", "3"])


QUEUES = """\
# HELP federation_leader 1 while this process leads.
federation_leader {leader}
federation_workqueue_depth{{controller="policy-validation"}} 2.0
federation_workqueue_depth{{controller="cluster-health"}} 3.0
federation_workqueue_depth{{controller="propagation"}} 0.0
federation_workqueue_processing{{controller="propagation"}} 1.0
federation_workqueue_adds_total{{controller="propagation"}} 201.0
federation_workqueue_adds_total{{controller="cluster-health"}} 3.0
"""


def test_queue_totals_of_a_follower_leave_out_the_leaders_controllers() -> None:
    """A follower's leader-only queues hold what it would do if it led, forever: counting
    them, a sharded group never looks idle."""
    assert scale.queue_totals(QUEUES.format(leader="0.0")) == (1.0, 201.0)
    assert scale.queue_totals(QUEUES.format(leader="1.0")) == (6.0, 204.0)
    plain = "\n".join(QUEUES.format(leader="").splitlines()[2:])  # no election at all
    assert scale.queue_totals(plain) == (6.0, 204.0)
    assert scale.queue_totals("federation_leader 0.0\n") is None
