"""engine.place and engine.plan end to end: every placement field and its explanation."""

from __future__ import annotations

from typing import Any

from federation.placement import clusters, engine
from federation.placement.decision import Decision
from federation.placement.resources import ResourceKey

from .builders import aggregated, cluster, deployment, duplicated, dynamic, make_policy, static

MEMBERS = [cluster("member1", 6), cluster("member2", 8), cluster("member3", 10)]


def place(
    placement: dict[str, Any],
    fleet: list[clusters.Cluster],
    replicas: int = 12,
    previous: dict[str, int] | None = None,
) -> Decision:
    return engine.place(deployment(replicas=replicas), make_policy(placement), fleet, previous)


def explained(decision: Decision, text: str) -> bool:
    return any(text in line for line in decision.explanation)


# -- the examples ----------------------------------------------------------------------


def test_static_examples() -> None:
    """14 at 3:2:1 gives 7:5:2 and 5 at 170:110:60 gives 2:2:1, whatever the room."""
    weights = {"member1": 3, "member2": 2, "member3": 1}
    assert place(static(weights), MEMBERS, 14).clusters == {
        "member1": 7,
        "member2": 5,
        "member3": 2,
    }
    weights = {"member1": 170, "member2": 110, "member3": 60}
    assert place(static(weights), MEMBERS, 5).clusters == {"member1": 2, "member2": 2, "member3": 1}


def test_dynamic_and_aggregated_examples() -> None:
    """12 replicas over available 6, 8, 10: 3:4:5 dynamic, 0:5:7 aggregated."""
    assert place(dynamic(), MEMBERS).clusters == {"member1": 3, "member2": 4, "member3": 5}
    assert place(aggregated(), MEMBERS).clusters == {"member2": 5, "member3": 7}


# -- modes -------------------------------------------------------------------------------------


def test_duplicated_is_the_default() -> None:
    """Without replicaScheduling every candidate gets all replicas."""
    decision = place({}, MEMBERS, 4)
    assert decision.clusters == {"member1": 4, "member2": 4, "member3": 4}
    assert explained(decision, "mode: Duplicated")
    assert explained(decision, "availableReplicas is not considered in this mode")


def test_static_weight_is_the_largest_matching_rule() -> None:
    """A cluster matched by several rules takes the largest weight, not the sum."""
    placement = {
        "replicaScheduling": {
            "weightPreference": {
                "staticWeightList": [
                    {"targetCluster": {}, "weight": 1},
                    {"targetCluster": {"clusterNames": ["member1"]}, "weight": 2},
                ]
            }
        }
    }
    decision = place(placement, MEMBERS, 8)
    assert decision.clusters == {"member1": 4, "member2": 2, "member3": 2}
    assert explained(
        decision,
        "weights (largest matching staticWeightList rule): member1=2, member2=1, member3=1",
    )


def test_static_leaves_out_unmatched_clusters() -> None:
    """Clusters no rule matches get nothing and are reported as filtered by weight."""
    decision = place(static({"member1": 1, "member2": 1}), MEMBERS, 4)
    assert decision.clusters == {"member1": 2, "member2": 2}
    assert explained(decision, "filtered (weight: no staticWeightList rule matches): member3")


def test_static_with_no_matching_rule_weighs_everyone_equally() -> None:
    """If no candidate matches any rule, every candidate weighs 1."""
    decision = place(static({"elsewhere": 5}), MEMBERS, 3)
    assert decision.clusters == {"member1": 1, "member2": 1, "member3": 1}
    assert explained(decision, "no candidate matches a staticWeightList rule, so all weigh 1")


def test_static_explains_ties() -> None:
    """Ties broken by the Webster rule are listed."""
    decision = place(static({"member1": 1, "member2": 1, "member3": 1}), MEMBERS, 1)
    assert decision.clusters == {"member1": 1}
    assert explained(decision, "tie for replica 1: member1 over member2 (name)")


