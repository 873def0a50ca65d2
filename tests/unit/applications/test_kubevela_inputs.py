"""What issue 23 found when KubeVela's own Applications went through ``fedctl app dry-run``.

- malformed input that raised a traceback (expose ``port: 80`` as a scalar, a typo in a
  ``placement`` block, an override's ``properties`` as a list) is one ``error:`` line naming
  the field; ``--local-cluster`` naming no member blames the flag, not a "policy local";
- two topologies selecting the same cluster in one deploy step render each object there
  once (KubeVela places each cluster and namespace once);
- KubeVela's defaults are taken instead of refused: ``traits: null``, a policy without a
  name, an Application without components, a topology without clusters (the local one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from federation.applications import compile as compile_
from federation.applications import model, scope
from federation.cli import cli
from federation.placement import clusters as clusters_

FLEET = [clusters_.Cluster(name=n, labels={"region": r})
         for n, r in (("member1", "eu"), ("member2", "eu"), ("member3", "us"))]


def app(components: Any = None, policies: Any = None, workflow: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"components": [{"name": "web", "type": "webservice",
                                            "properties": {"image": "web:1"}}]
                            if components is None else components}
    if policies is not None:
        spec["policies"] = policies
    if workflow is not None:
        spec["workflow"] = workflow
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": "shop", "namespace": "shop"}, "spec": spec}


def dry_run(tmp_path: Path, document: dict[str, Any], *extra: str) -> Result:
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(document))
    return CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path), *extra])


def refused(result: Result, words: str) -> None:
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 1
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: ") and words in last, result.stderr


TOPOLOGY = {"name": "t", "type": "topology", "properties": {"clusters": ["member1"]}}
WEB = {"name": "web", "type": "webservice", "properties": {"image": "web:1"}}


@pytest.mark.parametrize(("document", "words"), [
    (app([{**WEB, "traits": [{"type": "expose", "properties": {"port": 80}}]}], [TOPOLOGY]),
     "spec.components[0].traits[0].properties.port: must be a list of port numbers"),
    (app(policies=[{"name": "t", "type": "topology", "properties": {
        "clusters": ["member1"], "placement": {"clusterAfinity": {}}}}]),
     "policy t properties.placement.clusterAfinity: unknown field"),
    (app(policies=[TOPOLOGY, {"name": "o", "type": "override", "properties": {
        "components": [{"name": "web", "properties": ["image", "web:2"]}]}}]),
     "policy o properties.components[0].properties: a map"),
    (app([{**WEB, "traits": [{"type": "storage", "properties": {"pvc": 1.0}}]}], [TOPOLOGY]),
     "spec.components[0].traits[0].properties.pvc: must be a list"),
    (app([{**WEB, "properties": {"image": "web:1", "cpu": {"a": 1}}}], [TOPOLOGY]),
     "spec.components[0].properties.cpu: must be a quantity"),
    (app([{"name": "raw", "type": "k8s-objects", "properties": {"objects": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"labels": "x"}}]},
           "traits": [{"type": "labels", "properties": {"a": "b"}}]}], [TOPOLOGY]),
     "spec.components[0].properties.objects[0].metadata.labels: must be a map of strings"),
    (app([{"name": "raw", "type": "k8s-objects", "properties": {"objects": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": []}}]},
           "traits": [{"type": "scaler", "properties": {"replicas": 2}}]}], [TOPOLOGY]),
     "spec.components[0].properties.objects[0].spec.template: must be a map"),
])
def test_malformed_fields_are_one_line_naming_the_field(tmp_path: Path,
                                                        document: dict[str, Any],
                                                        words: str) -> None:
    """Each of these raised TypeError, LoadError or pydantic's ValidationError before."""
    refused(dry_run(tmp_path, document), words)


def test_a_missing_local_cluster_blames_the_flag(tmp_path: Path) -> None:
    """No topology deploys to KubeVela's local cluster; a --local-cluster that is no member
    used to be reported as "policy local properties...", a policy nobody wrote."""
    result = dry_run(tmp_path, app(), "--local-cluster", "nope")
    refused(result, "no topology, and the local cluster 'nope' (--local-cluster")
    assert "policy local" not in result.stderr
    result = dry_run(tmp_path, app(policies=[{"name": "here", "type": "topology",
                                              "properties": {"clusters": ["local"]}}]),
                     "--local-cluster", "nope")
    refused(result, "policy here deploys to KubeVela's local cluster, and the local "
                    "cluster 'nope'")


