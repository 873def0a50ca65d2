"""Override policies' ``components`` as KubeVela applies them (issue 23, "accepted and silently
wrong"): an entry naming a component the Application lacks adds it, names with ``*`` are
patterns, a patch of another type replaces the component, ``selector`` filters after the
patches.

The cases are KubeVela's own: ``Test_EnvBindApp_GenerateConfiguredApplication`` in
kubevela/kubevela ``pkg/policy/envbinding/patch_test.go`` (the function every override
policy goes through, ``PatchComponents``), re-typed here as inputs and expected outputs; each
test names the upstream case. Trait types (``ingress-1-20``) are KubeVela's: patches do not
check types, the renderer does.
"""

from __future__ import annotations

from typing import Any

import pytest

from federation.applications import compile as compile_
from federation.applications import model, patches
from federation.placement import clusters as clusters_

#: ``baseApp`` of patch_test.go.
BASE: list[dict[str, Any]] = [{"name": "express-server", "type": "webservice",
         "properties": {"image": "crccheck/hello-world", "port": 8000},
         "traits": [{"type": "ingress-1-20",
                     "properties": {"domain": "testsvc.example.com", "http": {"/": 8000}}}]}]
#: The base of patch-all-comp, patch-type-comp and patch-without-type-specified.
TWO: list[dict[str, Any]] = [{"name": "express-server", "type": "webservice",
        "properties": {"image": "crccheck/hello-world"},
        "traits": [{"type": "ingress", "properties": {"domain": "a.example.com"}},
                   {"type": "ingress-1-20", "properties": {"domain": "a-1-20.example.com"}}]},
       {"name": "express-worker", "type": "worker",
        "properties": {"image": "crccheck/hello-world"}}]
INGRESS_B = {"type": "ingress", "properties": {"domain": "b.example.com"}}


def patched(base: list[dict[str, Any]], components: list[dict[str, Any]],
            selector: list[str] | None = None) -> list[dict[str, Any]]:
    properties: dict[str, Any] = {"components": components}
    if selector is not None:
        properties["selector"] = selector
    policy = model.PolicySpec(name="o", type="override", properties=properties)
    entries = patches.entries_of([model.Component.model_validate(c) for c in base])
    return [e.component.model_dump() for e in patches.override(entries, policy)]


def comp(name: str, type_: str, properties: dict[str, Any],
         traits: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"name": name, "type": type_, "properties": properties,
            "traits": tuple(traits or ())}


def test_normal_test() -> None:
    """Upstream case "normal-test": properties and a trait's properties merged."""
    out = patched(BASE, [{"name": "express-server", "type": "webservice",
                          "properties": {"image": "busybox"},
                          "traits": [{"type": "ingress-1-20",
                                      "properties": {"domain": "newTestsvc.example.com"}}]}])
    assert out == [comp("express-server", "webservice", {"image": "busybox", "port": 8000},
                        [{"type": "ingress-1-20",
                          "properties": {"domain": "newTestsvc.example.com",
                                         "http": {"/": 8000}}}])]


def test_add_component() -> None:
    """Upstream case "add-component": an entry naming no component is added after the
    Application's own (the docs' advance-override deploys both)."""
    labels = {"type": "labels", "properties": {"test": "label"}}
    out = patched(BASE, [{"name": "express-server", "type": "webservice", "traits": [labels]},
                         {"name": "new-server", "type": "worker",
                          "properties": {"image": "busybox", "cmd": ["sleep", "1000"]},
                          "traits": [labels]}])
    assert out == [comp("express-server", "webservice",
                        {"image": "crccheck/hello-world", "port": 8000},
                        [BASE[0]["traits"][0], labels]),
                   comp("new-server", "worker", {"image": "busybox", "cmd": ["sleep", "1000"]},
                        [labels])]


def test_disable_trait() -> None:
    """Upstream case "disable-trait"."""
    out = patched(BASE, [{"name": "express-server", "type": "webservice",
                          "traits": [{"type": "ingress-1-20", "disable": True}]}])
    assert out == [comp("express-server", "webservice",
                        {"image": "crccheck/hello-world", "port": 8000})]


def test_component_selector() -> None:
    """Upstream case "component-selector": the selector applies after the patches, so it
    keeps only the component the patch added."""
    out = patched(BASE, [{"name": "new-server", "type": "worker",
                          "properties": {"image": "busybox"}}], selector=["new-server"])
    assert out == [comp("new-server", "worker", {"image": "busybox"})]


def test_empty_component_selector() -> None:
    """Upstream case "empty-component-selector": an empty selector selects nothing."""
    assert patched(BASE, [{"name": "new-server", "type": "worker",
                           "properties": {"image": "busybox"}}], selector=[]) == []


def test_patch_all_comp() -> None:
    """Upstream case "patch-all-comp": no name and no type patches every component."""
    out = patched(TWO, [{"name": "", "type": "", "properties": {"image": "busybox"},
                         "traits": [INGRESS_B]}])
    assert out == [comp("express-server", "webservice", {"image": "busybox"},
                        [INGRESS_B, TWO[0]["traits"][1]]),
                   comp("express-worker", "worker", {"image": "busybox"}, [INGRESS_B])]


