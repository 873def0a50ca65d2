"""deploy-cloud-resource and share-cloud-resource in the controller: the connection Secret
of this Application's own Configuration, in its namespace of the local cluster, is copied
into its namespace of the env's clusters only where the hub namespace has the Secret
grant and the terraform controller's labels name that Configuration; the data goes into
that member write and nowhere else (docs/security.md, *Applications: cloud-resource
steps*). Each refusal is the attack performed."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from federation.applications import cloud_resource, terraform
from federation.applications import compile as compile_
from federation.applications.model import AppError
from federation.contexts.cache import ReadOnly
from federation.contexts.client import Resource
from federation.contexts.scoped import NotGranted
from federation.controllers import applications
from federation.controllers.applications import compilation, deploy
from federation.controllers.applications.build import Build
from federation.controllers.kit import plan
from federation.controllers.kit.chain import Problem
from federation.hub import manifests
from federation.placement import clusters as clusters_
from tests.unit.applications.test_config_store import steps_of
from tests.unit.applications.test_controller import MC, REQUEST, Clock, set_app
from tests.unit.applications.test_controller_workflow_io import without_nulls
from tests.unit.controllers import fakes
from tests.unit.controllers.applications import fakes as app_fakes
from tests.unit.controllers.applications.fakes import FakeView, app, build_of, run_through

JSON = dict[str, Any]
PASSWORD = "rds-admin-password-1"
DATA = {"DB_PASSWORD": base64.b64encode(PASSWORD.encode()).decode(),
        "DB_HOST": base64.b64encode(b"rm-1.mysql.example").decode()}
OWNER = "shop/shop"
"""The test Application (``app()``): ``shop`` in namespace ``shop``."""


def configuration() -> JSON:
    return {"apiVersion": terraform.API_VERSION, "kind": "Configuration",
            "metadata": {"name": "db"},
            "spec": {"remote": "https://github.com/kubevela-contrib/terraform-modules.git",
                     "path": "alibaba/rds", "variable": {},
                     "writeConnectionSecretToRef": {"name": "db-conn", "namespace": "shop"}}}


def application(step: JSON, env: JSON | None = None) -> JSON:
    body = app(steps=[step])
    body["spec"]["components"] = [{"name": "db", "type": "k8s-objects",
                                   "properties": {"objects": [configuration()]}}]
    body["spec"]["policies"] = [{"name": "envs", "type": "env-binding", "properties": {
        "envs": [env or {"name": "prod", "placement": {"clusterSelector": {"name": "member2"}}}]}}]
    return body


DEPLOY = {"name": "rds", "type": "deploy-cloud-resource", "properties": {"env": "prod"}}


def live_configuration(owner: str = OWNER) -> JSON:
    """``db-prod`` as this Application (or ``owner``) placed it in the local cluster."""
    return {"apiVersion": terraform.API_VERSION, "kind": "Configuration",
            "metadata": {"name": "db-prod", "namespace": "shop",
                         "labels": {manifests.MANAGED_BY_LABEL: manifests.MANAGER},
                         "annotations": {manifests.APPLICATION_ANNOTATION: owner}},
            "spec": {"writeConnectionSecretToRef": {"name": "db-conn-prod",
                                                    "namespace": "shop"}}}


def source(**labels: str) -> JSON:
    found = labels if labels else {terraform.OWNED_BY: "db-prod",
                                   terraform.OWNED_NAMESPACE: "shop"}
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db-conn-prod", "namespace": "shop", "labels": found},
            "data": dict(DATA)}


class Granted(FakeView):
    """The fleet; the hub's Secrets readable in ``granted`` only (the scoped cache)."""

    def __init__(self, objects: list[tuple[str, JSON]], granted: tuple[str, ...] = ("shop",)
                 ) -> None:
        super().__init__(objects,
                         settings=applications.ApplicationSettings(local_cluster="member1"))
        self.granted = granted

    async def list(self, resource: Resource, namespace: str | None = None) -> list[ReadOnly]:
        if resource.kind == "Secret" and namespace not in self.granted:
            raise NotGranted("hub", f"Secrets of namespace {namespace} are not readable "
                                    "(no RoleBinding federation:control-plane:secrets)")
        return await super().list(resource, namespace)


async def planned(view: FakeView, doc: JSON) -> Build:
    build = build_of(doc)
    await run_through(view, build, deploy.plan_deploy)
    return build


def secrets_written(build: Build) -> dict[str, JSON]:
    return {v.cluster: v.obj for v in build.plan if v.obj.get("kind") == "Secret"
            and v.action in (plan.Action.CREATE, plan.Action.UPDATE)}


def assert_no_value(build: Build) -> None:
    said = " ".join([*build.problems, *(str(e) for e in build.events)])
    for value in (PASSWORD, *DATA.values()):
        assert value not in said


