"""vela-core's remaining workflow steps, with KubeVela's semantics and narrowed for a
tenant: ``print-message-in-status`` (its message as the step's status message),
``collect-service-endpoints`` (the endpoints of the Application's own Services and
Ingresses in the clusters its steps started, into the step's outputs), ``export-data`` (a
ConfigMap or Secret in the Application's own namespace of a topology's clusters, as a
deploy step of that one object), ``depends-on-app`` (waits for another Application of
the same namespace to be running; creating a missing one from its ConfigMap is
``test_depends_on_app.py``'s), ``clean-jobs`` (this Application's own Jobs and Pods
of its namespace taken away where earlier steps put them, deleted through the tracker).
Each attack test fails on a naive step that reads or deletes what its properties name."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from federation.applications import compile as compile_
from federation.applications import endpoints, model, scope, workflow
from federation.cli import cli
from federation.contexts.client import Resource
from federation.controllers.applications.settings import ApplicationSettings
from federation.placement import clusters as clusters_
from tests.unit.applications.test_controller import MC, REQUEST, Clock, set_app
from tests.unit.applications.test_controller_workflow_io import without_nulls
from tests.unit.applications.test_workflow_data import Driver, healthy
from tests.unit.controllers import fakes
from tests.unit.controllers.applications import fakes as app_fakes

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2", "member3")]


def spec_of(*steps: JSON) -> JSON:
    return {"components": [{"name": "web", "type": "webservice",
                            "properties": {"image": "nginx"}}],
            "workflow": {"steps": list(steps)}}


def compiled(*steps: JSON) -> compile_.Compiled:
    return compile_.compile_app(spec_of(*steps), "shop", "shop", {}, FLEET,
                                local_cluster="member1")


def dry_run(tmp_path: Path, steps: str, *flags: str) -> Any:
    app = tmp_path / "app.yaml"
    app.write_text("apiVersion: core.oam.dev/v1beta1\nkind: Application\n"
                   "metadata: {name: shop, namespace: shop}\nspec:\n"
                   "  components: [{name: web, type: webservice, properties: {image: nginx}}]\n"
                   "  workflow:\n    steps:\n" + steps)
    return CliRunner().invoke(cli, ["app", "dry-run", "-f", str(app), *flags])


# -- print-message-in-status ----------------------------------------------------------------


def test_print_message_in_status_succeeds_with_its_message() -> None:
    """KubeVela's docs example: the message shows in the step's status, the step succeeds."""
    result = compiled({"name": "message", "type": "print-message-in-status",
                       "properties": {"message": "All addons have been enabled."}})
    [spec] = result.steps
    state = workflow.initial(1, result.steps, 0.0)
    state, actions = workflow.evaluate(state, result.steps, workflow.Observations(), 1.0)
    [step] = state.steps
    assert (spec.message, step.phase, step.reason, step.message, actions) == (
        "All addons have been enabled.", "succeeded", "Message",
        "All addons have been enabled.", [])


def test_print_message_in_status_takes_its_message_from_an_input() -> None:
    driver = Driver({"components": [{"name": "web", "type": "webservice",
                                     "properties": {"image": "nginx"}}],
                     "workflow": {"steps": [
                         {"name": "apply", "type": "apply-component",
                          "properties": {"component": "web"},
                          "outputs": [{"name": "who", "valueFrom": '"hello " + context.name'}]},
                         {"name": "say", "type": "print-message-in-status",
                          "inputs": [{"from": "who", "parameterKey": "message"}]}]}})
    driver.step()
    driver.step(healthy("apply"))
    driver.step(healthy("apply"))
    assert driver.state is not None
    assert {s.name: (s.phase, s.message) for s in driver.state.steps}["say"] == (
        "succeeded", "hello custom-if")


@pytest.mark.parametrize(("props", "words"), [
    ({}, r"steps\[0\]\.properties\.message: required, a string"),
    ({"message": {"text": "x"}}, r"properties\.message: required, a string"),
    ({"message": "x" * 4001}, r"properties\.message: 4001 characters; at most 4000"),
    ({"message": "x", "level": "info"}, r"properties\.level: not supported"),
])
def test_print_message_in_status_refused_by_path(props: JSON, words: str) -> None:
    with pytest.raises(model.AppError, match=words):
        compiled({"name": "m", "type": "print-message-in-status", "properties": props})


def test_dry_run_says_what_print_message_in_status_shows(tmp_path: Path) -> None:
    result = dry_run(tmp_path, "    - {name: say, type: print-message-in-status, "
                               "properties: {message: all done}}\n")
    assert result.exit_code == 0, result.output
    assert '# step say (print-message-in-status): its status message will be "all done"' \
        in result.output


# -- collect-service-endpoints --------------------------------------------------------------


def service(kind: str = "ClusterIP", **extra: Any) -> JSON:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"type": kind, "ports": [{"name": "http", "port": 8080, "protocol": "TCP",
                                              "nodePort": 30080}]}, **extra}


def test_endpoints_of_services_as_kubevelas_provider_makes_them() -> None:
    [inner] = endpoints.of_object(service(), "member1", "web")
    assert inner == {"endpoint": {"protocol": "TCP", "appProtocol": "http", "portName": "http",
                                  "path": "", "host": "web.shop", "port": 8080, "inner": True},
                     "cluster": "member1", "component": "web",
                     "ref": {"apiVersion": "v1", "kind": "Service", "namespace": "shop",
                             "name": "web"}}
    balanced = endpoints.of_object(service("LoadBalancer", status={"loadBalancer": {
        "ingress": [{"ip": "203.0.113.7"}, {"hostname": "lb.example.com"}]}}), "m", "web")
    assert [(e["endpoint"]["host"], e["endpoint"]["inner"]) for e in balanced] == [
        ("203.0.113.7", False), ("lb.example.com", False)]
    [node] = endpoints.of_object(service("NodePort"), "m", "web")
    assert (node["endpoint"]["host"], node["endpoint"]["port"]) == ("", 30080)


def test_endpoints_of_an_ingress_by_rule_and_path_https_with_tls() -> None:
    ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "web", "namespace": "shop",
                            "annotations": {"ingress.controller/https-port": "8443"}},
               "spec": {"tls": [{"hosts": ["secure.example.com"]}], "rules": [
                   {"host": "secure.example.com", "http": {"paths": [{"path": "/api"}]}},
                   {"host": "plain.example.com", "http": {"paths": [{"path": "/"}]}}]}}
    found = [(e["endpoint"]["appProtocol"], e["endpoint"]["host"], e["endpoint"]["port"],
              e["endpoint"]["path"]) for e in endpoints.of_object(ingress, "m", "web")]
    assert found == [("https", "secure.example.com", 8443, "/api"),
                     ("http", "plain.example.com", 80, "/")]


def test_the_template_filters_as_the_steps_cue() -> None:
    found = (endpoints.of_object(service(), "m1", "web")
             + endpoints.of_object(service("LoadBalancer", status={"loadBalancer": {
                 "ingress": [{"ip": "203.0.113.7"}]}}), "m2", "web"))
    everything = endpoints.template(endpoints.Collect(), found)
    assert everything["value"]["url"] == "http://web.shop:8080"
    assert len(everything["outputs"]["endpoints"]) == 2
    outer = endpoints.template(endpoints.Collect(outer=True, protocol="https"), found)
    assert outer["value"]["url"] == "https://203.0.113.7:8080"
    assert endpoints.template(endpoints.Collect(port=80), found)["value"] == {}
    assert endpoints.template(endpoints.Collect(port_name="grpc"), found)[
        "outputs"]["endpoints"] == []


def collect_step(**props: Any) -> JSON:
    return {"name": "collect", "type": "collect-service-endpoints", "properties": props}


@pytest.mark.parametrize(("props", "words"), [
    ({"name": "bank-app"}, r"steps\[0\]\.properties\.name: not supported \(the step "
                           r"collects this Application's own endpoints"),
    ({"namespace": "bank"}, r"properties\.namespace: not supported \(the step reads the "
                            r"Application's own namespace only"),
    ({"components": ["db"]}, r"properties\.components\[0\]: names no component"),
    ({"cluster": "member3"}, r"properties\.cluster: not supported for a "
                             r"collect-service-endpoints step"),
    ({"kind": "Secret"}, r"properties\.kind: not supported"),
    ({"protocal": "ftp"}, r"properties\.protocal"),
    ({"port": "80"}, r"properties\.port"),
])
def test_attack_collect_service_endpoints_refused_by_path(props: JSON, words: str) -> None:
    """Another Application, another namespace, a cluster, a kind (a Secret): none can be
    named; the step reads this Application's own Services and Ingresses only."""
    with pytest.raises(model.AppError, match=words):
        compiled(collect_step(**props))


