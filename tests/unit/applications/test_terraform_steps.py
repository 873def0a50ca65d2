"""vela-core's apply-terraform-config and apply-terraform-provider steps as deploy steps of
what they write, in the Application's own namespace, to the local cluster
(workflowstep/apply-terraform-config.cue, apply-terraform-provider.cue, and the terraform
addons' config templates terraform-<type>)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from federation.applications import compile as compile_
from federation.applications import model, terraform_steps, vela_core
from federation.cli import cli
from federation.placement import clusters as clusters_

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2")]


def compiled(*steps: JSON, objects: list[JSON] | None = None) -> compile_.Compiled:
    components = [{"name": "web", "type": "k8s-objects", "properties": {"objects": objects}}] \
        if objects else []
    spec = {"components": components, "workflow": {"steps": list(steps)}}
    return compile_.compile_app(spec, "app", "shop", {}, FLEET, local_cluster="member1")


def config_step(**props: Any) -> JSON:
    return {"name": "rds", "type": "apply-terraform-config",
            "properties": {"source": {"path": "alibaba/rds"}, **props}}


def provider_step(**props: Any) -> JSON:
    return {"name": "prov", "type": "apply-terraform-provider",
            "properties": {"type": "alibaba", "accessKey": "AK-1", "secretKey": "SK-1",
                           "region": "cn-hongkong", **props}}


def test_the_model_and_the_steps_know_the_same_parameters() -> None:
    assert terraform_steps.CONFIG_KEYS == model.TERRAFORM_CONFIG_KEYS
    assert terraform_steps.PROVIDER_KEYS == model.TERRAFORM_PROVIDER_KEYS


def test_apply_terraform_config_is_a_configuration_of_the_apps_namespace() -> None:
    """The definition's defaults: deleteResource true, forceDelete false, the references'
    namespace the Application's, remote KubeVela's modules repository with ``path``."""
    result = compiled(config_step(variable={"instance_name": "db"},
                                  providerRef={"name": "alibaba-provider"},
                                  writeConnectionSecretToRef={"name": "db-conn"}))
    [step] = result.steps
    assert (step.type, step.targets) == ("apply-terraform-config", ("member1",))
    [obj] = result.targets["rds"].clusters["member1"]
    assert (obj["kind"], obj["metadata"]["name"], obj["metadata"]["namespace"]) == \
        ("Configuration", "app-rds", "shop")
    assert obj["spec"] == {
        "deleteResource": True, "variable": {"instance_name": "db"}, "forceDelete": False,
        "remote": terraform_steps.DEFAULT_REMOTE, "path": "alibaba/rds",
        "providerRef": {"name": "alibaba-provider", "namespace": "shop"},
        "writeConnectionSecretToRef": {"name": "db-conn", "namespace": "shop"}}


def test_hcl_source_and_region_as_custom_region() -> None:
    """KubeVela writes ``spec.region``, which the v1beta2 Configuration lacks: here it is
    ``customRegion``, what the parameter's usage says it does."""
    result = compiled(config_step(source={"hcl": "resource \"null\" \"x\" {}"},
                                  region="eu-west-1", deleteResource=False))
    [obj] = result.targets["rds"].clusters["member1"]
    assert obj["spec"]["hcl"] == "resource \"null\" \"x\" {}"
    assert "remote" not in obj["spec"] and obj["spec"]["customRegion"] == "eu-west-1"
    assert obj["spec"]["deleteResource"] is False


@pytest.mark.parametrize(("step", "words"), [
    # the attacks: another namespace's Provider (its cloud credentials run our module) or
    # connection Secret (overwritten with our outputs)
    (config_step(providerRef={"name": "aws", "namespace": "bank"}),
     r"properties\.providerRef\.namespace: 'bank' is not the Application's namespace"),
    (config_step(writeConnectionSecretToRef={"name": "conn", "namespace": "bank"}),
     r"properties\.writeConnectionSecretToRef\.namespace: 'bank' is not the Application's"),
    (config_step(jobEnv={"TF_LOG": "DEBUG"}), r"properties\.jobEnv: not supported"),
    (config_step(backend={"inline": "x"}),
     r"properties\.backend: not supported for a apply-terraform-config step"),
    (config_step(source={"hcl": "x", "remote": "https://x"}),
     r"properties\.source: hcl, or remote with path, not both"),
    (config_step(source={"git": "x"}), r"properties\.source\.git: not supported"),
    (config_step(providerRef={"name": "a", "kind": "Provider"}),
     r"properties\.providerRef\.kind: not supported"),
    (config_step(variable=[1]), r"properties\.variable: must be a map"),
    (config_step(forceDelete="yes"), r"properties\.forceDelete: must be true or false"),
    ({"name": "rds", "type": "apply-terraform-config", "properties": {}},
     r"properties\.source: required"),
])
def test_config_refusals(step: JSON, words: str) -> None:
    with pytest.raises(model.AppError, match=words):
        compiled(step)


