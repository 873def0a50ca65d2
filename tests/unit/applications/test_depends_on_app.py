"""depends-on-app's creation of a missing Application from the ConfigMap of its name, as
vela-core's step does, held to the waiting Application's own namespace: the ConfigMap is
read there only, its YAML (through the capped loader) must be an Application of that
namespace and name, and what is created is marked as the step's. Each attack test fails
on a step that applies whatever the ConfigMap holds, or reads it from wherever it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from federation.applications import depends_on_app, model
from federation.contexts.client import ApiError
from federation.controllers.applications import dependencies
from federation.controllers.applications.settings import ApplicationSettings
from tests.unit.applications import test_vela_steps as vela_steps
from tests.unit.applications.test_controller import MC, REQUEST, Clock, set_app
from tests.unit.applications.test_vela_steps import DEPENDING, dry_run, steps_of
from tests.unit.controllers import fakes
from tests.unit.controllers.applications import fakes as app_fakes

JSON = dict[str, Any]

FLUXCD = """\
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: fluxcd
  namespace: shop
  labels: {team: shop}
spec:
  components:
  - name: settings
    type: config
    properties: {data: {token: t0ps3cret}}
"""
"""KubeVela's docs case (initialize-env: kruise waits for fluxcd), in the tenant's
namespace and with a built-in type."""


def config_map(text: Any, name: str = "fluxcd", namespace: str = "shop") -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"application": text}}


def made(text: Any) -> JSON:
    return depends_on_app.application(config_map(text), "fluxcd", "shop", "shop/kruise",
                                      "check-flux")


# -- what is created ---------------------------------------------------------------------


def test_the_configmaps_application_is_created_marked_as_the_steps() -> None:
    body = made(FLUXCD)
    assert body == {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "fluxcd", "namespace": "shop", "labels": {"team": "shop"},
                     "annotations": {depends_on_app.CREATED_BY: "shop/kruise",
                                     depends_on_app.CREATED_BY_STEP: "check-flux"}},
        "spec": {"components": [{"name": "settings", "type": "config",
                                 "properties": {"data": {"token": "t0ps3cret"}}}]}}


def test_a_yaml_without_a_namespace_is_created_in_the_waiting_applications() -> None:
    body = made(FLUXCD.replace("  namespace: shop\n", ""))
    assert body["metadata"]["namespace"] == "shop"


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefg", "bcdefgh", strict=True))


@pytest.mark.parametrize(("text", "words"), [
    (FLUXCD.replace("namespace: shop", "namespace: bank"),
     r"metadata\.namespace: another namespace than shop"),
    (FLUXCD.replace("namespace: shop", "namespace: kube-system"),
     r"metadata\.namespace: another namespace than shop"),
    (FLUXCD.replace("kind: Application", "kind: ClusterRoleBinding"),
     r"apiVersion and kind must be core\.oam\.dev/v1beta1 Application"),
    (FLUXCD.replace("kind: Application", "kind: Secret").replace(
        "core.oam.dev/v1beta1", "v1"), r"apiVersion and kind must be"),
    (FLUXCD.replace("v1beta1", "v1alpha1"), r"apiVersion and kind must be"),
    (FLUXCD.replace("kind: Application", "kind: Policy"), r"apiVersion and kind must be"),
    (FLUXCD.replace("name: fluxcd", "name: payments"),
     r"metadata\.name: must be fluxcd, the Application the step waits for"),
    (FLUXCD + "---\n" + FLUXCD.replace("fluxcd", "second"), r"YAML documents"),
    (FLUXCD + "status: {status: running}\n", r"data\.application\.status: not supported"),
    (FLUXCD.replace("  labels:", "  ownerReferences: [{kind: Application, name: kruise}]\n"
                                 "  labels:"), r"metadata\.ownerReferences: not supported"),
    (FLUXCD.replace("  labels:", "  finalizers: [x/y]\n  labels:"),
     r"metadata\.finalizers: not supported"),
    (FLUXCD.replace("  labels:", "  annotations: {apps.federation.io/created-by: bank/x}\n"
                                 "  labels:"), r"created-by: set by the control plane only"),
    (FLUXCD.replace("labels: {team: shop}", "labels: {team: [shop]}"),
     r"metadata\.labels: a map of strings"),
    (FLUXCD.split("spec:")[0], r"data\.application\.spec: required, a map"),
    ("- t0ps3cret\n", r"not one YAML document of an Application"),
    ("", r"not one YAML document of an Application"),
    (BOMB, r"values after expanding aliases"),
    ("x: " + "[" * 60 + "]" * 60, r"nested deeper than"),
    ("x: '" + "t0ps3cret" * 120_000 + "'", r"larger than the limit"),
    ("a: \ud800", r"not readable text"),
    ("key: 't0ps3cret\n", r"malformed YAML"),
    (42, r"data\.application: missing"),
])
def test_attack_the_configmap_holds_no_application_of_this_namespace_and_name(
        text: Any, words: str) -> None:
    """Another namespace, another kind, another name, more than one document, fields
    beyond an Application's, forged marks, alias bombs, depth, size: refused by name, the
    ConfigMap's values never quoted."""
    with pytest.raises(model.AppError, match=words) as raised:
        made(text)
    assert "t0ps3cret" not in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_configmap_without_the_application_key_is_refused() -> None:
    with pytest.raises(model.AppError, match=r"ConfigMap shop/fluxcd data\.application: "
                                             r"missing"):
        depends_on_app.application({"binaryData": {"application": "eA=="}}, "fluxcd",
                                   "shop", "shop/kruise", "check")