def test_zero_replicas_go_everywhere_with_zero() -> None:
    """A resource without replicas is propagated to every candidate with 0 replicas."""
    decision = place(dynamic(), MEMBERS, 0)
    assert decision.ok
    assert decision.clusters == {"member1": 0, "member2": 0, "member3": 0}
    assert decision.nonzero() == {}


# -- sticky modes and failover -----------------------------------------------------------------


def test_sticky_nothing_changed_moves_nothing() -> None:
    """Feeding a decision back as previous returns the same placement."""
    first = place(dynamic(), MEMBERS)
    again = place(dynamic(), MEMBERS, previous=dict(first.clusters))
    assert again.clusters == first.clusters
    assert explained(again, "kept the current placement")


def test_failover_moves_only_the_failed_clusters_replicas() -> None:
    """A not-ready cluster's replicas are placed again; the others keep theirs."""
    previous = {"member1": 3, "member2": 4, "member3": 5}
    fleet = clusters.mark_failed(MEMBERS, ["member3"])
    decision = place(dynamic(), fleet, previous=previous)
    assert decision.clusters["member1"] >= 3 and decision.clusters["member2"] >= 4
    assert "member3" not in decision.clusters
    assert decision.placed == 12
    assert explained(decision, "member3 held 5 replicas but is no longer a candidate (not ready)")


def test_unknown_previous_cluster_is_replaced() -> None:
    """Replicas on a cluster missing from the fleet are placed again."""
    decision = place(aggregated(), MEMBERS, 4, previous={"gone": 4})
    assert decision.placed == 4
    assert explained(
        decision, "gone held 4 replicas but is no longer a candidate (unknown cluster)"
    )


def test_no_schedule_taint_keeps_existing_replicas_but_takes_no_new_ones() -> None:
    """A NoSchedule-tainted cluster keeps current replicas in sticky modes and gets none added."""
    taint = clusters.Taint(key="maintenance", effect="NoSchedule")
    fleet = [cluster("a", 10, taints=(taint,)), cluster("b", 10)]
    decision = place(dynamic(), fleet, 10, previous={"a": 4, "b": 2})
    assert decision.clusters == {"a": 4, "b": 6}
    assert explained(
        decision, "a keeps its replicas but takes no new ones (taint maintenance:NoSchedule)"
    )
    assert place(dynamic(), fleet, 10).clusters == {"b": 10}


def test_no_execute_taint_evicts() -> None:
    """A NoExecute taint moves the replicas away."""
    taint = clusters.Taint(key="broken", effect="NoExecute")
    fleet = [cluster("a", 10, taints=(taint,)), cluster("b", 10)]
    decision = place(dynamic(), fleet, 6, previous={"a": 4, "b": 2})
    assert decision.clusters == {"b": 6}


def test_tolerations_allow_tainted_clusters() -> None:
    """A matching clusterToleration makes a tainted cluster an ordinary candidate."""
    taint = clusters.Taint(key="gpu", value="yes", effect="NoSchedule")
    fleet = [cluster("a", taints=(taint,)), cluster("b")]
    placement = {
        **duplicated(),
        "clusterTolerations": [{"key": "gpu", "operator": "Equal", "value": "yes"}],
    }
    assert place(placement, fleet, 1).clusters == {"a": 1, "b": 1}


# -- unschedulable and partial -----------------------------------------------------------------


def test_unschedulable_reports_the_shortfall_and_places_nothing() -> None:
    """Not enough room: error, shortfall in unschedulable, no clusters."""
    decision = place(dynamic(), MEMBERS, 30)
    assert decision.error is not None and decision.error.startswith("unschedulable: 30 replicas")
    assert decision.unschedulable == 6
    assert decision.clusters == {}


def test_partial_places_what_fits() -> None:
    """allowPartial: the room is filled and the rest is pending, without error."""
    decision = place(aggregated(allowPartial=True), MEMBERS, 30)
    assert decision.ok
    assert decision.clusters == {"member1": 6, "member2": 8, "member3": 10}
    assert decision.pending == 6