def test_collect_service_endpoints_takes_its_own_name_and_namespace() -> None:
    result = compiled(collect_step(name="shop", namespace="shop", components=["web"],
                                   port=8080, outer=False))
    assert result.collects["collect"] == endpoints.Collect(("web",), 8080, None, False, "http")


COLLECTING: JSON = {
    "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
    "metadata": {"name": "shop", "namespace": "shop", "annotations": {}},
    "spec": {
        "components": [{"name": "web", "type": "k8s-objects", "properties": {"objects": [
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
             "spec": {"ports": [{"port": 8080}]}}]}}],
        "policies": [{"name": "one", "type": "topology",
                      "properties": {"clusters": ["member1"]}}],
        "workflow": {"steps": [
            {"name": "deploy", "type": "deploy", "properties": {"policies": ["one"]}},
            {"name": "collect", "type": "collect-service-endpoints",
             "outputs": [{"name": "host", "valueFrom": "value.endpoint.host"},
                         {"name": "url", "valueFrom": "value.url"}]},
            {"name": "say", "type": "print-message-in-status",
             "inputs": [{"from": "url", "parameterKey": "message"}]}]}}}


async def run(mc: MC, app: JSON, times: int = 10) -> JSON:
    set_app(mc, app)
    return await reconcile(mc, times)


