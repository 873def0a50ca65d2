"""Override policies: schema, matching, order and each overrider's semantics."""

from typing import Any

import pytest

from federation.hub import overrides
from federation.placement import clusters, resources

MEMBER2 = clusters.Cluster(name="member2", region="eu-west-1", provider="gcp",
                           labels={"env": "prod"})
MEMBER1 = clusters.Cluster(name="member1", region="us-east-1", provider="aws")


def deployment() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [
                {"name": "app", "image": "docker.io/library/nginx:1.25",
                 "command": ["nginx"], "args": ["-g", "daemon off;"]}]}}}}


def policy(rules: list[dict[str, Any]], name: str = "o", kind: str = "OverridePolicy"
           ) -> overrides.OverridePolicy:
    meta: dict[str, Any] = {"name": name}
    if kind == "OverridePolicy":
        meta["namespace"] = "shop"
    return overrides.parse({
        "apiVersion": "policy.federation.io/v1alpha1", "kind": kind, "metadata": meta,
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                 "overrideRules": rules}})


WEB = resources.Resource(api_version="apps/v1", kind="Deployment", namespace="shop", name="web")


@pytest.mark.parametrize(("image", "component", "operator", "value", "expected"), [
    ("docker.io/library/nginx:1.25", "Tag", "replace", "1.27", "docker.io/library/nginx:1.27"),
    ("nginx:1.25", "Registry", "replace", "mirror.local", "mirror.local/nginx:1.25"),
    ("docker.io/nginx", "Registry", "add", "-cn", "docker.io-cn/nginx"),
    ("localhost:5000/app:v1", "Repository", "replace", "team/app", "localhost:5000/team/app:v1"),
    ("quay.io/app:v1", "Tag", "remove", "", "quay.io/app"),
    ("quay.io/app@sha256:abc", "Tag", "add", "v2", "quay.io/app:v2"),
])
def test_image_components(image: str, component: str, operator: str, value: str,
                          expected: str) -> None:
    """Registry, repository and tag are each added to, removed or replaced."""
    overrider = overrides.ImageOverrider.model_validate(
        {"component": component, "operator": operator, "value": value})
    assert overrides.override_image(image, overrider) == expected


def test_rule_applies_only_to_its_target_cluster() -> None:
    """An image override for member2 changes member2's copy and not member1's."""
    rule = {"targetCluster": {"clusterNames": ["member2"]},
            "overriders": {"imageOverrider": [
                {"component": "Tag", "operator": "replace", "value": "1.27"}]}}
    chosen = overrides.applicable([policy([rule])], WEB)
    on2 = overrides.apply_all(deployment(), MEMBER2, chosen).manifest
    on1 = overrides.apply_all(deployment(), MEMBER1, chosen)
    assert on2["spec"]["template"]["spec"]["containers"][0]["image"].endswith("nginx:1.27")
    assert on1.manifest == deployment() and on1.notes == ()


