"""vela-core's ``replication`` policy: KubeVela's own example rendered as KubeVela renders
it, the refusals, and what a tenant's keys cannot do (move or overwrite other objects).

``tests/fixtures/kubevela/replication.yaml`` re-types KubeVela's example
(references/docgen/def-doc/policy/replication.eg.md, Apache-2.0): a ComponentDefinition
naming its objects with ``context.replicaKey`` and the docs' Application.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from federation.applications import compile as compile_
from federation.applications import cue_worker, definitions, model
from federation.cli import cli
from federation.placement import clusters as clusters_

JSON = dict[str, Any]
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "kubevela" / "replication.yaml"
FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2")]


def fixture() -> tuple[JSON, JSON]:
    """The definition and the Application's spec (a fresh copy each time)."""
    definition, application = [d for d in yaml.safe_load_all(FIXTURE.read_text()) if d]
    return definition, copy.deepcopy(application["spec"])


def compile_with(spec: JSON, docs: list[JSON] | None = None,
                 evaluate: definitions.Evaluate = cue_worker.inline) -> compile_.Compiled:
    catalog, _ = definitions.catalog(docs if docs is not None else [fixture()[0]])
    user = definitions.Rendering(catalog, definitions.AppInfo("app-replication-policy", 1,
                                                              components=tuple(
                                                                  spec["components"])),
                                 evaluate)
    return compile_.compile_app(spec, "app-replication-policy", "default", {}, FLEET,
                                "member1", None, user)


def names(compiled: compile_.Compiled, step: str, cluster: str = "member1"
          ) -> list[tuple[str, str]]:
    return [(o["kind"], o["metadata"]["name"]) for o in compiled.targets[step].clusters[cluster]]


def refusal(spec: JSON, docs: list[JSON] | None = None) -> str:
    with pytest.raises(model.AppError) as caught:
        compile_with(spec, docs)
    return str(caught.value)


def replication_policy(spec: JSON) -> JSON:
    return next(p for p in spec["policies"] if p["type"] == "replication")


# -- KubeVela's example -----------------------------------------------------------------------


def test_the_docs_example_renders_two_deployments_and_two_services() -> None:
    """As the docs show (``kubectl get deploy``: hello-rep-beijing, hello-rep-hangzhou, and
    the Services of the same names), each copy with ``context.replicaKey`` in its names and
    selectors, and KubeVela's ``app.oam.dev/replicaKey`` label."""
    compiled = compile_with(fixture()[1])
    assert names(compiled, "deploy-with-rep") == [
        ("Deployment", "hello-rep-beijing"), ("Service", "hello-rep-beijing"),
        ("Deployment", "hello-rep-hangzhou"), ("Service", "hello-rep-hangzhou")]
    assert list(compiled.targets["deploy-with-rep"].clusters) == ["member1"]
    for obj in compiled.targets["deploy-with-rep"].clusters["member1"]:
        key = obj["metadata"]["name"].removeprefix("hello-rep-")
        assert obj["metadata"]["labels"]["app.oam.dev/replicaKey"] == key
        assert obj["metadata"]["labels"]["app.oam.dev/component"] == "hello-rep"
        assert obj["metadata"]["namespace"] == "default"
        selector = obj["spec"]["selector"]
        selector = selector.get("matchLabels", selector)
        assert selector == {"app.oam.dev/component": "hello-rep",
                            "app.oam.dev/replicaKey": key}
    assert compiled.targets["deploy-with-rep"].replicas == (
        "policy replication-default: replicates hello-rep by keys beijing, hangzhou",)


def test_kubevelas_e2e_case_replicates_in_one_step_and_not_in_the_other() -> None:
    """KubeVela's test/e2e-test/testdata/app/app_replication.yaml: the second deploy step,
    without the replication policy, renders the plain webservice once, with no key."""
    spec = fixture()[1]
    spec["components"].append({"name": "hello-no-rep", "type": "webservice",
                               "properties": {"image": "crccheck/hello-world",
                                              "ports": [{"port": 80, "expose": True}]}})
    spec["policies"].insert(1, {"name": "comp-not-replicate", "type": "override",
                                "properties": {"selector": ["hello-no-rep"]}})
    spec["workflow"]["steps"].append(
        {"name": "deploy-without-rep", "type": "deploy",
         "properties": {"policies": ["comp-not-replicate", "target-default"]}})
    compiled = compile_with(spec)
    assert len(names(compiled, "deploy-with-rep")) == 4
    plain = compiled.targets["deploy-without-rep"].clusters["member1"]
    assert [(o["kind"], o["metadata"]["name"]) for o in plain] == [
        ("Deployment", "hello-no-rep"), ("Service", "hello-no-rep")]
    assert all("app.oam.dev/replicaKey" not in o["metadata"]["labels"] for o in plain)
    assert compiled.targets["deploy-without-rep"].replicas == ()