async def reconcile(mc: MC, times: int, clock: Clock | None = None, *,
                    recorder: app_fakes.Recorder | None = None,
                    until_done: bool = True) -> JSON:
    """Reconciles of the Application as it is on the hub, each by a new controller
    (``until_done``: no more once the workflow succeeded or failed)."""
    clock = clock or Clock()
    status: JSON = {}
    settings = ApplicationSettings(local_cluster="member1")
    for _ in range(times):
        reconciler = app_fakes.reconciler(mc, recorder or app_fakes.Recorder(), settings,
                                          clock=clock)
        await reconciler.reconcile(REQUEST)
        live = mc.find("hub", "Application", "shop", "shop")
        assert live is not None
        live["status"] = without_nulls(live["status"])
        mc.put("hub", live)
        status = live["status"]
        clock.now += 1
        if until_done and status.get("workflow", {}).get("phase") in ("succeeded", "failed"):
            break
    return status


def steps_of(status: JSON) -> dict[str, tuple[str, str]]:
    return {s["name"]: (s["phase"], s.get("message", "")) for s in status["workflow"]["steps"]}


async def test_collect_reads_the_apps_own_service_in_the_cluster_it_deployed_to() -> None:
    """KubeVela's e2e example in small: deploy, collect, the URL into the next step."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    status = await run(mc, COLLECTING)
    assert status["workflow"]["phase"] == "succeeded", status["workflow"]
    assert steps_of(status)["say"] == ("succeeded", "http://web.shop:8080")
    assert steps_of(status)["collect"] == ("succeeded", "1 endpoint(s)")


async def test_attack_another_apps_service_of_that_name_is_not_collected() -> None:
    """bank's Service 'web' in member2 (where shop does not deploy) and one of another
    Application in shop's namespace of member1 (which shop's deploy may not overwrite):
    the collect step, run beside the deploy, reads neither; it waits, and neither host
    is anywhere in the status."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    foreign = service("LoadBalancer", status={"loadBalancer": {"ingress": [
        {"hostname": "bank-internal.example.com"}]}})
    foreign["metadata"] = {"name": "web", "namespace": "shop", "annotations": {
        "federation.io/application": "shop/other"}, "labels": {
        "federation.io/managed-by": "federation"}}
    mc.put("member1", foreign)
    elsewhere = copy.deepcopy(foreign)
    elsewhere["metadata"] = {"name": "web", "namespace": "bank"}
    elsewhere["status"]["loadBalancer"]["ingress"] = [{"hostname": "bank.example.com"}]
    mc.put("member2", elsewhere)
    app = copy.deepcopy(COLLECTING)
    app["spec"]["workflow"]["mode"] = {"steps": "DAG"}
    status = await run(mc, app, 6)
    assert steps_of(status)["collect"][0] == "running", status["workflow"]
    assert "example.com" not in json.dumps(status)


