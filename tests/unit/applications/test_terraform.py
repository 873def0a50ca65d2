"""Terraform components: a ComponentDefinition's ``spec.schematic.terraform`` rendered as
vela-core renders it (a terraform-controller Configuration), and the references a
tenant's properties may not make. The first cases re-type vela-core's own
``TestGenerateTerraformConfigurationWorkload`` (pkg/appfile/appfile_test.go)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from federation.applications import compile as compile_
from federation.applications import cue_worker, definitions, model, terraform
from federation.cli import cli
from federation.placement import clusters as clusters_

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name="member1")]
RDS_MODULE = "https://github.com/kubevela-contrib/terraform-modules.git"


def definition(module: JSON, annotations: dict[str, str] | None = None,
               name: str = "rds") -> JSON:
    meta: JSON = {"name": name, "namespace": "vela-system"}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "ComponentDefinition",
            "metadata": meta,
            "spec": {"workload": {"definition": {"apiVersion": "terraform.core.oam.dev/v1beta1",
                                                 "kind": "Configuration"}},
                     "schematic": {"terraform": module}}}


def remote_rds(**extra: Any) -> JSON:
    return definition({"configuration": RDS_MODULE, "type": "remote", "path": "alibaba/rds",
                       **extra}, {"definition.oam.dev/description": "RDS"})


def compiled(docs: list[JSON], properties: JSON, namespace: str = "shop",
             traits: list[JSON] | None = None) -> list[JSON]:
    catalog, reports = definitions.catalog(docs)
    assert reports == []
    user = definitions.Rendering(catalog, definitions.AppInfo("app"), cue_worker.inline)
    component: JSON = {"name": "db", "type": str(docs[0]["metadata"]["name"]),
                       "properties": properties}
    if traits:
        component["traits"] = traits
    spec = {"components": [component], "policies": [
        {"name": "one", "type": "topology", "properties": {"clusters": ["member1"]}}]}
    result = compile_.compile_app(spec, "app", namespace, {}, FLEET, None, None, user)
    return list(result.targets["deploy"].clusters["member1"])


def configuration(docs: list[JSON], properties: JSON, namespace: str = "shop") -> JSON:
    [obj] = compiled(docs, properties, namespace)
    return obj


# -- vela-core's cases --------------------------------------------------------------------------


def test_valid_hcl_workload() -> None:
    """vela-core's "valid hcl workload": the HCL, the variables without the reserved key,
    the connection Secret as given."""
    got = configuration([definition({"configuration": "abc", "writeConnectionSecretToRef": {
        "name": "oss", "namespace": "default"}})], {
            "acl": "private", "writeConnectionSecretToRef": {"name": "oss",
                                                             "namespace": "default"}},
        namespace="default")
    assert got["apiVersion"] == "terraform.core.oam.dev/v1beta2"
    assert got["kind"] == "Configuration"
    assert got["metadata"]["name"] == "db" and got["metadata"]["namespace"] == "default"
    assert got["spec"] == {"hcl": "abc", "variable": {"acl": "private"},
                           "writeConnectionSecretToRef": {"name": "oss",
                                                          "namespace": "default"}}


def test_the_definitions_connection_secret_gets_the_components_namespace() -> None:
    """vela-core's "the namespace of WriteConnectionSecretToReference is empty": filled
    with the component's namespace."""
    got = configuration([definition({"configuration": "abc",
                                     "writeConnectionSecretToRef": {"name": "oss"}})],
                        {"acl": "private"})
    assert got["spec"]["writeConnectionSecretToRef"] == {"name": "oss", "namespace": "shop"}


def test_remote_hcl_workload() -> None:
    got = configuration([definition({"configuration": "https://xxx/a.git",
                                     "type": "remote"})], {"acl": "private"})
    assert got["spec"] == {"remote": "https://xxx/a.git", "variable": {"acl": "private"}}


def test_the_definitions_provider_reference_is_kept_as_written() -> None:
    """vela-core's "has a provider reference": the administrator's providerRef (the
    addons name ``default``'s Providers) is rendered as written, in any namespace."""
    got = configuration([definition({"configuration": "variable \"name\" {}",
                                     "providerRef": {"name": "aws", "namespace": "default"}})],
                        {"acl": "private"})
    assert got["spec"]["providerRef"] == {"name": "aws", "namespace": "default"}


# -- the catalog's addons, as the corpus uses them ----------------------------------------------