def test_apply_terraform_provider_writes_the_secret_and_the_provider_reading_it() -> None:
    """The terraform-alibaba config template's objects, both in the Application's
    namespace (the template's Provider is in ``default``, where the step does not look)."""
    result = compiled(provider_step())
    secret, provider = result.targets["prov"].clusters["member1"]
    assert (secret["kind"], secret["metadata"]["name"], secret["metadata"]["namespace"]) == \
        ("Secret", "app-prov", "shop")
    assert secret["stringData"] == {"credentials": "accessKeyID: AK-1\naccessKeySecret: SK-1"}
    assert (provider["kind"], provider["metadata"]["name"],
            provider["metadata"]["namespace"]) == ("Provider", "alibaba-provider", "shop")
    assert provider["spec"] == {"provider": "alibaba", "region": "cn-hongkong", "credentials": {
        "source": "Secret", "secretRef": {"namespace": "shop", "name": "app-prov",
                                          "key": "credentials"}}}


@pytest.mark.parametrize(("props", "credentials", "region"), [
    ({"type": "aws", "accessKey": "a", "secretKey": "s", "region": "r"},
     "awsAccessKeyID: a\nawsSecretAccessKey: s\nawsSessionToken: ", "r"),
    ({"type": "azure", "clientID": "c", "clientSecret": "s", "subscriptionID": "u",
      "tenantID": "t"}, "armClientID: c\narmClientSecret: s\narmSubscriptionID: u\n"
     "armTenantID: t", None),
    ({"type": "ec"}, "ecApiKey: ", None),
    ({"type": "gcp", "credentials": "{}", "region": "r", "project": "p"},
     "gcpCredentialsJSON: {}\ngcpProject: p", "r"),
    ({"type": "ucloud", "publicKey": "p", "privateKey": "k", "projectID": "i", "region": "r"},
     "privateKey: k\npublicKey: p\nprojectID: i", "r"),
])
def test_each_provider_type_as_its_addons_template(props: JSON, credentials: str,
                                                   region: str | None) -> None:
    result = compiled({"name": "prov", "type": "apply-terraform-provider",
                       "properties": props})
    secret, provider = result.targets["prov"].clusters["member1"]
    assert secret["stringData"]["credentials"] == credentials
    assert provider["metadata"]["name"] == f"{props['type']}-provider"
    assert provider["spec"].get("region") == region


@pytest.mark.parametrize(("props", "words"), [
    ({"type": "oracle"}, r"properties\.type: required, one of alibaba"),
    ({"type": "ec", "accessKey": "x"}, r"properties\.accessKey: not supported"),
    ({"type": "ec", "name": "../x"}, r"properties\.name: not a Kubernetes object name"),
    ({"type": "aws", "accessKey": "a", "secretKey": "s"}, r"properties\.region: required"),
    ({"type": "ec", "namespace": "bank"},
     r"properties\.namespace: not supported for a apply-terraform-provider step"),
])
def test_provider_refusals(props: JSON, words: str) -> None:
    with pytest.raises(model.AppError, match=words):
        compiled({"name": "prov", "type": "apply-terraform-provider", "properties": props})


def test_a_provider_refusal_quotes_no_credential() -> None:
    with pytest.raises(model.AppError) as caught:
        compiled(provider_step(secretKey=["SK-SECRET"], accessKey="AK-SECRET"))
    assert "SECRET" not in str(caught.value)


def provider_manifest(credentials: JSON) -> JSON:
    return {"apiVersion": "terraform.core.oam.dev/v1beta1", "kind": "Provider",
            "metadata": {"name": "aws"}, "spec": {"provider": "aws",
                                                  "credentials": credentials}}


