"""KubeVela's CUE definition file split into metadata and template text (vela def's format)."""

from __future__ import annotations

import pytest

from federation.cue import Budget, CueError, export, parse
from federation.cue.definition_file import split_definition_file

FILE = '''import (
	"strings"
	s2 "strconv"
)

// the definition's metadata
greeter: {
	type: "component"
	attributes: workload: definition: {apiVersion: "apps/v1", kind: "Deployment"}
	attributes: status: healthPolicy: #"""
		isHealth: context.output.status.ready == true
		"""#
	description: "says \\("hello")"
}

template: {
	// +patchKey=name
	output: {
		apiVersion: "v1"
		kind:       "ConfigMap"
		data: greeting: strings.ToUpper(parameter.text) + s2.FormatInt(2, 10)
		data: note: """
			two
\t\t\t  lines
			"""
	}
	parameter: text: string
}
'''


def test_the_metadata_is_evaluated_and_the_template_cut_out_as_written() -> None:
    """The metadata is JSON; the template is the struct's body with the imports before it,
    comments and directives kept, and evaluates as the inline template would."""
    parts = split_definition_file(FILE, name="greeter.cue")
    assert parts.name == "greeter"
    assert parts.metadata["type"] == "component"
    assert parts.metadata["description"] == "says hello"
    assert parts.metadata["attributes"]["workload"]["definition"]["kind"] == "Deployment"
    assert "isHealth" in parts.metadata["attributes"]["status"]["healthPolicy"]
    assert parts.template.startswith('import (\n\t"strings"\n\ts2 "strconv"\n)\n\n')
    assert "// +patchKey=name\noutput: {\n\tapiVersion" in parts.template
    exported = export(parse(parts.template), {"parameter": {"text": "hi"}}, ["output"]).values
    assert exported["output"]["data"] == {"greeting": "HI2", "note": "two\n  lines"}


def test_a_one_line_template_and_a_quoted_name() -> None:
    parts = split_definition_file('"my-trait": {type: "trait"}\ntemplate: {patch: {a: 1}}')
    assert (parts.name, parts.template) == ("my-trait", "patch: {a: 1}\n")


@pytest.mark.parametrize(("source", "message"), [
    ('template: {a: 1}', "no metadata field"),
    ('x: {type: "trait"}', "no template field"),
    ('x: {type: "trait"}\ny: {type: "trait"}\ntemplate: {}', "a second metadata field ('y')"),
    ('x: {type: "trait"}\ntemplate: {}\ntemplate: {}', "template: written twice"),
    ('x: {type: "trait"}\ntemplate: a: 1', "template: must be written as a struct"),
    ('x: {type: "trait"}\ntemplate: {} & {}', "template: must be written as a struct"),
    ('x: {type: "trait"}\nlet y = 1\ntemplate: {}', "only fields at the top level"),
    ('x: {type: "trait"}\n[string]: _\ntemplate: {}', "only fields at the top level"),
    ('x: {type: "trait"}\ny?: 1\ntemplate: {}', "only fields at the top level"),
    ('x: 3\ntemplate: {}', "the metadata must be a struct"),
    ('x: {type: string}\ntemplate: {}', "incomplete"),
    ('x: {type: "trait"\ntemplate: {}', "f.cue:"),
    ('import "vela/op"\nx: {type: "workflow-step"}\ntemplate: {}', "'vela/op' is not supported"),
    # attacks: a definition file that would run a command or reach a URL
    ('import "tool/exec"\nx: {type: "component"}\ntemplate: {}', "'tool/exec' is not supported"),
    ('import "tool/http"\nx: {type: "component", description: http.Get & {url: "http://a"}}'
     '\ntemplate: {}', "'tool/http' is not supported"),
    ('import "tool/file"\nx: {type: "component"}\ntemplate: {}', "'tool/file' is not supported"),
    ('x: {attributes: status: healthPolicy: {isHealth: true}}\ntemplate: {}',
     "x.attributes.status.healthPolicy: only a string is supported"),
])
def test_what_is_not_a_definition_file_is_refused_in_one_line(source: str, message: str) -> None:
    with pytest.raises(CueError) as caught:
        split_definition_file(source, name="f.cue")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_metadata_is_evaluated_within_the_budget() -> None:
    """An admin's metadata that loops is stopped by the budget like any template."""
    hostile = 'x: {description: strings.Repeat("ab", 1000000)}\ntemplate: {}'
    with pytest.raises(CueError, match="value size budget of 10000 exceeded"):
        split_definition_file(f'import "strings"\n{hostile}',
                              budget=Budget(string_bytes=10_000))
