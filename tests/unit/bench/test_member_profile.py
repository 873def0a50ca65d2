"""bench/member_profile.py's pure parts: pprof's text tables and the request counts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

PATH = Path(__file__).resolve().parents[3] / "bench" / "member_profile.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("member_profile", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


profile = _load()

TOP = """File: kube-apiserver
Type: cpu
Duration: 12.41s, Total samples = 2410ms (19.42%)
Showing nodes accounting for 2.41s, 100% of 2.41s total
      flat  flat%   sum%        cum   cum%
         0     0%     0%      920ms 38.17%  net/http.HandlerFunc.ServeHTTP
      10ms  0.41%  0.41%      690ms 28.63%  handlers.createHandler.func1.2
     1.50s 62.24% 62.65%      1.50s 62.24%  runtime.futex
    0.50ms  0.02% 62.67%     0.50ms  0.02%  reflect.name.isExported (inline)
"""


def test_a_zero_is_read_without_its_unit_and_units_become_milliseconds() -> None:
    total, cumulative = profile.parse_top(TOP, cumulative=True)
    assert total == pytest.approx(2410.0)
    assert cumulative == pytest.approx({
        "net/http.HandlerFunc.ServeHTTP": 920.0,
        "handlers.createHandler.func1.2": 690.0,
        "runtime.futex": 1500.0, "reflect.name.isExported (inline)": 0.5})
    _, flat = profile.parse_top(TOP, cumulative=False)
    assert flat["net/http.HandlerFunc.ServeHTTP"] == 0.0
    assert flat["runtime.futex"] == pytest.approx(1500.0)


def test_requests_are_counted_by_verb_resource_and_code() -> None:
    metrics = "\n".join([
        '# TYPE apiserver_request_total counter',
        'apiserver_request_total{code="201",component="apiserver",group="apps",'
        'resource="deployments",scope="resource",subresource="",verb="POST",version="v1"} 7',
        'apiserver_request_total{code="200",component="apiserver",group="apps",'
        'resource="deployments",scope="resource",subresource="status",verb="GET",'
        'version="v1"} 3',
        'apiserver_request_total{code="409",component="apiserver",group="apps",'
        'resource="deployments",scope="resource",subresource="",verb="POST",version="v1"} 2',
        'apiserver_request_duration_seconds_count{verb="POST"} 99',
    ])
    counts = profile.requests_so_far(metrics)
    assert counts == {"POST deployments 201": 7, "GET deployments/status 200": 3,
                      "POST deployments 409": 2}
    assert profile.member_creates(counts) == 7