def test_a_remote_module_with_its_path_annotations_and_variables() -> None:
    """terraform-alibaba's ``alibaba-rds``: remote and path from the definition, its
    annotations on the Configuration, every property but the reserved ones a variable
    (``deleteResource`` both: vela-core does not take it out)."""
    got = configuration([remote_rds()], {
        "instance_name": "links", "password": "p", "writeConnectionSecretToRef": {
            "name": "db-conn"}, "customRegion": "cn-beijing", "forceDelete": True,
        "deleteResource": False, "providerRef": {"name": "mine", "namespace": "shop"}})
    assert got["metadata"]["annotations"] == {"definition.oam.dev/description": "RDS"}
    assert got["metadata"]["labels"] == {"app.oam.dev/name": "app",
                                         "app.oam.dev/component": "db"}
    assert got["spec"] == {
        "remote": RDS_MODULE, "path": "alibaba/rds",
        "writeConnectionSecretToRef": {"name": "db-conn", "namespace": "shop"},
        "customRegion": "cn-beijing", "forceDelete": True, "deleteResource": False,
        "providerRef": {"name": "mine", "namespace": "shop"},
        "variable": {"instance_name": "links", "password": "p", "deleteResource": False}}


def test_a_property_named_like_metadata_is_only_a_variable() -> None:
    """The Configuration is the component's name in its namespace whatever the properties
    say: ``name`` and ``namespace`` are Terraform variables (alibaba-ask's ``name``)."""
    got = configuration([remote_rds()], {"name": "kube-apiserver", "namespace": "kube-system"})
    assert (got["metadata"]["name"], got["metadata"]["namespace"]) == ("db", "shop")
    assert got["spec"]["variable"] == {"name": "kube-apiserver", "namespace": "kube-system"}


# -- attacks: references into another namespace -------------------------------------------------


@pytest.mark.parametrize(("key", "value", "message"), [
    # vela-core's own "custom params compared to ComponentDefinition" case lets these through
    ("writeConnectionSecretToRef", {"name": "oss2", "namespace": "default2"},
     r"writeConnectionSecretToRef.namespace: 'default2' is not the component namespace"),
    ("providerRef", {"name": "aws2", "namespace": "default2"},
     r"providerRef.namespace: 'default2' is not the component namespace"),
    ("providerRef", {"name": "aws"},
     r"providerRef.namespace \(by default, as the terraform controller reads it\): 'default'"),
    ("gitCredentialsSecretReference", {"name": "deploy-key", "namespace": "bank"},
     r"gitCredentialsSecretReference.namespace: 'bank'"),
    ("terraformCredentialsSecretReference", {"name": "registry"},
     r"terraformCredentialsSecretReference.namespace: required"),
    ("terraformRCConfigMapReference", {"name": "rc", "namespace": "kube-system"},
     r"terraformRCConfigMapReference.namespace: 'kube-system'"),
    ("terraformCredentialsHelperConfigMapReference", {"name": "h", "namespace": "bank"},
     r"terraformCredentialsHelperConfigMapReference.namespace: 'bank'"),
])
def test_a_reference_into_another_namespace_is_refused(key: str, value: JSON,
                                                       message: str) -> None:
    """The connection Secret would be written in, or the Provider's credentials, a Secret
    or a ConfigMap read from, another namespace by the member's terraform controller."""
    with pytest.raises(model.AppError, match=rf"spec.components\[0\].properties.{message}"):
        compiled([remote_rds()], {key: value})


def test_a_provider_reference_without_namespace_in_default_is_kept() -> None:
    """``default`` is the component's own namespace there (KubeVela's force-delete example
    in ``default``)."""
    got = configuration([remote_rds()], {"providerRef": {"name": "xxx-not-existed"}},
                        namespace="default")
    assert got["spec"]["providerRef"] == {"name": "xxx-not-existed"}


@pytest.mark.parametrize("key", ["ProviderRef", "providerref", "WRITECONNECTIONSECRETTOREF",
                                 "gitcredentialssecretreference"])
def test_a_reference_spelt_in_other_letter_case_is_refused(key: str) -> None:
    """Go's unmarshal matches field names in any letter case, so vela-core would set the
    reference from it; refused before it could pass by the namespace check."""
    with pytest.raises(model.AppError, match=rf"properties.{key}: spelt like the "
                       "Configuration field"):
        compiled([remote_rds()], {key: {"name": "aws", "namespace": "kube-system"}})


