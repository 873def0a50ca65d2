"""`fedctl app dry-run` (offline) and the status tree."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from federation.cli import cli
from federation.commands.app import tree

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "applications" / "shop.yaml"


def test_dry_run_prints_each_step_and_the_override() -> None:
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert "# step canary (deploy): member1" in result.output
    assert "# step rollout (deploy): member2, member3 (parallelism 1)" in result.output
    assert "eu.mirror.example.com/shop/web:1.0" in result.output


def test_dry_run_names_the_bad_field(tmp_path: Path) -> None:
    bad = tmp_path / "app.yaml"
    bad.write_text(EXAMPLE.read_text().replace("image: registry", "imag: registry"))
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(bad)])
    assert result.exit_code == 1
    assert "spec.components[0].properties.imag: not supported" in result.output


def test_dry_run_refuses_a_restart_annotation_kubevela_does_not_take(tmp_path: Path) -> None:
    bad = tmp_path / "app.yaml"
    text = EXAMPLE.read_text()
    assert text.count("metadata:\n  name: shop\n") == 1
    bad.write_text(text.replace("metadata:\n  name: shop\n", "metadata:\n  name: shop\n"
                                "  annotations:\n    app.oam.dev/restart-workflow: soon\n"))
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(bad)])
    assert result.exit_code == 1
    assert "metadata.annotations.app.oam.dev/restart-workflow: 'soon' is not 'true'" in \
        result.output


def test_dry_run_says_what_a_read_object_step_reads(tmp_path: Path) -> None:
    app = tmp_path / "app.yaml"
    app.write_text("""apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: shop, namespace: shop}
spec:
  components: [{name: web, type: webservice, properties: {image: nginx}}]
  workflow:
    steps:
    - {name: read, type: read-object, properties: {apiVersion: v1, kind: ConfigMap,
                                                   name: settings}}
""")
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(app)])
    assert result.exit_code == 0, result.output
    assert "# step read (read-object): reads ConfigMap settings (v1) in the Application's " \
        "namespace on the hub" in result.output


def test_status_tree_lists_steps_clusters_and_resources() -> None:
    text = tree("shop", {
        "status": "running", "healthy": True, "latestRevision": {"name": "shop-v2"},
        "workflow": {"phase": "succeeded", "steps": [
            {"name": "canary", "type": "deploy", "phase": "succeeded", "clusters": ["member1"]}]},
        "services": [{"step": "canary", "cluster": "member1", "healthy": True}],
        "appliedResources": [{"cluster": "member1", "kind": "Deployment", "namespace": "d",
                              "name": "web", "revision": 2}]})
    assert "canary (deploy): succeeded" in text and "member1: healthy" in text
    assert "member1: Deployment d/web (v2)" in text


def test_status_tree_says_why_an_application_is_not_rendered() -> None:
    """renderFailed: the Rendered condition's one-line reason (a missing Workflow's)."""
    reason = "spec.workflow.ref: Workflow shop/release not found on the hub (the " \
        "Application is rendered once it exists in its namespace)"
    text = tree("shop", {"status": "renderFailed", "conditions": [
        {"type": "Rendered", "status": "False", "reason": "InvalidApplication",
         "message": reason}]})
    assert text.splitlines()[1] == f"├─ not rendered: {reason}"
    assert "not rendered" not in tree("shop", {"status": "running", "conditions": [
        {"type": "Rendered", "status": "True", "message": "ok"}]})


def test_status_tree_lists_components_a_definitions_status_judged() -> None:
    """A component entry (KubeVela's shape, before the step entries) does not hide its
    step's entry; it is listed with its message and its traits'."""
    text = tree("shop", {
        "status": "runningWorkflow", "healthy": False,
        "workflow": {"phase": "running", "steps": [
            {"name": "deploy", "type": "deploy", "phase": "running", "clusters": ["member1"]}]},
        "services": [
            {"name": "api", "namespace": "shop", "cluster": "member1", "step": "deploy",
             "healthy": False, "message": "Ready:1/2",
             "traits": [{"type": "probe", "healthy": True, "message": "probe\nyes"}]},
            {"step": "deploy", "cluster": "member1", "healthy": False,
             "message": "Deployment shop/api: Ready:1/2"}]})
    assert "└─ member1: Deployment shop/api: Ready:1/2" in text  # the step's own entry
    assert "component api in member1 (deploy): unhealthy: Ready:1/2" in text
    assert "trait probe: healthy: probe\\nyes" in text


HELM_APP = """\
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: shop, namespace: shop}
spec:
  components:
  - name: web
    type: helmchart
    properties:
      chart: {source: demo, repoURL: "http://127.0.0.1:9/charts", version: 1.0.0}
"""


def test_dry_run_fetches_a_chart_under_the_outbound_policy(tmp_path: Path) -> None:
    """Without --chart-allow a loopback repository is refused (nothing dialled), as in the
    controller; a --helm that is not a program is named."""
    app = tmp_path / "app.yaml"
    app.write_text(HELM_APP)
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(app), "--local-cluster",
                                      "member1", "--helm", "/bin/true"])
    assert result.exit_code == 1
    assert ("spec.components[0]: chart 'demo' 1.0.0: fetching the chart: "
            "http://127.0.0.1:9/charts/index.yaml: destination refused by the control "
            "plane's outbound policy") in result.output
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(app), "--helm",
                                      str(tmp_path / "nothing")])
    assert result.exit_code == 1 and "--helm: " in result.output
    assert "Traceback" not in result.output


VERSIONED = """apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: shop, namespace: shop}
spec:
  components: [{name: web, type: greeter@v1}]
  policies: [{name: one, type: topology, properties: {clusters: [member1]}}]
---
apiVersion: core.oam.dev/v1beta1
kind: ComponentDefinition
metadata: {name: greeter, namespace: vela-system}
spec:
  schematic: {cue: {template: 'output: {apiVersion: "v1", kind: "ConfigMap", data: a: "new"}'}}
"""
REVISION = """---
apiVersion: core.oam.dev/v1beta1
kind: DefinitionRevision
metadata: {name: greeter-v1}
spec:
  revision: 1
  revisionHash: abc
  definitionType: Component
  componentDefinition:
    apiVersion: core.oam.dev/v1beta1
    kind: ComponentDefinition
    metadata: {name: greeter, namespace: vela-system}
    spec:
      schematic: {cue: {template: 'output: {apiVersion: "v1", kind: "ConfigMap", data: a: "old"}'}}
"""


def test_dry_run_renders_a_definition_revision_of_its_file(tmp_path: Path) -> None:
    """``greeter@v1`` renders with the file's DefinitionRevision greeter-v1 (one without a
    namespace is vela-system's, as a definition); without it, one line naming the type and
    the version, no traceback."""
    app = tmp_path / "app.yaml"
    app.write_text(VERSIONED + REVISION)
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(app)])
    assert result.exit_code == 0, result.output
    assert "a: old" in result.output and "a: new" not in result.output
    app.write_text(VERSIONED)
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(app)])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr.splitlines()[-1] == (
        f"error: {app}: spec.components[0].type: 'greeter@v1': no revision v1 of "
        "ComponentDefinition greeter (no DefinitionRevision greeter-v1 in vela-system, "
        "federation-system; it has no revision here)")
