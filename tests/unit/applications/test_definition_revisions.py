"""Definition revisions: what the controller writes for a definition, and how an
Application's ``type: name@v<version>`` resolves (a revision, a built-in, or refused)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from federation.applications import compile as compile_
from federation.applications import cue_worker, definition_revisions, definitions, model
from federation.placement import clusters as clusters_

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name="member1")]


def template(greeting: str) -> str:
    return f"""
parameter: {{name: *"x" | string}}
output: {{
  apiVersion: "v1"
  kind: "ConfigMap"
  data: {{greeting: "{greeting}", who: parameter.name}}
}}
"""


def definition(name: str = "mydef", greeting: str = "old", namespace: str = "vela-system",
               kind: str = "ComponentDefinition", **spec: Any) -> JSON:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {"schematic": {"cue": {"template": template(greeting)}}, **spec}}


def revisions_of(doc: JSON, *more: JSON, limit: int = 20) -> list[JSON]:
    """The revisions the controller writes as ``doc`` then each of ``more`` is applied."""
    kept: list[JSON] = []
    for version in (doc, *more):
        created, old = definition_revisions.planned(version, kept, limit)
        gone = {o["metadata"]["name"] for o in old}
        kept = [r for r in kept if r["metadata"]["name"] not in gone]
        if created is not None:
            kept.append(created)
    return kept


def names(revisions: list[JSON]) -> list[str]:
    return [r["metadata"]["name"] for r in revisions]


# -- what the controller writes ---------------------------------------------------------------


def test_each_new_spec_is_a_new_numbered_revision_as_kubevela_names_them() -> None:
    first, same, changed = definition(), definition(), definition(greeting="new")
    kept = revisions_of(first, same, changed)
    assert names(kept) == ["mydef-v1", "mydef-v2"]
    one = kept[0]
    assert one["metadata"]["namespace"] == "vela-system"
    assert one["metadata"]["labels"] == {"componentdefinition.oam.dev/name": "mydef"}
    assert one["metadata"]["ownerReferences"][0]["uid"] == "uid-mydef"
    assert one["spec"]["revision"] == 1 and one["spec"]["definitionType"] == "Component"
    assert one["spec"]["componentDefinition"]["spec"] == first["spec"]
    assert len(one["spec"]["revisionHash"]) == 16
    assert one["spec"]["revisionHash"] != kept[1]["spec"]["revisionHash"]


def test_spec_version_names_the_revision_once() -> None:
    """``spec.version: 1.2`` is revision ``mydef-v1.2.0`` (semver's canonical form); a
    later change under the same version writes nothing (a named revision is immutable)."""
    kept = revisions_of(definition(), definition(greeting="b", version="1.2"),
                        definition(greeting="c", version="1.2.0"))
    assert names(kept) == ["mydef-v1", "mydef-v1.2.0"]
    assert kept[1]["spec"]["revision"] == 2
    copied = kept[1]["spec"]["componentDefinition"]["spec"]
    assert copied["schematic"]["cue"]["template"] == template("b")


def test_a_trait_revision_has_the_traits_label_and_type() -> None:
    [trait] = revisions_of(definition("tag", kind="TraitDefinition"))
    assert trait["metadata"]["labels"] == {"trait.oam.dev/name": "tag"}
    assert trait["spec"]["definitionType"] == "Trait"
    assert "traitDefinition" in trait["spec"]


def test_a_definition_named_like_a_built_in_numbers_from_two() -> None:
    """Revision 1 of ``webservice`` is the built-in (KubeVela installs it as a
    definition): an administrator's replacement is ``webservice-v2``."""
    assert names(revisions_of(definition("webservice"))) == ["webservice-v2"]


def test_revisions_past_the_history_limit_are_deleted_oldest_first() -> None:
    specs = [definition(greeting=str(n)) for n in range(6)]
    assert names(revisions_of(*specs, limit=3)) == ["mydef-v4", "mydef-v5", "mydef-v6"]


@pytest.mark.parametrize("version", ["latest", "1.2.3.4", "1.2.0+build", "V1", "1.x", 3])
def test_a_spec_version_that_is_no_semantic_version_is_refused(version: Any) -> None:
    with pytest.raises(definitions.DefinitionError, match=r"mydef: spec\.version: a "
                                                           "semantic version"):
        definitions.load(definition(version=version))


def test_kubevelas_named_revision_annotation_is_refused_by_name() -> None:
    doc = definition()
    doc["metadata"]["annotations"] = {definitions.NAMED_REVISION: "4.4"}
    with pytest.raises(definitions.DefinitionError, match=r"definitionrevision\.oam\.dev/name"):
        definitions.load(doc)


# -- an Application naming a revision ---------------------------------------------------------


def hub(*more: JSON) -> list[JSON]:
    """mydef as applied once ("old") then changed ("new", spec.version 2.0.0): the
    definition and the revisions the controller wrote."""
    first, now = definition(), definition(greeting="new", version="2.0.0")
    return [now, *revisions_of(first, now), *more]


def catalog_of(docs: list[JSON]) -> definitions.Catalog:
    defs = [d for d in docs if d["kind"] in definitions.KINDS]
    revisions = [d for d in docs if d["kind"] == definition_revisions.KIND]
    return definition_revisions.with_revisions(definitions.catalog(defs)[0], revisions)


def render(type_: str, docs: list[JSON], annotations: JSON | None = None,
           namespace: str = "shop") -> JSON:
    catalog = catalog_of(docs)
    spec = {"components": [{"name": "web", "type": type_, "properties": {"name": "me"}}]}
    resolved = definition_revisions.resolve(catalog, spec, annotations)
    user = definitions.Rendering(catalog, definitions.AppInfo("app"), cue_worker.inline)
    compiled = compile_.compile_app(resolved, "app", namespace, {}, FLEET, "member1", None,
                                    user)
    [obj] = compiled.targets["deploy"].clusters["member1"]
    return dict(obj)


def test_name_at_v1_renders_the_old_spec_and_the_name_the_new() -> None:
    assert render("mydef@v1", hub())["data"] == {"greeting": "old", "who": "me"}
    assert render("mydef", hub())["data"] == {"greeting": "new", "who": "me"}
    assert render("mydef@v2.0.0", hub())["data"]["greeting"] == "new"


def test_a_missing_revision_is_one_line_naming_the_type_and_the_version() -> None:
    with pytest.raises(model.AppError) as caught:
        render("mydef@v7", hub())
    assert str(caught.value) == (
        "spec.components[0].type: 'mydef@v7': no revision v7 of ComponentDefinition mydef "
        "(no DefinitionRevision mydef-v7 in vela-system, federation-system; its revisions "
        "here: v1, v2.0.0)")
    with pytest.raises(model.AppError, match=r"'other@v1': no revision v1 of "
                                             r"ComponentDefinition other .*it has no revision"):
        render("other@v1", hub())


@pytest.mark.parametrize("type_", ["mydef@latest", "mydef@1", "mydef@v01", "mydef@v1.2",
                                   "mydef@", "@v1", "mydef@v1@v2", "mydef@V1",
                                   "mydef@v1.0.0+build"])
def test_a_malformed_version_is_refused_naming_the_field(type_: str) -> None:
    with pytest.raises(model.AppError) as caught:
        render(type_, hub())
    message = str(caught.value)
    assert message.startswith(f"spec.components[0].type: {type_!r}: the version is v<N>")
    assert "\n" not in message


def test_a_tenants_revision_is_never_used() -> None:
    """Attack: a tenant writes a DefinitionRevision in its own namespace (its copy even
    claiming vela-system) with a template of its own, and names it: refused, saying why;
    beside an administrator's revision of that name, the administrator's wins."""
    evil = copy.deepcopy(revisions_of(definition("mydef", greeting="evil"))[0])
    evil["metadata"]["namespace"] = "shop"
    evil["metadata"]["name"] = "mydef-v9"
    with pytest.raises(model.AppError) as caught:
        render("mydef@v9", hub(evil))
    assert "in namespace shop (DefinitionRevision mydef-v9) is not used: definitions " \
        "count only in vela-system, federation-system" in str(caught.value)
    shadow = copy.deepcopy(evil)
    shadow["metadata"]["name"] = "mydef-v1"
    assert render("mydef@v1", [shadow, *hub()])["data"]["greeting"] == "old"


def test_a_revision_whose_copy_is_of_another_kind_is_not_that_type() -> None:
    """A TraitDefinition's revision is no ComponentDefinition revision of that name."""
    trait = revisions_of(definition("mydef", kind="TraitDefinition", greeting="t"))[0]
    assert definition_revisions.type_of(trait) == ("trait", "mydef@v1")
    confused = copy.deepcopy(trait)
    confused["spec"]["definitionType"] = "Component"
    assert definition_revisions.type_of(confused) is None


def test_a_built_in_at_v1_is_the_built_in() -> None:
    spec: JSON = {"components": [{"name": "web", "type": "webservice@v1",
                                  "properties": {"image": "nginx"},
                                  "traits": [{"type": "scaler@v1",
                                              "properties": {"replicas": 2}}]}],
                  "workflow": {"steps": [{"name": "go", "type": "deploy@v1",
                                          "properties": {"policies": []}}]}}
    resolved = definition_revisions.resolve(catalog_of([]), spec)
    assert resolved["components"][0]["type"] == "webservice"
    assert resolved["components"][0]["traits"][0]["type"] == "scaler"
    assert resolved["workflow"]["steps"][0]["type"] == "deploy"
    assert spec["components"][0]["type"] == "webservice@v1"  # the caller's is not changed
    with pytest.raises(model.AppError, match=r"'webservice@v2': no revision v2 of "
                                             r"ComponentDefinition webservice .*its "
                                             r"revisions here: v1 \(the built-in\)\)$"):
        definition_revisions.resolve(catalog_of([]), {"components": [
            {"name": "web", "type": "webservice@v2"}]})


def test_a_replaced_built_in_at_v1_says_what_replaced_it() -> None:
    replaced = definition("webservice", greeting="mine")
    with pytest.raises(model.AppError, match="v1 was the built-in webservice, which "
                                             "ComponentDefinition vela-system/webservice "
                                             "replaces"):
        render("webservice@v1", [replaced])
    [revision] = revisions_of(replaced)
    assert render("webservice@v2", [replaced, revision])["data"]["greeting"] == "mine"


def test_auto_update_is_refused_by_name() -> None:
    with pytest.raises(model.AppError, match=r"app\.oam\.dev/autoUpdate: not supported"):
        render("mydef@v1", hub(), {"app.oam.dev/autoUpdate": "true"})
    assert render("mydef", hub(), {"app.oam.dev/autoUpdate": "true"})  # no version: fine


def test_a_revision_is_recorded_in_the_application_revision_and_rolls_back() -> None:
    """The ApplicationRevision's snapshot holds the revision's spec under its versioned
    type, so a rollback renders with it even once the DefinitionRevision is gone."""
    spec = {"components": [{"name": "web", "type": "mydef@v1"}]}
    snapshot = catalog_of(hub()).used(spec)
    assert list(snapshot) == ["ComponentDefinition/mydef@v1"]
    kept = snapshot["ComponentDefinition/mydef@v1"]
    assert kept["spec"]["schematic"]["cue"]["template"] == template("old")
    again = definitions.from_snapshot(snapshot)
    user = definitions.Rendering(again, definitions.AppInfo("app"), cue_worker.inline)
    compiled = compile_.compile_app(definition_revisions.resolve(again, spec), "app", "shop",
                                    {}, FLEET, "member1", None, user)
    assert compiled.targets["deploy"].clusters["member1"][0]["data"]["greeting"] == "old"


def test_versioned_types_in_policies_and_sub_steps_are_resolved_too() -> None:
    spec: JSON = {"components": [{"name": "web", "type": "webservice"}],
                  "policies": [{"name": "t", "type": "topology@v1"},
                               {"name": "o", "type": "override", "properties": {
                                   "components": [{"name": "web", "type": "webservice@v1"}]}}],
                  "workflow": {"steps": [{"name": "g", "type": "step-group", "subSteps": [
                      {"name": "s", "type": "suspend@v3"}]}]}}
    with pytest.raises(model.AppError, match=r"spec\.workflow\.steps\[0\]\.subSteps\[0\]"
                                             r"\.type: 'suspend@v3'"):
        definition_revisions.resolve(catalog_of([]), spec)
    spec["workflow"]["steps"][0]["subSteps"][0]["type"] = "suspend@v1"
    resolved = definition_revisions.resolve(catalog_of([]), spec)
    assert resolved["policies"][0]["type"] == "topology"
    assert resolved["policies"][1]["properties"]["components"][0]["type"] == "webservice"
    assert resolved["workflow"]["steps"][0]["subSteps"][0]["type"] == "suspend"


def test_the_latest_revision_is_the_spec_versions_or_the_highest() -> None:
    """What the controller writes in the definition's ``status.latestRevision``."""
    kept = revisions_of(definition(), definition(greeting="b", version="1.2"),
                        definition(greeting="c"))
    assert names(kept) == ["mydef-v1", "mydef-v1.2.0", "mydef-v3"]
    latest = definition_revisions.latest(definition(greeting="c"), kept)
    assert latest == {"name": "mydef-v3", "revision": 3,
                      "revisionHash": kept[2]["spec"]["revisionHash"]}
    pinned = definition_revisions.latest(definition(greeting="b", version="1.2.0"), kept)
    assert pinned is not None and pinned["name"] == "mydef-v1.2.0"
    assert definition_revisions.latest(definition(), []) is None
