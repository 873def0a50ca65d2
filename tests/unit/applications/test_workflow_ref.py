"""KubeVela's ``spec.workflow.ref``: the Application's workflow is a Workflow object's of
its own namespace (the pure part and ``fedctl app dry-run``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from federation.applications import compile as compile_
from federation.applications import revision, workflow_ref
from federation.applications.model import AppError
from federation.cli import cli
from federation.placement import clusters as clusters_

FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2", "member3")]
POLICIES = [{"name": "one", "type": "topology", "properties": {"clusters": ["member1"]}},
            {"name": "two", "type": "topology", "properties": {"clusters": ["member2"]}}]


def spec(**workflow: Any) -> dict[str, Any]:
    return {"components": [{"name": "web", "type": "webservice",
                            "properties": {"image": "web:1"}}],
            "policies": POLICIES, "workflow": workflow or {"ref": "release"}}


def workflow_doc(*steps: dict[str, Any], namespace: str = "shop", name: str = "release",
                 **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "core.oam.dev/v1alpha1", "kind": "Workflow",
            "metadata": {"name": name, "namespace": namespace},
            "steps": list(steps) or [
                {"name": "first", "type": "deploy", "properties": {"policies": ["one"]}},
                {"name": "second", "type": "deploy", "properties": {"policies": ["two"]}}],
            **fields}


def compiled(app_spec: dict[str, Any], found: dict[str, Any] | None
             ) -> compile_.Compiled:
    """As the controller compiles: resolved, then compiled, a refusal located."""
    try:
        resolved = workflow_ref.resolved(app_spec, workflow_ref.covered(found), "shop")
        return compile_.compile_app(resolved, "shop", "shop", {}, FLEET)
    except AppError as exc:
        raise workflow_ref.located(exc, app_spec, "shop") from None


def test_the_workflows_steps_are_the_applications() -> None:
    result = compiled(spec(), workflow_doc())
    assert [s.name for s in result.steps] == ["first", "second"]
    assert {name: sorted(t.clusters) for name, t in result.targets.items()} == {
        "first": ["member1"], "second": ["member2"]}


def test_the_workflows_mode_counts_unless_the_application_gives_one() -> None:
    found = workflow_doc(mode={"steps": "DAG"})
    assert workflow_ref.resolved(spec(), found, "shop")["workflow"]["mode"] == \
        {"steps": "DAG"}
    own = workflow_ref.resolved(spec(ref="release", mode={"steps": "StepByStep"}), found,
                                "shop")
    assert own["workflow"] == {"mode": {"steps": "StepByStep"}, "steps": found["steps"]}


def test_a_workflow_without_steps_is_the_default_workflow() -> None:
    """As vela-core's generators: no steps, one deploy step of the topology policies."""
    found = workflow_doc()
    del found["steps"]
    assert [(s.name, s.type) for s in compiled(spec(), found).steps] == [("deploy", "deploy")]


def test_no_ref_or_an_empty_one_leaves_the_spec_as_it_is() -> None:
    plain = spec(steps=[{"name": "all", "type": "deploy"}])
    assert workflow_ref.resolved(plain, None, "shop") is plain
    empty = spec(ref="", steps=[{"name": "all", "type": "deploy"}])
    assert workflow_ref.name_of(empty) is None
    assert workflow_ref.resolved(empty, None, "shop") is empty


def test_a_missing_workflow_is_a_one_line_refusal_naming_it() -> None:
    with pytest.raises(AppError) as caught:
        compiled(spec(), None)
    assert str(caught.value) == (
        "spec.workflow.ref: Workflow shop/release not found on the hub (the Application is "
        "rendered once it exists in its namespace)")


def test_ref_and_steps_together_are_refused_as_kubevela_does() -> None:
    both = spec(ref="release", steps=[{"name": "all", "type": "deploy"}])
    with pytest.raises(AppError, match=r"^spec.workflow: ref and steps cannot both be given"):
        compiled(both, workflow_doc())
    empty_list = spec(ref="release", steps=[])  # Go's non-nil empty slice: refused too
    with pytest.raises(AppError, match="cannot both be given"):
        compiled(empty_list, workflow_doc())
    null = spec(ref="release", steps=None)  # Go's nil: no steps given
    assert [s.name for s in compiled(null, workflow_doc()).steps] == ["first", "second"]