def test_dry_run_says_what_collect_service_endpoints_reads(tmp_path: Path) -> None:
    result = dry_run(tmp_path, "    - {name: collect, type: collect-service-endpoints, "
                               "properties: {components: [web], port: 80}}\n")
    assert result.exit_code == 0, result.output
    assert "# step collect (collect-service-endpoints): waits for an endpoint of the " \
        "Application's own Services and Ingresses in the clusters its steps deploy to " \
        "(components web; port 80)" in result.output


# -- export-data ----------------------------------------------------------------------------


def export(**props: Any) -> JSON:
    return {"name": "export", "type": "export-data", "properties": props}


TOPOLOGY_ALL = {"name": "all", "type": "topology",
                "properties": {"clusters": ["local", "member2"], "namespace": "bank"}}


def compiled_with(policies: list[JSON], *steps: JSON) -> compile_.Compiled:
    """Compiled with bank granted: the topology may name it, export-data still does not
    write there."""
    return compile_.compile_app({**spec_of(*steps), "policies": policies}, "shop", "shop",
                                {}, FLEET, local_cluster="member1",
                                grant=scope.Grant("shop", frozenset({"bank"})))


def test_export_data_is_a_configmap_named_after_the_app_in_the_local_cluster() -> None:
    result = compiled(export(data={"host": "web.shop", "port": 8080}))
    [configmap] = result.targets["export"].clusters["member1"]
    assert (configmap["kind"], configmap["metadata"]["name"], configmap["metadata"][
        "namespace"], configmap["data"]) == ("ConfigMap", "shop", "shop",
                                            {"host": "web.shop", "port": "8080"})
    assert set(result.targets["export"].clusters) == {"member1"}


def test_export_data_goes_to_each_cluster_of_its_topology_in_the_apps_namespace() -> None:
    """The topology's clusters, not its namespace (KubeVela applies the object in its own
    namespace too): bank gets nothing."""
    result = compiled_with([TOPOLOGY_ALL], export(topology="all", kind="Secret", name="conn",
                                                  data={"password": "s3cret"}))
    clusters = result.targets["export"].clusters
    assert set(clusters) == {"member1", "member2"}
    for [secret] in clusters.values():
        assert (secret["kind"], secret["metadata"]["namespace"], secret["stringData"]) == (
            "Secret", "shop", {"password": "s3cret"})
        assert "type" not in secret


@pytest.mark.parametrize(("props", "words"), [
    ({"namespace": "bank"}, r"steps\[0\]\.properties\.namespace: not supported \(the step "
                            r"writes or reads the Application's own namespace only"),
    ({"kind": "ServiceAccount"}, r"properties\.kind"),
    ({"kind": "ClusterRole"}, r"properties\.kind"),
    ({"cluster": "member3"}, r"properties\.cluster: not supported for a export-data step"),
    ({"topology": "nope"}, r"properties\.topology: names no topology policy"),
    ({"name": "../kube-system/x"}, r"properties\.name: not a Kubernetes object name"),
    ({"data": {"../x": "1"}}, r"properties\.data: a key is not a ConfigMap or Secret key"),
    ({"type": "kubernetes.io/service-account-token"}, r"properties\.type: not supported"),
])
def test_attack_export_data_refused_by_path(props: JSON, words: str) -> None:
    """Another namespace, a kind other than ConfigMap or Secret (a cluster-scoped one), a
    cluster of its own choosing, a token Secret, path characters: refused by name."""
    with pytest.raises(model.AppError, match=words):
        compiled(export(**props))


def test_attack_export_data_secret_values_are_never_in_a_refusal() -> None:
    with pytest.raises(model.AppError) as caught:
        compiled(export(kind="Secret", data={"password": "hunter2", "bad key": "x"}))
    assert "hunter2" not in str(caught.value)


