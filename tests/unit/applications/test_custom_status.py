"""Definitions' ``spec.status``: ``healthPolicy`` and ``customStatus`` (KubeVela's semantics).

The policies here are our own, written the way KubeVela's webservice and the fluxcd addon's
``helm`` write theirs (isHealth from ``context.output.status``, a message from it and from
``context.outputs``); the addon's own text is read from the catalog mirror when present.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from federation.applications import compile as compile_
from federation.applications import cue_worker, custom_status, definitions
from federation.cli import cli
from federation.placement import clusters as clusters_

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2")]

READY_POLICY = """
ready: {
	readyReplicas: *0 | int
} & {
	if context.output.status.readyReplicas != _|_ {
		readyReplicas: context.output.status.readyReplicas
	}
}
_ip: context.outputs.web.spec.clusterIP
isHealth: context.output.spec.replicas == ready.readyReplicas && _ip != ""
"""
READY_MESSAGE = """
ready: *0 | int
if context.output.status.readyReplicas != _|_ {
	ready: context.output.status.readyReplicas
}
_of: "healthy=\\(context.status.healthy) of \\(parameter.image)"
message: "Ready:\\(ready)/\\(context.output.spec.replicas) \\(_of)"
"""
SERVER = """
output: {
	apiVersion: "apps/v1"
	kind:       "Deployment"
	spec: {
		replicas: parameter.replicas
		selector: matchLabels: app: context.name
		template: {
			metadata: labels: app: context.name
			spec: containers: [{name: context.name, image: parameter.image}]
		}
	}
}
outputs: web: {
	apiVersion: "v1"
	kind:       "Service"
	metadata: name: context.name
	spec: {selector: app: context.name, ports: [{port: 80}]}
}
parameter: {image: string, replicas: *2 | int}
"""
PROBE_TRAIT = """
outputs: probe: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: "\\(context.name)-probe"
	data: wanted: parameter.wanted
}
parameter: wanted: string
"""


def definition(kind: str, name: str, template: str, health: str = "", custom: str = ""
               ) -> JSON:
    status = {k: v for k, v in (("healthPolicy", health), ("customStatus", custom)) if v}
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": kind,
            "metadata": {"name": name, "namespace": "vela-system"},
            "spec": {"schematic": {"cue": {"template": template}},
                     **({"status": status} if status else {})}}


def server_definitions() -> list[JSON]:
    return [definition("ComponentDefinition", "server", SERVER, READY_POLICY, READY_MESSAGE),
            definition("TraitDefinition", "probe", PROBE_TRAIT,
                       'isHealth: context.outputs.probe.data.seen == parameter.wanted',
                       'message: "probe \\(context.outputs.probe.data.seen)"')]


def server_app() -> JSON:
    return {"components": [{"name": "api", "type": "server", "properties": {"image": "api:1"},
                            "traits": [{"type": "probe", "properties": {"wanted": "yes"}}]}],
            "policies": [{"name": "two", "type": "topology",
                          "properties": {"clusters": ["member1", "member2"]}}]}


def compiled_server() -> compile_.Compiled:
    catalog, reports = definitions.catalog(server_definitions())
    assert reports == []
    user = definitions.Rendering(catalog, definitions.AppInfo("shop", 2), cue_worker.inline)
    return compile_.compile_app(server_app(), "shop", "shop", {}, FLEET, None, None, user)


def judged(check: custom_status.Check, output: JSON | None, outputs: dict[str, JSON]
           ) -> tuple[bool, str, str]:
    context = custom_status.context_for(check, "member1", output, outputs)
    healthy, reason = custom_status.health_of(
        cue_worker.inline(custom_status.health_request(check, context)), check) \
        if check.health else (True, "")
    message = custom_status.message_of(
        cue_worker.inline(custom_status.message_request(check, context, healthy)), check) \
        if check.custom else ""
    return healthy, reason, message


def live(obj: JSON, **status: Any) -> JSON:
    return {**obj, "status": status}


# -- loading and rendering --------------------------------------------------------------------


def test_a_definitions_status_loads_and_each_component_gets_its_checks() -> None:
    """healthPolicy and customStatus are loaded, not refused; the render records the
    component's and its trait's checks against its workload, with KubeVela's base context
    and each definition's own parameter."""
    compiled = compiled_server()
    [checks] = compiled.targets["deploy"].checks
    assert checks.component == "api"
    assert checks.workload == ("apps/v1", "Deployment", "shop", "api")
    own, trait = checks.checks
    assert (own.field, own.type, own.ref) == ("component", "server",
                                              "ComponentDefinition vela-system/server")
    assert own.parameter == {"image": "api:1"} and trait.parameter == {"wanted": "yes"}
    assert own.context == {"name": "api", "namespace": "shop", "appName": "shop",
                           "appRevision": "shop-v2"}
    assert own.health == READY_POLICY.strip() and trait.custom.startswith("message:")


