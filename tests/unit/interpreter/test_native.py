"""The built-in interpreter: Karmada's default semantics for the core kinds."""

from typing import Any

from federation.hub import manifests
from federation.interpreter import native, pods, quantity

JSON = dict[str, Any]


def deployment(replicas: int = 4, retain: bool = False) -> JSON:
    labels = {"app": "web"}
    if retain:
        labels[native.RETAIN_REPLICAS_LABEL] = "true"
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": labels},
            "spec": {"replicas": replicas, "template": {"spec": {
                "nodeSelector": {"disk": "ssd"},
                "serviceAccountName": "web",
                "imagePullSecrets": [{"name": "pull"}],
                "volumes": [{"name": "c", "configMap": {"name": "conf"}},
                            {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                     "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s1"}}}]},
                    {"name": "b", "resources": {"limits": {"cpu": "0.2", "memory": "64Mi"}}}],
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1"}}}]}}}}


def test_replicas_and_requirements_of_a_deployment() -> None:
    """A replica asks the sum of its containers (limits for missing requests), at least
    its largest init container; the node claim is its selector."""
    replicas, requirements = native.REPLICAS["Deployment"](deployment())
    assert replicas == 4
    assert requirements == {"nodeClaim": {"nodeSelector": {"disk": "ssd"}},
                            "resourceRequest": {"cpu": "1", "memory": "128Mi"}}


def test_job_replicas_are_its_parallelism_capped_by_completions() -> None:
    job = {"kind": "Job", "spec": {"parallelism": 5, "completions": 3, "template": {}}}
    assert native.REPLICAS["Job"](job) == (3, None)
    assert native.REVISE["Job"](job, 2)["spec"]["parallelism"] == 2


def test_dependencies_of_a_pod_template() -> None:
    found = native.DEPENDENCIES["Deployment"](deployment())
    assert {(d["kind"], d["name"]) for d in found} == {
        ("ConfigMap", "conf"), ("Secret", "s1"), ("Secret", "pull"),
        ("ServiceAccount", "web"), ("PersistentVolumeClaim", "data")}
    assert {d["namespace"] for d in found} == {"shop"}


def test_replicas_are_retained_only_under_the_label() -> None:
    """An HPA scaled the member's copy to 9: kept with the label, reverted without."""
    observed = deployment(9)
    assert native.retain(deployment(4, retain=True), observed)["spec"]["replicas"] == 9
    assert native.retain(deployment(4), observed)["spec"]["replicas"] == 4


def test_retain_does_not_change_the_desired_object() -> None:
    desired = deployment(4, retain=True)
    native.retain(desired, deployment(9))
    assert desired["spec"]["replicas"] == 4


def test_allocated_fields_are_retained() -> None:
    service = {"kind": "Service", "spec": {"ports": [{"port": 80}]}}
    live = {"spec": {"clusterIP": "10.1.0.3", "clusterIPs": ["10.1.0.3"],
                     "ports": [{"port": 80, "protocol": "TCP", "nodePort": 31000}]}}
    kept = native.retain(service, live)
    assert kept["spec"]["clusterIP"] == "10.1.0.3"
    assert kept["spec"]["ports"][0]["nodePort"] == 31000
    pvc = native.retain({"kind": "PersistentVolumeClaim", "spec": {}},
                        {"spec": {"volumeName": "pv-1"}})
    assert pvc["spec"]["volumeName"] == "pv-1"
    account = native.retain({"kind": "ServiceAccount"}, {"secrets": [{"name": "t"}]})
    assert account["secrets"] == [{"name": "t"}]
    pod = native.retain({"kind": "Pod", "spec": {"containers": [{"name": "a"}]}},
                        {"spec": {"nodeName": "n1", "volumes": [{"name": "tok"}],
                                  "containers": [{"name": "a", "volumeMounts": [{"n": 1}]}]}})
    assert pod["spec"]["nodeName"] == "n1"
    assert pod["spec"]["containers"][0]["volumeMounts"] == [{"n": 1}]


def test_an_hpa_scaled_copy_is_not_drift_when_replicas_are_retained() -> None:
    """The attack on the old code: a member's HPA scales our copy; every reconcile saw
    drift at /spec/replicas and wrote it back, two controllers in a loop."""
    desired = manifests.mark(deployment(4, retain=True), "uid-1")
    live = {**desired, "spec": {**desired["spec"], "replicas": 9},
            "metadata": {**desired["metadata"], "resourceVersion": "5"}}
    assert manifests.needs_write(desired, live) is None
    without = manifests.mark(deployment(4), "uid-1")
    scaled = {**without, "spec": {**without["spec"], "replicas": 9}}
    assert manifests.needs_write(without, scaled) == "drift at /spec/replicas"


def test_a_write_for_another_change_keeps_the_members_replicas() -> None:
    desired = manifests.mark(deployment(4, retain=True), "uid-2")
    live = {**deployment(9, retain=True), "metadata": {"resourceVersion": "5"}}
    written = manifests.retain(desired, live)
    assert written["spec"]["replicas"] == 9
    assert written["metadata"]["resourceVersion"] == "5"


def test_ignored_pointers_match_list_items_with_a_star() -> None:
    desired = {"spec": {"containers": [{"name": "a", "image": "x"}]}}
    live = {"spec": {"containers": [{"name": "a", "image": "y"}]}}
    assert manifests.needs_write(desired, live) == "drift at /spec/containers/0/image"
    assert manifests.needs_write(desired, live,
                                 ignored=("/spec/containers/*/image",)) is None


def test_health_of_the_core_kinds() -> None:
    ready = {"metadata": {"generation": 2}, "spec": {"replicas": 2},
             "status": {"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 2}}
    assert native.HEALTH["Deployment"](ready)
    assert not native.HEALTH["Deployment"]({**ready, "status": {"observedGeneration": 1}})
    assert native.HEALTH["Service"]({"spec": {"type": "ClusterIP"}})
    assert not native.HEALTH["Service"]({"spec": {"type": "LoadBalancer"}})
    assert native.HEALTH["PersistentVolumeClaim"]({"status": {"phase": "Bound"}})


def test_status_is_reflected_and_aggregated() -> None:
    copy_ = {"kind": "Deployment", "status": {"replicas": 2, "readyReplicas": 1,
                                             "conditions": [], "observedGeneration": 3}}
    reflected = native.reflect_status(copy_)
    assert reflected == {"replicas": 2, "readyReplicas": 1, "observedGeneration": 3}
    template = {"kind": "Deployment", "metadata": {"generation": 5}}
    total = native.aggregate_status(template, [{"status": reflected}, {"status": reflected}])
    assert total["status"] == {"replicas": 4, "readyReplicas": 2, "observedGeneration": 5}


def test_quantities_print_as_kubernetes_does() -> None:
    assert str(quantity.Quantity.parse("0.1")) == "100m"
    assert str(quantity.Quantity.parse("1.5Gi")) == "1536Mi"
    assert str(quantity.Quantity.parse("100m") + quantity.Quantity.parse("1900m")) == "2"
    assert quantity.equal("0.5", "500m")
    assert pods.resource_request({"overhead": {"cpu": "10m"}}) == {"cpu": "10m"}
