"""Karmada compatibility: policy files modelled on Karmada's samples and user guide
(karmada_samples/, each naming its source) load and plan unchanged, and the Karmada
fields this project implements behave as Karmada's code does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from federation.cli import cli
from federation.hub import karmada_crds, overrides
from federation.placement import clusters, engine, loader, matching, resources
from federation.placement import policy as policy_

SAMPLES = Path(__file__).parent / "karmada_samples"
CLUSTERS = str(SAMPLES / "clusters.yaml")
DEPLOYMENT = str(SAMPLES / "nginx-deployment.yaml")
POLICY_FILES = sorted(p for p in SAMPLES.glob("*.yaml")
                      if p.name not in ("clusters.yaml", "nginx-deployment.yaml"))


def plan(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["plan", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize("path", POLICY_FILES, ids=lambda p: p.name)
def test_every_sample_plans_unchanged(path: Path) -> None:
    """apiVersion policy.karmada.io/v1alpha1 kept; every resource placed (exit 0)."""
    docs = list(yaml.safe_load_all(path.read_text()))
    for doc in docs:
        if "policy" in doc["apiVersion"]:
            assert doc["apiVersion"] == "policy.karmada.io/v1alpha1"
    workloads = [] if any("policy" not in d["apiVersion"] for d in docs) else ["-f", DEPLOYMENT]
    code, output = plan("-f", str(path), *workloads, "--clusters", CLUSTERS,
                        "-o", "json", "--show-manifests")
    assert code == 0, output
    placed = json.loads(output)["placements"]
    assert placed and all(p["error"] is None for p in placed if p["policy"])


def manifests_of(path: str, name: str, *more: str) -> dict[str, Any]:
    code, output = plan("-f", path, *more, "--clusters", CLUSTERS, "-o", "json",
                        "--show-manifests")
    assert code == 0, output
    return next(p["manifests"] for p in json.loads(output)["placements"]
                if p["resource"]["name"] == name)


def test_bundle_override_shows_per_cluster() -> None:
    copies = manifests_of(str(SAMPLES / "bundle-propagation-override.yaml"), "nginx",
                          "-f", DEPLOYMENT)
    member1 = copies["member1"]["spec"]["template"]["spec"]["containers"][0]
    member2 = copies["member2"]["spec"]["template"]["spec"]["containers"][0]
    assert member2["image"] == "registry.eu.example.com/nginx:1.25"
    assert copies["member2"]["metadata"]["labels"]["env"] == "eu-stage"
    assert member1["image"] == "nginx:1.25"
    assert member1["command"][-2:] == ["-c", "/etc/nginx/member1.conf"]


def test_deprecated_spec_level_overriders_act_as_one_rule() -> None:
    copies = manifests_of(str(SAMPLES / "clusteroverridepolicy.yaml"), "nginx", "-f", DEPLOYMENT)
    images = {c: m["spec"]["template"]["spec"]["containers"][0]["image"]
              for c, m in copies.items()}
    assert images == {"member1": "nginx:1.25", "member3": "nginx:1.26"}


def test_field_overrider_edits_yaml_and_json_inside_strings() -> None:
    copies = manifests_of(str(SAMPLES / "fieldoverrider-configmap.yaml"), "app-config")
    data = copies["member1"]["data"]
    assert yaml.safe_load(data["db-config.yaml"]) == {
        "database": {"host": "remote-db.example.com", "port": 3307}}
    assert json.loads(data["settings.json"]) == {"log": {"level": "debug"}}
    assert copies["member2"]["data"]["settings.json"] == '{"log":{"level":"info"}}'


def test_workload_affinity_and_anti_affinity() -> None:
    code, output = plan("-f", str(SAMPLES / "workload-affinity.yaml"), "--clusters", CLUSTERS,
                        "-o", "json")
    assert code == 0, output
    where = {p["resource"]["name"]: [c["name"] for c in p["clusters"]]
             for p in json.loads(output)["placements"]}
    assert where["frontend"] == where["backend"]          # affinity group app-group=shop
    assert not set(where["db-a"]) & set(where["db-b"])     # anti-affinity group db-ha=orders


def test_overflow_fills_the_primary_tier_first() -> None:
    code, output = plan("-f", str(SAMPLES / "overflow-affinities.yaml"), "-f", DEPLOYMENT,
                        "--clusters", CLUSTERS, "-o", "json", "--explain")
    assert code == 0, output
    placed = json.loads(output)["placements"][0]
    assert {c["name"]: c["replicas"] for c in placed["clusters"]} == {"member1": 1,
                                                                       "member2": 1}
    assert any("overflow tier 1 'burst'" in line for line in placed["explanation"])


def karmada_policy(placement: dict[str, Any]) -> policy_.Policy:
    return loader.parse_policy({
        "apiVersion": policy_.KARMADA_GROUP_VERSION, "kind": "PropagationPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                 "placement": placement}}, "p.yaml")


AGGREGATED = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}


def test_overflow_runs_out_of_room_is_an_error() -> None:
    policy = karmada_policy({"clusterAffinities": [{
        "affinityName": "a", "clusterNames": ["x"],
        "overflowAffinities": [{"affinityName": "b", "clusterNames": ["y"]}]}],
        "replicaScheduling": AGGREGATED})
    fleet = [clusters.Cluster(name="x", available_replicas=2),
             clusters.Cluster(name="y", available_replicas=3)]
    workload = resources.Resource(api_version="apps/v1", kind="Deployment", name="w",
                                  namespace="default", replicas=9)
    decision = engine.place(workload, policy, fleet)
    assert decision.error is not None and decision.unschedulable == 4
    assert "4 replicas left" in decision.explanation[-1]


@pytest.mark.parametrize(("placement", "path", "words"), [
    ({"clusterAffinities": [{"affinityName": "a", "clusterNames": ["x"],
                             "overflowAffinities": [{"affinityName": "b"}]}]},
     "spec.placement.clusterAffinities[0].overflowAffinities", "Aggregated or a dynamic weight"),
    ({"clusterAffinities": [{"affinityName": "a", "overflowAffinities": []}],
      "replicaScheduling": AGGREGATED},
     "spec.placement.clusterAffinities[0].overflowAffinities", "own cluster affinity"),
    ({"clusterAffinities": [{"affinityName": "a", "clusterNames": ["x"],
                             "overflowAffinities": [{"affinityName": "a"}]}],
      "replicaScheduling": AGGREGATED},
     "spec.placement.clusterAffinities[0].overflowAffinities[0].affinityName", "duplicate"),
    ({"workloadAffinity": {"affinity": {"groupByLabelKey": "g"},
                           "antiAffinity": {"groupByLabelKey": "g"}}},
     "spec.placement.workloadAffinity", "same groupByLabelKey"),
    ({"workloadAffinity": {"affinity": {"groupByLabelKey": "not a key"}}},
     "spec.placement.workloadAffinity.affinity.groupByLabelKey", "not a valid label key"),
    ({"clusterTolerations": [{"key": "k", "operator": "Gt", "value": "1"}]},
     "spec.placement.clusterTolerations[0].operator", "Gt is not supported"),
])
def test_karmada_validation_rules(placement: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(loader.LoadError) as caught:
        karmada_policy(placement)
    assert caught.value.path == path and words in caught.value.message


def karmada_doc(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": policy_.KARMADA_GROUP_VERSION, "kind": "PropagationPolicy",
            "metadata": {"name": "p"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                     **spec}}


def test_cluster_failover_state_preservation_loads() -> None:
    loaded = loader.parse_policy(karmada_doc({"failover": {"cluster": {
        "purgeMode": "Directly", "statePreservation": {"rules": [
            {"aliasLabelName": "failover.karmada.io/failover-jobid",
             "jsonPath": "{ .jobStatus.jobID }"}]}}}}), "p.yaml")
    assert loaded.spec.failover is not None and loaded.spec.failover.cluster is not None


@pytest.mark.parametrize(("failover", "path"), [
    # docs/proposals/failover/application-failover.md: a list of per-kind behaviours, a
    # design that was never built. Karmada's CRD types spec.failover as an object, so the
    # API server refuses the document before any webhook sees it.
    ([{"apiVersion": "apps/v1", "kind": "Deployment",
       "behavior": {"application": {"activeGates": [{"healthyState": "Unhealthy"}]}}}],
     "spec.failover"),
    # the same proposal's first shape: preConditions and healthyState are no fields of
    # Karmada's API (kubectl's strict field validation names them; we do too).
    ({"application": {"preConditions": {"delaySeconds": 5000}, "decisionConditions": {
        "tolerationSeconds": 200}}}, "spec.failover.application.preConditions"),
    # Karmada's own federated-resource-quota proposal: Immediately left the enum.
    ({"application": {"decisionConditions": {"tolerationSeconds": 150},
                      "purgeMode": "Immediately"}}, "spec.failover.application.purgeMode"),
])
def test_failover_blocks_of_other_shapes_are_refused_as_karmada_does(
        failover: Any, path: str) -> None:
    """Documents whose failover block is not Karmada's API are refused naming the field,
    where Karmada's API server refuses them too."""
    with pytest.raises(loader.LoadError) as caught:
        loader.parse_policy(karmada_doc({"failover": failover}), "p.yaml")
    assert caught.value.path == path


