"""KubeVela's resource-update policy, the pure part: its parameters, which rule decides for
an object (``ResourceUpdatePolicySpec.FindStrategy``), and whether a write is a recreate
(``needRecreate`` of pkg/utils/apply), on KubeVela's own e2e Application
(test/e2e-multicluster-test/testdata/app/app-recreate-test.yaml, re-typed) and its
def-doc examples."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from federation.applications import compile as compile_
from federation.applications import model
from federation.applications import resource_policies as rp
from federation.cli import cli
from federation.placement import clusters as clusters_

JSON = dict[str, Any]
LABELS = {"app.oam.dev/component": "recreate"}
SECRET: JSON = {"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "recreate", "labels": LABELS},
                "data": {"key": "dgo=", "value": "dgo="}, "immutable": True}
CONFIG_MAP: JSON = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "recreate", "labels": LABELS},
                    "data": {"key": "val"}}
RULES: list[JSON] = [
    {"selector": {"resourceTypes": ["Secret"]}, "strategy": {"recreateFields": ["data.key"]}},
    {"selector": {"resourceTypes": ["ConfigMap"]}, "strategy": {"op": "replace"}}]
"""KubeVela's e2e case: the immutable Secret recreated when data.key changes, the
ConfigMap replaced."""


def recreate_app() -> JSON:
    return {"components": [{"type": "k8s-objects", "name": "recreate", "properties": {
        "objects": [{k: v for k, v in obj.items() if k != "metadata"} | {
            "metadata": {"name": "recreate"}} for obj in (SECRET, CONFIG_MAP)]}}],
        "policies": [{"type": "resource-update", "name": "resource-update",
                      "properties": {"rules": copy.deepcopy(RULES)}}]}


def policy(properties: JSON, *more: JSON) -> rp.ResourceUpdate:
    return rp.resource_update_of([
        model.PolicySpec(name=f"u{index}", type="resource-update", properties=p)
        for index, p in enumerate((properties, *more))])


def changed(obj: JSON, path: tuple[str, ...], value: Any) -> JSON:
    copied = copy.deepcopy(obj)
    node = copied
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return copied


def test_kubevelas_e2e_application_compiles_with_its_rules() -> None:
    """The e2e Application as written: the Secret's rule recreates on data.key, the
    ConfigMap's replaces (a full update, our only update: no recreate)."""
    fleet = [clusters_.Cluster(name="member1")]
    compiled = compile_.compile_app(recreate_app(), "recreate", "ns", {}, fleet, "member1")
    update = compiled.resource_update
    objects = compiled.targets[next(iter(compiled.targets))].clusters["member1"]
    secret, config_map = sorted(objects, key=lambda o: str(o["kind"]), reverse=True)
    assert update.rule(secret) == rp.UpdateRule(update.rules[0].selector, ("data.key",))
    rule = update.rule(config_map)
    assert rule is not None and rule.op == "replace" and rule.recreate_fields == ()
    live = changed(secret, ("data", "key"), "dnZ2Cg==")
    assert update.recreate(secret, live) == rp.Recreate(("data.key",))
    assert update.recreate(config_map, changed(config_map, ("data", "key"), "val2")) == \
        rp.Recreate()


def test_only_a_changed_recreate_field_recreates() -> None:
    """KubeVela's def-doc: "If the field is not changed, the application will use the
    normal update"; a change elsewhere (data.value) is an update."""
    update = policy({"rules": RULES})
    assert update.recreate(SECRET, copy.deepcopy(SECRET)) == rp.Recreate()
    assert update.recreate(SECRET, changed(SECRET, ("data", "value"), "eA==")) == rp.Recreate()
    assert update.recreate(SECRET, changed(SECRET, ("data", "key"), "eA==")).changed == \
        ("data.key",)


def test_paths_reach_into_lists_and_map_keys_and_compare_whole_values() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "web", "labels": {"app.oam.dev/component": "web"}},
                  "spec": {"selector": {"matchLabels": {"app": "web"}},
                           "template": {"spec": {"containers": [{"image": "a"}]}}}}
    update = policy({"rules": [{"selector": {"componentNames": ["web"]}, "strategy": {
        "recreateFields": ["spec.selector", "spec.template.spec.containers[0].image",
                           "metadata.labels[app.oam.dev/component]"]}}]})
    live = changed(deployment, ("spec", "selector"), {"matchLabels": {"app": "web",
                                                                      "tier": "1"}})
    assert update.recreate(deployment, live).changed == ("spec.selector",)
    live = changed(deployment, ("spec", "template", "spec", "containers"), [{"image": "b"}])
    assert update.recreate(deployment, live).changed == (
        "spec.template.spec.containers[0].image",)


