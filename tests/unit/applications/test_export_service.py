"""vela-core's ``export-service``: a selector-less Service and its Endpoints, in the
Application's namespace of a topology's clusters, only for an address an administrator
allows (``fedctl run --export-service-allow``); loopback, link-local (cloud metadata),
unspecified and multicast never. The writer lets the step's own Endpoints through the deny
list and nothing else: a tenant's Endpoints (``k8s-objects``) stays refused, and no other
step may carry the step's annotation. The member role grants Endpoints only with
``--export-service``."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from federation.applications import compile as compile_
from federation.applications import export_service, model, workflow
from federation.cli import cli
from federation.controllers import propagation
from federation.hub import deny
from federation.placement import clusters as clusters_
from federation.rbac import roles
from tests.unit.applications.test_workflow_data import Driver
from tests.unit.controllers.test_deny import FakeMC

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2", "member3")]
ALLOW = export_service.Allow.parse(["10.20.0.0/16,fd00:20::/64"])
WORKER = {"name": "worker", "type": "topology", "properties": {"clusters": ["member2",
                                                                           "member3"]}}


def step(**props: Any) -> JSON:
    return {"name": "export", "type": "export-service",
            "properties": {"ip": "10.20.3.4", "port": 80, "targetPort": 8080, **props}}


def compiled(*steps: JSON, allow: export_service.Allow | None = ALLOW,
             components: list[JSON] | None = None) -> compile_.Compiled:
    spec = {"components": components or [{"name": "web", "type": "webservice",
                                          "properties": {"image": "nginx"}}],
            "policies": [WORKER], "workflow": {"steps": list(steps)}}
    return compile_.compile_app(spec, "shop", "shop", {}, FLEET, local_cluster="member1",
                                export_allow=allow)


def test_a_service_and_its_endpoints_go_to_each_cluster_of_the_topology() -> None:
    """KubeVela's objects (a ClusterIP Service of one TCP port, its Endpoints of the one
    address and targetPort), named ``name``, in the Application's namespace, marked."""
    result = compiled(step(name="db", topology="worker"))
    clusters = result.targets["export"].clusters
    assert set(clusters) == {"member2", "member3"}
    for objects in clusters.values():
        service, endpoints = sorted(objects, key=lambda o: o["kind"], reverse=True)
        assert (service["kind"], service["metadata"]["name"], service["metadata"][
            "namespace"]) == ("Service", "db", "shop")
        assert service["spec"]["type"] == "ClusterIP" and "selector" not in service["spec"]
        assert service["spec"]["ports"] == [{"protocol": "TCP", "port": 80,
                                             "targetPort": 8080}]
        assert (endpoints["kind"], endpoints["metadata"]["name"],
                endpoints["metadata"]["namespace"]) == ("Endpoints", "db", "shop")
        assert endpoints["subsets"] == [{"addresses": [{"ip": "10.20.3.4"}],
                                         "ports": [{"port": 8080}]}]
        assert endpoints["metadata"]["annotations"][export_service.ANNOTATION] == "export"
        assert export_service.writable(endpoints, ALLOW)
    [spec] = [s for s in result.steps if s.name == "export"]
    assert spec.type in workflow.DEPLOYING


def test_without_a_topology_it_goes_to_the_local_cluster_named_after_the_app() -> None:
    result = compiled(step())
    [names] = [{o["metadata"]["name"] for o in objects}
               for objects in result.targets["export"].clusters.values()]
    assert set(result.targets["export"].clusters) == {"member1"} and names == {"shop"}


@pytest.mark.parametrize(("props", "words"), [
    ({"namespace": "bank"}, r"steps\[0\]\.properties\.namespace: not supported \(the step "
                            r"writes or reads the Application's own namespace only"),
    ({"ip": "10.30.0.1"}, r"properties\.ip: 10\.30\.0\.1 is outside the ranges the "
                          r"administrator lets Applications export \(fedctl run "
                          r"--export-service-allow: 10\.20\.0\.0/16, fd00:20::/64\)"),
    ({"ip": "db.example.com"}, r"properties\.ip: not an IP address"),
    ({"topology": "nope"}, r"properties\.topology: names no topology policy"),
    ({"name": "../kube-system"}, r"properties\.name: not a Service name"),
    ({"port": 0}, r"properties\.port"),
    ({"targetPort": 70000}, r"properties\.targetPort"),
    ({"cluster": "member3"}, r"properties\.cluster: not supported for a export-service"),
])
def test_attack_refused_by_path(props: JSON, words: str) -> None:
    """Another namespace, an address outside the allowlist (the message names the flag),
    a host name, path characters, a cluster of its own choosing: refused by name."""
    with pytest.raises(model.AppError, match=words):
        compiled(step(**props))