# -- on the in-memory fleet ------------------------------------------------------------------


async def reconcile(mc: MC, times: int, recorder: app_fakes.Recorder | None = None) -> JSON:
    """Reconciles of shop/shop as it is on the hub, each by a new controller, all ``times``."""
    return await vela_steps.reconcile(mc, times, recorder=recorder, until_done=False)


def applications(mc: MC) -> dict[tuple[str, str], JSON]:
    return {(k[2], k[3]): o for k, o in mc.objects.items()
            if k[0] == "hub" and o.get("kind") == "Application"}


async def test_a_missing_application_is_created_from_its_configmap_and_waited_for() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", config_map(FLUXCD))
    set_app(mc, DEPENDING)
    recorder = app_fakes.Recorder()
    status = await reconcile(mc, 1, recorder)
    assert steps_of(status)["check"] == ("running", "Application shop/fluxcd on the hub not "
                                         "found: creating it from ConfigMap shop/fluxcd")
    created = applications(mc)[("shop", "fluxcd")]
    assert created["metadata"]["annotations"] == {
        depends_on_app.CREATED_BY: "shop/shop", depends_on_app.CREATED_BY_STEP: "check"}
    assert ("Normal", dependencies.CREATED, "Application shop/fluxcd created from ConfigMap "
            "shop/fluxcd by step check") in recorder.events
    status = await reconcile(mc, 1)
    assert steps_of(status)["check"] == ("running", "waiting for it to be running (it is "
                                         "new)")
    created["status"] = {"status": "running"}
    status = await reconcile(mc, 2)
    assert status["workflow"]["phase"] == "succeeded", status["workflow"]
    assert "t0ps3cret" not in json.dumps(status)