def test_patch_type_comp() -> None:
    """Upstream case "patch-type-comp": no name, a type: the components of that type."""
    out = patched(TWO, [{"type": "webservice", "properties": {"image": "busybox"},
                         "traits": [INGRESS_B]}])
    assert out == [comp("express-server", "webservice", {"image": "busybox"},
                        [INGRESS_B, TWO[0]["traits"][1]]),
                   comp("express-worker", "worker", {"image": "crccheck/hello-world"})]


def test_patch_without_type_specified() -> None:
    """Upstream case "patch-without-type-specified": a name without a type merges."""
    out = patched(TWO, [{"name": "express-worker", "properties": {"image": "busybox"},
                         "traits": [INGRESS_B]}])
    assert out[0] == comp("express-server", "webservice", {"image": "crccheck/hello-world"},
                          TWO[0]["traits"])
    assert out[1] == comp("express-worker", "worker", {"image": "busybox"}, [INGRESS_B])


def test_a_patch_of_another_type_replaces_the_component() -> None:
    """PatchComponents' rule 3 (its comment; no upstream case): a matched component of
    another type is replaced by the entry, properties and traits included, not merged."""
    out = patched(TWO, [{"name": "express-worker", "type": "webservice",
                         "properties": {"image": "nginx", "port": 80}}])
    assert out[1] == comp("express-worker", "webservice", {"image": "nginx", "port": 80})


def test_names_with_a_star_are_patterns_searched_anywhere() -> None:
    """PatchComponents compiles the name to a regular expression with ``*`` as ``.*`` and
    searches it unanchored: ``express-*`` patches both, ``worker`` patches express-worker,
    and neither adds a component."""
    out = patched(TWO, [{"name": "express-*", "properties": {"image": "busybox"}}])
    assert [c["properties"]["image"] for c in out] == ["busybox", "busybox"]
    out = patched(TWO, [{"name": "worker", "properties": {"image": "busybox"}}])
    assert [c["properties"]["image"] for c in out] == ["crccheck/hello-world", "busybox"]
    assert len(out) == 2


@pytest.mark.parametrize(("entry", "words"), [
    ({"name": "web", "properties": [1, 2]}, "components[0].properties: a map"),
    ({"name": "web.api"}, "components[0].name: a component name, or a pattern"),
    ({"name": "123", "type": "worker"}, "components[0].name: '123' matches no component"),
    ({"name": "web", "traits": [{"properties": {}}]}, "components[0].traits[0].type"),
    ({"name": "web", "traits": {"type": "scaler"}}, "components[0].traits: a list"),
    ({"name": "new", "type": "worker", "properties": {"image": 5}},
     "components[0].properties.image"),
    ({"name": "new", "type": "helm", "properties": {}}, "components[0].type: 'helm'"),
    ({"name": "web", "traits": [{"type": "rollout"}]},
     "spec.components[0] as patched by policy o properties.components[0].traits[1]"
     ".type: 'rollout'"),
    ({"name": "web", "externalRevision": "v1"}, "components[0].externalRevision"),
])
def test_malformed_entries_are_one_line_naming_the_entry(entry: dict[str, Any],
                                                         words: str) -> None:
    """The entry that added or changed a component is named, never a traceback (an
    override's ``properties`` as a list used to raise pydantic's error)."""
    spec = {"components": [{"name": "web", "type": "webservice",
                            "properties": {"image": "web:1"},
                            "traits": [{"type": "scaler", "properties": {"replicas": 1}}]}],
            "policies": [{"name": "t", "type": "topology", "properties": {"clusters": ["m1"]}},
                         {"name": "o", "type": "override",
                          "properties": {"components": [entry]}}]}
    with pytest.raises(model.AppError) as caught:
        compile_.compile_app(spec, "app", "ns", {}, [clusters_.Cluster(name="m1")])
    assert words in str(caught.value) and "policy o properties." in str(caught.value)


def test_an_added_component_is_deployed_next_to_the_others() -> None:
    """The docs' advance-override case (kubevela.io, "multi-cluster application"): the
    override adds a component, and the deploy step renders both."""
    spec = {"components": [{"name": "nginx-ha", "type": "webservice",
                            "properties": {"image": "nginx"}}],
            "policies": [{"name": "t", "type": "topology", "properties": {"clusters": ["m1"]}},
                         {"name": "o", "type": "override", "properties": {"components": [
                             {"name": "nginx-ha", "traits": [
                                 {"type": "scaler", "properties": {"replicas": 3}}]},
                             {"name": "nginx-ha-2", "type": "worker",
                              "properties": {"image": "busybox"}}]}}]}
    compiled = compile_.compile_app(spec, "app", "ns", {}, [clusters_.Cluster(name="m1")])
    deployments = {m["metadata"]["name"]: m["spec"]["replicas"]
                   for m in compiled.targets["deploy"].clusters["m1"]}
    assert deployments == {"nginx-ha": 3, "nginx-ha-2": 1}
