"""The resource policies' selectors by ``componentTypes``, ``oamTypes`` and ``traitTypes``
(garbage-collect ``rules``, apply-once ``rules``, read-only ``rules``), as KubeVela's
``ResourcePolicyRuleSelector.Match`` reads its labels: the component type on the
component's workload only, WORKLOAD or TRAIT, the trait that added an object
(``AuxiliaryWorkload``: a component's other objects)."""

from __future__ import annotations

from typing import Any

import pytest

from federation.applications import compile as compile_
from federation.applications import model, render
from federation.placement import clusters as clusters_

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name="member1")]
CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "extra"},
          "data": {"a": "b"}}


def compiled(policies: list[JSON]) -> compile_.Compiled:
    spec = {"components": [
        {"name": "web", "type": "webservice",
         "properties": {"image": "nginx", "ports": [{"port": 80}]},
         "traits": [{"type": "scaler", "properties": {"replicas": 2}},
                    {"type": "expose", "properties": {"port": [80]}}]},
        {"name": "objs", "type": "k8s-objects", "properties": {"objects": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "first"},
             "data": {"a": "b"}}, CONFIG]}}],
        "policies": [{"name": "here", "type": "topology",
                      "properties": {"clusters": ["member1"]}}, *policies]}
    return compile_.compile_app(spec, "app", "shop", {}, FLEET)


def rendered(result: compile_.Compiled) -> dict[tuple[str, str], JSON]:
    return {(obj["kind"], obj["metadata"]["name"]): obj
            for target in result.targets.values()
            for objects in target.clusters.values() for obj in objects}


def gc_strategies(selector: JSON) -> dict[tuple[str, str], str]:
    result = compiled([{"name": "gc", "type": "garbage-collect", "properties": {
        "rules": [{"selector": selector, "strategy": "never"}]}}])
    return {key: result.gc.strategy(obj)[0] for key, obj in rendered(result).items()}


NEVER = "never"
UPDATE = "onAppUpdate"


def test_trait_types_select_what_the_trait_added() -> None:
    """KubeVela's gc docs (end-user/policies/gc.md): `traitTypes: [expose]` keeps the
    Service expose added, not the Deployment."""
    assert gc_strategies({"traitTypes": ["expose"]}) == {
        ("Deployment", "web"): UPDATE, ("Service", "web"): NEVER,
        ("ConfigMap", "first"): UPDATE, ("ConfigMap", "extra"): UPDATE}


def test_a_patching_trait_makes_nothing() -> None:
    """scaler patched the Deployment: it is still the component's workload."""
    assert NEVER not in gc_strategies({"traitTypes": ["scaler"]}).values()


def test_component_types_select_the_workload_only() -> None:
    """KubeVela labels ``workload.oam.dev/type`` on the component's output, not on its
    traits' objects nor its other outputs."""
    assert gc_strategies({"componentTypes": ["webservice"]}) == {
        ("Deployment", "web"): NEVER, ("Service", "web"): UPDATE,
        ("ConfigMap", "first"): UPDATE, ("ConfigMap", "extra"): UPDATE}
    assert gc_strategies({"componentTypes": ["k8s-objects"]})[("ConfigMap", "first")] == NEVER


def test_oam_types_and_auxiliary_workloads() -> None:
    assert gc_strategies({"oamTypes": ["TRAIT"]}) == {
        ("Deployment", "web"): UPDATE, ("Service", "web"): NEVER,
        ("ConfigMap", "first"): UPDATE, ("ConfigMap", "extra"): NEVER}
    assert gc_strategies({"traitTypes": ["AuxiliaryWorkload"]}) == {
        ("Deployment", "web"): UPDATE, ("Service", "web"): UPDATE,
        ("ConfigMap", "first"): UPDATE, ("ConfigMap", "extra"): NEVER}


def test_every_given_list_must_match() -> None:
    assert NEVER not in gc_strategies({"componentTypes": ["webservice"],
                                       "resourceTypes": ["Service"]}).values()
    assert gc_strategies({"traitTypes": ["expose"], "componentNames": ["web"]})[
        ("Service", "web")] == NEVER


def test_read_only_and_apply_once_select_by_type_too() -> None:
    result = compiled([
        {"name": "ro", "type": "read-only",
         "properties": {"rules": [{"selector": {"traitTypes": ["expose"]}}]}},
        {"name": "once", "type": "apply-once", "properties": {"enable": True, "rules": [
            {"selector": {"componentTypes": ["webservice"]},
             "strategy": {"path": ["spec.replicas"]}}]}}])
    objects = rendered(result)
    assert [key for key, obj in objects.items() if result.read_only.match(obj)] == [
        ("Service", "web")]
    assert result.apply_once.kept(objects[("Deployment", "web")], "onUpdate") == \
        ("spec.replicas",)
    assert result.apply_once.kept(objects[("Service", "web")], "onUpdate") == ()


def test_the_objects_written_are_unchanged() -> None:
    """What rendered an object is kept beside it, never written into it."""
    for obj in rendered(compiled([])).values():
        assert render.MADE_BY_KEY not in obj and render.OUTPUT_KEY not in obj
        assert set(obj["metadata"]["labels"]) == {"app.oam.dev/name", "app.oam.dev/component"}


def test_oam_types_are_kubevelas_label_values() -> None:
    """KubeVela's usage text says "COMPONENT or TRAIT"; its code labels WORKLOAD or TRAIT,
    so COMPONENT would match nothing there: refused here rather than ignored."""
    with pytest.raises(model.AppError, match=r"selector\.oamTypes\[0\]: must be one of"):
        compiled([{"name": "gc", "type": "garbage-collect", "properties": {
            "rules": [{"selector": {"oamTypes": ["COMPONENT"]}, "strategy": "never"}]}}])
