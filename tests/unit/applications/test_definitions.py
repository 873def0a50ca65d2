"""User definitions: loading, the system namespaces, rendering through CUE, patch strategies.

The definitions of ``tests/fixtures/kubevela/definitions.yaml`` are KubeVela's own example
(docs/examples/application/template.yaml, Apache-2.0): rendered here exactly as written.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.applications import compile as compile_
from federation.applications import cue_worker, definitions, model, revision, scope
from federation.placement import clusters as clusters_

JSON = dict[str, Any]
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "kubevela" / "definitions.yaml"
FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2")]


def docs_definitions() -> list[JSON]:
    return [d for d in yaml.safe_load_all(FIXTURE.read_text()) if d]


def definition(kind: str, name: str, template: str, namespace: str = "vela-system",
               **spec: Any) -> JSON:
    """A definition document (``spec``: more fields of its spec)."""
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"schematic": {"cue": {"template": template}}, **spec}}


def application(components: list[JSON], namespace: str = "shop") -> JSON:
    return {"components": components,
            "policies": [{"name": "two", "type": "topology",
                          "properties": {"clusters": ["member1", "member2"]}}]}


def compile_with(spec: JSON, docs: list[JSON], namespace: str = "shop",
                 grant: scope.Grant | None = None) -> compile_.Compiled:
    catalog, _ = definitions.catalog(docs)
    user = definitions.Rendering(catalog, definitions.AppInfo("docs", 3),
                                 cue_worker.inline)
    return compile_.compile_app(spec, "docs", namespace, {}, FLEET, None, grant, user)


def objects(compiled: compile_.Compiled, cluster: str = "member1") -> list[JSON]:
    return [dict(o) for o in compiled.targets["deploy"].clusters[cluster]]


DOCS_APP = [{"name": "backend", "type": "docs-worker",
             "properties": {"image": "busybox", "cmd": ["sleep", "1000"]},
             "traits": [{"type": "docs-sidecar",
                         "properties": {"name": "logger", "image": "busybox"}},
                        {"type": "kservice", "properties": {"http": {"web": 80}}}]}]


# -- KubeVela's own example -------------------------------------------------------------------


def test_kubevelas_example_definitions_render_a_workload_a_sidecar_and_a_service() -> None:
    """The worker renders the Deployment, the sidecar trait merges a container by name
    (``+patchKey=name``), kservice patches a label and adds a Service; every object has
    KubeVela's labels and the Application's namespace, in every member."""
    compiled = compile_with(application(DOCS_APP), docs_definitions())
    for cluster in ("member1", "member2"):
        deployment, service = objects(compiled, cluster)
        assert deployment["kind"] == "Deployment"
        assert deployment["metadata"]["name"] == "backend"
        assert deployment["metadata"]["namespace"] == "shop"
        assert deployment["metadata"]["labels"] == {"app.oam.dev/name": "docs",
                                                    "app.oam.dev/component": "backend"}
        pod = deployment["spec"]["template"]
        assert [c["name"] for c in pod["spec"]["containers"]] == ["backend", "logger"]
        assert pod["spec"]["containers"][0]["command"] == ["sleep", "1000"]
        assert pod["metadata"]["labels"]["app"] == "backend"
        assert service["kind"] == "Service"
        assert service["spec"]["ports"] == [{"port": 80, "targetPort": 80}]
        assert "x-federation-output-name" not in service


def test_a_missing_parameter_is_refused_in_one_line_naming_the_definition() -> None:
    spec = application([{"name": "backend", "type": "docs-worker", "properties": {}}])
    with pytest.raises(model.AppError) as raised:
        compile_with(spec, docs_definitions())
    message = str(raised.value)
    assert message.startswith("spec.components[0].type: ComponentDefinition "
                              "vela-system/docs-worker: ")
    assert "\n" not in message


def test_a_yaml_date_in_the_properties_is_a_string_as_from_the_api_server() -> None:
    """The CLI reads YAML, where ``2020-01-01`` is a date: evaluated as the string the
    API server would store, not a traceback."""
    import datetime
    template = 'output: {apiVersion: "v1", kind: "ConfigMap", data: when: parameter.when}\n' \
        "parameter: when: string"
    docs = [definition("ComponentDefinition", "c", template)]
    spec = application([{"name": "x", "type": "c",
                         "properties": {"when": datetime.date(2020, 1, 1)}}])
    assert objects(compile_with(spec, docs))[0]["data"] == {"when": "2020-01-01"}


def test_the_context_carries_kubevelas_names() -> None:
    template = """
