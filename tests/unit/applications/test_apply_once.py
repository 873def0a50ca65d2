"""KubeVela's apply-once policy, the pure part: its parameters, which paths a rule keeps at
which stage (``ApplyOncePolicySpec.FindStrategy``, ``shouldMerge`` and ``mergeValue`` of
KubeVela's resourcekeeper), and the merge of live values into what is written."""

from __future__ import annotations

from typing import Any

import pytest

from federation.applications import model
from federation.applications import resource_policies as rp

DEPLOYMENT: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "web", "labels": {"app.oam.dev/component": "web"}},
              "spec": {"replicas": 1, "template": {"spec": {"containers": [
                  {"name": "web", "image": "a", "resources": {"limits": {"cpu": "1"}}}]}}}}


def policy(properties: dict[str, Any]) -> rp.ApplyOnce:
    return rp.apply_once_of([model.PolicySpec(name="once", type="apply-once",
                                              properties=properties)])


def test_no_policy_or_disabled_keeps_nothing() -> None:
    assert rp.apply_once_of([]).kept(DEPLOYMENT, "onStateKeep") == ()
    assert policy({}).kept(DEPLOYMENT, "onStateKeep") == ()
    assert policy({"enable": False, "rules": [{"strategy": {"path": ["*"]}}]}).kept(
        DEPLOYMENT, "onUpdate") == ()


def test_enabled_without_rules_keeps_the_whole_object_once_written() -> None:
    """KubeVela skips its state-keep; a new revision is written as usual."""
    once = policy({"enable": True})
    assert once.kept(DEPLOYMENT, "onStateKeep") == ("*",)
    assert once.kept(DEPLOYMENT, "onUpdate") == ()


@pytest.mark.parametrize(("affect", "update", "state_keep"), [
    ("", ("spec.replicas",), ("spec.replicas",)),
    ("always", ("spec.replicas",), ("spec.replicas",)),
    ("onUpdate", ("spec.replicas",), ()),
    ("onStateKeep", (), ("spec.replicas",)),
])
def test_a_rules_strategy_applies_at_the_stages_it_names(
        affect: str, update: tuple[str, ...], state_keep: tuple[str, ...]) -> None:
    once = policy({"enable": True, "rules": [{"selector": {"resourceTypes": ["Deployment"]},
                                              "strategy": {"path": ["spec.replicas"],
                                                           "affect": affect}}]})
    assert once.kept(DEPLOYMENT, "onUpdate") == update
    assert once.kept(DEPLOYMENT, "onStateKeep") == state_keep


def test_the_first_matching_rule_decides_and_a_rule_without_strategy_keeps_nothing() -> None:
    once = policy({"enable": True, "rules": [
        {"selector": {"componentNames": ["web"], "resourceNames": ["web"]}},
        {"selector": {"resourceTypes": ["Deployment"]}, "strategy": {"path": ["*"]}}]})
    assert once.kept(DEPLOYMENT, "onUpdate") == ()
    other = {**DEPLOYMENT, "metadata": {"name": "api"}}
    assert once.kept(other, "onUpdate") == ("*",)


@pytest.mark.parametrize(("selector", "matches"), [
    ({}, False),  # no condition: KubeVela's Match needs one met
    ({"componentNames": ["web"]}, True),
    ({"componentNames": ["api"]}, False),
    ({"resourceTypes": ["Deployment"], "resourceNames": ["other"]}, False),
    ({"resourceTypes": ["Deployment", "Service"], "resourceNames": ["web"]}, True),
])
def test_selectors_match_as_kubevelas(selector: dict[str, Any], matches: bool) -> None:
    once = policy({"enable": True, "rules": [{"selector": selector,
                                              "strategy": {"path": ["spec"]}}]})
    assert bool(once.kept(DEPLOYMENT, "onUpdate")) is matches


@pytest.mark.parametrize(("properties", "words"), [
    ({"enable": "yes"}, r"policy once properties\.enable: must be true or false"),
    ({"enable": True, "rules": [{"selector": {"traitTypes": "scaler"}}]},
     r"rules\[0\]\.selector\.traitTypes: must be a list"),
    ({"enable": True, "rules": [{"strategy": {"path": ["spec..replicas"]}}]},
     r"rules\[0\]\.strategy\.path\[0\]: 'spec\.\.replicas' is not a field path"),
    ({"enable": True, "rules": [{"strategy": {"path": ["a"], "affect": "sometimes"}}]},
     r"strategy\.affect: must be one of"),
    ({"enable": True, "rules": [{"strategy": {"paths": ["a"]}}]},
     r"strategy\.paths: not supported"),
])
def test_bad_parameters_are_refused_by_path(properties: dict[str, Any], words: str) -> None:
    with pytest.raises(model.AppError, match=words):
        policy(properties)


def test_live_values_are_kept_at_their_paths() -> None:
    live = {"spec": {"replicas": 7, "template": {"spec": {"containers": [
        {"name": "web", "resources": {"limits": {"cpu": "3"}}}]}}},
        "metadata": {"labels": {"a.b/c": "x"}}}
    merged = rp.keep_live(DEPLOYMENT, live, ["spec.replicas",
                                             "spec.template.spec.containers[0].resources",
                                             "metadata.labels[a.b/c]", "spec.paused",
                                             "spec.template.spec.containers[3].image"])
    assert merged["spec"]["replicas"] == 7
    assert merged["spec"]["template"]["spec"]["containers"][0] == {
        "name": "web", "image": "a", "resources": {"limits": {"cpu": "3"}}}
    assert merged["metadata"]["labels"]["a.b/c"] == "x"
    assert "paused" not in merged["spec"]  # a field live lacks stays as rendered
    assert DEPLOYMENT["spec"]["replicas"] == 1  # the rendered object is not changed


def test_paths() -> None:
    assert rp.parse_path("spec.template.spec.containers[0].resources", "p") == [
        "spec", "template", "spec", "containers", 0, "resources"]
    assert rp.parse_path("*", "p") == []
    for bad in ("", ".spec", "spec.", "spec[", "spec]x"):
        with pytest.raises(model.AppError, match="is not a field path"):
            rp.parse_path(bad, "p")


def test_read_only_selects_by_its_rules() -> None:
    only = rp.read_only_of([model.PolicySpec(name="r", type="read-only", properties={
        "rules": [{"selector": {"resourceTypes": ["Deployment"]}}]})])
    assert only.match(DEPLOYMENT)
    assert not only.match({**DEPLOYMENT, "kind": "Service"})
    assert not rp.read_only_of([]).match(DEPLOYMENT)
    for properties, words in (({"rules": [{}]}, r"rules\[0\]\.selector: required"),
                              ({"rules": [{"selector": {"oamTypes": "TRAIT"}}]},
                               r"selector\.oamTypes: must be a list")):
        with pytest.raises(model.AppError, match=words):
            rp.read_only_of([model.PolicySpec(name="r", type="read-only",
                                              properties=properties)])