def test_a_path_either_object_lacks_is_an_error_not_a_silent_update() -> None:
    """KubeVela fails the apply ("unable to get path ... from existing object"): here the
    object's write, with the reason; a misspelt path never silently disables it."""
    update = policy({"rules": [{"selector": {"resourceTypes": ["Secret"]},
                                "strategy": {"recreateFields": ["data.nope"]}}]})
    found = update.recreate(SECRET, SECRET)
    assert found.changed == () and "'data.nope': not in the member's object" in found.missing
    live = changed(SECRET, ("data", "nope"), "x")
    assert "not in the rendered object" in update.recreate(SECRET, live).missing


def test_the_first_matching_rule_decides_across_policies() -> None:
    """KubeVela concatenates the rules of every resource-update policy; the first rule
    whose selector matches decides, even one without recreateFields."""
    update = policy({"rules": [{"selector": {"resourceNames": ["recreate"]},
                                "strategy": {"op": "replace"}}]},
                    {"rules": RULES})
    assert len(update.rules) == 3
    assert update.recreate(SECRET, changed(SECRET, ("data", "key"), "x")) == rp.Recreate()
    other = changed(SECRET, ("metadata", "name"), "other")
    assert update.recreate(other, changed(other, ("data", "key"), "x")).changed == \
        ("data.key",)


def test_no_policy_no_rules_or_no_match_never_recreates() -> None:
    live = changed(SECRET, ("data", "key"), "x")
    for update in (rp.resource_update_of([]), policy({}), policy({"rules": []}),
                   policy({"rules": [{"selector": {"resourceTypes": ["ConfigMap"]},
                                      "strategy": {"recreateFields": ["data.key"]}}]}),
                   policy({"rules": [{"selector": {"resourceTypes": ["Secret"]}}]})):
        assert update.recreate(SECRET, live) == rp.Recreate()


@pytest.mark.parametrize(("properties", "words"), [
    ({"rules": [{"selector": {"resourceTypes": ["Secret"]}, "strategy": {"op": "patch"}}]},
     r"policy u0 properties\.rules\[0\]\.strategy\.op: 'patch' is not supported "
     r"\(KubeVela's op patch is a three-way merge"),
    ({"rules": [{"selector": {"resourceTypes": ["Secret"]}, "strategy": {"op": "merge"}}]},
     r"rules\[0\]\.strategy\.op"),
    ({"rules": [{"strategy": {"op": "replace"}}]}, r"rules\[0\]\.selector"),
    ({"rules": [{"selector": {"resourceTypes": ["Secret"]},
                 "strategy": {"recreateFields": ["data..key"]}}]},
     r"rules\[0\]\.strategy\.recreateFields\[0\]: 'data\.\.key' is not a field path"),
    ({"rules": [{"selector": {"resourceTypes": ["Secret"]},
                 "strategy": {"recreateFields": ["*"]}}]},
     r"recreateFields\[0\]: '\*' is not a field path"),
    ({"rules": [{"selector": {"resourceTypes": ["Secret"]},
                 "strategy": {"recreatefields": ["data.key"]}}]}, r"recreatefields"),
    ({"rules": [{"selector": {"resourceTypes": ["Secret"]}}], "rule": []}, r"rule\b"),
    ({"rules": [{"selector": {"oamTypes": ["COMPONENT"]}}]}, r"oamTypes"),
])
def test_malformed_rules_are_refused_by_name(properties: JSON, words: str) -> None:
    with pytest.raises(model.AppError, match=words):
        policy(properties)


def test_a_refused_rule_refuses_the_application_at_compile() -> None:
    spec = recreate_app()
    spec["policies"][0]["properties"]["rules"][1]["strategy"]["op"] = "patch"
    with pytest.raises(model.AppError, match=r"policy resource-update properties\.rules\[1\]"
                                             r"\.strategy\.op: 'patch' is not supported"):
        compile_.compile_app(spec, "recreate", "ns", {}, [clusters_.Cluster(name="m")], "m")


def test_dry_run_says_which_objects_are_recreated(tmp_path: Path) -> None:
    """KubeVela's def-doc example through ``fedctl app dry-run``: the Secret's line says
    it is recreated on data.key; the ConfigMap (op replace) gets no line."""
    spec = recreate_app()
    doc = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
           "metadata": {"name": "recreate", "namespace": "ns"}, "spec": spec}
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path), "--local-cluster",
                                     "member1"])
    assert result.exit_code == 0, result.output
    assert result.output.count("# resource-update: ") == 1
    line = "# resource-update: deleted and created again when data.key differs in the member"
    after = result.output.split(line + "\n", 1)[1]
    assert after.split("---")[0].count("kind: Secret") == 1
