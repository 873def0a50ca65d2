"""The public surface: parse once, export fields with a fill, evaluate expressions."""

from __future__ import annotations

import pytest

from federation.cue import Budget, CueError, Directive, evaluate_expression, export, parse

TEMPLATE = """
import "strconv"

output: {
	kind: "Deployment"
	metadata: name: context.name
	spec: {
		replicas: parameter.replicas
		template: spec: {
			containers: [{
				name:  context.name
				image: parameter.image
				if parameter.port != _|_ {
					ports: [{
						containerPort: parameter.port
						name:          "port-" + strconv.FormatInt(parameter.port, 10)
					}]
				}
			}]
			if parameter.hosts != _|_ {
				// +patchKey=ip
				hostAliases: parameter.hosts
			}
		}
	}
}
parameter: {
	image:    string
	replicas: *1 | int & >=0
	port?:    int
	hosts?: [...{ip: string}]
}
"""


def test_a_component_renders_with_defaults_and_guards() -> None:
    """Defaults fill what the user left out; `x != _|_` guards optional parameters."""
    template = parse(TEMPLATE, name="demo")
    result = export(template, {"parameter": {"image": "nginx", "port": 80},
                               "context": {"name": "web"}}, ["output", "missing"])
    assert result.values == {"output": {
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{
            "name": "web", "image": "nginx",
            "ports": [{"containerPort": 80, "name": "port-80"}],
        }]}}},
    }}
    assert result.directives == ()


def test_patch_directives_are_reported_with_their_path() -> None:
    template = parse(TEMPLATE)
    result = export(template, {"parameter": {"image": "x", "hosts": [{"ip": "1.1.1.1"}]},
                               "context": {"name": "web"}}, ["output"])
    assert result.directives == (
        Directive(("spec", "template", "spec", "hostAliases"), "patchKey", "ip"),)


def test_a_parameter_of_the_wrong_type_is_refused_by_path_without_its_value() -> None:
    template = parse(TEMPLATE, name="demo")
    with pytest.raises(CueError) as err:
        export(template, {"parameter": {"image": "nginx", "replicas": "secret-ish"},
                          "context": {"name": "web"}}, ["output"])
    assert "parameter.replicas" in str(err.value)
    assert "secret-ish" not in str(err.value)


def test_a_missing_required_parameter_is_an_incomplete_error_naming_the_output_path() -> None:
    template = parse(TEMPLATE, name="demo")
    with pytest.raises(CueError, match=r"output\.spec\.template\.spec\.containers\[0\]\.image"):
        export(template, {"parameter": {}, "context": {"name": "web"}}, ["output"])


def test_expressions_over_json_scope() -> None:
    scope = {"status": {"step1": {"phase": "succeeded"}}, "a": 3}
    assert evaluate_expression('status.step1.phase == "succeeded"', scope) is True
    assert evaluate_expression('"\\(a)-x"', scope) == "3-x"
    with pytest.raises(CueError):
        evaluate_expression("status.step2.phase", scope, Budget())


def test_errors_never_quote_a_parameter_value() -> None:
    """A bound built from one parameter and checked against another names neither value."""
    template = parse("parameter: {a: string, b: string & !=a, n: int & <10, m: =~\"^[a-z]+$\"}\n"
                     "out: parameter\n", name="demo")
    for fill in ({"a": "s3cret-token", "b": "s3cret-token", "n": 1, "m": "ok"},
                 {"a": "x", "b": "y", "n": 987654, "m": "ok"},
                 {"a": "x", "b": "y", "n": 1, "m": "S3CRET-VALUE"}):
        with pytest.raises(CueError) as err:
            export(template, {"parameter": fill}, ["out"])
        message = str(err.value)
        assert "parameter." in message
        for value in fill.values():
            if value not in ("x", "y", "ok", 1):
                assert str(value) not in message, message


def test_expressions_as_workflow_steps_write_them() -> None:
    """``if:`` conditions and ``valueFrom:`` paths over the step's scope; the standard
    packages are there without an import, and a scope name shadows a package."""
    scope = {"status": {"apply": {"phase": "succeeded", "failed": False}},
             "output": {"value": {"status": {"podIP": "10.0.0.7"}}},
             "inputs": {"names": ["a", "b"]}}
    assert evaluate_expression("output.value.status.podIP", scope) == "10.0.0.7"
    assert evaluate_expression('status.apply.phase != "failed" && !status.apply.failed',
                               scope) is True
    assert evaluate_expression('strings.Join(inputs.names, ",")', scope) == "a,b"
    assert evaluate_expression("len(inputs.names) > 1", scope) is True
    assert evaluate_expression("{x: inputs.names[0]}", scope) == {"x": "a"}
    assert evaluate_expression("strings", {"strings": 1}) == 1
    for bad in ("status.missing.phase", "inputs.names[5]", "output.value +", "vela.op"):
        with pytest.raises(CueError, match=r"^expression"):
            evaluate_expression(bad, scope)
