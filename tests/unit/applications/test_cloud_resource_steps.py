"""vela-core's ``generate-jdbc-connection`` stays refused (docs/security.md,
*Applications: cloud-resource steps*): it is tried here the way a tenant would use it to
read a Secret it cannot read (another Application's connection Secret, an
administrator's, one of its namespace no Terraform module wrote), and refused before
anything is read, with a reason that names no value; the env it would give a container is
had without the control plane reading anything. (``deploy-cloud-resource`` and
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
from federation.applications import model, vela_core
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
STEPS = ("generate-jdbc-connection",)

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
async def test_the_controller_refuses_the_step_and_reads_no_secret(
        step_type: str, properties: JSON) -> None:
    """The Application is refused (renderFailed) naming the step's reason; no Secret of
    any cluster is read, and the message quotes no value of one."""
    body = app()
    body["spec"] = spec_with(step_type, properties)
    view = RecordingView()
    with pytest.raises(Problem) as raised:
        await run_through(view, build_of(body), compilation.compile_app)
    assert (raised.value.condition, raised.value.reason) == ("Rendered", "InvalidApplication")
    message = str(raised.value)
    assert f"'{step_type}' is not a built-in step (vela-core's workflowstep {step_type}: " \
        in message
    assert view.secret_reads == []
    for value in (PASSWORD, base64.b64encode(PASSWORD.encode()).decode(), "db.internal"):
        assert value not in message


@pytest.mark.parametrize(("step_type", "properties"), ATTACKS)
def test_the_compile_refuses_the_step_by_its_type(step_type: str, properties: JSON) -> None:
    with pytest.raises(model.AppError, match=r"workflow\.steps\[0\]\.type: "
                       f"'{step_type}' is not a built-in step"):
        compile_.compile_app(spec_with(step_type, properties), "app", "shop", {}, FLEET,
                             local_cluster="member1")


@pytest.mark.parametrize(("step_type", "properties"), ATTACKS)
def test_dry_run_refuses_in_one_line_naming_no_secret(tmp_path: Path, step_type: str,
                                                      properties: JSON) -> None:
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
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    [line] = [line for line in result.output.splitlines() if not line.startswith("#")]
    assert line.startswith("error: ")
    assert f"vela-core's workflowstep {step_type}: " in line
    for name in ("bank-db-conn", "etcd-certs", "payments-api-key"):
        assert name not in line


def test_the_reason_says_where_the_password_would_go_and_what_to_do_instead() -> None:
    jdbc = str(vela_core.refusal("workflowstep", "generate-jdbc-connection"))
    assert "status" in jdbc and "view role" in jdbc and "secretKeyRef" in jdbc
    assert "named freely" in jdbc


def test_the_docs_rows_quote_the_catalogue() -> None:
    """docs/applications.md's table gives each step the reason the refusal quotes."""
    table = (Path(__file__).resolve().parents[3] / "docs/applications.md").read_text()
    for name in STEPS:
        row = f"| workflowstep | `{name}` | refused: {vela_core.refusal('workflowstep', name)} |"
        assert row in table.splitlines(), name


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