# -- bounds in every mode ----------------------------------------------------------------------

BOUNDS = [
    {"targetCluster": {"clusterNames": ["member1"]}, "minReplicas": 2},
    {"targetCluster": {"clusterNames": ["member3"]}, "maxReplicas": 4},
]


def test_bounds_in_duplicated_mode() -> None:
    """Duplicated clamps each copy to the cluster's bounds."""
    decision = place(duplicated(replicaBounds=BOUNDS), MEMBERS, 1)
    assert decision.clusters == {"member1": 2, "member2": 1, "member3": 1}


def test_bounds_in_static_mode() -> None:
    """Static weights honour min and max."""
    decision = place(
        static({"member1": 1, "member2": 1, "member3": 10}, replicaBounds=BOUNDS), MEMBERS, 12
    )
    assert decision.clusters == {"member1": 4, "member2": 4, "member3": 4}
    assert explained(decision, "bounds [min, max]: member1=[2, -], member3=[0, 4]")


def test_bounds_in_dynamic_mode() -> None:
    """Dynamic weights honour min and max."""
    decision = place(dynamic(replicaBounds=BOUNDS), MEMBERS, 12)
    assert decision.clusters["member1"] >= 2 and decision.clusters["member3"] <= 4
    assert decision.placed == 12


def test_bounds_in_aggregated_mode() -> None:
    """Aggregated uses a cluster with minReplicas even if others could hold everything."""
    decision = place(aggregated(replicaBounds=BOUNDS), MEMBERS, 8)
    assert decision.clusters["member1"] >= 2 and decision.clusters.get("member3", 0) <= 4
    assert decision.placed == 8


def test_bounds_are_intersected() -> None:
    """Several matching bounds apply together (largest min, smallest max)."""
    bounds = [
        {"targetCluster": {}, "maxReplicas": 5},
        {"targetCluster": {"clusterNames": ["member2"]}, "maxReplicas": 2},
    ]
    decision = place(
        static({"member1": 1, "member2": 1, "member3": 1}, replicaBounds=bounds), MEMBERS, 12
    )
    assert decision.clusters == {"member1": 5, "member2": 2, "member3": 5}


def test_infeasible_min_bounds_are_a_clear_error() -> None:
    """minReplicas over the total is an error, nothing placed."""
    bounds = [{"targetCluster": {}, "minReplicas": 5}]
    decision = place(static({"member1": 1, "member2": 1}, replicaBounds=bounds), MEMBERS, 6)
    assert (
        decision.error
        == "bounds: minReplicas add up to 10 (member1=5, member2=5) but there are only 6 replicas"
    )


# -- affinity, fallback and spread ----------------------------------------------------------------


def test_affinity_filters_are_explained() -> None:
    """Each filtered cluster appears under its reason."""
    fleet = [*MEMBERS, cluster("down", ready=False)]
    decision = place({"clusterAffinity": {"exclude": ["member2"]}}, fleet, 1)
    assert decision.clusters == {"member1": 1, "member3": 1}
    assert explained(decision, "filtered (not ready): down")
    assert explained(decision, "filtered (affinity: in exclude): member2")


def test_no_feasible_cluster_is_an_error() -> None:
    """When every cluster is filtered out the decision is an error."""
    decision = place({"clusterAffinity": {"clusterNames": ["elsewhere"]}}, MEMBERS, 1)
    assert decision.error == "no feasible cluster: every cluster was filtered out"


def test_cluster_affinities_fall_back_in_order() -> None:
    """The next term is used only when the previous yields no feasible placement."""
    placement = {
        "clusterAffinities": [
            {"affinityName": "none", "clusterNames": ["elsewhere"]},
            {"affinityName": "small", "clusterNames": ["member1"]},
            {"affinityName": "all"},
        ],
        **aggregated(),
    }
    decision = place(placement, MEMBERS, 4)
    assert decision.clusters == {"member1": 4}
    assert explained(decision, "affinity term 'none' (1 of 3) cannot place the resource")
    assert explained(decision, "affinity term 'small' (2 of 3) is used")
    bigger = place(placement, MEMBERS, 9)
    assert bigger.clusters == {"member3": 9}
    assert explained(
        bigger, "affinity term 'small' (2 of 3) cannot place the resource: unschedulable"
    )


