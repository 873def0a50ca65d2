"""Pure pieces of propagation: copy decisions, cluster input, bindings and status."""

from typing import Any

from federation.controllers import propagation
from federation.controllers.kit import copies, plan
from federation.hub import bindings, manifests, status
from federation.placement import decision, loader


def config_map(data: dict[str, str], ours: bool = True) -> dict[str, Any]:
    labels = {manifests.MANAGED_BY_LABEL: manifests.MANAGER} if ours else {}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "n", "labels": labels}, "data": data}


def desired(data: dict[str, str]) -> dict[str, Any]:
    return manifests.mark(manifests.render(config_map(data, ours=False), None, False), "uid-1")


def test_missing_copy_is_created() -> None:
    """No live object: a create vertex."""
    vertex = copies.copy_vertex("m1", desired({"a": "1"}), None, overwrite=False)
    assert vertex is not None and vertex.action is plan.Action.CREATE


def test_equal_copy_needs_nothing_and_changed_copy_is_updated_with_its_version() -> None:
    """Ours and equal: noop; ours and different: a PUT carrying the live resourceVersion."""
    live = desired({"a": "1"})
    live["metadata"]["resourceVersion"] = "42"
    same = copies.copy_vertex("m1", desired({"a": "1"}), live, overwrite=False)
    assert same is not None and same.action is plan.Action.NOOP
    changed = copies.copy_vertex("m1", desired({"a": "2"}), live, overwrite=False)
    assert changed is not None and changed.action is plan.Action.UPDATE
    assert changed.obj["metadata"]["resourceVersion"] == "42"
    assert changed.reason == "content changed"


def test_foreign_object_is_a_conflict_unless_overwrite() -> None:
    """Someone else's object: no vertex (conflict); with Overwrite an update takes it over."""
    foreign = config_map({"a": "theirs"}, ours=False)
    assert copies.copy_vertex("m1", desired({"a": "1"}), foreign, overwrite=False) is None
    taken = copies.copy_vertex("m1", desired({"a": "1"}), foreign, overwrite=True)
    assert taken is not None and taken.action is plan.Action.UPDATE
    assert taken.reason == "taking over"


def policy(names: list[str], weights: dict[str, int] | None = None) -> Any:
    placement: dict[str, Any] = {"clusterAffinity": {"clusterNames": names}}
    if weights:
        placement["replicaScheduling"] = {
            "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
            "weightPreference": {"staticWeightList": [
                {"targetCluster": {"clusterNames": [n]}, "weight": w}
                for n, w in weights.items()]}}
    return loader.parse_policy({
        "apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "p", "namespace": "n"},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                 "placement": placement}}, "test")


def test_unknown_cluster_names_are_found_in_affinity_and_weights() -> None:
    """Names that no MemberCluster carries are reported, from every place they can appear."""
    found = propagation.unknown_cluster_names(policy(["m1", "m9"], {"m1": 1, "m8": 2}),
                                              {"m1", "m2"})
    assert found == ["m8", "m9"]


def test_member_cluster_becomes_a_placement_cluster() -> None:
    """Location, labels, taints, capacity and readiness come from the MemberCluster."""
    doc: dict[str, Any] = {"metadata": {"name": "m2", "labels": {"env": "prod"}},
           "spec": {"region": "eu-west-1", "zone": "eu-west-1b", "provider": "gcp",
                    "taints": [{"key": "k", "effect": "NoSchedule",
                                "timeAdded": "2026-01-01T00:00:00Z"}]},
           "status": {"conditions": [{"type": "Ready", "status": "False"}],
                      "availableReplicas": 7}}
    cluster = propagation.member_cluster(doc, reachable=True)
    assert (cluster.name, cluster.region, cluster.zone, cluster.provider) == \
        ("m2", "eu-west-1", "eu-west-1b", "gcp")
    assert cluster.labels == {"env": "prod"} and cluster.available_replicas == 7
    assert [t.key for t in cluster.taints] == ["k"] and not cluster.ready
    doc["status"]["conditions"][0]["status"] = "True"
    assert propagation.member_cluster(doc, reachable=True).ready
    assert not propagation.member_cluster(doc, reachable=False).ready


def test_binding_names_and_summary() -> None:
    """Bindings are <name>-<kind>; the summary shows replicas, or names when none."""
    template = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "shop", "uid": "u"}}
    assert bindings.name_of(template) == "web-deployment"
    assert bindings.binding_name("web", "Deployment") == "web-deployment"
    assert bindings.binding_resource(template).kind == "ResourceBinding"
    divided = decision.Decision(12, clusters={"m1": 6, "m2": 4, "m3": 2})
    assert bindings.summary(divided) == "m1=6,m2=4,m3=2"
    duplicated = decision.Decision(0, clusters={"m1": 0, "m2": 0})
    assert bindings.summary(duplicated) == "m1,m2"


def test_aggregated_status_says_per_cluster_what_happened() -> None:
    """Applied copies carry health and status; failed ones the error."""
    copy = {"kind": "Deployment", "metadata": {"generation": 2}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 2, "readyReplicas": 2, "replicas": 2}}
    entries = bindings.aggregated({"m1": copy, "m2": None}, {"m2": "409 Conflict"}, {})
    assert entries[0].to_obj() == {"cluster": "m1", "applied": True, "health": "Healthy",
                          "status": {"observedGeneration": 2, "readyReplicas": 2,
                                     "replicas": 2}}
    assert entries[1].to_obj() == {"cluster": "m2", "applied": False, "health": "Unknown",
                          "error": "409 Conflict"}


def test_template_status_sums_copies_and_waits_for_observation() -> None:
    """Replica counts add up; observedGeneration follows only when every copy observed."""
    def copy(ready: int, observed: int) -> dict[str, Any]:
        return {"kind": "Deployment", "metadata": {"generation": 2},
                "spec": {"replicas": ready},
                "status": {"observedGeneration": observed, "readyReplicas": ready,
                           "replicas": ready}}
    template = {"kind": "Deployment", "metadata": {"generation": 5}, "status": {}}
    done = status.template_status(template, {"a": copy(6, 2), "b": copy(4, 2)}, [])
    assert done is not None and done["readyReplicas"] == 10 and done["observedGeneration"] == 5
    pending = status.template_status(template, {"a": copy(6, 2), "b": copy(4, 1)}, [])
    assert pending is not None and "observedGeneration" not in pending
    assert status.template_status({"kind": "ConfigMap", "metadata": {}}, {}, []) is None


def test_condition_transition_time_moves_only_on_status_change() -> None:
    """Same status keeps lastTransitionTime; a flip sets a new one."""
    before = [{"type": "Applied", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]
    kept = status.condition("Applied", True, "Applied", "ok", before)
    assert kept["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    flipped = status.condition("Applied", False, "ApplyFailed", "m2: down", before)
    assert flipped["lastTransitionTime"] != "2020-01-01T00:00:00Z"
    assert status.same_status({"conditions": [kept]}, {"conditions": [
        {**kept, "lastTransitionTime": "later"}]})