def test_attack_export_data_local_without_a_local_member_is_refused() -> None:
    """KubeVela's local cluster is its hub: here it is the --local-cluster member, and
    without one the step is refused rather than written to the hub."""
    with pytest.raises(model.AppError, match="local"):
        compile_.compile_app(spec_of(export(data={"a": "b"})), "shop", "shop", {}, FLEET)


EXPORTING = copy.deepcopy(COLLECTING)
EXPORTING["spec"]["policies"].append(
    {"name": "all", "type": "topology", "properties": {"clusters": ["local", "member2"]}})
EXPORTING["spec"]["workflow"]["steps"][2] = {
    "name": "export-data", "type": "export-data", "properties": {"topology": "all"},
    "inputs": [{"from": "host", "parameterKey": "data.host"}]}


async def test_kubeveals_collect_then_export_example_on_the_fleet() -> None:
    """KubeVela's e2e-multicluster app-collect-service-endpoint-and-export: the host
    collected in member1 exported as a ConfigMap to local (member1) and member2, tracked."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    status = await run(mc, EXPORTING, 12)
    assert status["workflow"]["phase"] == "succeeded", status["workflow"]
    for cluster in ("member1", "member2"):
        configmap = mc.find(cluster, "ConfigMap", "shop", "shop")
        assert configmap is not None and configmap["data"] == {"host": "web.shop"}, cluster
    tracked = {(r["cluster"], r["kind"], r["name"]) for r in status["appliedResources"]}
    assert {("member1", "ConfigMap", "shop"), ("member2", "ConfigMap", "shop")} <= tracked
    assert mc.find("member3", "ConfigMap", "shop", "shop") is None


def test_dry_run_shows_export_datas_object_per_cluster(tmp_path: Path) -> None:
    result = dry_run(tmp_path, "    - {name: export, type: export-data, properties: "
                               "{data: {a: b}}}\n", "--local-cluster", "member1")
    assert result.exit_code == 0, result.output
    assert "# step export (export-data): member1 (parallelism 5)\n---\n# cluster: member1\n" \
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shop\n  namespace: shop\n" \
        in result.output


# -- depends-on-app -------------------------------------------------------------------------


def depends(**props: Any) -> JSON:
    return {"name": "check", "type": "depends-on-app", "properties": props}


def test_depends_on_app_names_an_application_of_its_own_namespace() -> None:
    assert compiled(depends(name="fluxcd", namespace="shop")).awaits == {"check": "fluxcd"}
    assert compiled(depends(name="fluxcd")).awaits == {"check": "fluxcd"}


@pytest.mark.parametrize(("props", "words"), [
    ({"name": "fluxcd", "namespace": "vela-system"},
     r"steps\[0\]\.properties\.namespace: not supported \(the step writes or reads the "
     r"Application's own namespace only"),
    ({"name": "shop"}, r"properties\.name: names this Application itself"),
    ({"name": "../bank/x"}, r"properties\.name: not a Kubernetes object name"),
    ({}, r"properties\.name"),
    ({"name": "fluxcd", "cluster": "member2"}, r"properties\.cluster: not supported"),
    ({"name": "fluxcd", "kind": "Secret"}, r"properties\.kind: not supported"),
])
def test_attack_depends_on_app_refused_by_path(props: JSON, words: str) -> None:
    """Another namespace's Application (KubeVela's docs wait for vela-system's), itself,
    path characters, a cluster, a kind: refused by name before anything is read."""
    with pytest.raises(model.AppError, match=words):
        compiled(depends(**props))


def other_app(name: str, namespace: str, phase: str | None) -> JSON:
    body: JSON = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                  "metadata": {"name": name, "namespace": namespace},
                  "spec": {"components": [{"name": "c", "type": "config",
                                           "properties": {"data": {"token": "t0ps3cret"}}}]}}
    if phase is not None:
        body["status"] = {"status": phase}
    return body


DEPENDING: JSON = {
    "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
    "metadata": {"name": "shop", "namespace": "shop", "annotations": {}},
    "spec": {"components": [], "workflow": {"steps": [
        depends(name="fluxcd"),
        {"name": "say", "type": "print-message-in-status", "properties": {"message": "go"}}]}}}


async def test_depends_on_app_waits_until_the_other_application_is_running() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    clock = Clock()
    status = await run(mc, DEPENDING, 3)
    assert steps_of(status)["check"] == ("running", "Application shop/fluxcd on the hub not "
                                         "found, nor ConfigMap shop/fluxcd to create it "
                                         "from: waiting for it")
    mc.put("hub", other_app("fluxcd", "shop", "runningWorkflow"))
    status = await reconcile(mc, 3, clock)
    assert steps_of(status)["check"] == ("running", "waiting for it to be running (it is "
                                         "runningWorkflow)")
    mc.put("hub", other_app("fluxcd", "shop", "running"))
    status = await reconcile(mc, 3, clock)
    assert status["workflow"]["phase"] == "succeeded", status["workflow"]
    assert steps_of(status) == {"check": ("succeeded", ""), "say": ("succeeded", "go")}
    assert "t0ps3cret" not in json.dumps(status)


@pytest.mark.parametrize("shown", [["running"], {"status": ["running"]}, "running", None])
async def test_attack_a_malformed_status_of_the_other_application_is_not_running(
        shown: Any) -> None:
    """The other Application's status is whatever its writer put there: read as no phase."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    body = other_app("fluxcd", "shop", None)
    body["status"] = shown
    mc.put("hub", body)
    status = await run(mc, DEPENDING, 2)
    assert steps_of(status)["check"] == ("running", "waiting for it to be running (it is new)")


