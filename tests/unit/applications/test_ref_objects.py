"""KubeVela's ref-objects component: what may be read (the Application's own namespace on
the hub, no Secret, no cluster-scoped kind, no URL, no other cluster), what is deployed
(the object as it is there, server fields dropped: ``ClearRefObjectForDispatch``), and
``fedctl app dry-run`` reading the referenced objects from its file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from federation.applications import model, refs
from federation.cli import cli

JSON = dict[str, Any]


def spec(*objects: JSON, **props: Any) -> JSON:
    return {"components": [{"name": "web", "type": "webservice",
                            "properties": {"image": "x"}},
                           {"name": "conf", "type": "ref-objects",
                            "properties": {"objects": list(objects), **props}}]}


def test_references_by_resource_name_and_labels() -> None:
    found = refs.refs_of(spec({"resource": "configmap"},
                              {"resource": "deployments", "name": "web"},
                              {"apiVersion": "v1", "kind": "Service",
                               "labelSelector": {"app": "x"}}))
    assert found == {1: [
        refs.Ref("v1", "ConfigMap", "conf", None, "spec.components[1].properties.objects[0]"),
        refs.Ref("apps/v1", "Deployment", "web", None,
                 "spec.components[1].properties.objects[1]"),
        refs.Ref("v1", "Service", None, {"app": "x"},
                 "spec.components[1].properties.objects[2]")]}
    assert refs.refs_of({"components": "x"}) == {}


@pytest.mark.parametrize(("entry", "props", "words"), [
    ({"resource": "configmap", "namespace": "bank"}, {},
     r"objects\[0\]\.namespace: not supported .ref-objects reads the Application's own"),
    ({"resource": "configmap", "cluster": "member1"}, {},
     r"objects\[0\]\.cluster: not supported .ref-objects reads the hub only"),
    ({"resource": "secret"}, {}, r"objects\[0\]\.resource: 'secret' .group 'core'. is not"),
    ({"resource": "deployments", "group": ""}, {}, r"'deployments' .group 'core'. is not"),
    ({"apiVersion": "v1", "kind": "Secret", "name": "db"}, {},
     r"objects\[0\]: a Secret is not supported .the control plane reads no Secret"),
    ({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "admin"},
     {}, r"objects\[0\]: ClusterRole is cluster-scoped"),
    ({"resource": "configmap", "name": "a", "labelSelector": {"a": "b"}}, {},
     r"objects\[0\]: name and labelSelector cannot be both set"),
    ({"resource": "configmap", "apiVersion": "v1"}, {}, r"give resource or apiVersion"),
    ({"name": "a"}, {}, r"objects\[0\]\.resource: required .or apiVersion and kind"),
    ({"resource": "configmap", "selector": {}}, {}, r"objects\[0\]\.selector: not supported"),
    ({"resource": "configmap"}, {"urls": ["http://169.254.169.254/"]},
     r"properties\.urls: not supported .the control plane fetches no URL"),
])
def test_reads_outside_the_applications_own_objects_are_refused(
        entry: JSON, props: JSON, words: str) -> None:
    """Each attack: reading another team's namespace, a member, a Secret, a cluster-scoped
    object or a URL with the control plane's identity, refused before anything is read."""
    with pytest.raises(model.AppError, match=words):
        refs.refs_of(spec(entry, **props))


def test_what_is_read_is_deployed_without_server_fields() -> None:
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "db", "namespace": "shop", "uid": "u", "labels": {"a": "b"},
                            "resourceVersion": "7", "managedFields": [{}],
                            "ownerReferences": [{}], "creationTimestamp": "t"},
               "spec": {"clusterIP": "10.0.0.3", "clusterIPs": ["10.0.0.3"], "ports": [
                   {"port": 5432}]}, "status": {"loadBalancer": {}}}
    ref = refs.Ref("v1", "Service", "db", None, "w")
    assert refs.cleared(service, ref) == {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "db", "labels": {"a": "b"}},
        "spec": {"ports": [{"port": 5432}]}}
    headless = {**service, "spec": {"clusterIP": "None"}}
    assert refs.cleared(headless, ref)["spec"] == {"clusterIP": "None"}
    expanded = refs.expand(spec({"resource": "service", "name": "db"}),
                           {1: [refs.cleared(service, ref)]})
    assert expanded["components"][1] == {
        "name": "conf", "type": "k8s-objects",
        "properties": {"objects": [refs.cleared(service, ref)]}}
    with pytest.raises(model.AppError, match=r"components\[1\]\.properties\.objects: the "
                                             "references select no object"):
        refs.expand(spec({"resource": "configmap", "labelSelector": {"a": "b"}}), {1: []})


def test_an_override_cannot_bring_in_unread_references() -> None:
    from federation.applications import render
    component = model.Component.model_validate({"name": "c", "type": "ref-objects",
                                                "properties": {}})
    with pytest.raises(model.AppError, match="cannot be brought in by an override"):
        render.render_component(component, "app", "ns")


def app_file(tmp_path: Path, *extra: JSON, objects: list[JSON] | None = None) -> Path:
    application = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                   "metadata": {"name": "shop", "namespace": "shop"},
                   "spec": {"components": [{"name": "conf", "type": "ref-objects",
                                            "properties": {"objects": objects or [
                                                {"resource": "configmap", "name": "web"}]}}],
                            "policies": [{"name": "t", "type": "topology",
                                          "properties": {"clusters": ["member1"]}}]}}
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump_all([application, *extra]))
    return path


def dry_run(path: Path) -> Any:
    return CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path)])


def test_dry_run_takes_the_referenced_objects_from_its_file(tmp_path: Path) -> None:
    conf = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "web", "namespace": "shop"}, "data": {"k": "v"}}
    other = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "web", "namespace": "bank"}, "data": {"k": "stolen"}}
    result = dry_run(app_file(tmp_path, other, conf))
    assert result.exit_code == 0, result.output
    assert "data:\n  k: v\n" in result.output and "kind: ConfigMap" in result.output
    assert "stolen" not in result.output
    missing = dry_run(app_file(tmp_path, other))
    assert missing.exit_code == 1
    assert "ConfigMap shop/web is not in the file" in missing.stderr
