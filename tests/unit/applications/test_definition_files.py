"""CUE definition files (vela def's and the addons' format) as the objects KubeVela installs,
and `fedctl app dry-run --definitions` taking them. The files here are our own, written in
the format of the catalog's (addons/fluxcd/definitions/kustomize.cue and its like)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.applications import definitions
from federation.applications.definition_files import from_cue_file
from federation.cli import cli

SYNCER = '''syncer: {
	attributes: workload: type: "autodetects.core.oam.dev"
	description: "syncs a repository"
	alias:       "sync"
	type:        "component"
	annotations: {
		"addon.oam.dev/ignore-without-component": "syncer-controller"
		team: "infra"
	}
	labels: "ui-hidden": "true"
}

template: {
	output: {
		apiVersion: "sync.example.com/v1"
		kind:       "Sync"
		metadata: name: context.name
		spec: {
			url:      parameter.url
			interval: parameter.interval
		}
	}
	parameter: {
		url:       string
		interval: *"5m" | string
	}
}
'''
APP = '''apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: demo, namespace: shop}
spec:
  components:
  - name: repo
    type: syncer
    properties: {url: "https://example.com/r.git"}
'''


def test_the_file_becomes_the_object_vela_def_apply_installs() -> None:
    """vela-core's FromCUE: type -> kind, attributes -> spec, template -> schematic,
    description/alias annotations, user keys under custom.definition.oam.dev/."""
    doc = from_cue_file(SYNCER, "syncer.cue")
    assert doc["kind"] == "ComponentDefinition"
    assert doc["metadata"] == {
        "name": "syncer", "namespace": "vela-system",
        "annotations": {"addon.oam.dev/ignore-without-component": "syncer-controller",
                        "custom.definition.oam.dev/team": "infra",
                        "definition.oam.dev/description": "syncs a repository",
                        "definition.oam.dev/alias": "sync"},
        "labels": {"custom.definition.oam.dev/ui-hidden": "true"}}
    assert doc["spec"]["workload"] == {"type": "autodetects.core.oam.dev"}
    assert doc["spec"]["schematic"]["cue"]["template"].startswith("output: {\n\tapiVersion")
    loaded = definitions.load(doc)
    assert (loaded.kind, loaded.workload) == ("ComponentDefinition", "autodetects.core.oam.dev")


@pytest.mark.parametrize(("kind", "expected"), [
    ("trait", "TraitDefinition"), ("policy", "PolicyDefinition"),
    ("workflow-step", "WorkflowStepDefinition")])
def test_each_type_gives_its_kind(kind: str, expected: str) -> None:
    doc = from_cue_file(f'x: {{type: "{kind}"}}\ntemplate: {{parameter: {{}}}}', "x.cue")
    assert doc["kind"] == expected


@pytest.mark.parametrize(("source", "message"), [
    ('x: {type: "workload"}\ntemplate: {}', "x.type: one of component, trait"),
    ('x: {type: "component", attribute: {}}\ntemplate: {}',
     "x.attribute: not a definition file field"),
    ('x: {type: "component", attributes: 3}\ntemplate: {}', "x.attributes: a struct"),
    ('x: {type: "component", attributes: schematic: kube: {}}\ntemplate: {}',
     "x.attributes.schematic: not allowed"),
    ('x: {type: "component", labels: a: 1}\ntemplate: {}', "x.labels.a: a string"),
    ('x: {type: "component", description: 1}\ntemplate: {}', "x.description: a string"),
    ('x: {type: "component"}', "no template field"),
    # the elasticsearch-operator addon's traits carry a workload: vela addon enable fails
    ('x: {type: "trait", attributes: workload: type: "a"}\ntemplate: {}',
     "x.attributes.workload: not a TraitDefinition field (vela-core's conversion refuses it"),
])
def test_what_kubevela_would_drop_or_refuse_is_refused_by_name(source: str, message: str
                                                              ) -> None:
    with pytest.raises(definitions.DefinitionError) as caught:
        from_cue_file(source, "x.cue")
    assert message in str(caught.value) and str(caught.value).startswith("x.cue")


def test_status_written_in_the_file_is_loaded_as_from_yaml() -> None:
    """The spec means what it means in YAML: customStatus is honoured, a field that is
    not (details) is named."""
    doc = from_cue_file('x: {type: "component", attributes: status: customStatus: "m"}\n'
                        "template: {output: {}}", "x.cue")
    assert definitions.load(doc).custom_status == "m"
    doc = from_cue_file('x: {type: "component", attributes: status: details: "m"}\n'
                        "template: {output: {}}", "x.cue")
    with pytest.raises(definitions.DefinitionError, match=r"spec\.status\.details"):
        definitions.load(doc)


def test_dry_run_renders_with_a_cue_definition_file(tmp_path: Path) -> None:
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "syncer.cue").write_text(SYNCER)
    (tmp_path / "app.yaml").write_text(APP)
    result = CliRunner().invoke(cli, [
        "app", "dry-run", "-f", str(tmp_path / "app.yaml"), "--local-cluster", "member1",
        "--definitions", str(tmp_path / "defs")])
    assert result.exit_code == 0, result.output
    assert "kind: Sync\n" in result.output and "interval: 5m" in result.output


def test_dry_run_names_a_broken_cue_file_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.cue").write_text(SYNCER.replace("template: {", "template: {{"))
    (tmp_path / "app.yaml").write_text(APP)
    result = CliRunner().invoke(cli, [
        "app", "dry-run", "-f", str(tmp_path / "app.yaml"), "--definitions",
        str(tmp_path / "bad.cue")])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"error: {tmp_path / 'bad.cue'}:")


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet='ab:{}[]()"#\n\t /*+=.|&_!?,0123456789tyemplatr', max_size=120))
def test_any_text_is_an_object_or_one_line(text: str) -> None:
    """No input makes the converter raise anything but a one-line DefinitionError."""
    try:
        doc = from_cue_file(text, "x.cue")
    except definitions.DefinitionError as exc:
        assert "\n" not in str(exc)
    else:
        assert doc["apiVersion"] == "core.oam.dev/v1beta1"


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=len(SYNCER) - 1), st.integers(min_value=1, max_value=8))
def test_a_cut_definition_file_is_an_object_or_one_line(start: int, length: int) -> None:
    """The file with a piece cut out (unbalanced braces, a half string...)."""
    text = SYNCER[:start] + SYNCER[start + length:]
    try:
        from_cue_file(text, "x.cue")
    except definitions.DefinitionError as exc:
        assert "\n" not in str(exc)
