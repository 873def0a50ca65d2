"""Division equals Karmada's: the engine and ``fedctl plan -o json`` against a port of its Go.

The reference is :mod:`karmada_reference`, a straight port of Karmada's division code. For
random clusters (up to 12, see the reference's note on Go's sort), capacities (some
clusters without an estimate), static weights (some clusters matched by no rule, some by
two), previous assignments (some on clusters that have left the fleet), replica counts and
UIDs (some empty), the engine's decision is the reference's, in all three divided modes,
for policies of either API group (no extension fields are used, so both must be Karmada's).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from federation.cli import cli
from federation.placement import clusters, division, engine, policy, resources
from tests.unit.placement import builders
from tests.unit.placement import karmada_reference as ref

MODES = ("static", "dynamic", "aggregated")
KARMADA = policy.KARMADA_GROUP_VERSION
_NAMES = st.text("abcm-0123456789", min_size=1, max_size=6).filter(lambda s: s[0].isalpha())
_UIDS = st.one_of(st.just(""), st.uuids().map(str), st.text("0123456789abcdef-", max_size=12))


@dataclass(frozen=True)
class Case:
    mode: str
    replicas: int
    estimates: tuple[tuple[str, int | None], ...]
    weights: tuple[tuple[str, int], ...]  # (cluster, weight) rules, a cluster may have two
    previous: tuple[tuple[str, int], ...]  # in name order, as the engine reads it
    uid: str
    group: str


@st.composite
def cases(draw: st.DrawFn, modes: tuple[str, ...] = MODES) -> Case:
    names = draw(st.lists(_NAMES, min_size=1, max_size=12, unique=True))
    estimates = tuple(
        (n, draw(st.one_of(st.none(), st.integers(0, 40), st.just(0)))) for n in names
    )
    weighted = draw(st.lists(st.sampled_from(names), max_size=len(names) + 2))
    weights = tuple((n, draw(st.integers(1, 9))) for n in weighted)
    gone = draw(st.lists(_NAMES.filter(lambda s: s not in names), max_size=2, unique=True))
    held = draw(st.lists(st.sampled_from([*names, *gone]), max_size=len(names), unique=True))
    previous = tuple(sorted((n, draw(st.integers(1, 30))) for n in held))
    return Case(
        mode=draw(st.sampled_from(modes)),
        replicas=draw(st.integers(0, 120)),
        estimates=estimates,
        weights=weights,
        previous=previous,
        uid=draw(_UIDS),
        group=draw(st.sampled_from(policy.API_VERSIONS)),
    )


def karmada(case: Case) -> dict[str, int] | None:
    """The reference's division; None when Karmada finds the clusters unschedulable."""
    strategy = {
        "static": ref.StaticWeightStrategy,
        "dynamic": ref.DynamicWeightStrategy,
        "aggregated": ref.AggregatedStrategy,
    }[case.mode]
    rules = [ref.StaticClusterWeight(frozenset({n}), w) for n, w in case.weights]
    try:
        return ref.schedule(
            strategy, case.replicas, case.estimates, case.previous, case.uid, rules
        )
    except ref.Unschedulable:
        return None


def placement_of(case: Case) -> dict[str, Any]:
    if case.mode == "static":
        rules = [{"targetCluster": {"clusterNames": [n]}, "weight": w} for n, w in case.weights]
        return {
            "replicaScheduling": {
                "replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "Weighted",
                "weightPreference": {"staticWeightList": rules},
            }
        }
    return builders.dynamic() if case.mode == "dynamic" else builders.aggregated()


def ours(case: Case) -> dict[str, int] | None:
    resource = builders.deployment(replicas=case.replicas).model_copy(update={"uid": case.uid})
    chosen = builders.make_policy(placement_of(case), api_version=case.group)
    fleet = [builders.cluster(n, e) for n, e in case.estimates]
    decision = engine.place(resource, chosen, fleet, dict(case.previous))
    if decision.error is not None:
        assert decision.error.startswith("unschedulable"), decision.error
        return None
    return decision.nonzero()


@settings(max_examples=1500, deadline=None)
@given(cases())
@example(  # a tie on the last replica, broken by the UID's hash (odd: the last name wins)
    Case("static", 3, (("a", None), ("b", None)), (), (), "u-1", policy.GROUP_VERSION)
)
@example(  # no estimate weighs spec.replicas (12), not the 6 being added
    Case("dynamic", 12, (("a", None), ("b", 2)), (), (("b", 6),), "", policy.GROUP_VERSION)
)
@example(  # Aggregated: a cluster without an estimate is not first; holders are
    Case("aggregated", 9, (("a", None), ("b", 30), ("c", 5)), (), (("c", 1),), "", KARMADA)
)
def test_engine_divides_as_karmada(case: Case) -> None:
    assert ours(case) == karmada(case), case