async def test_an_application_made_meanwhile_is_not_overwritten() -> None:
    """Created by its author between the read and the write: 409 is the one waited for,
    neither replaced nor announced as created by the step."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", config_map(FLUXCD))
    set_app(mc, DEPENDING)
    theirs = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
              "metadata": {"name": "fluxcd", "namespace": "shop"},
              "spec": {"components": []}}
    reconciler = app_fakes.reconciler(mc, recorder := app_fakes.Recorder(),
                                      ApplicationSettings(local_cluster="member1"),
                                      clock=Clock())
    real_get = mc.get

    async def hidden(resource: Any, name: str, namespace: str | None = None, **kw: Any
                     ) -> Any:
        if resource.kind == "Application" and name == "fluxcd":
            return None  # the cache has not seen it yet
        return await real_get(resource, name, namespace, **kw)

    mc.put("hub", theirs)
    mc.get = hidden  # type: ignore[method-assign]
    await reconciler.reconcile(REQUEST)
    mc.get = real_get  # type: ignore[method-assign]
    assert applications(mc)[("shop", "fluxcd")]["spec"] == {"components": []}
    assert not [e for e in recorder.events if e[1] == dependencies.CREATED]


async def test_attack_another_namespaces_configmap_is_never_read() -> None:
    """bank's ConfigMap 'fluxcd' holds an Application of shop: shop's step reads shop's
    namespace only, creates nothing and waits."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", config_map(FLUXCD, namespace="bank"))
    set_app(mc, DEPENDING)
    status = await reconcile(mc, 2)
    assert steps_of(status)["check"] == ("running", "Application shop/fluxcd on the hub not "
                                         "found, nor ConfigMap shop/fluxcd to create it "
                                         "from: waiting for it")
    assert set(applications(mc)) == {("shop", "shop")}


@pytest.mark.parametrize(("yaml_text", "words"), [
    (FLUXCD.replace("namespace: shop", "namespace: bank"), "metadata.namespace: another "
                                                           "namespace than shop"),
    (FLUXCD.replace("kind: Application", "kind: ClusterRoleBinding"),
     "apiVersion and kind must be"),
])
async def test_attack_a_configmap_naming_another_namespace_or_kind_creates_nothing(
        yaml_text: str, words: str) -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", config_map(yaml_text))
    set_app(mc, DEPENDING)
    before = {k for k in mc.objects if k[0] == "hub"}
    status = await reconcile(mc, 2)
    phase, message = steps_of(status)["check"]
    assert phase == "running"
    assert message.startswith("Application shop/fluxcd on the hub not found; not created: "
                              "ConfigMap shop/fluxcd data.application")
    assert words in message and message.endswith(": waiting for it")
    created = {k for k in mc.objects if k[0] == "hub"} - before
    assert {k[1] for k in created} <= {"applicationrevisions", "resourcetrackers"}, created
    assert "t0ps3cret" not in json.dumps(status)


async def test_a_step_whose_turn_has_not_come_creates_nothing() -> None:
    """Pending behind a suspend step: KubeVela's step creates when it runs."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", config_map(FLUXCD))
    app = json.loads(json.dumps(DEPENDING))
    app["spec"]["workflow"]["steps"].insert(0, {"name": "hold", "type": "suspend"})
    set_app(mc, app)
    status = await reconcile(mc, 2)
    assert steps_of(status)["check"][0] == "pending"
    assert ("shop", "fluxcd") not in applications(mc)


async def test_a_create_the_hub_refuses_is_a_problem_not_a_success() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", config_map(FLUXCD))
    set_app(mc, DEPENDING)
    writer_of = mc.cluster

    def refusing(name: str) -> Any:
        writer = writer_of(name)
        real = writer.create

        async def create(obj: JSON, **kw: Any) -> JSON:
            if obj.get("kind") == "Application":
                raise ApiError(name, 403, "Forbidden", "applications is forbidden")
            return await real(obj, **kw)
        writer.create = create  # type: ignore[method-assign]
        return writer

    mc.cluster = refusing  # type: ignore[method-assign]
    recorder = app_fakes.Recorder()
    status = await reconcile(mc, 1, recorder)
    assert ("shop", "fluxcd") not in applications(mc)
    assert not [e for e in recorder.events if e[1] == dependencies.CREATED]
    assert "depends-on-app step check: creating Application shop/fluxcd" in json.dumps(status)


def test_dry_run_says_the_missing_application_comes_from_its_configmap(
        tmp_path: Path) -> None:
    result = dry_run(tmp_path, "    - {name: check, type: depends-on-app, properties: "
                               "{name: fluxcd}}\n")
    assert result.exit_code == 0, result.output
    assert "waits for Application fluxcd of this namespace to be running (created from " \
           "ConfigMap fluxcd of this namespace if it is missing)" in result.output
