"""``addRevisionLabel`` (vela-core's webservice.cue, statefulset.cue, daemon.cue): the pod
template gets ``app.oam.dev/revision: context.revision``, a hash of the component that
changes when the component does and only then; the built-ins write the same value as the
definitions themselves, evaluated by CUE, from a mirror of kubevela/kubevela when there is
one."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from federation.applications import cue_worker, definitions, model, render
from federation.applications.definition_files import from_cue_file

JSON = dict[str, Any]
MIRROR = Path("/work/.mirror/kubevela+kubevela/repo")
REVISION = "app.oam.dev/revision"


def component(type_: str = "webservice", **properties: Any) -> model.Component:
    traits = properties.pop("traits", [])
    return model.Component.model_validate(
        {"name": "web", "type": type_, "properties": {"image": "nginx", **properties},
         "traits": traits})


def pod_labels(objects: list[JSON]) -> dict[str, str]:
    labels: dict[str, str] = objects[0]["spec"]["template"]["metadata"]["labels"]
    return labels


@pytest.mark.parametrize("type_", ["webservice", "statefulset", "daemon"])
def test_the_pods_carry_the_components_revision(type_: str) -> None:
    """true: the label, with the component's hash; false or absent: none (the default)."""
    labelled = component(type_, addRevisionLabel=True)
    assert pod_labels(render.render_component(labelled, "app", "ns"))[REVISION] == \
        labelled.revision()
    for plain in (component(type_), component(type_, addRevisionLabel=False)):
        assert REVISION not in pod_labels(render.render_component(plain, "app", "ns"))


def test_the_revision_changes_with_the_component_and_only_with_it() -> None:
    """A changed property, trait or replication key is a new value (the pods roll); the
    same component, rendered again or by another compile, keeps its value; the value is
    a label value (16 hex digits)."""
    first = component(addRevisionLabel=True)
    assert component(addRevisionLabel=True).revision() == first.revision()
    assert re.fullmatch(r"[0-9a-f]{16}", first.revision())
    changed = [component(addRevisionLabel=True, cpu="1"),
               component(addRevisionLabel=True, image="nginx:2"),
               component(addRevisionLabel=True,
                         traits=[{"type": "scaler", "properties": {"replicas": 2}}]),
               first.replicated("beijing")]
    values = {first.revision(), *(c.revision() for c in changed)}
    assert len(values) == 1 + len(changed)


@pytest.mark.parametrize(("properties", "words"), [
    ({"addRevisionLabel": "yes"}, r"properties\.addRevisionLabel: must be true or false"),
    ({"addRevisionLabel": None}, r"properties\.addRevisionLabel: must be true or false"),
])
def test_a_value_that_is_no_boolean_is_refused(properties: JSON, words: str) -> None:
    with pytest.raises(model.AppError, match=words):
        render.render_component(component(**properties), "app", "ns")


@pytest.mark.parametrize("type_", ["worker", "task"])
def test_types_whose_definition_has_no_such_parameter_refuse_it(type_: str) -> None:
    """worker.cue and task.cue declare no ``addRevisionLabel``: refused by name, not
    dropped."""
    with pytest.raises(model.AppError, match=r"properties\.addRevisionLabel: not supported"):
        render.render_component(component(type_, addRevisionLabel=True), "app", "ns")


def vela_core(type_: str) -> definitions.Rendering:
    text = subprocess.run(
        ["git", "--git-dir", str(MIRROR), "show",
         f"HEAD:vela-templates/definitions/internal/component/{type_}.cue"],
        capture_output=True, text=True, check=True).stdout
    document = from_cue_file(text, f"{type_}.cue")
    document["metadata"] = {"name": type_, "namespace": "vela-system"}
    catalog, reports = definitions.catalog([document])
    assert reports == []
    return definitions.Rendering(catalog, definitions.AppInfo("app", 3), cue_worker.inline)


@pytest.mark.skipif(not MIRROR.is_dir(), reason=f"no mirror of kubevela/kubevela at {MIRROR}")
@pytest.mark.parametrize("type_", ["webservice", "statefulset", "daemon"])
def test_the_label_is_what_vela_cores_definition_writes(type_: str) -> None:
    """vela-core's own definition, evaluated by CUE with our ``context.revision``, labels
    the pods with the value the built-in writes (and without the parameter, neither
    does)."""
    for properties in ({"addRevisionLabel": True, "cpu": "0.5"}, {}):
        given = component(type_, **properties)
        by_definition = render.render_component(given, "app", "ns", user=vela_core(type_))
        built_in = render.render_component(given, "app", "ns")
        assert pod_labels(by_definition).get(REVISION) == pod_labels(built_in).get(REVISION)
    assert pod_labels(by_definition) != {} and REVISION not in pod_labels(by_definition)