def compiled(document: dict[str, Any], local: str | None = None) -> compile_.Compiled:
    return compile_.compile_app(document["spec"], "shop", "shop", {}, FLEET, local)


def test_two_topologies_sharing_a_cluster_render_each_object_once() -> None:
    """eu selects member1 and member2, pinned names member1 again: member1 gets one
    Deployment (it got two, the second an identical write)."""
    document = app(policies=[
        {"name": "eu", "type": "topology", "properties": {"clusterLabelSelector":
                                                          {"region": "eu"}}},
        {"name": "pinned", "type": "topology", "properties": {"clusters": ["member1"]}}])
    clusters = compiled(document).targets["deploy"].clusters
    assert [m["kind"] for m in clusters["member1"]] == ["Deployment"]
    assert [m["kind"] for m in clusters["member2"]] == ["Deployment"]


def test_two_topologies_placing_one_object_differently_are_refused() -> None:
    """Divided by one, duplicated by the other: member1 would get two replica counts for one
    Deployment; refused rather than one silently dropped."""
    document = app([{**WEB, "properties": {"image": "web:1", "replicas": 4}}], [
        {"name": "split", "type": "topology", "properties": {
            "clusters": ["member1", "member2"],
            "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                                "replicaDivisionPreference": "Weighted"}}}},
        {"name": "all", "type": "topology", "properties": {"clusters": ["member1"]}}])
    with pytest.raises(model.AppError, match="policy all: places Deployment shop/web in "
                                             "cluster member1, where policy split"):
        compiled(document)


def test_two_topologies_in_other_namespaces_both_place() -> None:
    """KubeVela places per (cluster, namespace): two namespaces are two objects."""
    document = app(policies=[
        {"name": "a", "type": "topology", "properties": {"clusters": ["member1"]}},
        {"name": "b", "type": "topology", "properties": {"clusters": ["member1"],
                                                         "namespace": "shop-b"}}])
    spec = document["spec"]
    result = compile_.compile_app(spec, "shop", "shop", {}, FLEET, None,
                                  scope.Grant("shop", frozenset({"shop-b"})))
    assert [m["metadata"]["namespace"] for m in result.targets["deploy"].clusters["member1"]
            ] == ["shop", "shop-b"]


def test_kubevela_defaults_are_taken() -> None:
    """``traits: null``, ``properties: null``, a policy without a name: KubeVela reads them
    as absent (Go's nil and omitempty), so do we."""
    document = app([{**WEB, "traits": None}, {"name": "c", "type": "config",
                                              "properties": None}],
                   [{"type": "topology", "properties": {"clusters": ["member2"]}}])
    result = compiled(document)
    assert list(result.targets["deploy"].clusters) == ["member2"]
    assert result.spec.policies[0].name == "spec.policies[0]"


def test_an_unnamed_policy_is_named_by_its_path_in_a_refusal() -> None:
    document = app(policies=[{"type": "topology", "properties": {"clusters": "member2"}}])
    with pytest.raises(model.AppError, match=r"policy spec.policies\[0\] properties.clusters"):
        compiled(document)


def test_a_workflow_only_application_has_no_components() -> None:
    """``components: []`` with a suspend and a notification: KubeVela runs the workflow."""
    document = app([], workflow={"steps": [{"name": "wait", "type": "suspend"}]})
    result = compiled(document)
    assert [s.type for s in result.steps] == ["suspend"]
    deploy_only = compiled(app([], [TOPOLOGY]))
    assert deploy_only.targets["deploy"].clusters == {}


def test_a_topology_without_clusters_is_the_local_cluster() -> None:
    """KubeVela's ``topology: {namespace: x}`` deploys to its own cluster; it placed on
    every member here before."""
    document = app(policies=[{"name": "ns", "type": "topology",
                              "properties": {"namespace": "shop"}}])
    assert list(compiled(document, "member3").targets["deploy"].clusters) == ["member3"]
    with pytest.raises(model.AppError, match=r"policy ns properties\.clusters: KubeVela's local"):
        compiled(document)


def test_a_null_replica_scheduling_is_the_default() -> None:
    """The compile fuzzer's find: ``placement: {replicaScheduling: null}`` raised
    AttributeError; null is absent, so KubeVela's copies (Duplicated)."""
    document = app(policies=[{"name": "t", "type": "topology", "properties": {
        "clusters": ["member1", "member2"], "placement": {"replicaScheduling": None}}}])
    clusters = compiled(document).targets["deploy"].clusters
    assert [m[0]["spec"]["replicas"] for m in clusters.values()] == [1, 1]