@st.composite
def crowded(draw: st.DrawFn) -> Case:
    """13 to 40 clusters with few distinct estimates: Go's pdqsort decides among equals."""
    names = [f"m{i}" for i in draw(st.lists(st.integers(0, 99), min_size=13, max_size=40,
                                             unique=True))]
    room = st.sampled_from([None, 0, 3, 5, 5, 8])
    estimates = tuple((n, draw(room)) for n in names)
    held = draw(st.lists(st.sampled_from(names), max_size=len(names), unique=True))
    previous = tuple(sorted((n, draw(st.sampled_from([1, 2, 4, 4]))) for n in held))
    return Case("aggregated", draw(st.integers(1, 150)), estimates, (), previous,
                draw(_UIDS), KARMADA)


@settings(max_examples=600, deadline=None)
@given(crowded())
def test_aggregated_over_many_equal_clusters_picks_as_go_sorts(case: Case) -> None:
    assert ours(case) == karmada(case), case


def test_uid_hash_parity_matches_go() -> None:
    """FNV-32a test vectors (the empty string, 'a', 'foobar'), and Karmada's rule on them."""
    assert division.fnv32a(b"") == 0x811C9DC5 == ref.fnv32a(b"")
    assert division.fnv32a(b"a") == 0xE40C292C
    assert division.fnv32a(b"foobar") == 0xBF9CF968
    assert not division.names_descending("")
    for uid in ("a", "b", "foobar", "0f8d3a5e-6b1c-4c33-9a0e-1d2f3a4b5c6d"):
        assert division.names_descending(uid) == (ref.fnv32a(uid.encode()) & 1 == 1)


def test_the_uid_decides_a_tie_both_ways() -> None:
    """3 replicas at 1:1 leave one tie; an even hash gives it to 'a', an odd one to 'b'."""
    odd = next(u for u in (f"u-{i}" for i in range(10)) if division.names_descending(u))
    even = next(u for u in (f"u-{i}" for i in range(10)) if not division.names_descending(u))
    for uid, winner in ((even, "a"), (odd, "b")):
        case = Case("static", 3, (("a", None), ("b", None)), (), (), uid, policy.GROUP_VERSION)
        assert ours(case) == karmada(case)
        assert ours(case) == {"a": 2, "b": 1} if winner == "a" else {"a": 1, "b": 2}


def test_static_weights_ignore_spread_for_karmada_policies_only() -> None:
    """Karmada ignores spreadConstraints with static weights; our group keeps them (ours)."""
    placement = {
        **builders.static({"a": 1, "b": 1, "c": 1}),
        "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
    }
    fleet = [builders.cluster(n, 10) for n in "abc"]
    resource = builders.deployment(replicas=6)
    theirs = engine.place(
        resource,
        builders.make_policy(placement, api_version=policy.KARMADA_GROUP_VERSION),
        fleet,
    )
    assert theirs.nonzero() == {"a": 2, "b": 2, "c": 2}
    assert any("not considered with static weights" in line for line in theirs.explanation)
    mine = engine.place(resource, builders.make_policy(placement), fleet)
    assert len(mine.nonzero()) == 1


def test_uid_is_read_from_the_manifest_and_refused_when_not_a_string() -> None:
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"}}
    assert resources.from_manifest(manifest).uid == ""
    manifest["metadata"] = {"name": "w", "uid": "1234"}
    assert resources.from_manifest(manifest).uid == "1234"
    manifest["metadata"] = {"name": "w", "uid": 1234}
    with pytest.raises(ValueError, match="uid"):
        resources.from_manifest(manifest)


# -- fedctl plan -o json ---------------------------------------------------------------------


def plan_json(case: Case, directory: Path) -> dict[str, int] | None:
    """Run ``fedctl plan -o json`` on files made from ``case``; the clusters or None (error)."""
    workload: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": case.replicas},
    }
    if case.uid:
        workload["metadata"]["uid"] = case.uid
    chosen = {
        "apiVersion": case.group,
        "kind": "PropagationPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "placement": placement_of(case),
        },
    }
    fleet = {
        "clusters": [
            {"name": n} if e is None else {"name": n, "availableReplicas": e}
            for n, e in case.estimates
        ]
    }
    key = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web"}
    previous = {
        "placements": [
            {"resource": key, "clusters": [{"name": n, "replicas": r} for n, r in case.previous]}
        ]
    }
    (directory / "in.yaml").write_text(yaml.safe_dump_all([chosen, workload]))
    (directory / "clusters.yaml").write_text(yaml.safe_dump(fleet))
    (directory / "prev.json").write_text(json.dumps(previous))
    files = {name: str(directory / name) for name in ("in.yaml", "clusters.yaml", "prev.json")}
    args = ["plan", "-f", files["in.yaml"], "-o", "json", "--clusters", files["clusters.yaml"]]
    args += ["--previous", files["prev.json"]]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (0, 2), result.output
    (placed,) = json.loads(result.stdout)["placements"]
    if placed["error"] is not None:
        assert result.exit_code == 2 and placed["error"].startswith("unschedulable")
        return None
    return {c["name"]: c["replicas"] for c in placed["clusters"] if c["replicas"]}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_fedctl_plan_json_divides_as_karmada(case: Case) -> None:
    with tempfile.TemporaryDirectory() as directory:
        assert plan_json(case, Path(directory)) == karmada(case), case