async def test_attack_another_namespaces_running_application_does_not_release_it() -> None:
    """bank's 'fluxcd' is running; shop's step reads only shop's namespace and waits."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", other_app("fluxcd", "bank", "running"))
    status = await run(mc, DEPENDING, 3)
    assert steps_of(status)["check"][0] == "running"
    assert steps_of(status)["say"][0] == "pending"


def test_depends_on_app_times_out() -> None:
    result = compiled({**depends(name="fluxcd"), "timeout": "10s"})
    state = workflow.initial(1, result.steps, 0.0)
    state, _ = workflow.evaluate(state, result.steps, workflow.Observations(), 1.0)
    state, _ = workflow.evaluate(state, result.steps, workflow.Observations(), 12.0)
    assert (state.steps[0].phase, state.steps[0].reason) == ("failed", "Timeout")


def test_dry_run_says_which_application_depends_on_app_waits_for(tmp_path: Path) -> None:
    result = dry_run(tmp_path, "    - {name: check, type: depends-on-app, properties: "
                               "{name: fluxcd, namespace: shop}}\n")
    assert result.exit_code == 0, result.output
    assert "# step check (depends-on-app): waits for Application fluxcd of this namespace to " \
        "be running" in result.output


# -- clean-jobs -----------------------------------------------------------------------------


def clean(**props: Any) -> JSON:
    return {"name": "clean", "type": "clean-jobs", "properties": props}


def test_clean_jobs_selects_kubevelas_default_label_or_the_given_one() -> None:
    assert compiled(clean()).cleans == {"clean": {"workflow.oam.dev/name": "shop"}}
    assert compiled(clean(labelselector={"my-label": "my-value"}, namespace="shop")).cleans \
        == {"clean": {"my-label": "my-value"}}


@pytest.mark.parametrize(("props", "words"), [
    ({"namespace": "bank"}, r"steps\[0\]\.properties\.namespace: not supported \(the step "
                            r"writes or reads the Application's own namespace only"),
    ({"namespace": "kube-system"}, r"properties\.namespace: not supported"),
    ({"labelselector": ["a"]}, r"properties\.labelselector"),
    ({"labelselector": {"a": 1}}, r"properties\.labelselector"),
    ({"labelselector": {"../x": "1"}}, r"properties\.labelselector: a key is not a label key"),
    ({"cluster": "member3"}, r"properties\.cluster: not supported for a clean-jobs step"),
    ({"kind": "Secret"}, r"properties\.kind: not supported"),
])
def test_attack_clean_jobs_refused_by_path(props: JSON, words: str) -> None:
    """Another namespace (a system one too), a cluster of its choosing, a kind (a
    Secret), a selector that is no label map: refused by name."""
    with pytest.raises(model.AppError, match=words):
        compiled(clean(**props))


def job(name: str, labels: dict[str, str], namespace: str = "shop") -> JSON:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox"}]}}}}


fakes.KINDS.setdefault("Job", Resource("batch", "v1", "jobs", "Job"))
LABEL = {"workflow.oam.dev/name": "shop"}
CLEANING: JSON = {
    "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
    "metadata": {"name": "shop", "namespace": "shop", "annotations": {}},
    "spec": {
        "components": [
            {"name": "init", "type": "k8s-objects", "properties": {"objects": [
                job("init", LABEL), job("keep", {"other": "x"})]}},
            {"name": "late", "type": "k8s-objects", "properties": {"objects": [
                job("late", LABEL)]}}],
        "policies": [{"name": "one", "type": "topology",
                      "properties": {"clusters": ["member1"]}},
                     {"name": "init-only", "type": "override",
                      "properties": {"selector": ["init"]}},
                     {"name": "late-only", "type": "override",
                      "properties": {"selector": ["late"]}}],
        "workflow": {"steps": [
            {"name": "init", "type": "deploy", "properties": {"policies": ["one",
                                                                           "init-only"]}},
            clean(),
            {"name": "late", "type": "deploy", "properties": {"policies": ["one",
                                                                           "late-only"]}}]}}}


def completed(mc: MC, cluster: str) -> None:
    """The member's Job controller, in small: every Job there has succeeded."""
    for name in ("init", "keep", "late"):
        live = mc.find(cluster, "Job", name, "shop")
        if live is not None and not live.get("status"):
            live["status"] = {"succeeded": 1, "conditions": [
                {"type": "Complete", "status": "True"}]}
            mc.put(cluster, live)