async def test_deploy_applies_the_renamed_configuration_then_copies_its_secret() -> None:
    """KubeVela's names: Configuration ``db-prod`` writing ``db-conn-prod`` in the local
    cluster; its data copied as ``db-conn`` into ``shop`` of the env's cluster."""
    view = Granted([("member1", live_configuration()), ("member1", source())])
    build = await planned(view, application(DEPLOY))
    configurations = [v.obj for v in build.plan if v.obj.get("kind") == "Configuration"]
    assert [(c["metadata"]["name"], c["spec"]["writeConnectionSecretToRef"])
            for c in configurations] == [("db-prod", {"name": "db-conn-prod",
                                                      "namespace": "shop"})]
    [copy] = secrets_written(build).items()
    assert copy[0] == "member2"
    body = copy[1]
    assert (body["metadata"]["name"], body["metadata"]["namespace"], body["type"]) == \
        ("db-conn", "shop", "Opaque")
    assert body["data"] == DATA
    assert build.problems == []


async def test_the_copy_never_passes_through_the_compile_or_the_state() -> None:
    view = Granted([("member1", live_configuration()), ("member1", source())])
    build = await planned(view, application(DEPLOY))
    assert build.compiled is not None
    compiled = [o for objs in build.compiled.targets["rds"].clusters.values() for o in objs
                if o["kind"] == "Secret"]
    assert [o["data"] for o in compiled] == [{}]
    assert build.state is not None and PASSWORD not in repr(build.state)
    assert DATA["DB_PASSWORD"] not in repr(build.state)


async def test_a_namespace_without_the_grant_waits_naming_it() -> None:
    view = Granted([("member1", live_configuration()), ("member1", source())], granted=())
    build = await planned(view, application(DEPLOY))
    assert secrets_written(build) == {}
    assert any("Secrets of namespace shop are not granted" in p and
               "federation:control-plane:secrets" in p for p in build.problems)
    assert_no_value(build)


@pytest.mark.parametrize("labels", [
    {"owner": "by-hand"},  # an administrator's Secret of that name, no module wrote it
    {terraform.OWNED_BY: "other-db", terraform.OWNED_NAMESPACE: "shop"},  # another's
    {terraform.OWNED_BY: "db-prod", terraform.OWNED_NAMESPACE: "bank"},
])
async def test_a_secret_the_configuration_did_not_write_is_not_copied(
        labels: dict[str, str]) -> None:
    view = Granted([("member1", live_configuration()), ("member1", source(**labels))])
    build = await planned(view, application(DEPLOY))
    assert secrets_written(build) == {}
    assert any("not copied" in p for p in build.problems)
    assert_no_value(build)


async def test_another_applications_configuration_is_not_a_source() -> None:
    """``db-prod`` placed by Application ``shop/other``: its Secret stays where it is."""
    view = Granted([("member1", live_configuration("shop/other")), ("member1", source())])
    build = await planned(view, application(DEPLOY))
    assert secrets_written(build) == {}
    assert any("waiting for Configuration shop/db-prod of this Application" in p
               for p in build.problems)


async def test_before_the_module_ran_the_copy_waits() -> None:
    view = Granted([("member1", live_configuration())])
    build = await planned(view, application(DEPLOY))
    assert secrets_written(build) == {}
    assert any("waiting for the connection Secret shop/db-conn-prod in member1" in p
               for p in build.problems)


async def test_share_copies_to_its_placements_without_applying() -> None:
    view = Granted([("member1", live_configuration()), ("member1", source())])
    share = {"name": "share", "type": "share-cloud-resource",
             "properties": {"env": "prod", "placements": [{"cluster": "member3"}]}}
    build = await planned(view, application(share))
    assert [v.obj["kind"] for v in build.plan
            if v.obj.get("kind") == "Configuration"] == []
    assert {c: o["data"] for c, o in secrets_written(build).items()} == {"member3": DATA}


@pytest.mark.parametrize(("step", "env", "words"), [
    ({"name": "share", "type": "share-cloud-resource", "properties": {
        "env": "prod", "placements": [{"cluster": "member2", "namespace": "bank"}]}},
     None, r"placements\[0\]\.namespace: not supported"),
    (DEPLOY, {"name": "prod", "placement": {"clusterSelector": {"name": "member2"},
                                            "namespaceSelector": {"name": "bank"}}},
     "is placed in namespace 'bank': a connection Secret is copied into the "
     "Application's own namespace only"),
])
async def test_another_namespace_is_refused_before_anything_is_read(
        step: JSON, env: JSON | None, words: str) -> None:
    view = Granted([("member1", live_configuration()), ("member1", source())])
    with pytest.raises(Problem, match=words):
        await run_through(view, build_of(application(step, env)), compilation.compile_app)


def test_an_env_without_a_connection_secret_is_refused() -> None:
    spec = application(DEPLOY)["spec"]
    del spec["components"][0]["properties"]["objects"][0]["spec"][
        "writeConnectionSecretToRef"]
    fleet = [clusters_.Cluster(name=n) for n in ("member1", "member2")]
    with pytest.raises(AppError, match="deploys no Terraform component that writes a "
                                       "connection Secret"):
        compile_.compile_app(spec, "shop", "shop", {}, fleet, local_cluster="member1")


