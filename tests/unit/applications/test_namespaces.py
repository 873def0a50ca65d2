"""An Application places objects only in its own namespace unless its hub Namespace grants
more (apps.federation.io/target-namespaces): the attacks (a topology namespace, a raw
manifest's own namespace, the same through an override or an external Policy) and the
grant, in the pure layer, the controller and `fedctl app dry-run`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from click.testing import CliRunner

from federation.applications import compile as compile_
from federation.applications import model, scope, tracker
from federation.cli import cli
from federation.contexts import client as kube
from federation.contexts.cache import ClusterCache, Event
from federation.contexts.client import NAMESPACES
from federation.controllers import applications
from federation.hub import api, manifests
from federation.placement import clusters as clusters_
from tests.unit.applications.test_controller import MC, REQUEST, Clock, app, must, set_app
from tests.unit.controllers import fakes
from tests.unit.controllers.applications import fakes as app_fakes

FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2", "member3")]
ALL = ["member1", "member2", "member3"]


def web(**extra: Any) -> dict[str, Any]:
    return {"components": [{"name": "web", "type": "webservice",
                            "properties": {"image": "web:1"}}], **extra}


def topology(namespace: str, name: str = "t") -> dict[str, Any]:
    return {"name": name, "type": "topology",
            "properties": {"clusters": ALL, "namespace": namespace}}


def raw(*namespaces: str | None) -> dict[str, Any]:
    objects = []
    for index, namespace in enumerate(namespaces):
        meta: dict[str, Any] = {"name": f"cm{index}"}
        if namespace is not None:
            meta["namespace"] = namespace
        objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                        "data": {"k": "v"}})
    return {"name": "raw", "type": "k8s-objects", "properties": {"objects": objects}}


def refused(field: str, spec: dict[str, Any], grant: scope.Grant | None = None,
            external: dict[str, Any] | None = None) -> str:
    with pytest.raises(model.AppError) as caught:
        compile_.compile_app(spec, "app", "team-a", external or {}, FLEET, None, grant)
    message = str(caught.value)
    assert message.startswith(field + ":"), message
    return message


def namespaces_of(compiled: compile_.Compiled) -> set[str]:
    return {m["metadata"]["namespace"] for t in compiled.targets.values()
            for objects in t.clusters.values() for m in objects}


# -- the attacks ---------------------------------------------------------------------------


def test_topology_namespace_of_another_team_is_refused_with_the_way_to_grant_it() -> None:
    message = refused("spec.policies[0].properties.namespace",
                      web(policies=[topology("team-b")]))
    assert "'team-b'" in message and "team-a" in message
    assert f"kubectl annotate namespace team-a {scope.TARGETS_ANNOTATION}=team-b" in message


def test_raw_manifest_naming_its_own_namespace_is_refused() -> None:
    spec = {"components": [raw(None, "team-b")],
            "policies": [{"name": "t", "type": "topology", "properties": {"clusters": ALL}}]}
    message = refused("spec.components[0].properties.objects[1].metadata.namespace", spec)
    assert "'team-b'" in message


def test_override_supplying_raw_manifests_in_another_namespace_is_refused() -> None:
    spec = {"components": [raw(None)], "policies": [
        {"name": "t", "type": "topology", "properties": {"clusters": ALL}},
        {"name": "o", "type": "override", "properties": {"components": [
            {"name": "raw", "properties": raw("team-b")["properties"]}]}}]}
    refused("spec.policies[1].properties.components[0].properties.objects[0]"
            ".metadata.namespace", spec)


def test_external_policy_topology_namespace_is_refused() -> None:
    spec = web(workflow={"steps": [{"name": "d", "type": "deploy",
                                    "properties": {"policies": ["ext"]}}]})
    external = {"ext": {"apiVersion": "core.oam.dev/v1alpha1", "kind": "Policy",
                        "metadata": {"name": "ext", "namespace": "team-a"},
                        "type": "topology", "properties": {"namespace": "team-b",
                                                           "clusters": ALL}}}
    refused("Policy team-a/ext properties.namespace", spec, external=external)


def test_override_rule_moving_objects_to_another_namespace_stays_refused() -> None:
    spec = web(policies=[
        {"name": "t", "type": "topology", "properties": {"clusters": ALL}},
        {"name": "o", "type": "override", "properties": {"overrideRules": [
            {"overriders": {"plaintext": [{"path": "/metadata/namespace",
                                           "operator": "replace", "value": "team-b"}]}}]}}])
    with pytest.raises(model.AppError, match="may not be overridden"):
        compile_.compile_app(spec, "app", "team-a", {}, FLEET, None,
                             scope.Grant("team-a", frozenset({"team-b"})))


def test_rendered_objects_are_checked_last_whatever_set_their_namespace() -> None:
    objects = [{"kind": "ConfigMap", "metadata": {"name": "a", "namespace": "team-a"}},
               {"kind": "Secret", "metadata": {"name": "b", "namespace": "team-b"}}]
    with pytest.raises(model.AppError, match=re.escape(
            "spec.components[2]: Secret b metadata.namespace: namespace 'team-b'")):
        scope.check_objects(objects, scope.Grant("team-a"), "spec.components[2]")


# -- the grant -----------------------------------------------------------------------------


def test_own_namespace_needs_no_grant() -> None:
    spec = {"components": [raw("team-a", None)], "policies": [topology("team-a")]}
    compiled = compile_.compile_app(spec, "app", "team-a", {}, FLEET)
    assert namespaces_of(compiled) == {"team-a"}


def test_granted_namespaces_are_written() -> None:
    grant = scope.grant_of("team-a", {scope.TARGETS_ANNOTATION: "prod, staging"})
    assert grant.extra == {"prod", "staging"}
    spec = {"components": [raw(None, "staging")], "policies": [topology("prod")]}
    compiled = compile_.compile_app(spec, "app", "team-a", {}, FLEET, None, grant)
    assert namespaces_of(compiled) == {"prod", "staging"}
    refused("spec.policies[0].properties.namespace", web(policies=[topology("team-b")]),
            grant)


def test_system_namespaces_and_cluster_scoped_stay_refused_whatever_the_grant() -> None:
    grant = scope.grant_of("team-a", {scope.TARGETS_ANNOTATION: "*,kube-system"})
    assert grant.allows("team-z") and not grant.allows("kube-system")
    message = refused("spec.policies[0].properties.namespace",
                      web(policies=[topology("kube-system")]), grant)
    assert "system namespace" in message
    spec = {"components": [raw("federation-system")],
            "policies": [{"name": "t", "type": "topology", "properties": {"clusters": ALL}}]}
    assert "system namespace" in refused(
        "spec.components[0].properties.objects[0].metadata.namespace", spec, grant)
    spec["components"] = [{"name": "ns", "type": "k8s-objects", "properties": {"objects": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}]}}]
    assert "cluster-scoped" in refused("spec.components[0]", spec, grant)


@pytest.mark.parametrize("value", ["prod,Prod", "prod,,-x", "a" * 64])
def test_a_bad_grant_annotation_is_refused_naming_it(value: str) -> None:
    with pytest.raises(model.AppError,
                       match=f"Namespace team-a annotation {scope.TARGETS_ANNOTATION}: "):
        scope.grant_of("team-a", {scope.TARGETS_ANNOTATION: value})


# -- the controller ------------------------------------------------------------------------


def hub_namespace(mc: MC, targets: str | None) -> dict[str, Any]:
    annotations = {scope.TARGETS_ANNOTATION: targets} if targets is not None else {}
    return mc.put("hub", {"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": "shop", "annotations": annotations}})


async def test_controller_refuses_until_an_admin_grants_the_namespace() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    reconciler = app_fakes.reconciler(mc, app_fakes.Recorder(), clock=Clock())
    body = app()
    body["spec"]["policies"][0]["properties"]["namespace"] = "prod"
    set_app(mc, body)
    hub_namespace(mc, None)
    await reconciler.reconcile(REQUEST)
    assert not [w for w in mc.writes if w[1] != "hub"]
    status = must(mc, "hub", "Application", "shop")["status"]
    assert status["status"] == "renderFailed"
    message = status["conditions"][0]["message"]
    assert message.startswith("spec.policies[0].properties.namespace: namespace 'prod'")
    assert scope.TARGETS_ANNOTATION in message
    hub_namespace(mc, "prod")
    await reconciler.reconcile(REQUEST)
    assert mc.find("member1", "Deployment", "web", "prod") is not None
    assert must(mc, "hub", "Application", "shop")["status"]["status"] != "renderFailed"


def test_a_changed_grant_requeues_the_namespace_applications() -> None:
    old = {"metadata": {"name": "shop", "annotations": {}}}
    new = {"metadata": {"name": "shop", "annotations": {scope.TARGETS_ANNOTATION: "prod"}}}
    changed = Event("MODIFIED", "hub", NAMESPACES, new, old)
    assert applications.grant_changed(changed)
    assert not applications.grant_changed(Event("MODIFIED", "hub", NAMESPACES, new, new))
    assert not applications.grant_changed(Event("ADDED", "hub", NAMESPACES, new))


# -- fedctl app dry-run --------------------------------------------------------------------


def write_app(tmp_path: Path, namespace_doc: dict[str, Any] | None = None) -> Path:
    docs: list[dict[str, Any]] = []
    if namespace_doc is not None:
        docs.append(namespace_doc)
    docs.append({"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                 "metadata": {"name": "app", "namespace": "team-a"},
                 "spec": web(policies=[topology("prod")])})
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_dry_run_refuses_without_a_grant_and_says_what_it_assumed(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(write_app(tmp_path))])
    assert result.exit_code == 1
    assert "# namespaces: namespace team-a only, from nothing" in result.output
    assert "spec.policies[0].properties.namespace: namespace 'prod'" in result.output


def test_dry_run_takes_the_grant_from_the_flag_or_the_file(tmp_path: Path) -> None:
    path = write_app(tmp_path)
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path),
                                      "--target-namespaces", "prod"])
    assert result.exit_code == 0, result.output
    assert "namespace team-a and prod, from --target-namespaces" in result.output
    assert "namespace: prod" in result.output
    path = write_app(tmp_path, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "team-a", "annotations": {scope.TARGETS_ANNOTATION: "prod"}}})
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path)])
    assert result.exit_code == 0, result.output
    assert "from Namespace team-a in the file" in result.output


async def test_a_forged_tracker_entry_deletes_nothing_of_another_team() -> None:
    """The tracker lives in the author's namespace: an author who writes one naming
    another team's object (ours, placed by their Application) gets nothing deleted."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    reconciler = app_fakes.reconciler(mc, app_fakes.Recorder(), clock=Clock())
    victim = manifests.mark({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "api", "namespace": "team-b",
        "annotations": {applications.APP_ANNOTATION: "team-b/api"}}, "spec": {}}, "uid-b")
    mc.put("member1", victim)
    entry = tracker.Entry("member1", "apps/v1", "Deployment", "team-b", "api", 1, "d")
    mc.put("hub", {"apiVersion": "core.oam.dev/v1beta1", "kind": "ResourceTracker",
                   "metadata": {"name": "shop", "namespace": "shop"},
                   "spec": {"application": "shop", "applicationUID": "forged",
                            "resources": [entry.as_json()], "pendingCleanup": []}})
    await reconciler.reconcile(REQUEST)  # the Application "shop" does not exist
    assert mc.find("member1", "Deployment", "api", "team-b") is not None
    assert not [w for w in mc.writes if w[1] != "hub"]


def test_an_external_policy_event_requeues_its_namespace_applications_only() -> None:
    """A changed Policy (external, KubeVela's) requeues every Application of its namespace
    at once (the revision hash then says whether one of them names it)."""
    clusters = fakes.cluster_set("member1")
    clusters.hub.cache = ClusterCache(cast(kube.ClusterClient, object()), cluster="hub")
    store = clusters.hub.cache.informer(api.APPLICATIONS).store
    for namespace, name in (("shop", "a"), ("shop", "b"), ("bank", "c")):
        store.put({"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                   "metadata": {"name": name, "namespace": namespace}})
    changed = {"metadata": {"name": "eu", "namespace": "shop"}}
    found = applications.apps_in_namespace(clusters, "hub",
                                           Event("MODIFIED", "hub", api.OAM_POLICIES, changed))
    assert sorted((r.namespace, r.name) for r in found) == [("shop", "a"), ("shop", "b")]