def test_every_overrider_in_documented_order() -> None:
    """command, args, labels, annotations and plaintext all apply; plaintext runs last."""
    rule = {"overriders": {
        "commandOverrider": [{"containerName": "app", "operator": "add", "value": ["-q"]}],
        "argsOverrider": [{"containerName": "app", "operator": "remove",
                           "value": ["daemon off;"]}],
        "labelsOverrider": [{"operator": "add", "value": {"tier": "front"}},
                            {"operator": "remove", "value": {"app": ""}}],
        "annotationsOverrider": [{"operator": "add", "value": {"team": "a"}}],
        "plaintext": [{"path": "/metadata/labels/tier", "operator": "replace",
                       "value": "edge"},
                      {"path": "/spec/replicas", "operator": "remove"}],
    }}
    result = overrides.apply_all(deployment(), MEMBER1, [policy([rule])])
    container = result.manifest["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["nginx", "-q"]
    assert container["args"] == ["-g"]
    assert result.manifest["metadata"]["labels"] == {"tier": "edge"}
    assert result.manifest["metadata"]["annotations"] == {"team": "a"}
    assert "replicas" not in result.manifest["spec"]
    assert len(result.notes) == 7


def test_cluster_policies_apply_before_namespaced_ones() -> None:
    """A namespaced OverridePolicy has the last word over a ClusterOverridePolicy."""
    def tag(value: str) -> dict[str, Any]:
        return {"overriders": {"imageOverrider": [
            {"component": "Tag", "operator": "replace", "value": value}]}}

    chosen = overrides.applicable(
        [policy([tag("ns")], "a"), policy([tag("cluster")], "z", "ClusterOverridePolicy")], WEB)
    assert [p.kind for p in chosen] == ["ClusterOverridePolicy", "OverridePolicy"]
    result = overrides.apply_all(deployment(), MEMBER1, chosen).manifest
    assert result["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":ns")


def test_invalid_path_is_an_error_naming_policy_and_rule() -> None:
    """A plaintext path that does not exist fails the whole cluster's copy, clearly."""
    rule = {"overriders": {"plaintext": [
        {"path": "/spec/nope/deeper", "operator": "replace", "value": 1}]}}
    with pytest.raises(overrides.OverrideError,
                       match=r"shop/o overrideRules\[0\]: plaintext\[0\]: cannot replace"):
        overrides.apply_all(deployment(), MEMBER1, [policy([rule])])


def test_unknown_container_is_an_error() -> None:
    """commandOverrider for a container that does not exist is reported, not ignored."""
    rule = {"overriders": {"commandOverrider": [
        {"containerName": "sidecar", "operator": "add", "value": ["x"]}]}}
    with pytest.raises(overrides.OverrideError, match="no container named 'sidecar'"):
        overrides.apply_all(deployment(), MEMBER1, [policy([rule])])


def test_malformed_policy_names_the_field() -> None:
    """Schema errors carry the field path."""
    path = r"spec\.overrideRules\[0\]\.overriders\.imageOverider"
    with pytest.raises(overrides.OverrideError, match=path):
        overrides.parse({"apiVersion": "policy.federation.io/v1alpha1", "kind": "OverridePolicy",
                         "metadata": {"name": "x"},
                         "spec": {"overrideRules": [{"overriders": {"imageOverider": []}}]}})


def group_policy(group: str, overriders: dict[str, Any], kind: str) -> overrides.OverridePolicy:
    return overrides.parse({
        "apiVersion": f"{group}/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": "o", "namespace": "shop"},
        "spec": {"resourceSelectors": [{"apiVersion": "batch/v1", "kind": kind}],
                 "overrideRules": [{"overriders": overriders}]}})


def cron_job() -> dict[str, Any]:
    pod = {"initContainers": [{"name": "init", "image": "busybox:1.36"}],
           "containers": [{"name": "app", "image": "nginx:1.25", "command": ["nginx"]}]}
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "c", "namespace": "shop"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": pod}}}}}


def job() -> dict[str, Any]:
    template = cron_job()["spec"]["jobTemplate"]["spec"]["template"]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "shop"},
            "spec": {"template": template}}


TAG = {"imageOverrider": [{"component": "Tag", "operator": "replace", "value": "2"}]}


def images(manifest: dict[str, Any]) -> list[str]:
    spec = overrides.pod_spec(manifest) or {}
    return [c["image"] for key in ("initContainers", "containers") for c in spec[key]]


def test_karmada_image_overrider_leaves_cron_jobs_and_init_containers_as_karmada() -> None:
    """policy.karmada.io: Karmada's six kinds and their containers only (a CronJob is left
    alone, with a note); policy.federation.io goes further, on purpose and documented."""
    karmada = group_policy("policy.karmada.io", TAG, "CronJob")
    applied = overrides.apply_all(cron_job(), MEMBER1, [karmada])
    assert images(applied.manifest) == ["busybox:1.36", "nginx:1.25"]
    assert "no container it applies to" in applied.notes[0]
    on_job = overrides.apply_all(job(), MEMBER1, [group_policy("policy.karmada.io", TAG, "Job")])
    assert images(on_job.manifest) == ["busybox:1.36", "nginx:2"]
    ours = overrides.apply_all(cron_job(), MEMBER1,
                               [group_policy("policy.federation.io", TAG, "CronJob")])
    assert images(ours.manifest) == ["busybox:2", "nginx:2"]


def test_command_overrider_for_a_missing_container_is_skipped_only_for_karmada() -> None:
    """Karmada skips a container name that matches nothing; ours refuses it as a typo."""
    command = {"commandOverrider": [{"containerName": "ap", "operator": "add",
                                     "value": ["-v"]}]}
    karmada = overrides.apply_all(job(), MEMBER1,
                                  [group_policy("policy.karmada.io", command, "Job")])
    assert karmada.manifest["spec"]["template"]["spec"]["containers"][0]["command"] == ["nginx"]
    assert "no such container, skipped as in Karmada" in karmada.notes[0]
    with pytest.raises(overrides.OverrideError, match="no container named 'ap'"):
        overrides.apply_all(job(), MEMBER1, [group_policy("policy.federation.io", command, "Job")])