def test_each_cluster_of_the_topology_gets_every_copy() -> None:
    spec = fixture()[1]
    spec["policies"][1]["properties"] = {"clusters": ["member1", "member2"]}
    compiled = compile_with(spec)
    assert names(compiled, "deploy-with-rep", "member1") == \
        names(compiled, "deploy-with-rep", "member2")


def test_two_policies_each_copy_the_component_as_kubevela_does() -> None:
    """Each replication policy selects among the components as the overrides left them
    (not among the other policy's copies); the same key in both is one object twice."""
    spec = fixture()[1]
    replication_policy(spec)["properties"]["keys"] = ["beijing"]
    spec["policies"].append({"name": "more", "type": "replication",
                             "properties": {"keys": ["shanghai"], "selector": ["hello-rep"]}})
    spec["workflow"]["steps"][0]["properties"]["policies"].append("more")
    assert [n for _, n in names(compile_with(spec), "deploy-with-rep")] == [
        "hello-rep-beijing", "hello-rep-beijing", "hello-rep-shanghai", "hello-rep-shanghai"]
    spec["policies"][-1]["properties"]["keys"] = ["beijing"]
    assert "which spec.components[0] (key 'beijing' of policy replication-default) " \
        "renders too" in refusal(spec)


def test_the_dry_run_shows_the_replicas() -> None:
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(FIXTURE),
                                      "--local-cluster", "member1"])
    assert result.exit_code == 0, result.output
    assert "#   policy replication-default: replicates hello-rep by keys beijing, " \
        "hangzhou" in result.output
    for name in ("hello-rep-beijing", "hello-rep-hangzhou"):
        assert result.output.count(f"name: {name}\n") == 2  # its Deployment and Service


# -- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "why"), [
    ("Beijing", "is not a DNS label"),
    ("a.b", "is not a DNS label"),
    ("../kube-system", "is not a DNS label"),
    ("-a", "is not a DNS label"),
    ("", "is not a DNS label"),
    ("x" * 64, "is not a DNS label"),
])
def test_a_key_that_is_no_dns_label_is_refused_by_name(key: str, why: str) -> None:
    spec = fixture()[1]
    replication_policy(spec)["properties"]["keys"] = ["beijing", key]
    assert refusal(spec).startswith(
        "policy replication-default properties.keys[1]: ")
    assert why in refusal(spec)


@pytest.mark.parametrize(("properties", "message"), [
    ({"keys": ["a", "a"], "selector": ["hello-rep"]}, "properties.keys[1]: 'a' is given twice"),
    ({"keys": [], "selector": ["hello-rep"]}, "properties.keys: no key"),
    ({"selector": ["hello-rep"]}, "properties.keys: no key"),
    ({"keys": "a", "selector": ["hello-rep"]}, "properties.keys: a list of strings"),
    ({"keys": [1], "selector": ["hello-rep"]}, "properties.keys: a list of strings"),
    ({"keys": ["a"], "selector": "hello-rep"}, "properties.selector: a list of strings"),
    ({"keys": ["a"]}, "properties.selector: selects no component of this deploy step"),
    ({"keys": ["a"], "selector": ["nothing"]},
     "properties.selector: selects no component of this deploy step"),
    ({"keys": ["a"], "selector": ["hello-rep"], "clusters": ["x"]},
     "properties.clusters: unknown field"),
])
def test_bad_properties_are_refused_by_name(properties: JSON, message: str) -> None:
    spec = fixture()[1]
    replication_policy(spec)["properties"] = properties
    assert f"policy replication-default {message}" in refusal(spec)