def test_all_affinity_terms_failing_is_an_error() -> None:
    """When no term can place the resource the decision says so."""
    placement = {"clusterAffinities": [{"affinityName": "x", "clusterNames": ["nope"]}]}
    decision = place(placement, MEMBERS, 1)
    assert decision.error == "none of the 1 affinity terms can place the resource"


def test_spread_constraint_error_fails_the_decision() -> None:
    """minGroups that cannot be met is an error."""
    decision = place(
        {"spreadConstraints": [{"spreadByField": "region", "minGroups": 2}]}, MEMBERS, 1
    )
    assert decision.error is not None and "minGroups 2 by region" in decision.error
    assert explained(decision, "filtered (spread: no region): member1, member2, member3")


def test_spread_limits_clusters() -> None:
    """maxGroups by cluster keeps the roomiest clusters."""
    decision = place(
        {"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 2}], **dynamic()},
        MEMBERS,
        12,
    )
    assert set(decision.clusters) == {"member2", "member3"}


# -- plan ----------------------------------------------------------------------------------------


def test_plan_matches_policies_and_reports_unmatched_resources() -> None:
    """plan() picks each resource's winning policy; an unmatched resource gets an error."""
    policies = [
        make_policy(
            static({"member1": 1}),
            name="web",
            selectors=[{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
        )
    ]
    planned = engine.plan([deployment("web", 2), deployment("api", 2)], policies, MEMBERS)
    assert planned[0].policy is policies[0]
    assert planned[0].decision.clusters == {"member1": 2}
    assert (
        planned[0].decision.explanation[0] == "policy default/web (PropagationPolicy, priority 0)"
    )
    assert planned[1].policy is None
    assert (
        planned[1].decision.error
        == "no PropagationPolicy or ClusterPropagationPolicy matches this resource"
    )


def test_plan_uses_previous_decisions_by_resource_key() -> None:
    """Previous decisions are looked up by (apiVersion, kind, namespace, name)."""
    previous: dict[ResourceKey, dict[str, int]] = {
        ("apps/v1", "Deployment", "default", "web"): {"member1": 12}
    }
    planned = engine.plan([deployment("web", 12)], [make_policy(dynamic())], MEMBERS, previous)
    assert planned[0].decision.clusters == {"member1": 12}


def test_a_fleet_and_a_plain_list_give_the_same_decision() -> None:
    """The fleet memo changes speed, never results."""
    fleet = clusters.Fleet(MEMBERS)
    policy = make_policy(static({"member1": 3, "member2": 2}))
    first = engine.place(deployment(replicas=7), policy, fleet)
    second = engine.place(deployment(replicas=7), policy, fleet)
    assert first == second == engine.place(deployment(replicas=7), policy, list(reversed(MEMBERS)))


def test_clusters_without_room_are_explained_as_capacity() -> None:
    """Dynamic modes name the clusters that got nothing for lack of room."""
    fleet = [cluster("full", 0), cluster("held", 0), cluster("roomy", 10)]
    decision = place(dynamic(), fleet, 6, previous={"held": 2})
    assert decision.clusters == {"held": 2, "roomy": 4}
    assert explained(decision, "filtered (capacity: no room for replicas): full")
    assert explained(decision, "no room for more replicas (capacity), current ones stay: held")


def test_unschedulable_scale_up_counts_only_the_replicas_to_add() -> None:
    """When scaling up, the shortfall concerns the replicas to add on top of those kept."""
    decision = place(dynamic(), MEMBERS, 31, previous={"member1": 6})
    assert decision.error is not None
    assert decision.error.startswith("unschedulable: 25 more replicas to place")
    assert decision.unschedulable == 1