@pytest.mark.parametrize("ip", ["169.254.169.254", "fe80::1", "::ffff:169.254.169.254",
                                "127.0.0.1", "::1", "0.0.0.0", "::", "224.0.0.1", "ff02::1",
                                "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1"])
def test_attack_metadata_and_loopback_addresses_are_never_exported(ip: str) -> None:
    """The cloud metadata service, the node's loopback, unspecified and multicast: refused
    even when the administrator allows every address."""
    everything = export_service.Allow.parse(["0.0.0.0/0", "::/0"])
    with pytest.raises(model.AppError, match=r"properties\.ip: .* never exported"):
        compiled(step(ip=ip), allow=everything)


def test_without_the_flag_every_export_is_refused() -> None:
    with pytest.raises(model.AppError, match=r"--export-service-allow: none\)"):
        compiled(step(), allow=None)


def test_attack_a_tenant_cannot_forge_the_steps_annotation() -> None:
    """A k8s-objects Endpoints carrying the annotation would pass the writer's deny check:
    the compile refuses it, whatever address it holds."""
    forged = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {
        "name": "db", "annotations": {export_service.ANNOTATION: "export"}},
        "subsets": [{"addresses": [{"ip": "10.20.3.4"}], "ports": [{"port": 8080}]}]}
    with pytest.raises(model.AppError, match=r"Endpoints db: annotation "
                                             r"federation.io/export-service is written by "
                                             r"the export-service step only"):
        compiled({"name": "deploy", "type": "deploy", "properties": {"policies": ["worker"]}},
                 components=[{"name": "ep", "type": "k8s-objects",
                              "properties": {"objects": [forged]}}])


def endpoints(ip: str = "10.20.3.4", namespace: str = "shop", **extra: Any) -> JSON:
    address: JSON = {"ip": ip, **extra}
    return {"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "db", "namespace": namespace,
                         "annotations": {export_service.ANNOTATION: "export"}},
            "subsets": [{"addresses": [address], "ports": [{"port": 8080}]}]}


def writer(mc: FakeMC) -> propagation.Writer:
    """The applications controller's writer (wiring.install's)."""
    return propagation.Writer(mc, "hub", deny.DenyList(), vouched=lambda o:
                              export_service.writable(o, ALLOW))


async def test_the_writer_lets_only_the_steps_own_endpoints_through() -> None:
    mc = FakeMC()
    await writer(mc).apply("member2", endpoints())
    assert mc.writer.calls == [("create", "db")]


@pytest.mark.parametrize("obj", [
    {**endpoints(), "metadata": {"name": "db", "namespace": "shop"}},
    endpoints(ip="10.30.0.1"), endpoints(ip="169.254.169.254"),
    endpoints(targetRef={"kind": "Pod", "namespace": "bank", "name": "db-0"}),
    {**endpoints(), "subsets": [{"addresses": [{"ip": "10.20.3.4"}, {"ip": "10.20.3.5"}],
                                 "ports": [{"port": 8080}]}]},
    endpoints(namespace=deny.AGENT_NAMESPACE),
])
async def test_attack_the_writer_refuses_any_other_endpoints(obj: JSON) -> None:
    """A tenant's Endpoints (a k8s-objects manifest, unmarked), an address outside the
    allowlist or the metadata service's, a targetRef into another namespace, two
    addresses, the pull agent's namespace (the list's other rules still hold): refused
    before any request."""
    mc = FakeMC()
    for verb in ("create", "update", "apply"):
        with pytest.raises(deny.Denied, match=r"^refused: Endpoints .* in member2"):
            await getattr(writer(mc), verb)("member2", obj)
    assert mc.writer.calls == []


async def test_attack_the_propagation_writer_vouches_for_nothing() -> None:
    with pytest.raises(deny.Denied, match=r"is on the propagation deny list \(core/Endpoints"):
        await propagation.Writer(FakeMC(), "hub", deny.DenyList()).create("m", endpoints())


