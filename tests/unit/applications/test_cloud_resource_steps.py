"""vela-core's ``generate-jdbc-connection`` reads nothing (docs/security.md,
*Applications: cloud-resource steps*): it is tried here the way a tenant would use it to
read a Secret it cannot read (another Application's connection Secret, an
administrator's, one of its namespace no Terraform module wrote): another namespace is
refused by name, and in every case no Secret is read and no value is said; the env it
gives a container is references the member's kubelet resolves (the step itself:
test_jdbc_connection.py). (``deploy-cloud-resource`` and
``share-cloud-resource``: tests/unit/controllers/applications/
test_cloud_resource_copies.py.)"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from federation.applications import compile as compile_
from federation.cli import cli
from federation.contexts.cache import ReadOnly
from federation.contexts.client import Resource
from federation.controllers.applications import compilation
from federation.controllers.kit.chain import Problem
from federation.placement import clusters as clusters_
from tests.unit.controllers.applications.fakes import FakeView, app, build_of, run_through

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2")]
PASSWORD = "hunter2-db-password"

ATTACKS: list[tuple[str, JSON]] = [
    # another Application's connection Secret, in its own namespace
    ("generate-jdbc-connection", {"name": "bank-db-conn", "namespace": "bank"}),
    # an administrator's Secret
    ("generate-jdbc-connection", {"name": "etcd-certs", "namespace": "kube-system"}),
    # a Secret of the tenant's namespace that no Terraform module wrote
    ("generate-jdbc-connection", {"name": "payments-api-key"}),
]


def secret(name: str, namespace: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"DB_PASSWORD": base64.b64encode(PASSWORD.encode()).decode(),
                     "DB_HOST": base64.b64encode(b"db.internal").decode()}}


def spec_with(step_type: str, properties: JSON) -> JSON:
    """A Configuration whose connection Secret is one the attack wants copied (a Secret
    of the namespace no module wrote), an env-binding policy, and the step."""
    configuration = {"apiVersion": "terraform.core.oam.dev/v1beta2", "kind": "Configuration",
                     "metadata": {"name": "db"},
                     "spec": {"remote": "https://github.com/kubevela-contrib/"
                                        "terraform-modules.git", "path": "alibaba/rds",
                              "writeConnectionSecretToRef": {"name": "payments-api-key",
                                                             "namespace": "shop"}}}
    return {"components": [{"name": "db", "type": "k8s-objects", "properties": {
                "objects": [configuration]}}],
            "policies": [{"name": "envs", "type": "env-binding", "properties": {"envs": [
                {"name": "prod", "placement": {"clusterSelector": {"name": "member1"}}}]}}],
            "workflow": {"steps": [{"name": "s", "type": step_type,
                                    "properties": properties}]}}


class RecordingView(FakeView):
    """The fleet with connection Secrets in it; every Secret read is recorded."""

    def __init__(self) -> None:
        super().__init__([("hub", secret("bank-db-conn", "bank")),
                          ("hub", secret("etcd-certs", "kube-system")),
                          ("hub", secret("payments-api-key", "shop")),
                          ("member1", secret("bank-db-conn", "bank")),
                          ("member1", secret("db-conn-prod", "shop"))])
        self.secret_reads: list[tuple[str, str, str | None]] = []

    async def get(self, resource: Resource, name: str, namespace: str | None,
                  cluster: str) -> ReadOnly | None:
        if resource.kind == "Secret":
            self.secret_reads.append((cluster, name, namespace))
        return await super().get(resource, name, namespace, cluster)

    async def list(self, resource: Resource, namespace: str | None = None) -> list[ReadOnly]:
        if resource.kind == "Secret":
            self.secret_reads.append(("hub", "*", namespace))
        return await super().list(resource, namespace)


@pytest.mark.parametrize(("step_type", "properties"), ATTACKS)
async def test_the_controller_reads_no_secret_and_refuses_another_namespace(
        step_type: str, properties: JSON) -> None:
    """Another namespace's Secret is refused (renderFailed) naming the field; one of its
    own namespace compiles to references the member's kubelet resolves. Either way no
    Secret of any cluster is read, and no value of one is in the message or the step."""
    body = app()
    body["spec"] = spec_with(step_type, properties)
    view = RecordingView()
    said = ""
    build = build_of(body)
    try:
        await run_through(view, build, compilation.compile_app)
    except Problem as raised:
        assert (raised.condition, raised.reason) == ("Rendered", "InvalidApplication")
        assert "properties.namespace: not supported" in str(raised)
        assert properties.get("namespace") not in (None, "shop")
        said = str(raised)
    else:
        assert properties.get("namespace") in (None, "shop")
        assert build.compiled is not None
        said = str(build.compiled.steps)
        assert "secretKeyRef" in said
    assert view.secret_reads == []
    for value in (PASSWORD, base64.b64encode(PASSWORD.encode()).decode(), "db.internal"):
        assert value not in said


@pytest.mark.parametrize(("step_type", "properties"), ATTACKS)
def test_dry_run_refuses_another_namespace_in_one_line_naming_no_secret(
        tmp_path: Path, step_type: str, properties: JSON) -> None:
    doc = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
           "metadata": {"name": "app", "namespace": "shop"},
           "spec": spec_with(step_type, properties)}
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(doc))
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(yaml.safe_dump({"clusters": [{"name": "member1"},
                                                     {"name": "member2"}]}))
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path), "--clusters",
                                      str(clusters), "--local-cluster", "member1"])
    assert "Traceback" not in result.output
    if properties.get("namespace") in (None, "shop"):
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code != 0
    [line] = [line for line in result.output.splitlines() if not line.startswith("#")]
    assert line.startswith("error: ") and "properties.namespace: not supported" in line
    for name in ("bank-db-conn", "etcd-certs", "payments-api-key"):
        assert name not in line


def test_the_jdbc_env_is_had_from_secret_key_references() -> None:
    """What generate-jdbc-connection would put in a container, written so that the
    member's kubelet reads the connection Secret and expands the url: the control plane
    reads nothing and the password is in no spec or status."""
    keys = {"DB_HOST": "DB_HOST", "DB_PORT": "DB_PORT", "DB_NAME": "DB_NAME",
            "username": "DB_USER", "password": "DB_PASSWORD"}
    env: list[JSON] = [{"name": var, "valueFrom": {"secretKeyRef": {"name": "db-conn",
                                                                    "key": key}}}
                       for var, key in keys.items()]
    env.append({"name": "url", "value": "jdbc://$(DB_HOST):$(DB_PORT)/$(DB_NAME)"
                                        "?characterEncoding=utf8&useSSL=false"})
    spec = {"components": [{"name": "express-server", "type": "webservice",
                            "properties": {"image": "crccheck/hello-world", "env": env}}],
            "policies": [{"name": "here", "type": "topology",
                          "properties": {"clusters": ["member1"]}}]}
    result = compile_.compile_app(spec, "app", "shop", {}, FLEET, local_cluster="member1")
    [deployment] = [o for objs in (t.clusters["member1"] for t in result.targets.values())
                    for o in objs if o["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["env"] == env