@pytest.mark.parametrize(("found", "message"), [
    (workflow_doc(spec={"steps": []}),
     "spec.workflow.ref (Workflow shop/release) spec: not supported by this control plane "
     "(a Workflow has steps and mode)"),
    (workflow_doc(status={}), "spec.workflow.ref (Workflow shop/release) status: not "
                              "supported"),
    ({**workflow_doc(), "steps": {"name": "x"}},
     "spec.workflow.ref (Workflow shop/release) steps: a list of steps"),
    (workflow_doc(mode="DAG"), "spec.workflow.ref (Workflow shop/release) mode: a map"),
    (workflow_doc(mode={"steps": "Parallel"}),
     "spec.workflow.ref (Workflow shop/release) mode.steps: Input should be 'DAG' or "
     "'StepByStep'"),
    (workflow_doc({"name": "a", "type": "deploy", "properties": {"policy": ["one"]}}),
     "spec.workflow.ref (Workflow shop/release) steps[0].properties.policy: not supported "
     "for a deploy step"),
    (workflow_doc({"name": "a", "type": "no-such-step"}),
     "spec.workflow.ref (Workflow shop/release) steps[0].type: 'no-such-step' is not a "
     "built-in step"),
    (workflow_doc({"name": "a", "type": "deploy"}, {"name": "a", "type": "deploy"}),
     "spec.workflow.ref (Workflow shop/release) steps[1].name: 'a' is used twice"),
    (workflow_doc(*[{"name": f"s{i}", "type": "suspend"} for i in range(51)]),
     "spec.workflow.ref (Workflow shop/release) steps: 51 steps; this control plane takes "
     "at most 50"),
    ({**workflow_doc(), "apiVersion": "core.oam.dev/v1beta1"},
     "spec.workflow.ref (Workflow shop/release): apiVersion and kind: only "
     "core.oam.dev/v1alpha1 Workflow"),
])
def test_a_malformed_workflow_is_refused_naming_its_field(found: dict[str, Any],
                                                          message: str) -> None:
    with pytest.raises(AppError) as caught:
        compiled(spec(), found)
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("ref", ["other/release", "../release", "Release", "a" * 254, 7,
                                 "release\n", " release",
                                 ["release"], {"namespace": "other", "name": "release"}])
def test_a_ref_is_a_plain_name_never_a_namespace(ref: Any) -> None:
    """The attack: a tenant of ``shop`` names another namespace's Workflow; only names
    an object of the Application's own namespace can have are taken."""
    with pytest.raises(AppError, match=r"^spec.workflow.ref: must be the name of a Workflow "
                                       r"in the Application's namespace"):
        compiled(spec(ref=ref), workflow_doc(namespace="other"))


def test_a_workflow_of_another_namespace_or_name_is_never_used() -> None:
    """Whatever a caller hands in, only the Application's namespace's Workflow of that
    name is taken (defence in depth behind the controller's namespaced read)."""
    for found in (workflow_doc(namespace="other"), workflow_doc(name="elsewhere")):
        with pytest.raises(AppError, match="only the Application's own namespace is read"):
            compiled(spec(), found)


def test_the_revision_keeps_the_workflow_and_a_changed_one_is_new_content() -> None:
    kept = workflow_ref.covered({**workflow_doc(), "metadata": {
        "name": "release", "namespace": "shop", "uid": "u", "resourceVersion": "7"}})
    assert kept == {**workflow_doc(), "metadata": {"name": "release", "namespace": "shop"}}
    before = revision.content_hash(revision.content(spec(), {}, None, kept))
    edited = workflow_doc({"name": "only", "type": "deploy", "properties": {"policies": ["two"]}})
    after = revision.content_hash(revision.content(spec(), {}, None,
                                                   workflow_ref.covered(edited)))
    assert before != after
    # an Application without a ref keeps the hash it had before refs were read
    plain = spec(steps=[{"name": "all", "type": "deploy"}])
    assert revision.content(plain, {}) == revision.content(plain, {}, None, None)


# -- fedctl app dry-run -----------------------------------------------------------------------


def dry_run(tmp_path: Path, *docs: dict[str, Any]) -> Any:
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path)])


APPLICATION = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
               "metadata": {"name": "shop", "namespace": "shop"}, "spec": spec()}


def test_dry_run_takes_the_workflow_from_the_file(tmp_path: Path) -> None:
    result = dry_run(tmp_path, APPLICATION, workflow_doc())
    assert result.exit_code == 0, result.output
    assert "# step first (deploy): member1 (parallelism 5)" in result.output
    assert "# step second (deploy): member2 (parallelism 5)" in result.output
    without_namespace = workflow_doc()
    del without_namespace["metadata"]["namespace"]  # the Application's, as kubectl -n
    assert dry_run(tmp_path, APPLICATION, without_namespace).exit_code == 0


def test_dry_run_refuses_a_workflow_missing_from_the_file_or_of_another_namespace(
        tmp_path: Path) -> None:
    for docs in ((APPLICATION,), (APPLICATION, workflow_doc(namespace="other"))):
        result = dry_run(tmp_path, *docs)
        assert result.exit_code == 1
        assert result.stderr.splitlines()[-1] == (
            f"error: {tmp_path / 'app.yaml'}: spec.workflow.ref: Workflow shop/release is "
            "not in the file (dry-run reads referenced objects from it)")
    twice = dry_run(tmp_path, APPLICATION, workflow_doc(), workflow_doc())
    assert twice.exit_code == 1 and "holds Workflow shop/release twice" in twice.stderr


def test_dry_run_names_the_workflows_bad_field(tmp_path: Path) -> None:
    bad = workflow_doc({"name": "a", "type": "deploy", "properties": {"policies": ["nope"]}})
    result = dry_run(tmp_path, APPLICATION, bad)
    assert result.exit_code == 1
    assert "spec.workflow.ref (Workflow shop/release) steps[0].properties.policies" in \
        result.stderr, result.stderr
    assert "Traceback" not in result.output