output: {
  apiVersion: "v1"
  kind: "ConfigMap"
  data: {
    name: context.name, namespace: context.namespace, app: context.appName
    revision: context.appRevision, number: "\\(context.appRevisionNum)"
    type: context.componentType
  }
}
"""
    docs = [definition("ComponentDefinition", "ctx", template)]
    compiled = compile_with(application([{"name": "c", "type": "ctx"}]), docs)
    assert objects(compiled)[0]["data"] == {
        "name": "c", "namespace": "shop", "app": "docs", "revision": "docs-v3",
        "number": "3", "type": "ctx"}


# -- which definitions count ------------------------------------------------------------------


def test_a_tenants_definition_in_its_own_namespace_is_not_used() -> None:
    """Attack: a tenant writes a ComponentDefinition in its namespace (or one named like a
    built-in, to replace it for everyone): never used; an Application naming it is refused
    naming the type and where the definition is."""
    template = 'output: {apiVersion: "v1", kind: "ConfigMap", data: a: "evil"}'
    docs = [definition("ComponentDefinition", "mine", template, namespace="shop"),
            definition("ComponentDefinition", "webservice", template, namespace="shop")]
    with pytest.raises(model.AppError, match=r"spec.components\[0\].type: 'mine': the "
                       r"ComponentDefinition 'mine' in namespace shop is not used"):
        compile_with(application([{"name": "c", "type": "mine"}]), docs)
    compiled = compile_with(application([{"name": "web", "type": "webservice",
                                          "properties": {"image": "web:1"}}]), docs)
    assert objects(compiled)[0]["kind"] == "Deployment"  # the built-in, not the tenant's


def test_a_system_definition_named_like_a_built_in_replaces_it() -> None:
    """As in KubeVela, whose built-ins are definitions in vela-system."""
    template = 'output: {apiVersion: "v1", kind: "ConfigMap", data: image: parameter.image}\n' \
        'parameter: image: string'
    docs = [definition("ComponentDefinition", "webservice", template)]
    compiled = compile_with(application([{"name": "web", "type": "webservice",
                                          "properties": {"image": "web:1"}}]), docs)
    assert objects(compiled)[0]["kind"] == "ConfigMap"
    assert objects(compiled)[0]["data"] == {"image": "web:1"}


@pytest.mark.parametrize(("spec", "field"), [
    ({"status": {"details": "x: 1"}}, "spec.status.details"),
    ({"status": {"healthPolicy": 1}}, "spec.status.healthPolicy: a CUE text"),
    ({"status": "isHealth: true"}, "spec.status: a map"),
    ({"revisionLabel": "rev"}, "spec.revisionLabel"),
    ({"childResourceKinds": [{"apiVersion": "v1", "kind": "Pod"}]}, "spec.childResourceKinds"),
    ({"version": "one"}, "spec.version: a semantic version"),
])
def test_fields_not_honoured_are_refused_by_name(spec: JSON, field: str) -> None:
    doc = definition("ComponentDefinition", "c", 'output: {apiVersion: "v1", kind: "Secret"}',
                     **spec)
    with pytest.raises(definitions.DefinitionError, match=field.replace(".", r"\.")):
        definitions.load(doc)
    _, reports = definitions.catalog([doc])
    assert reports[0]["reason"] == "Refused"
    with pytest.raises(model.AppError, match=field.replace(".", r"\.")):
        compile_with(application([{"name": "x", "type": "c"}]), [doc])


def test_a_versioned_type_compiled_without_its_revisions_is_refused() -> None:
    """The compile alone knows no revision (``definition_revisions.resolve`` does)."""
    with pytest.raises(model.AppError, match=r"'docs-worker@v1': a definition revision "
                                             r"\(type@version\) is not known here"):
        compile_with(application([{"name": "x", "type": "docs-worker@v1"}]),
                     docs_definitions())


def test_helm_kube_and_terraform_schematics_are_refused_by_name() -> None:
    for schematic in ("helm", "kube", "terraform"):
        doc = definition("ComponentDefinition", "c", "x")
        doc["spec"]["schematic"] = {schematic: {}}
        with pytest.raises(definitions.DefinitionError, match=f"spec.schematic.{schematic}"):
            definitions.load(doc)


def test_policy_and_step_definitions_are_served_but_not_evaluated() -> None:
    doc = definition("PolicyDefinition", "mine", "parameter: {}")
    spec = application([{"name": "web", "type": "webservice", "properties": {"image": "a"}}])
    spec["policies"].append({"name": "p", "type": "mine"})
    with pytest.raises(model.AppError, match="PolicyDefinition vela-system/mine: this "
                       "control plane evaluates only ComponentDefinitions"):
        compile_with(spec, [doc])


# -- what a definition renders meets the built-ins' checks -----------------------------------


def test_an_output_into_another_namespace_needs_the_grant() -> None:
    """Attack: a template (or a parameter it passes through) sets metadata.namespace."""
    template = 'output: {apiVersion: "v1", kind: "ConfigMap", metadata: namespace: ' \
        'parameter.ns}\nparameter: ns: string'
    docs = [definition("ComponentDefinition", "c", template)]
    spec = application([{"name": "x", "type": "c", "properties": {"ns": "bank"}}])
    with pytest.raises(model.AppError, match="bank"):
        compile_with(spec, docs)


def test_a_cluster_scoped_output_is_refused() -> None:
    template = 'output: {apiVersion: "rbac.authorization.k8s.io/v1", kind: ' \
        '"ClusterRoleBinding", roleRef: {}}'
    docs = [definition("ComponentDefinition", "c", template)]
    with pytest.raises(model.AppError, match="cluster-scoped"):
        compile_with(application([{"name": "x", "type": "c"}]), docs)


def test_a_hostile_parameter_meets_the_budget() -> None:
    """Attack: a parameter that makes the template build a huge value (a comprehension over
    a tenant-sized list, nested): the evaluation stops within its budget, one line."""
    template = """