def test_a_replication_policy_no_deploy_step_names_is_refused() -> None:
    """KubeVela's default deploy step ignores it: here it is refused, not ignored."""
    spec = fixture()[1]
    del spec["workflow"]
    assert refusal(spec) == (
        "spec.policies[2]: replication policy replication-default is named by no deploy "
        "step's policies; it replicates only in a deploy step that names it")


def test_too_many_keys_are_refused_before_any_render() -> None:
    """The copies count in the render budget (MAX_RENDERED) and are counted before the
    first is rendered: a long key list costs no evaluation."""
    spec = fixture()[1]
    replication_policy(spec)["properties"]["keys"] = [
        f"k{i}" for i in range(model.MAX_RENDERED + 1)]
    calls: list[JSON] = []

    def counting(request: JSON) -> JSON | None:
        calls.append(request)
        return cue_worker.inline(request)

    with pytest.raises(model.AppError) as caught:
        compile_with(spec, evaluate=counting)
    assert f"replicates 1 component(s) by {model.MAX_RENDERED + 1} keys" in str(caught.value)
    assert calls == []


def test_copies_spend_the_render_budget() -> None:
    """250 keys pass the count (one render each at least) but render 500 objects with
    their Services; the budget's own refusal stops them."""
    spec = fixture()[1]
    replication_policy(spec)["properties"]["keys"] = [f"k{i}" for i in range(251)]
    assert "render more than 500 objects" in refusal(spec)


# -- attacks: a key cannot move or overwrite anything -----------------------------------------


def test_a_key_colliding_with_another_components_object_is_refused_naming_both() -> None:
    """Attack: replicate ``hello`` by key ``rep`` so that its copy is named
    ``hello-rep``, the name of another component's Deployment in the same cluster, to
    overwrite it. Refused, naming both renders, instead of one silently winning."""
    spec = fixture()[1]
    spec["components"] = [
        {"name": "hello-rep", "type": "webservice", "properties": {"image": "nginx"}},
        {"name": "hello", "type": "replica-webservice",
         "properties": {"image": "evil", "ports": []}}]
    spec["policies"][0]["properties"]["selector"] = ["hello-rep", "hello"]
    replication_policy(spec)["properties"] = {"keys": ["rep"], "selector": ["hello"]}
    assert refusal(spec) == (
        "spec.components[1] (key 'rep' of policy replication-default): renders Deployment "
        "default/hello-rep in cluster member1, which spec.components[0] renders too; two "
        "renders of one object in a cluster are refused")


def test_a_definition_ignoring_the_key_cannot_be_replicated_into_one_cluster() -> None:
    """A built-in webservice names its objects after the component alone: two keys would
    write the same Deployment twice (the last one silently winning in KubeVela)."""
    spec = fixture()[1]
    spec["components"][0]["type"] = "webservice"
    message = refusal(spec)
    assert message.startswith("spec.components[0] (key 'hangzhou' of policy "
                              "replication-default): renders Deployment default/hello-rep in "
                              "cluster member1, which spec.components[0] (key 'beijing' of "
                              "policy replication-default) renders too")


def test_a_key_in_the_namespace_still_needs_the_grant() -> None:
    """Attack: a definition putting the key into ``metadata.namespace`` to write into
    another tenant's namespace: the namespace grant judges each copy's objects."""
    definition = fixture()[0]
    template = definition["spec"]["schematic"]["cue"]["template"]
    definition["spec"]["schematic"]["cue"]["template"] = template.replace(
        'kind:       "Deployment"\n  metadata: {\n',
        'kind:       "Deployment"\n  metadata: {\n    namespace: context.replicaKey\n', 1)
    assert definition["spec"]["schematic"]["cue"]["template"] != template
    spec = fixture()[1]
    replication_policy(spec)["properties"]["keys"] = ["team-b"]
    message = refusal(spec, [definition])
    assert "'team-b' is not this Application's namespace (default)" in message, message


def test_no_spec_field_sets_a_replica_key() -> None:
    """The key is the policy's alone: a component cannot carry one in the spec."""
    spec = fixture()[1]
    spec["components"][0]["replicaKey"] = "beijing"
    assert "spec.components[0].replicaKey" in refusal(spec)