@pytest.mark.parametrize("key", ["hcl", "remote", "path", "gitRef", "backend", "JobEnv"])
def test_a_property_replacing_the_module_or_its_runner_is_refused(key: str) -> None:
    with pytest.raises(model.AppError, match=rf"properties.{key}: not supported for a "
                       "Terraform component"):
        compiled([remote_rds()], {key: {"x": "y"} if key in ("gitRef", "backend", "JobEnv")
                                  else "provider \"null\" {}"})


def test_traits_on_a_terraform_component_are_refused() -> None:
    """A json-merge-patch could otherwise rewrite the references after they were checked."""
    with pytest.raises(model.AppError, match=r"spec.components\[0\].traits: not supported "
                       "on a Terraform component"):
        compiled([remote_rds()], {}, traits=[{"type": "json-merge-patch", "properties": {
            "spec": {"providerRef": {"name": "aws", "namespace": "kube-system"}}}}])


@pytest.mark.parametrize(("key", "value", "message"), [
    ("deleteResource", "no", "must be true or false"),
    ("customRegion", 3, "must be a string"),
    ("writeConnectionSecretToRef", {"name": "x", "kind": "Secret"}, "a map of name and"),
    ("providerRef", {"namespace": "shop"}, r"providerRef.name: required"),
])
def test_malformed_spec_properties_are_one_line(key: str, value: Any, message: str) -> None:
    with pytest.raises(model.AppError, match=message):
        compiled([remote_rds()], {key: value})


# -- the definition ------------------------------------------------------------------------------


@pytest.mark.parametrize(("module", "message"), [
    ({}, r"terraform.configuration: required"),
    ({"configuration": "x", "type": "json"}, r"terraform.type: hcl or remote"),
    ({"configuration": "x", "path": "a"}, r"terraform.path: a string, with type remote"),
    ({"configuration": "x", "deleteResource": False}, r"terraform.deleteResource: vela-core"),
    ({"configuration": "x", "customRegion": "eu"}, r"terraform.customRegion: vela-core"),
    ({"configuration": "x", "inlineCredentials": True}, r"inlineCredentials: not supported"),
    ({"configuration": "x", "providerRef": {"namespace": "d"}}, r"providerRef.name: required"),
])
def test_a_definitions_module_is_honoured_or_refused_by_name(module: JSON,
                                                             message: str) -> None:
    with pytest.raises(definitions.DefinitionError, match=message):
        definitions.load(definition(module))


def test_the_crds_default_delete_resource_is_accepted() -> None:
    """KubeVela's CRD defaults ``deleteResource: true`` in every stored definition."""
    loaded = definitions.load(definition({"configuration": "x", "deleteResource": True}))
    assert loaded.module is not None and loaded.module.source == "hcl"


def test_terraform_only_alone_and_only_for_components() -> None:
    doc = definition({"configuration": "x"})
    doc["spec"]["schematic"]["cue"] = {"template": "output: {}"}
    with pytest.raises(definitions.DefinitionError, match="only alone, in a Component"):
        definitions.load(doc)
    trait = {**definition({"configuration": "x"}), "kind": "TraitDefinition"}
    trait["spec"] = {"schematic": {"terraform": {"configuration": "x"}}}
    with pytest.raises(definitions.DefinitionError, match="only alone, in a Component"):
        definitions.load(trait)
    status = definition({"configuration": "x"})
    status["spec"]["status"] = {"healthPolicy": "isHealth: true"}
    with pytest.raises(definitions.DefinitionError, match=r"spec.status: not with a Terraform"):
        definitions.load(status)


def test_a_revisions_snapshot_keeps_the_annotations() -> None:
    """A rollback renders the Configuration with the definition's annotations as they were."""
    catalog, _ = definitions.catalog([remote_rds()])
    snapshot = catalog.used({"components": [{"name": "db", "type": "rds"}]})
    again = definitions.from_snapshot(snapshot)
    user = definitions.Rendering(again, definitions.AppInfo("app"), cue_worker.inline)
    spec = {"components": [{"name": "db", "type": "rds", "properties": {}}]}
    result = compile_.compile_app(spec, "app", "shop", {}, FLEET, "member1", None, user)
    [obj] = result.targets["deploy"].clusters["member1"]
    assert obj["metadata"]["annotations"] == {"definition.oam.dev/description": "RDS"}


# -- health --------------------------------------------------------------------------------------