def test_application_failover_of_the_user_guide_loads() -> None:
    """Karmada's application failover user guide, as written."""
    loaded = loader.parse_policy(karmada_doc({"propagateDeps": True, "failover": {
        "application": {"decisionConditions": {"tolerationSeconds": 300},
                        "gracePeriodSeconds": 600, "purgeMode": "Gracefully"}}}), "p.yaml")
    assert loaded.spec.failover is not None and loaded.spec.failover.application is not None


def test_effect_only_toleration_tolerates_that_effect() -> None:
    """Karmada's own artifacts/example/propagationpolicy_taintToleration.yaml."""
    policy = karmada_policy({"clusterTolerations": [{"effect": "NoSchedule"}]})
    tainted = clusters.Cluster.model_validate(
        {"name": "x", "taints": [{"key": "maintenance", "effect": "NoSchedule"}]})
    workload = resources.Resource(api_version="apps/v1", kind="Deployment", name="w",
                                  namespace="default")
    assert engine.place(workload, policy, [tainted]).clusters == {"x": 0}


def test_same_name_in_both_groups_ours_wins_and_priority_crosses_groups() -> None:
    karmada = karmada_policy({})
    ours = karmada.model_copy(update={"api_version": policy_.GROUP_VERSION})
    assert matching.candidates(
        resources.Resource(api_version="apps/v1", kind="Deployment", name="w",
                           namespace="default"), [karmada, ours])[0] is ours
    higher = karmada.model_copy(update={"spec": karmada.spec.model_copy(
        update={"priority": 5})})
    assert matching.candidates(
        resources.Resource(api_version="apps/v1", kind="Deployment", name="w",
                           namespace="default"), [ours, higher])[0] is higher


