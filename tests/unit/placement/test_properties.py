"""Properties of engine.place over random fleets, policies and previous decisions."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from federation.placement import clusters, engine, policy
from federation.placement.decision import Decision

from .builders import aggregated, deployment, duplicated, dynamic, make_policy, static

NAMES = [f"c{i}" for i in range(8)]


@st.composite
def fleets(draw: st.DrawFn) -> list[clusters.Cluster]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6, unique=True))
    return [
        clusters.Cluster(
            name=name,
            region=draw(st.sampled_from(["eu", "us", None])),
            available_replicas=draw(st.none() | st.integers(0, 30)),
            ready=draw(st.sampled_from([True, True, True, False])),
        )
        for name in names
    ]


@st.composite
def bounds(draw: st.DrawFn) -> list[dict[str, Any]]:
    rules = []
    for name in draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True)):
        low = draw(st.integers(0, 3))
        high = draw(st.none() | st.integers(low, low + 8))
        rules.append(
            {"targetCluster": {"clusterNames": [name]}, "minReplicas": low, "maxReplicas": high}
        )
    return rules


@st.composite
def placements(
    draw: st.DrawFn, modes: tuple[str, ...] = ("duplicated", "static", "dynamic", "aggregated")
) -> dict[str, Any]:
    mode = draw(st.sampled_from(modes))
    extra: dict[str, Any] = {"replicaBounds": draw(bounds())}
    if draw(st.booleans()):
        extra["allowPartial"] = True
    if mode == "duplicated":
        return duplicated(replicaBounds=extra["replicaBounds"])
    if mode == "static":
        weights = draw(st.dictionaries(st.sampled_from(NAMES), st.integers(1, 20), max_size=6))
        return static(weights, **extra)
    return dynamic(**extra) if mode == "dynamic" else aggregated(**extra)


def bounds_of(placed: policy.Policy, name: str) -> tuple[int, int | None]:
    strategy = placed.spec.placement.replica_scheduling
    low, high = 0, None
    for rule in strategy.replica_bounds if strategy else []:
        if name in rule.target_cluster.cluster_names:
            low = max(low, rule.min_replicas)
            if rule.max_replicas is not None:
                high = rule.max_replicas if high is None else min(high, rule.max_replicas)
    return low, high


SETTINGS = settings(max_examples=120, deadline=None)


@SETTINGS
@given(
    fleet=fleets(),
    placement=placements(("static", "dynamic", "aggregated")),
    replicas=st.integers(1, 60),
)
def test_divided_replicas_are_conserved(
    fleet: list[clusters.Cluster], placement: dict[str, Any], replicas: int
) -> None:
    """A successful division places exactly the replicas, less only what is pending."""
    decision = engine.place(deployment(replicas=replicas), make_policy(placement), fleet)
    if decision.ok:
        assert decision.placed + decision.pending == replicas
    else:
        assert decision.clusters == {}


@SETTINGS
@given(fleet=fleets(), placement=placements(), replicas=st.integers(1, 60))
def test_bounds_and_room_are_honoured(
    fleet: list[clusters.Cluster], placement: dict[str, Any], replicas: int
) -> None:
    """Every placed cluster is within its bounds, and within its room in the dynamic modes."""
    placed = make_policy(placement)
    decision = engine.place(deployment(replicas=replicas), placed, fleet)
    mode = policy.mode(placed.spec.placement)
    for item in fleet:
        if item.name not in decision.clusters:
            continue
        low, high = bounds_of(placed, item.name)
        assert decision.clusters[item.name] >= low
        assert high is None or decision.clusters[item.name] <= high
        if (
            mode in (policy.Mode.DYNAMIC, policy.Mode.AGGREGATED)
            and item.available_replicas is not None
        ):
            assert decision.clusters[item.name] <= item.available_replicas


@SETTINGS
@given(fleet=fleets(), placement=placements(), replicas=st.integers(0, 60), data=st.data())
def test_deterministic(
    fleet: list[clusters.Cluster], placement: dict[str, Any], replicas: int, data: st.DataObject
) -> None:
    """The same inputs, in any cluster order, give the same decision."""
    placed = make_policy(placement)
    first = engine.place(deployment(replicas=replicas), placed, fleet)
    shuffled = data.draw(st.permutations(fleet))
    assert engine.place(deployment(replicas=replicas), placed, shuffled) == first


@SETTINGS
@given(fleet=fleets(), placement=placements(), replicas=st.integers(0, 60))
def test_nothing_changed_moves_nothing(
    fleet: list[clusters.Cluster], placement: dict[str, Any], replicas: int
) -> None:
    """A decision fed back as previous, nothing else changed, gives the same placement."""
    placed = make_policy(placement)
    first = engine.place(deployment(replicas=replicas), placed, fleet)
    assume(first.ok and first.pending == 0)
    again = engine.place(deployment(replicas=replicas), placed, fleet, dict(first.clusters))
    assert again.clusters == first.clusters


@SETTINGS
@given(
    fleet=fleets(),
    weights=st.dictionaries(st.sampled_from(NAMES), st.integers(1, 20), max_size=6),
    replicas=st.integers(0, 60),
)
def test_static_is_house_monotone(
    fleet: list[clusters.Cluster], weights: dict[str, int], replicas: int
) -> None:
    """With static weights, one more replica never lowers any cluster."""
    placed = make_policy(static(weights))
    before = engine.place(deployment(replicas=replicas), placed, fleet)
    after = engine.place(deployment(replicas=replicas + 1), placed, fleet)
    assume(before.ok and after.ok)
    assert all(after.clusters.get(name, 0) >= n for name, n in before.clusters.items())


@SETTINGS
@given(
    fleet=fleets(),
    placement=placements(("dynamic", "aggregated")),
    replicas=st.integers(1, 40),
    change=st.integers(-20, 20),
)
def test_sticky_scaling_moves_only_in_the_scaling_direction(
    fleet: list[clusters.Cluster], placement: dict[str, Any], replicas: int, change: int
) -> None:
    """Scaling up never lowers a cluster; scaling down never raises one (absent min bounds)."""
    scheduling = placement["replicaScheduling"]
    scheduling["replicaBounds"] = [{**b, "minReplicas": 0} for b in scheduling["replicaBounds"]]
    placed = make_policy(placement)
    first = engine.place(deployment(replicas=replicas), placed, fleet)
    assume(first.ok and first.pending == 0 and replicas + change >= 0)
    second: Decision = engine.place(
        deployment(replicas=replicas + change), placed, fleet, dict(first.clusters)
    )
    assume(second.ok)
    for name in first.clusters.keys() | second.clusters.keys():
        old, new = first.clusters.get(name, 0), second.clusters.get(name, 0)
        assert (new >= old) if change >= 0 else (new <= old)