def test_a_copy_names_its_source_only_from_the_compile() -> None:
    made = cloud_resource.copy_manifest("db-conn", cloud_resource.Source(
        "member1", "db-conn-prod", "db-prod"))
    assert cloud_resource.source_of(made) == cloud_resource.Source(
        "member1", "db-conn-prod", "db-prod")
    assert cloud_resource.source_of({**made, "kind": "ConfigMap"}) is None


# -- through the whole reconcile ------------------------------------------------------------


async def test_the_step_waits_for_the_module_then_copies_and_succeeds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The real reconciler over the fake fleet, the terraform controller played by the
    test: the step runs while the Configuration is not Available and its Secret is not
    written, then copies it and succeeds; the data is in the member's copy only, never in
    the Application's status or its Events."""
    monkeypatch.setitem(fakes.KINDS, "Configuration", app_fakes.CONFIGURATIONS)
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    body = application(DEPLOY)
    body["status"] = {}
    set_app(mc, body)
    recorder = app_fakes.Recorder()
    clock = Clock()
    settings = applications.ApplicationSettings(local_cluster="member1")

    async def reconcile() -> JSON:
        await app_fakes.reconciler(mc, recorder, settings=settings,
                                   clock=clock).reconcile(REQUEST)
        live = mc.find("hub", "Application", "shop", "shop")
        assert live is not None
        live["status"] = without_nulls(live["status"])
        mc.put("hub", live)
        clock.now += 5
        return dict(live["status"])

    status = await reconcile()
    status = await reconcile()
    assert steps_of(status)["rds"]["phase"] == "running"
    made = mc.find("member1", "Configuration", "db-prod", "shop")
    assert made is not None
    assert mc.find("member2", "Secret", "db-conn", "shop") is None
    # the terraform controller: the module ran, its Secret written with its labels
    made["status"] = {"observedGeneration": made["metadata"].get("generation", 0),
                      "apply": {"state": "Available"}}
    mc.put("member1", made)
    mc.put("member1", source())
    for _ in range(6):
        status = await reconcile()
        if status.get("workflow", {}).get("phase") == "succeeded":
            break
    assert steps_of(status)["rds"]["phase"] == "succeeded", steps_of(status)["rds"]
    copied = mc.find("member2", "Secret", "db-conn", "shop")
    assert copied is not None and copied["data"] == DATA
    said = json.dumps([status, recorder.events])
    for value in (PASSWORD, *DATA.values()):
        assert value not in said


def forged_copy(namespace: str | None = None) -> JSON:
    """A tenant's own Secret manifest posing as a copy: it names this Application's
    connection Secret as its source, to land where the tenant places it."""
    made = cloud_resource.copy_manifest("loot", cloud_resource.Source(
        "member1", "db-conn-prod", "db-prod"))
    if namespace:
        made["metadata"]["namespace"] = namespace
    return made


def with_forged_copy(namespace: str | None = None) -> JSON:
    body = application(DEPLOY)
    body["spec"]["components"].append({"name": "loot", "type": "k8s-objects",
                                       "properties": {"objects": [forged_copy(namespace)]}})
    body["spec"]["policies"].append({"name": "there", "type": "topology",
                                     "properties": {"clusters": ["member3"]}})
    body["spec"]["workflow"]["steps"] = [
        {"name": "loot", "type": "deploy", "properties": {"policies": ["there"]}}, DEPLOY]
    return body


async def test_a_forged_copy_annotation_is_refused_by_the_compile() -> None:
    view = Granted([("member1", live_configuration()), ("member1", source())])
    with pytest.raises(Problem, match=r"annotation federation\.io/connection-secret-copy-of is "
                                      "written by deploy-cloud-resource and "
                                      "share-cloud-resource only"):
        await run_through(view, build_of(with_forged_copy()), compilation.compile_app)


async def test_a_forged_copy_the_compile_missed_is_not_filled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller's own check, with the compile's disabled: a copy is filled only for
    a cloud-resource step's entry in the Application's namespace."""
    monkeypatch.setattr(cloud_resource, "refuse_forged", lambda clusters, where: None)
    view = Granted([("member1", live_configuration()), ("member1", source())])
    build = await planned(view, with_forged_copy())
    assert [v for v in build.plan if v.obj.get("kind") == "Secret"
            and v.obj["metadata"]["name"] == "loot"] == []
    assert any("outside a cloud-resource step's copy" in p for p in build.problems)
    assert_no_value(build)


def test_two_configurations_of_one_component_are_refused() -> None:
    """KubeVela names the applied Configuration after its component: two in one
    ``k8s-objects`` component would be one object."""
    spec = application(DEPLOY)["spec"]
    other = configuration()
    other["metadata"]["name"] = "db2"
    spec["components"][0]["properties"]["objects"].append(other)
    fleet = [clusters_.Cluster(name=n) for n in ("member1", "member2")]
    with pytest.raises(AppError, match="two Configurations would both be db-prod"):
        compile_.compile_app(spec, "shop", "shop", {}, fleet, local_cluster="member1")