def test_auxiliary_objects_carry_kubevelas_labels() -> None:
    """KubeVela finds a definition's outputs by ``trait.oam.dev/type`` (AuxiliaryWorkload
    or the trait's type) and ``trait.oam.dev/resource`` (the output's name)."""
    objects = compiled_server().targets["deploy"].clusters["member1"]
    by_kind = {o["kind"]: o["metadata"]["labels"] for o in objects}
    assert by_kind["Service"]["trait.oam.dev/type"] == "AuxiliaryWorkload"
    assert by_kind["Service"]["trait.oam.dev/resource"] == "web"
    assert by_kind["ConfigMap"]["trait.oam.dev/type"] == "probe"
    assert by_kind["ConfigMap"]["trait.oam.dev/resource"] == "probe"
    assert "trait.oam.dev/type" not in by_kind["Deployment"]
    assert set(custom_status.outputs_of(objects, "api", "AuxiliaryWorkload")) == {"web"}
    assert set(custom_status.outputs_of(objects, "api", "probe")) == {"probe"}


def test_a_definition_without_status_records_no_check() -> None:
    docs = [definition("ComponentDefinition", "server", SERVER)]
    catalog, _ = definitions.catalog(docs)
    user = definitions.Rendering(catalog, definitions.AppInfo("shop"), cue_worker.inline)
    spec = server_app()
    spec["components"][0]["traits"] = []
    compiled = compile_.compile_app(spec, "shop", "shop", {}, FLEET, None, None, user)
    assert compiled.targets["deploy"].checks == ()


# -- evaluation -------------------------------------------------------------------------------


def objects_by_kind() -> dict[str, JSON]:
    return {o["kind"]: dict(o) for o in compiled_server().targets["deploy"].clusters["member1"]}


def test_health_and_message_follow_the_live_objects() -> None:
    """isHealth over ``context.output`` and ``context.outputs.<name>``; the message sees
    ``context.status.healthy`` and ``parameter``, as KubeVela's GetStatus gives them."""
    [checks] = compiled_server().targets["deploy"].checks
    own = checks.checks[0]
    found = objects_by_kind()
    service = live(found["Service"])
    service["spec"] = {**service["spec"], "clusterIP": "10.0.0.7"}
    starting = live(found["Deployment"], readyReplicas=1)
    assert judged(own, starting, {"web": service}) == (
        False, "", "Ready:1/2 healthy=false of api:1")
    ready = live(found["Deployment"], readyReplicas=2)
    assert judged(own, ready, {"web": service}) == (True, "", "Ready:2/2 healthy=true of api:1")


def test_a_traits_status_sees_only_its_own_outputs() -> None:
    [checks] = compiled_server().targets["deploy"].checks
    trait = checks.checks[1]
    probe = objects_by_kind()["ConfigMap"]
    seen = {**probe, "data": {"wanted": "yes", "seen": "yes"}}
    assert judged(trait, objects_by_kind()["Deployment"], {"probe": seen}) == (
        True, "", "probe yes")
    context = custom_status.context_for(trait, "member1", {"kind": "Deployment"},
                                        {"probe": seen})
    assert "output" not in context and context["cluster"] == "member1"


def test_the_component_is_unhealthy_if_a_trait_is_and_says_its_own_message_first() -> None:
    [checks] = compiled_server().targets["deploy"].checks
    own, trait = checks.checks
    status = custom_status.fold(checks, [(own, True, "Ready:2/2"), (trait, False, "probe no")])
    assert (status.healthy, status.message, status.judged) == (False, "Ready:2/2", True)
    assert status.traits == (("probe", False, "probe no"),)
    status = custom_status.fold(checks, [(own, True, ""), (trait, False, "probe no")])
    assert status.message == "probe no"


@pytest.mark.parametrize(("policy", "reason"), [
    ("isHealth: context.output.status.nothing.here", "healthPolicy: isHealth: "),
    ("ready: true", "healthPolicy: isHealth is not defined"),
    ('isHealth: "yes"', "healthPolicy: isHealth is not a concrete bool"),
    ("isHealth: bool", "healthPolicy: isHealth"),
    ("isHealth: {{", "healthPolicy: "),
])
def test_a_policy_that_cannot_say_is_unhealthy_with_the_reason(policy: str, reason: str
                                                               ) -> None:
    """KubeVela counts a policy that fails as unhealthy (the error only in its log); here
    the reason is the message, one line, naming the definition."""
    check = custom_status.Check("component", "server", "ComponentDefinition vela-system/s",
                                policy, "", {}, {"name": "api"})
    healthy, message, _ = judged(check, {"kind": "Deployment", "status": {}}, {})
    assert healthy is False
    assert message.startswith("ComponentDefinition vela-system/s: ") and reason in message
    assert "\n" not in message and "Traceback" not in message


