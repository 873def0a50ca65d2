"""The propagation bench's pure parts: metric parsing, percentiles, policies, arguments."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

PATH = Path(__file__).resolve().parents[3] / "bench" / "propagation_bench.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("propagation_bench", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


bench = _load()

def _line(code: str, resource: str, subresource: str, verb: str, value: int) -> str:
    return (f'apiserver_request_total{{code="{code}",component="apiserver",group="g",'
            f'resource="{resource}",subresource="{subresource}",verb="{verb}"}} {value}')


METRICS = "\n".join([
    "# HELP apiserver_request_total Counter of apiserver requests",
    _line("201", "deployments", "", "POST", 500),
    _line("200", "deployments", "status", "PATCH", 12),
    _line("200", "deployments", "", "LIST", 40),
    _line("409", "resourcebindings", "", "PUT", 3),
    _line("422", "endpoints", "", "POST", 6),
    _line("200", "customresourcedefinitions", "", "APPLY", 7),
    'apiserver_request_duration_seconds_count{verb="POST"} 99',
])


def test_mutating_requests_counts_writes_only_and_names_failures() -> None:
    counts = bench.mutating_requests(METRICS)
    assert counts == {"POST deployments": 500, "PATCH deployments/status": 12,
                      "PUT resourcebindings (409)": 3, "APPLY customresourcedefinitions": 7}


def test_delta_keeps_what_grew() -> None:
    before = bench.mutating_requests(METRICS)
    after = bench.mutating_requests(METRICS.replace("} 12", "} 15"))
    assert bench.delta(after, before) == {"PATCH deployments/status": 3}


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert bench.percentile(values, 0.5) == 50.0
    assert bench.percentile(values, 0.99) == 99.0
    assert bench.percentile([3.0], 0.99) == 3.0
    assert math.isnan(bench.percentile([], 0.5))


def test_judged_marks_missing_values_as_failures() -> None:
    assert bench.judged("s", "m", math.nan, ".2f", "<= 1", lambda v: v <= 1).verdict == "FAIL"
    assert bench.judged("s", "m", 0.5, ".2f", "<= 1", lambda v: v <= 1).verdict == "PASS"


def test_divided_policy_names_every_member_with_equal_weight() -> None:
    placement = bench.policy("ns", ["member1", "member2"], divided=True)["spec"]["placement"]
    assert placement["clusterAffinity"] == {"clusterNames": ["member1", "member2"]}
    weights = placement["replicaScheduling"]["weightPreference"]["staticWeightList"]
    assert [w["weight"] for w in weights] == [1, 1]


def test_copy_ready_needs_observed_generation_and_ready_replicas() -> None:
    copy = {"metadata": {"generation": 2}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 1, "readyReplicas": 2}}
    assert not bench.copy_ready(copy)
    copy["status"]["observedGeneration"] = 2
    assert bench.copy_ready(copy)
    copy["status"]["readyReplicas"] = 1
    assert not bench.copy_ready(copy)


def test_arguments_refuse_unknown_scenarios_and_zero_sizes() -> None:
    assert bench.parse_args(["--scenarios", "burst, paced"]).scenarios == ["burst", "paced"]
    with pytest.raises(SystemExit):
        bench.parse_args(["--scenarios", "bursty"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--templates", "0"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--paced-rate", "0"])


def test_member_cluster_heartbeats_are_not_charged_to_templates() -> None:
    counts = bench.mutating_requests("\n".join([
        _line("201", "deployments", "", "POST", 10),
        _line("200", "resourcebindings", "", "POST", 10),
        _line("200", "memberclusters", "status", "PATCH", 40)]))
    assert bench.heartbeats(counts) == 40
    run = bench.Run(latencies=[], copies_per_second=0.0, hub_writes=counts,
                    member_writes=bench.collections.Counter(), own_writes=10, cpu=0.0,
                    window_cpu={}, window_writes=(0, 0), creates_done=0.0,
                    complete=True, templates=10, members=3, elapsed=1.0)
    assert run.hub_writes_per_template == 1.0


def _busy(rounds: int) -> int:
    return sum(i * i for i in range(rounds))


def test_cpu_profile_summary_charges_per_template_and_groups_by_module(tmp_path: Path) -> None:
    """The profile tables the bench prints: per-unit figures (total / units), modules and
    functions by their own time, stages by their time with callees."""
    import cProfile
    import time

    cpu_profile = bench.cpu_profile
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    for _ in range(20):
        _busy(20000)
    profiler.disable()
    path = tmp_path / "profile"
    profiler.dump_stats(str(path))
    found, total = cpu_profile.entries(str(path))
    assert total > 0 and any("(_busy)" in label for label, *_ in found)
    text = cpu_profile.summary(str(path), per=10, names=("(_busy)", "(absent)"))
    assert "ms per template" in text
    busy = next(line for line in text.splitlines()
                if line.startswith("| `") and "(_busy)" in line and "calls/template" not in line)
    assert "| 2.0 |" in busy  # 20 calls over 10 templates
    assert "(absent)" not in text
    assert cpu_profile.group_of(("~", 0, "<method 'get' of 'dict' objects>")) == "builtin dict"
    assert cpu_profile.group_of(("/x/site-packages/aiohttp/client.py", 1, "f")) == "aiohttp"
    assert cpu_profile.group_of(("/w/federation/contexts/cache.py", 1, "f")) == \
        "federation/contexts/cache.py"


def test_cpu_profile_compare_gives_the_ratio_of_two_profiles(tmp_path: Path) -> None:
    """Two profiles side by side: the whole, a named stage and the modules, after/before."""
    import cProfile
    import time

    paths = []
    for rounds in (40, 20):
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        for _ in range(rounds):
            _busy(20000)
        profiler.disable()
        paths.append(tmp_path / f"p{rounds}")
        profiler.dump_stats(str(paths[-1]))
    text = bench.cpu_profile.compare(str(paths[0]), str(paths[1]), 10, names=("(_busy)",))
    assert text.splitlines()[0].startswith("| what | before")
    busy = next(line for line in text.splitlines() if "(_busy)" in line)
    ratio = float(busy.rstrip(" |").rsplit("|", 1)[1])
    assert 0.3 < ratio < 0.8  # half the work, give or take the clock's grain


PLANE_METRICS = "\n".join([
    '# HELP federation_reconcile_total Reconciles',
    'federation_reconcile_total{cluster="hub",controller="propagation",result="success"} 900',
    'federation_reconcile_total{cluster="hub",controller="propagation",result="error"} 100',
    'federation_reconcile_total{cluster="hub",controller="cleanup",result="success"} 50',
    'federation_client_request_duration_seconds_count{cluster="hub",code="201",verb="POST"} 300',
    'federation_client_request_duration_seconds_count{cluster="member1",code="201",verb="POST"}'
    ' 100',
    'federation_client_request_duration_seconds_count{cluster="member2",code="200",verb="PUT"}'
    ' 100',
    'federation_client_request_duration_seconds_bucket{cluster="hub",le="0.1",verb="POST"} 7',
    'federation_watch_events_total{cluster="member1",resource="apps/v1/deployments"} 400',
    'federation_watch_events_total{cluster="hub",resource="apps/v1/deployments"} 200',
    'federation_propagation_unchanged_total 250.0',
])


def test_plane_counts_per_template() -> None:
    """The control plane's reconciles (propagation only), requests and watch events, per
    template, by hub and members; buckets and other controllers are not counted."""
    counts = bench.plane_counts(PLANE_METRICS)
    assert counts["reconciles cleanup success"] == 50
    assert dict(bench.counts_per_template(counts, 100)) == {
        "API requests (hub)": 3.0, "API requests (member)": 2.0,
        "propagation reconciles": 10.0, "propagation reconciles on the fast path": 2.5,
        "watch events (hub)": 2.0, "watch events (member)": 4.0}


def test_server_traffic_counts_every_verb_and_the_watch_events_sent() -> None:
    """Reads count as well as writes (the servers' cost beyond writes); requests for no
    resource (the bench's polls of /metrics) and the endpoints reconciler do not; watch
    events and their bytes by kind, whichever label names it."""
    text = "\n".join([
        METRICS,
        'apiserver_request_total{code="200",resource="",verb="GET"} 900',
        'apiserver_watch_events_total{group="apps",kind="Deployment",version="v1"} 30',
        'apiserver_watch_events_sizes_sum{group="apps",kind="Deployment",version="v1"} 2048',
        'apiserver_watch_events_sizes_count{group="apps",kind="Deployment",version="v1"} 30',
        'apiserver_watch_events_total{group="",resource="configmaps",version="v1"} 4',
    ])
    counts = bench.server_traffic(text)
    assert counts == {"requests POST deployments": 500, "requests PATCH deployments/status": 12,
                      "requests LIST deployments": 40, "requests PUT resourcebindings": 3,
                      "requests APPLY customresourcedefinitions": 7,
                      "watch events Deployment": 30, "watch bytes Deployment": 2048,
                      "watch events configmaps": 4}
    rows = dict(bench.traffic_per_template(counts, counts, 10))
    assert rows["API server requests (all verbs) per template: hub / members"] == \
        "56.20 / 56.20"
    assert rows["API server watch events sent per template: hub / members"] == "3.40 / 3.40"
    assert rows["API server watch KB sent per template: hub / members"] == "0.20 / 0.20"