def test_the_allowlist_flag_names_a_bad_network() -> None:
    with pytest.raises(ValueError, match=r"^--export-service-allow: 'nope' is not an IP "):
        export_service.Allow.parse(["10.0.0.0/8,nope"])
    result = CliRunner().invoke(cli, ["run", "--export-service-allow", "10.0.0.0/33"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "error: --export-service-allow: '10.0.0.0/33' is not an IP network in CIDR form"]


def test_the_member_role_grants_endpoints_only_with_export_service() -> None:
    def endpoint_rules(settings: roles.Settings) -> list[roles.Rule]:
        return [r for m in roles.member(settings) for r in m.rules
                if "endpoints" in r.resources]

    assert endpoint_rules(roles.Settings()) == []
    [rule] = endpoint_rules(roles.Settings(export_service=True))
    assert rule.api_groups == ("",) and rule.resources == ("endpoints",)
    assert set(rule.verbs) == {"get", "list", "watch", "create", "update", "patch", "delete"}
    assert not any("endpoints" in r.resources for m in roles.hub(
        roles.Settings(export_service=True)) for r in m.rules)
    printed = CliRunner().invoke(cli, ["rbac", "--only", "member", "--export-service"])
    assert printed.exit_code == 0 and "resources: [endpoints]" in printed.output


def dry_run(tmp_path: Any, *flags: str) -> Any:
    app = tmp_path / "app.yaml"
    app.write_text("apiVersion: core.oam.dev/v1beta1\nkind: Application\n"
                   "metadata: {name: shop, namespace: shop}\nspec:\n  components: []\n"
                   "  workflow:\n    steps:\n    - {name: export, type: export-service, "
                   "properties: {ip: 10.20.3.4, port: 80, targetPort: 8080}}\n")
    return CliRunner().invoke(cli, ["app", "dry-run", "-f", str(app), "--local-cluster",
                                    "member1", *flags])


def test_dry_run_takes_the_allowlist_as_fedctl_run_does(tmp_path: Any) -> None:
    refused = dry_run(tmp_path)
    assert refused.exit_code == 1
    assert refused.stderr.strip().splitlines()[-1].endswith(
        "(fedctl run --export-service-allow: none)")
    shown = dry_run(tmp_path, "--export-service-allow", "10.20.0.0/16")
    assert shown.exit_code == 0, shown.output
    assert "kind: Endpoints" in shown.stdout and "kind: Service" in shown.stdout
    bad = dry_run(tmp_path, "--export-service-allow", "nope")
    assert bad.exit_code == 1 and bad.stderr.strip().splitlines()[-1] == (
        "error: --export-service-allow: 'nope' is not an IP network in CIDR form")


def test_an_address_from_an_input_is_checked_once_known_and_fails_the_step() -> None:
    """KubeVela's def-doc example takes ``ip`` from an earlier step's output: the step
    renders once it is known; the metadata service's address fails the step (the
    Application stands), naming why."""
    driver = Driver({"components": [], "policies": [WORKER], "workflow": {"steps": [
        {"name": "host", "type": "print-message-in-status", "properties": {"message": "x"},
         "outputs": [{"name": "host", "valueFrom": '"169.254.169.254"'}]},
        {"name": "export", "type": "export-service",
         "inputs": [{"from": "host", "parameterKey": "ip"}],
         "properties": {"port": 80, "targetPort": 8080, "topology": "worker"}}]}}, app="shop")
    for _ in range(3):
        state = driver.step()
    [export] = [s for s in state.steps if s.name == "export"]
    assert (export.phase, export.reason) == ("failed", "Rendering")
    assert "properties.ip: 169.254.169.254 is a link-local address" in export.message
    assert driver.compiled is not None and "export" not in driver.compiled.targets


@pytest.mark.parametrize("mode", [[], ["--mode", "pull"]])
def test_join_takes_the_rule_only_where_it_applies_the_member_role(mode: list[str]) -> None:
    """`fedctl join --export-service` without --create-service-account or --apply-agent
    would apply no role: refused rather than ignored, before anything is read."""
    result = CliRunner().invoke(cli, ["join", "edge", "--kubeconfig", "/nonexistent",
                                      "--export-service", *mode])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "error: --export-service grants the member role a right: only with "
        "--create-service-account or --apply-agent, which apply that role"]