def test_a_message_that_cannot_be_said_names_why() -> None:
    check = custom_status.Check("trait", "probe", "TraitDefinition vela-system/probe", "",
                                "message: 42", {}, {})
    assert judged(check, None, {})[2] == \
        "TraitDefinition vela-system/probe: customStatus: message is not a concrete string"


# -- attacks: what a status may do ------------------------------------------------------------


@pytest.mark.parametrize("policy", [
    # unbounded work: a comprehension over a tenant-sized list, thrice nested
    "n: [for i, _ in context.output.spec.items {i}]\n"
    "x: [for a in n for b in n for c in n {a + b + c}]\nisHealth: len(x) > 0",
    # self-reference: a cycle, not a loop
    "a: b + 1\nb: a + 1\nisHealth: a > 0",
    # a string grown without bound
    'isHealth: len(strings.Repeat("x", 100000000)) > 0\nimport "strings"',
])
def test_a_hostile_policy_is_stopped_by_the_budget(policy: str) -> None:
    """Attack: a healthPolicy (or a live object it reads) that loops or allocates is
    stopped by the evaluator's budget: unhealthy with a one-line reason, in bounded time."""
    output = {"kind": "Deployment", "spec": {"items": list(range(300))}}
    check = custom_status.Check("component", "c", "ComponentDefinition vela-system/c",
                                policy, "", {}, {})
    healthy, message, _ = judged(check, output, {})
    assert healthy is False and message.startswith("ComponentDefinition vela-system/c: ")


@pytest.mark.parametrize("policy", [
    'import "tool/file"\nisHealth: true',
    'import "tool/exec"\nisHealth: true',
    'import "tool/http"\nisHealth: true',
    'import "os"\nisHealth: true',
])
def test_a_policy_cannot_read_outside_its_context(policy: str) -> None:
    """Attack: a status that imports CUE's I/O packages (files, commands, the network, the
    environment) is refused before anything is evaluated."""
    check = custom_status.Check("component", "c", "ComponentDefinition vela-system/c",
                                policy, "", {}, {})
    healthy, message, _ = judged(check, {"kind": "Deployment"}, {})
    assert healthy is False and "is not supported" in message


# -- KubeVela's own (the catalog's fluxcd helm), when the mirror is here -----------------------

CATALOG = Path("/work/.mirror/kubevela+catalog/repo")


def fluxcd_helm_status() -> JSON:
    if not CATALOG.exists():
        pytest.skip("the KubeVela catalog mirror is not here")
    from federation.applications.definition_files import from_cue_file
    text = subprocess.run(["git", "-C", str(CATALOG), "show",
                           "HEAD:addons/fluxcd/definitions/helm-release-def.cue"],
                          capture_output=True, text=True, check=True).stdout
    status: JSON = from_cue_file(text, "helm-release-def.cue")["spec"]["status"]
    return status


def test_the_fluxcd_helm_status_judges_a_helm_release() -> None:
    """The addon's ``helm`` (26 of the corpus' Applications): healthy once the release's
    first condition is True; its message says what the repository and the release do."""
    status = fluxcd_helm_status()
    check = custom_status.Check("component", "helm", "ComponentDefinition vela-system/helm",
                                status["healthPolicy"], status["customStatus"], {}, {})
    release = {"apiVersion": "helm.toolkit.fluxcd.io/v2beta1", "kind": "HelmRelease"}
    assert judged(check, release, {}) == (
        False, "ComponentDefinition vela-system/helm: healthPolicy: isHealth: 1:29: "
        "field 'status' not found", "Use existed repository, Creating helm release")
    done = {**release, "status": {"conditions": [
        {"type": "Ready", "status": "True", "message": "Release reconciliation succeeded"}]}}
    repo = {"kind": "HelmRepository", "status": {"conditions": [{"type": "Ready"}]}}
    assert judged(check, done, {"repo": repo}) == (
        True, "", "Fetch repository successfully, Create helm release successfully")


# -- fedctl app dry-run -----------------------------------------------------------------------


def test_dry_run_accepts_a_status_and_says_health_is_unknown_offline(tmp_path: Path) -> None:
    docs = [*server_definitions(), {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "shop", "namespace": "shop"}, "spec": server_app()}]
    (tmp_path / "app.yaml").write_text(yaml.safe_dump_all(docs))
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(tmp_path / "app.yaml"),
                                      "--target-namespaces", "shop"])
    assert result.exit_code == 0, result.output
    assert ("#   component api: ComponentDefinition vela-system/server, TraitDefinition "
            "vela-system/probe: health unknown offline") in result.output
    assert "trait.oam.dev/resource: web" in result.output