def live(state: str | None, generation: int = 2, observed: int = 2,
         message: str = "") -> JSON:
    status: JSON = {"observedGeneration": observed,
                    "apply": {"state": state, "message": message} if state else {}}
    return {"metadata": {"generation": generation}, "status": status}


def test_health_is_kubevelas_set_status() -> None:
    """Available at the observed generation is healthy; anything else waits, saying the
    state and never the controller's message (Terraform output may quote a variable)."""
    assert terraform.health("c", live("Available")) == ("healthy", "")
    assert terraform.health("c", live("Available", observed=0)) == ("healthy", "")
    assert terraform.health("c", live("Available", generation=3)) == \
        ("progressing", "c: generation not observed yet")
    verdict = terraform.health("c", live("TFApplyError", message="password=U34rfwef"))
    assert verdict == ("progressing", "c: state TFApplyError")
    assert terraform.health("c", live(None)) == ("progressing", "c: state not reported")


def test_dry_run_renders_the_configuration(tmp_path: Path) -> None:
    app = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
           "metadata": {"name": "app", "namespace": "shop"},
           "spec": {"components": [{"name": "db", "type": "rds", "properties": {
               "password": "p", "writeConnectionSecretToRef": {"name": "db-conn"}}}]}}
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump_all([remote_rds(), app]))
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(yaml.safe_dump({"clusters": [{"name": "member1"}]}))
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path), "--clusters",
                                      str(clusters), "--local-cluster", "member1"])
    assert result.exit_code == 0, result.output
    rendered = [d for d in yaml.safe_load_all(result.stdout.split("# namespaces")[0]) if d]
    assert [d["kind"] for d in rendered] == ["Configuration"]
    assert rendered[0]["spec"]["writeConnectionSecretToRef"] == {"name": "db-conn",
                                                                 "namespace": "shop"}


# -- attacks: the same references in a Configuration written as a manifest ------------------


def manifest_app(spec: JSON, namespace: str = "shop") -> JSON:
    config = {"apiVersion": "terraform.core.oam.dev/v1beta2", "kind": "Configuration",
              "metadata": {"name": "db", "namespace": namespace}, "spec": spec}
    return {"components": [{"name": "db", "type": "k8s-objects",
                            "properties": {"objects": [config]}}],
            "policies": [{"name": "one", "type": "topology",
                          "properties": {"clusters": ["member1"]}}]}


@pytest.mark.parametrize(("spec", "message"), [
    ({"hcl": "x", "providerRef": {"name": "aws", "namespace": "bank"}},
     r"spec.providerRef.namespace: 'bank' is not the namespace of the Configuration"),
    ({"hcl": "x", "providerRef": {"name": "aws"}}, r"spec.providerRef.namespace: 'default'"),
    ({"hcl": "x", "writeConnectionSecretToRef": {"name": "out"}},
     r"spec.writeConnectionSecretToRef.namespace: 'default'"),
    ({"hcl": "x", "gitCredentialsSecretReference": {"name": "key"}},
     r"spec.gitCredentialsSecretReference.namespace: required"),
    ({"hcl": "x", "backend": {"kubernetes": {"secret_suffix": "s", "namespace": "bank"}}},
     r"spec.backend: keeps the state outside"),
    ({"hcl": "x", "backend": {"inline": "terraform { backend \"kubernetes\" {} }"}},
     r"spec.backend: keeps the state outside"),
])
def test_a_manifests_reference_into_another_namespace_is_refused(spec: JSON,
                                                                message: str) -> None:
    """A k8s-objects Configuration: the terraform controller follows its references the
    same way, so the same rule holds for a tenant's manifest."""
    with pytest.raises(model.AppError, match=rf"spec.components\[0\]: Configuration db "
                       rf"{message}"):
        compile_.compile_app(manifest_app(spec), "app", "shop", {}, FLEET)


def test_a_manifests_own_namespace_references_are_kept() -> None:
    spec = {"hcl": "x", "providerRef": {"name": "aws", "namespace": "shop"},
            "writeConnectionSecretToRef": {"name": "out", "namespace": "shop"},
            "backend": {"kubernetes": {"secret_suffix": "s", "namespace": "shop"}}}
    result = compile_.compile_app(manifest_app(spec), "app", "shop", {}, FLEET)
    [obj] = result.targets["deploy"].clusters["member1"]
    assert obj["spec"] == spec