@pytest.mark.parametrize(("credentials", "words"), [
    # the attack: a Provider of our namespace reading another namespace's cloud
    # credentials, which the terraform controller would hand to our modules
    ({"source": "Secret", "secretRef": {"namespace": "bank", "name": "aws", "key": "c"}},
     r"secretRef\.namespace: 'bank' is not the namespace of the Provider 'shop'"),
    ({"source": "Secret", "secretRef": {"name": "aws", "key": "c"}},
     r"secretRef\.namespace: required, the namespace of the Provider 'shop'"),
    # the terraform controller's own identity or environment: the member admin's
    ({"source": "InjectedIdentity"}, r"source: 'InjectedIdentity' is not "),
    ({"source": "Environment"}, r"source: 'Environment' is not supported"),
])
def test_a_tenants_provider_manifest_reads_its_own_namespace_only(credentials: JSON,
                                                                  words: str) -> None:
    with pytest.raises(model.AppError, match=rf"Provider aws spec\.credentials\.{words}"):
        compiled({"name": "d", "type": "deploy"}, objects=[provider_manifest(credentials)])
    with pytest.raises(model.AppError, match=words):
        compiled({"name": "d", "type": "apply-object",
                  "properties": {"value": provider_manifest(credentials)}})


def test_a_tenants_provider_of_its_own_namespaces_secret_is_kept() -> None:
    credentials = {"source": "Secret", "secretRef": {"namespace": "shop", "name": "aws",
                                                     "key": "c"}}
    result = compiled({"name": "d", "type": "deploy"}, objects=[provider_manifest(credentials)])
    [obj] = result.targets["d"].clusters["member1"]
    assert obj["spec"]["credentials"] == credentials


def test_the_catalogue_builds_the_terraform_steps() -> None:
    for name in terraform_steps.STEP_TYPES:
        assert name in vela_core.BUILT_IN["workflowstep"]
    for name in ("deploy-cloud-resource", "share-cloud-resource", "generate-jdbc-connection"):
        assert name in vela_core.BUILT_IN["workflowstep"]
        assert vela_core.refusal("workflowstep", name) is None


def test_dry_run_says_what_each_step_does(tmp_path: Path) -> None:
    app = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
           "metadata": {"name": "app", "namespace": "shop"},
           "spec": {"components": [], "workflow": {"steps": [
               provider_step(), config_step(providerRef={"name": "alibaba-provider"})]}}}
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(app))
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(yaml.safe_dump({"clusters": [{"name": "member1"}]}))
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path), "--clusters",
                                      str(clusters), "--local-cluster", "member1"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith("# step")]
    assert lines == [
        "# step prov (apply-terraform-provider): writes a terraform Provider and the Secret "
        "of its credentials, both in the Application's namespace: member1 (parallelism 5)",
        "# step rds (apply-terraform-config): writes a Configuration for the member's "
        "terraform controller to run; the step waits until it reports the apply Available: "
        "member1 (parallelism 5)"]


def test_the_terraform_controllers_default_provider_is_not_a_tenants() -> None:
    """The attack: an Application of ``default`` writes Provider default/default (the
    step's ``name``, or a manifest); every Configuration without providerRef in the member,
    other namespaces' included, would run with its cloud account and leave it their
    resources. Another name there, or ``default`` elsewhere, is fine."""
    def in_default(step: JSON) -> compile_.Compiled:
        return compile_.compile_app({"components": [], "workflow": {"steps": [step]}},
                                    "app", "default", {}, FLEET, local_cluster="member1")

    with pytest.raises(model.AppError, match=r"Provider default/default is the terraform "
                       "controller's default"):
        in_default(provider_step(name="default"))
    credentials = {"source": "Secret", "secretRef": {"namespace": "default", "name": "aws",
                                                     "key": "c"}}
    manifest = {**provider_manifest(credentials), "metadata": {"name": "default"}}
    with pytest.raises(model.AppError, match=r"Provider default/default"):
        in_default({"name": "d", "type": "apply-object", "properties": {"value": manifest}})
    in_default(provider_step(name="mine"))
    compiled(provider_step(name="default"))