parameter: n: [...int]
output: {
  apiVersion: "v1"
  kind: "ConfigMap"
  data: {for a in parameter.n for b in parameter.n for c in parameter.n {"\\(a)-\\(b)-\\(c)": "x"}}
}
"""
    docs = [definition("ComponentDefinition", "c", template)]
    spec = application([{"name": "x", "type": "c",
                         "properties": {"n": list(range(300))}}])
    with pytest.raises(model.AppError, match="budget") as raised:
        compile_with(spec, docs)
    assert "\n" not in str(raised.value)


# -- traits -----------------------------------------------------------------------------------


def trait_docs(patch: str, applies: list[str] | None = None) -> list[JSON]:
    extra: JSON = {"appliesToWorkloads": applies} if applies else {}
    return [*docs_definitions(), definition("TraitDefinition", "t", patch, **extra)]


def backend(*traits: JSON) -> JSON:
    return application([{"name": "backend", "type": "docs-worker",
                         "properties": {"image": "busybox"}, "traits": list(traits)}])


def test_conflicting_scalars_are_an_error_as_in_cue() -> None:
    docs = trait_docs('patch: spec: template: spec: containers: [{name: "other"}]')
    with pytest.raises(model.AppError, match=r"containers\.name: conflicts"):
        compile_with(backend({"type": "t"}), docs)


def test_retain_keys_and_replace_override() -> None:
    docs = trait_docs('patch: spec: {\n  // +patchStrategy=retainKeys\n  selector: '
                      'matchLabels: x: "y"\n}')
    deployment = objects(compile_with(backend({"type": "t"}), docs))[0]
    assert deployment["spec"]["selector"] == {"matchLabels": {"x": "y"}}
    docs = trait_docs('patch: spec: template: spec: {\n  // +patchStrategy=replace\n'
                      '  containers: [{name: "only", image: "x"}]\n}')
    deployment = objects(compile_with(backend({"type": "t"}), docs))[0]
    assert deployment["spec"]["template"]["spec"]["containers"] == [
        {"name": "only", "image": "x"}]


def test_json_merge_patch_and_json_patch() -> None:
    docs = trait_docs('// +patchStrategy=jsonMergePatch\npatch: spec: replicas: 4')
    assert objects(compile_with(backend({"type": "t"}), docs))[0]["spec"]["replicas"] == 4
    docs = trait_docs('// +patchStrategy=jsonPatch\npatch: operations: [{op: "add", '
                      'path: "/spec/replicas", value: 5}]')
    assert objects(compile_with(backend({"type": "t"}), docs))[0]["spec"]["replicas"] == 5


def test_applies_to_workloads_is_honoured() -> None:
    docs = trait_docs("patch: {}", applies=["statefulsets.apps"])
    with pytest.raises(model.AppError, match=r"applies to statefulsets\.apps"):
        compile_with(backend({"type": "t"}), docs)
    for name in ("deployments.apps", "Deployment.apps", "Deployment", "docs-worker"):
        compile_with(backend({"type": "t"}), trait_docs("patch: {}", applies=[name]))


def test_a_user_trait_on_a_built_in_component() -> None:
    docs = trait_docs("patch: spec: template: metadata: labels: traced: \"yes\"")
    spec = application([{"name": "web", "type": "webservice", "properties": {"image": "a"},
                         "traits": [{"type": "t"}]}])
    deployment = objects(compile_with(spec, docs))[0]
    assert deployment["spec"]["template"]["metadata"]["labels"]["traced"] == "yes"


def test_the_trait_sees_the_components_output_as_context_output() -> None:
    docs = trait_docs('patch: metadata: annotations: image: '
                      'context.output.spec.template.spec.containers[0].image')
    deployment = objects(compile_with(backend({"type": "t"}), docs))[0]
    assert deployment["metadata"]["annotations"] == {"image": "busybox"}


# -- revisions --------------------------------------------------------------------------------


def test_the_definitions_used_are_part_of_the_revision() -> None:
    """Changing a definition the Application uses changes its revision hash; changing one
    it does not use, or an Application of built-ins, does not."""
    docs = docs_definitions()
    spec = application(DOCS_APP)
    catalog, _ = definitions.catalog(docs)
    used = catalog.used(spec)
    assert set(used) == {"ComponentDefinition/docs-worker", "TraitDefinition/docs-sidecar",
                         "TraitDefinition/kservice"}
    before = revision.content_hash(revision.content(spec, {}, used))
    changed = copy.deepcopy(docs)
    changed[0]["spec"]["schematic"]["cue"]["template"] += "\n// a comment\n"
    after_catalog, _ = definitions.catalog(changed)
    after = revision.content_hash(revision.content(spec, {}, after_catalog.used(spec)))
    assert before != after
    builtin = application([{"name": "web", "type": "webservice", "properties": {"image": "a"}}])
    assert catalog.used(builtin) == {}
    assert revision.content(builtin, {}, {}) == revision.content(builtin, {})


def test_a_revisions_snapshot_renders_as_it_was() -> None:
    catalog, _ = definitions.catalog(docs_definitions())
    spec = application(DOCS_APP)
    again = definitions.from_snapshot(catalog.used(spec))
    user = definitions.Rendering(again, definitions.AppInfo("docs", 1), cue_worker.inline)
    compiled = compile_.compile_app(spec, "docs", "shop", {}, FLEET, None, None, user)
    assert [o["kind"] for o in objects(compiled)] == ["Deployment", "Service"]


@pytest.mark.parametrize("properties", [
    {}, {"image": None}, {"image": 3}, {"image": {"a": 1}}, {"image": "x", "cmd": "ls"},
    {"image": "x", "cmd": [[1]]}, {"image": "x", "extra": True}, {"image": "x" * 10_000},
    {"image": "x", "cmd": [2**80]}, {"image": float("nan")}, {"image": "\u0000\n"},
])
def test_any_properties_render_or_are_refused_in_one_line(properties: JSON) -> None:
    """Tenant properties of any shape: a render, or an AppError of one line; never
    another exception."""
    spec = application([{"name": "x", "type": "docs-worker", "properties": properties}])
    try:
        compile_with(spec, docs_definitions())
    except model.AppError as exc:
        assert "\n" not in str(exc)