async def test_clean_jobs_deletes_the_apps_own_jobs_placed_before_it_and_no_other() -> None:
    """The init Job (labelled) goes once clean-jobs ran; 'keep' (not labelled) and 'late'
    (placed by a later step) stay; so do a Job of another Application and a member's own
    Job with the same label in shop's namespace of member1, and one in member3, where
    shop does not deploy: the control plane deletes only what this Application placed."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    other = job("other-app", LABEL)
    other["metadata"]["annotations"] = {"federation.io/application": "shop/other"}
    other["metadata"]["labels"] = {**LABEL, "federation.io/managed-by": "federation"}
    mc.put("member1", other)
    mc.put("member1", job("members-own", LABEL))
    mc.put("member3", job("elsewhere", LABEL))
    set_app(mc, CLEANING)
    clock = Clock()
    status: JSON = {}
    for _ in range(6):
        status = await reconcile(mc, 2, clock)
        completed(mc, "member1")
        if status["workflow"]["phase"] == "succeeded":
            break
    assert status["workflow"]["phase"] == "succeeded", status["workflow"]
    assert steps_of(status)["clean"][0] == "succeeded"
    assert mc.find("member1", "Job", "init", "shop") is None
    for cluster, name in (("member1", "keep"), ("member1", "late"), ("member1", "other-app"),
                          ("member1", "members-own"), ("member3", "elsewhere")):
        assert mc.find(cluster, "Job", name, "shop") is not None, name
    tracked = {(r["cluster"], r["kind"], r["name"]) for r in status["appliedResources"]}
    assert ("member1", "Job", "init") not in tracked
    assert ("member1", "Job", "late") in tracked


def test_dry_run_says_what_clean_jobs_deletes(tmp_path: Path) -> None:
    result = dry_run(tmp_path, "    - {name: clean, type: clean-jobs, properties: "
                               "{labelselector: {my-label: my-value}}}\n")
    assert result.exit_code == 0, result.output
    assert "# step clean (clean-jobs): deletes this Application's own Jobs (their pods with " \
        "them) and Pods labelled my-label=my-value in its namespace, where earlier steps put " \
        "them" in result.output


def test_rendering_a_manifest_leaves_the_applications_own_labels_unchanged() -> None:
    """A k8s-objects manifest's labels are copied before ours are added: the controller
    renders from the cached Application, which must not change (it did: the labels map was
    shared, found by the clean-jobs test on the frozen fleet cache)."""
    spec = spec_of()
    spec["components"] = [{"name": "init", "type": "k8s-objects",
                           "properties": {"objects": [job("init", LABEL)]}}]
    before = copy.deepcopy(spec)
    compile_.compile_app(spec, "shop", "shop", {}, FLEET, local_cluster="member1")
    assert spec == before
