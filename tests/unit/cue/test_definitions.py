"""KubeVela's own trait templates (fixtures/, Apache-2.0, KubeVela's) render as CUE renders
them; expected values are read off the templates' CUE, not taken from our output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from federation.cue import CueError, Directive, export, parse

FIXTURES = Path(__file__).parent / "fixtures"
CONTEXT: dict[str, Any] = {"name": "web", "appName": "app", "namespace": "default",
                           "output": {"spec": {"template": {"spec": {"containers": []}}}}}


def render(name: str, parameter: dict[str, Any], fields: list[str]) -> Any:
    template = parse((FIXTURES / f"{name}.cue").read_text(), name=name)
    return export(template, {"parameter": parameter, "context": CONTEXT}, fields)


def test_scaler_defaults_replicas_and_marks_retain_keys() -> None:
    result = render("scaler", {}, ["patch"])
    assert result.values == {"patch": {"spec": {"replicas": 1}}}
    assert result.directives == (Directive((), "patchStrategy", "retainKeys"),)
    assert render("scaler", {"replicas": 3}, ["patch"]).values["patch"]["spec"] == {
        "replicas": 3}


def test_scaler_refuses_a_replicas_string_naming_the_parameter() -> None:
    with pytest.raises(CueError, match=r"parameter\.replicas") as err:
        render("scaler", {"replicas": "three"}, ["patch"])
    assert "three" not in str(err.value)


def test_labels_patches_metadata_and_the_pod_template_as_a_merge_patch() -> None:
    result = render("labels", {"team": "a", "gone": None}, ["patch"])
    labels = {"team": "a", "gone": None}
    assert result.values == {"patch": {
        "metadata": {"labels": labels},
        "spec": {"template": {"metadata": {"labels": labels}}},
    }}
    assert result.directives == (Directive((), "patchStrategy", "jsonMergePatch"),)


def test_expose_builds_a_service_from_ports() -> None:
    result = render("expose", {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}],
                               "annotations": {}}, ["outputs"])
    assert result.values == {"outputs": {"service": {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "annotations": {}},
        "spec": {
            "selector": {"app.oam.dev/component": "web"},
            "ports": [
                {"port": 80, "targetPort": 80, "name": "port-80", "protocol": "TCP"},
                {"port": 53, "targetPort": 53, "name": "port-53-udp", "protocol": "UDP"},
            ],
            "type": "ClusterIP",
        },
    }}}


def test_expose_old_style_ports_and_a_wrong_service_type() -> None:
    result = render("expose", {"port": [8080], "annotations": {}}, ["outputs"])
    assert result.values["outputs"]["service"]["spec"]["ports"] == [
        {"name": "port-8080", "port": 8080, "targetPort": 8080}]
    with pytest.raises(CueError, match=r"parameter\.type"):
        render("expose", {"port": [80], "annotations": {}, "type": "Nope"}, ["outputs"])
    # the parameter struct is open (not a definition): an unknown property is CUE-valid
    render("expose", {"ports": [{"port": 80, "extra": 1}], "annotations": {}}, ["outputs"])