def test_plan_refuses_a_bad_override_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "op.yaml"
    bad.write_text(yaml.safe_dump({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": "op"},
        "spec": {"overrideRules": [{"overriders": {"fieldOverrider": [
            {"fieldPath": "/data/x", "json": [{"subPath": "/a", "operator": "add", "value": 1}],
             "yaml": [{"subPath": "/a", "operator": "add", "value": 1}]}]}}]}}))
    code, output = plan("-f", str(SAMPLES / "propagationpolicy-simple.yaml"), "-f", DEPLOYMENT,
                        "-f", str(bad), "--clusters", CLUSTERS)
    assert code == 1
    assert "fieldOverrider[0]: exactly one of json and yaml must be set" in output


def test_field_overrider_may_not_rewrite_a_protected_field() -> None:
    with pytest.raises(overrides.OverrideRefused, match="fieldPath: path /metadata/name"):
        overrides.validate({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": {"name": "op"},
            "spec": {"overrideRules": [{"overriders": {"fieldOverrider": [
                {"fieldPath": "/metadata/name",
                 "json": [{"subPath": "/a", "operator": "add", "value": 1}]}]}}]}})


def test_karmada_crd_file_is_the_generator_output() -> None:
    written = (Path(karmada_crds.__file__).parents[1] / "crds" / "karmada.yaml").read_text()
    assert written == karmada_crds.render()


def test_karmada_crds_type_every_field_the_models_load() -> None:
    """Each field of our Karmada-facing models is a property of the CRD schema (no field
    the hub would prune), and the CRD's placement has no field the models lack."""
    spec = karmada_crds.documents()[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    placement = spec["properties"]["spec"]["properties"]["placement"]["properties"]
    loaded = {f.alias or name for name, f in policy_.Placement.model_fields.items()}
    assert set(placement) == loaded
    term = placement["clusterAffinities"]["items"]["properties"]
    assert set(term) == {f.alias for f in policy_.ClusterAffinityTerm.model_fields.values()}
    overriders = karmada_crds.overriders()["properties"]
    assert set(overriders) == {f.alias for f in overrides.Overriders.model_fields.values()}


def test_a_selector_in_another_namespace_is_refused_as_karmada_does() -> None:
    with pytest.raises(loader.LoadError) as caught:
        loader.parse_policy({
            "apiVersion": policy_.KARMADA_GROUP_VERSION, "kind": "PropagationPolicy",
            "metadata": {"name": "p", "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap",
                                            "namespace": "kube-system"}]}}, "p.yaml")
    assert caught.value.path == "spec.resourceSelectors[0].namespace"


def test_a_cluster_the_workload_already_targets_passes_the_peer_filters() -> None:
    """Karmada's filters let a binding keep every cluster it targets (even at 0 replicas)."""
    policy = karmada_policy({"workloadAffinity": {"antiAffinity": {"groupByLabelKey": "g"}}})
    fleet = [clusters.Cluster(name=n) for n in ("x", "y")]
    workload = resources.Resource(api_version="v1", kind="ConfigMap", name="c",
                                  namespace="default", labels={"g": "1"})
    peers = engine.Peers(anti=frozenset({"x", "y"}))
    assert engine.place(workload, policy, fleet, {"x": 0}, peers).clusters == {"x": 0}
    refused = engine.place(workload, policy, fleet, {}, peers)
    assert refused.error is not None
    assert any("anti-affinity group" in line for line in refused.explanation)
