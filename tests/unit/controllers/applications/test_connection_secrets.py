"""A tenant's terraform Configuration never makes the member's terraform controller
overwrite, then delete, a Secret the tenant did not write: the controller writes the
module's outputs over an existing Secret of the name ``writeConnectionSecretToRef`` gives
when it carries no owner label, and deletes that Secret, whoever made it, with the
Configuration (terraform-controller controllers/process/process.go,
configuration_controller.go ``cleanUpSubResources``)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from federation.applications import terraform
from federation.controllers import applications
from federation.controllers.applications import deploy
from federation.controllers.applications.build import Build
from tests.unit.controllers.applications.fakes import FakeView, app, build_of, run_through

JSON = dict[str, Any]
PASSWORD = "registry-password-1"


def configuration(secret: str = "registry-login", name: str = "db") -> JSON:
    return {"apiVersion": terraform.API_VERSION, "kind": "Configuration",
            "metadata": {"name": name},
            "spec": {"remote": "https://github.com/kubevela-contrib/terraform-modules.git",
                     "path": "alibaba/rds", "variable": {},
                     "writeConnectionSecretToRef": {"name": secret, "namespace": "shop"}}}


def with_configuration(obj: JSON) -> JSON:
    body = app()
    body["spec"]["components"] = [{"name": "db", "type": "k8s-objects",
                                   "properties": {"objects": [obj]}}]
    return body


def secret(name: str = "registry-login", **labels: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": "shop", "labels": labels},
            "data": {".dockerconfigjson": base64.b64encode(PASSWORD.encode()).decode()}}


async def planned(view: FakeView, doc: JSON) -> Build:
    build = build_of(doc)
    await run_through(view, build, deploy.plan_deploy)
    return build


def configurations(build: Build) -> list[str]:
    return [v.cluster for v in build.plan if v.obj.get("kind") == "Configuration"]


async def test_a_configuration_naming_an_administrators_secret_is_not_written() -> None:
    """The attack: the member's registry login in ``shop``, which the tenant cannot read
    nor write, named as the module's connection Secret. Nothing is written; the problem
    names the Secret, never a value of it."""
    view = FakeView([("member1", secret())])
    build = await planned(view, with_configuration(configuration()))
    assert configurations(build) == []
    [problem] = build.problems
    assert "connection Secret shop/registry-login exists and was not written for this " \
        "Configuration" in problem
    assert PASSWORD not in problem and base64.b64encode(PASSWORD.encode()).decode() \
        not in problem


@pytest.mark.parametrize("labels", [
    {terraform.OWNED_BY: "other-db", terraform.OWNED_NAMESPACE: "shop"},  # another's
    {terraform.OWNED_BY: "db", terraform.OWNED_NAMESPACE: "bank"},  # same name, elsewhere
    {terraform.OWNED_BY: "db"},
])
async def test_another_configurations_connection_secret_is_not_taken(
        labels: dict[str, str]) -> None:
    view = FakeView([("member1", secret(**labels))])
    build = await planned(view, with_configuration(configuration()))
    assert configurations(build) == []
    assert len(build.problems) == 1


async def test_a_new_connection_secret_or_its_own_is_written() -> None:
    build = await planned(FakeView(), with_configuration(configuration()))
    assert configurations(build) == ["member1"]
    assert build.problems == []
    own = secret(**{terraform.OWNED_BY: "db", terraform.OWNED_NAMESPACE: "shop"})
    build = await planned(FakeView([("member1", own)]), with_configuration(configuration()))
    assert configurations(build) == ["member1"]
    assert build.problems == []


async def test_a_member_that_cannot_say_holds_the_configuration() -> None:
    view = FakeView([("member1", secret())])
    view.unserved.add("Secret")
    build = await planned(view, with_configuration(configuration()))
    assert configurations(build) == []
    assert any("cannot read its connection Secret shop/registry-login" in p
               for p in build.problems)


def test_the_rule_reads_the_reference_as_the_controller_does() -> None:
    """No namespace: the controller's ``default``; no reference: nothing to check."""
    obj = configuration()
    del obj["spec"]["writeConnectionSecretToRef"]["namespace"]
    assert terraform.connection_secret(obj) == ("default", "registry-login")
    del obj["spec"]["writeConnectionSecretToRef"]
    assert terraform.connection_secret(obj) is None
    assert terraform.foreign_connection_secret(obj, secret()) is None
    assert terraform.connection_secret({"apiVersion": "v1", "kind": "ConfigMap"}) is None


async def test_apply_terraform_config_is_held_the_same_way() -> None:
    """vela-core's step writes its Configuration to the local cluster: the same rule."""
    view = FakeView([("member1", secret())],
                    settings=applications.ApplicationSettings(local_cluster="member1"))
    body = app(steps=[{"name": "rds", "type": "apply-terraform-config", "properties": {
        "source": {"path": "alibaba/rds"},
        "writeConnectionSecretToRef": {"name": "registry-login"}}}])
    build = await planned(view, body)
    assert configurations(build) == []
    assert any("connection Secret shop/registry-login exists" in p for p in build.problems)