def test_a_no_schedule_cluster_holding_replicas_keeps_its_estimate_for_karmada_policies() -> None:
    """Karmada's TaintToleration filter passes a cluster already in the binding, estimate and
    all; our group keeps it for its replicas only (room 0)."""
    taint = clusters.Taint(key="maintenance", effect="NoSchedule")
    fleet = [builders.cluster("a", 10, taints=(taint,)), builders.cluster("b", 10)]
    resource = builders.deployment(replicas=10)
    theirs = engine.place(
        resource, builders.make_policy(builders.dynamic(), api_version=KARMADA), fleet,
        {"a": 4, "b": 2},
    )
    reference = ref.schedule(ref.DynamicWeightStrategy, 10, [("a", 10), ("b", 10)],
                             [("a", 4), ("b", 2)])
    assert theirs.nonzero() == reference == {"a": 6, "b": 4}
    assert any("a stays a candidate (taint" in line for line in theirs.explanation)
    mine = engine.place(resource, builders.make_policy(builders.dynamic()), fleet,
                        {"a": 4, "b": 2})
    assert mine.nonzero() == {"a": 4, "b": 6}


# -- Fresh (a WorkloadRebalancer's re-division) -----------------------------------------------


def karmada_fresh(case: Case) -> dict[str, int] | None:
    strategy = ref.DynamicWeightStrategy if case.mode == "dynamic" else ref.AggregatedStrategy
    try:
        return ref.schedule(strategy, case.replicas, case.estimates, case.previous, case.uid,
                            fresh=True)
    except ref.Unschedulable:
        return None


def ours_fresh(case: Case) -> dict[str, int] | None:
    resource = builders.deployment(replicas=case.replicas).model_copy(update={"uid": case.uid})
    chosen = builders.make_policy(placement_of(case), api_version=case.group)
    fleet = [builders.cluster(n, e) for n, e in case.estimates]
    decision = engine.place(resource, chosen, fleet, dict(case.previous), fresh=True)
    if decision.error is not None:
        assert decision.error.startswith("unschedulable"), decision.error
        return None
    return decision.nonzero()


@settings(max_examples=1500, deadline=None)
@given(cases(("dynamic", "aggregated")))
@example(  # room ties between a holder and a newcomer: the holder first (ClusterLocality)
    Case("aggregated", 5, (("a", 5), ("b", 0)), (), (("b", 5),), "", KARMADA)
)
@example(  # no estimate: spec.replicas plus what the cluster holds
    Case("dynamic", 10, (("a", None), ("b", 4)), (), (("a", 3), ("b", 7)), "", KARMADA)
)
def test_fresh_division_is_karmadas(case: Case) -> None:
    """Karmada's dynamicFreshScale, replica for replica, in both dynamic modes."""
    assert ours_fresh(case) == karmada_fresh(case), case


@settings(max_examples=400, deadline=None)
@given(crowded())
def test_fresh_aggregated_over_many_equal_clusters_picks_as_go_sorts(case: Case) -> None:
    assert ours_fresh(case) == karmada_fresh(case), case


def test_fresh_sets_a_drifted_steady_division_aside() -> None:
    """Steady keeps 9:1 after room changed; Fresh divides 10 by room plus held (5+9, 9+1)."""
    resource = builders.deployment(replicas=10)
    chosen = builders.make_policy(builders.dynamic(), api_version=KARMADA)
    fleet = [builders.cluster("a", 5), builders.cluster("b", 9)]
    previous = {"a": 9, "b": 1}
    assert engine.place(resource, chosen, fleet, previous).nonzero() == previous
    fresh = engine.place(resource, chosen, fleet, previous, fresh=True)
    assert fresh.nonzero() == {"a": 6, "b": 4}
    assert any(line.startswith("fresh division") for line in fresh.explanation)


def test_fresh_changes_nothing_with_static_weights() -> None:
    """Static weights never keep the previous division (Karmada): Fresh is the same."""
    resource = builders.deployment(replicas=7)
    chosen = builders.make_policy(placement_of(Case("static", 7, (), (("a", 2), ("b", 1)),
                                                    (), "", KARMADA)), api_version=KARMADA)
    fleet = [builders.cluster("a", 1), builders.cluster("b", 1)]
    steady = engine.place(resource, chosen, fleet, {"b": 7})
    assert engine.place(resource, chosen, fleet, {"b": 7}, fresh=True) == steady
