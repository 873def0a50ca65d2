"""vela-core's vela-cli and build-push-image steps as deploy steps of the Job or Pod they
write, in the Application's own namespace, to the local cluster, run as a ServiceAccount
of that namespace (workflowstep/vela-cli.cue, build-push-image.cue; docs/security.md,
*Applications: vela-cli and build-push-image*)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from federation.applications import compile as compile_
from federation.applications import model, pod_steps, vela_core
from federation.cli import cli
from federation.contexts.client import Resource
from federation.placement import clusters as clusters_
from tests.unit.applications.test_controller import MC, set_app
from tests.unit.applications.test_vela_steps import reconcile, steps_of
from tests.unit.controllers import fakes

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2")]
fakes.KINDS.setdefault("Job", Resource("batch", "v1", "jobs", "Job"))
fakes.KINDS.setdefault("Pod", Resource("", "v1", "pods", "Pod"))


def compiled(*steps: JSON, app: str = "app") -> compile_.Compiled:
    spec = {"components": [], "workflow": {"steps": list(steps)}}
    return compile_.compile_app(spec, app, "shop", {}, FLEET, local_cluster="member1")


def cli_step(name: str = "list-app", **props: Any) -> JSON:
    return {"name": name, "type": "vela-cli", "properties": {"command": ["vela", "ls"], **props}}


def build_step(name: str = "build", **props: Any) -> JSON:
    return {"name": name, "type": "build-push-image",
            "properties": {"context": {"git": "github.com/FogDong/simple-web-demo",
                                       "branch": "main"},
                           "image": "fogdong/simple-web-demo:v1", **props}}


def the_object(result: compile_.Compiled, step: str) -> JSON:
    [obj] = result.targets[step].clusters["member1"]
    return obj


def test_the_model_and_the_steps_know_the_same_parameters() -> None:
    for step_type in pod_steps.STEP_TYPES:
        assert pod_steps.KEYS[step_type] == model._STEP_PROPERTIES[step_type], step_type


# -- vela-cli --------------------------------------------------------------------------


def test_vela_cli_is_a_job_of_the_apps_namespace_on_the_local_cluster() -> None:
    """KubeVela's example (vela-cli.eg.md) with the definition's defaults: the image,
    backoffLimit 3, restartPolicy Never, the step label; the namespace's default
    ServiceAccount (KubeVela's default is its controller's, in vela-system)."""
    result = compiled(cli_step())
    [step] = result.steps
    assert (step.type, step.targets) == ("vela-cli", ("member1",))
    job = the_object(result, "list-app")
    assert (job["apiVersion"], job["kind"], job["metadata"]["namespace"]) == \
        ("batch/v1", "Job", "shop")
    assert job["metadata"]["name"].startswith("app-list-app-")
    assert job["spec"] == {"backoffLimit": 3, "template": {
        "metadata": {"labels": {"workflow.oam.dev/step-name": "app-list-app"}},
        "spec": {"containers": [{"name": "vela-cli", "image": "oamdev/vela-cli:v1.6.4",
                                 "command": ["vela", "ls"]}],
                 "restartPolicy": "Never", "serviceAccountName": "default"}}}


def test_vela_cli_without_a_command_runs_the_images_own() -> None:
    [container] = the_object(compiled({"name": "c", "type": "vela-cli"}), "c")[
        "spec"]["template"]["spec"]["containers"]
    assert container == {"name": "vela-cli", "image": pod_steps.VELA_CLI_IMAGE}


def test_vela_cli_parameters() -> None:
    """image, serviceAccountName (of the namespace), Secret volumes (defaultMode 420,
    items of mode 511 by default, subPath) and hostPath volumes (type Directory by
    default), a mount per entry and a volume per name (the first kept)."""
    storage = {
        "secret": [{"name": "kube", "mountPath": "/root/.kube", "secretName": "kubeconfig",
                    "items": [{"key": "config", "path": "config"}]},
                   {"name": "kube", "mountPath": "/etc/kube", "secretName": "other",
                    "subPath": "config", "defaultMode": 256}],
        "hostPath": [{"name": "data", "path": "/var/data", "mountPath": "/data"},
                     {"name": "sock", "path": "/run/x.sock", "mountPath": "/x.sock",
                      "type": "Socket"}]}
    job = the_object(compiled(cli_step(image="oamdev/vela-cli:v1.9.0",
                                       serviceAccountName="deployer", storage=storage)),
                     "list-app")
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "deployer"
    [container] = pod["containers"]
    assert container["image"] == "oamdev/vela-cli:v1.9.0"
    assert container["volumeMounts"] == [
        {"name": "secret-kube", "mountPath": "/root/.kube"},
        {"name": "secret-kube", "mountPath": "/etc/kube", "subPath": "config"},
        {"name": "hostpath-data", "mountPath": "/data"},
        {"name": "hostpath-sock", "mountPath": "/x.sock"}]
    assert pod["volumes"] == [
        {"name": "secret-kube", "secret": {"defaultMode": 420, "secretName": "kubeconfig",
                                           "items": [{"key": "config", "path": "config",
                                                      "mode": 511}]}},
        {"name": "hostpath-data", "hostPath": {"path": "/var/data", "type": "Directory"}},
        {"name": "hostpath-sock", "hostPath": {"path": "/run/x.sock", "type": "Socket"}}]


# -- build-push-image ----------------------------------------------------------------------


def test_build_push_image_is_a_kaniko_pod_of_the_apps_namespace() -> None:
    """KubeVela's example (build-push-image.eg.md) with the definition's defaults: the
    executor image, ./Dockerfile, verbosity info; the git context as kaniko's git URL;
    no ServiceAccount token in the pod (kaniko never calls the API)."""
    result = compiled(build_step())
    assert result.steps[0].targets == ("member1",)
    pod = the_object(result, "build")
    assert (pod["apiVersion"], pod["kind"], pod["metadata"]["namespace"]) == \
        ("v1", "Pod", "shop")
    assert pod["metadata"]["name"].startswith("app-build-")
    assert pod["spec"] == {
        "containers": [{"name": "kaniko", "image": "oamdev/kaniko-executor:v1.9.1", "args": [
            "--dockerfile=./Dockerfile",
            "--context=git://github.com/FogDong/simple-web-demo#refs/heads/main",
            "--destination=fogdong/simple-web-demo:v1", "--verbosity=info"]}],
        "restartPolicy": "Never", "automountServiceAccountToken": False}


def test_build_push_image_parameters() -> None:
    """A context string as given; git:// stripped once and branch master by default;
    platform, build args, verbosity; the registry Secret's key (.dockerconfigjson by
    default) as kaniko's config.json; the git token Secret's key as GIT_TOKEN."""
    pod = the_object(compiled(build_step(
        context="s3://bucket/ctx.tar.gz", dockerfile="docker/Dockerfile",
        kanikoExecutor="gcr.io/kaniko-project/executor:latest", platform="linux/arm",
        buildArgs=["A=1", "B=two words"], verbosity="debug",
        credentials={"image": {"name": "image-secret"},
                     "git": {"name": "git-secret", "key": "token"}})), "build")
    [container] = pod["spec"]["containers"]
    assert container["image"] == "gcr.io/kaniko-project/executor:latest"
    assert container["args"] == [
        "--dockerfile=docker/Dockerfile", "--context=s3://bucket/ctx.tar.gz",
        "--destination=fogdong/simple-web-demo:v1", "--verbosity=debug",
        "--customPlatform=linux/arm", "--build-arg=A=1", "--build-arg=B=two words"]
    assert container["volumeMounts"] == [{"name": "registry-credentials",
                                          "mountPath": "/kaniko/.docker/"}]
    assert pod["spec"]["volumes"] == [{"name": "registry-credentials", "secret": {
        "defaultMode": 420, "secretName": "image-secret",
        "items": [{"key": ".dockerconfigjson", "path": "config.json"}]}}]
    assert container["env"] == [{"name": "GIT_TOKEN", "valueFrom": {
        "secretKeyRef": {"name": "git-secret", "key": "token"}}}]
    git = the_object(compiled(build_step(context={"git": "git://github.com/a/b"})), "build")
    assert "--context=git://github.com/a/b#refs/heads/master" in \
        git["spec"]["containers"][0]["args"]


# -- names -----------------------------------------------------------------------------


def test_names_fit_63_characters_follow_the_content_and_never_collide() -> None:
    """``<app>-<step>`` cut to 54 characters, then a digest: two long steps whose cut
    names are the same still differ; a changed step is a new object (a Job's template
    cannot be updated); the same step is the same name on every compile."""
    app = "a" * 60
    result = compiled(cli_step("step-one-" + "x" * 40), cli_step("step-one-" + "x" * 41),
                      app=app)
    names = [next(iter(t.clusters.values()))[0]["metadata"]["name"]
             for t in result.targets.values()]
    assert all(len(n) <= 63 for n in names) and len(set(names)) == 2
    assert names[0][:54] == names[1][:54]
    label = next(iter(result.targets.values())).clusters["member1"][0]["spec"]["template"][
        "metadata"]["labels"]["workflow.oam.dev/step-name"]
    assert len(label) <= 63
    first = the_object(compiled(cli_step()), "list-app")["metadata"]["name"]
    assert the_object(compiled(cli_step()), "list-app")["metadata"]["name"] == first
    assert the_object(compiled(cli_step(command=["vela", "status"])), "list-app")[
        "metadata"]["name"] != first
    assert the_object(compiled(cli_step(), app="other"), "list-app")["metadata"][
        "name"] != first.replace("app-", "other-", 1)


# -- refusals --------------------------------------------------------------------------


@pytest.mark.parametrize(("step", "words"), [
    # the attack: KubeVela's default identity, the controller's own account
    (cli_step(serviceAccountName="kubevela-vela-core"),
     r"properties\.serviceAccountName: 'kubevela-vela-core' is the KubeVela controller's "
     "own ServiceAccount"),
    # another namespace: no parameter names one
    (cli_step(namespace="vela-system"),
     r"properties\.namespace: not supported for a vela-cli step"),
    (build_step(namespace="kube-system"),
     r"properties\.namespace: not supported for a build-push-image step"),
    (cli_step(serviceAccountName="../admin"),
     r"properties\.serviceAccountName: not a Kubernetes object name"),
    (cli_step(command="vela ls"), r"properties\.command: must be a list"),
    (cli_step(storage={"secret": [{"name": "k", "mountPath": "/k", "secretName": "s",
                                   "readOnly": True}]}),
     r"properties\.storage\.secret\[0\]\.readOnly: not supported"),
    (cli_step(storage={"pvc": []}), r"properties\.storage\.pvc: not supported"),
    (cli_step(storage={"secret": [{"name": "k", "mountPath": "/k",
                                   "secretName": "../bank"}]}),
     r"properties\.storage\.secret\[0\]\.secretName: not a Kubernetes object name"),
    (cli_step(storage={"secret": [{"name": "K_", "mountPath": "/k", "secretName": "s"}]}),
     r"properties\.storage\.secret\[0\]\.name: secret-<name> names the pod's volume"),
    (cli_step(storage={"secret": [{"name": "k", "mountPath": "/k", "secretName": "s",
                                   "items": [{"key": "a/b", "path": "x"}]}]}),
     r"properties\.storage\.secret\[0\]\.items\[0\]\.key: not a Secret key"),
    (cli_step(storage={"hostPath": [{"name": "h", "path": "/h", "mountPath": "h"}]}),
     r"properties\.storage\.hostPath\[0\]\.mountPath: must be an absolute path"),
    (cli_step(storage={"hostPath": [{"name": "h", "path": "/h", "mountPath": "/h",
                                     "type": "Pipe"}]}),
     r"properties\.storage\.hostPath\[0\]\.type: must be one of Directory"),
    (cli_step(log=True), r"properties\.log: not supported for a vela-cli step"),
    (build_step(image=None), r"properties\.image: required"),
    ({"name": "b", "type": "build-push-image", "properties": {"image": "x"}},
     r"properties\.context: required, a string or a map of git and branch"),
    (build_step(context={"git": "github.com/a/b", "tag": "v1"}),
     r"properties\.context\.tag: not supported \(branch, git\)"),
    (build_step(context=""), r"properties\.context: must not be empty"),
    (build_step(verbosity="loud"), r"properties\.verbosity: must be one of info"),
    (build_step(credentials={"image": {"name": "s", "namespace": "bank"}}),
     r"properties\.credentials\.image\.namespace: not supported"),
    (build_step(credentials={"git": {"name": "s"}}),
     r"properties\.credentials\.git\.key: required"),
    (build_step(credentials={"git": {"name": "bank/s", "key": "t"}}),
     r"properties\.credentials\.git\.name: not a Kubernetes object name"),
    (build_step(buildArgs="A=1"), r"properties\.buildArgs: must be a list"),
])
def test_refused_by_name(step: JSON, words: str) -> None:
    with pytest.raises(model.AppError, match=words):
        compiled(step)


def test_the_steps_are_no_longer_refused_by_the_catalogue() -> None:
    for step_type in pod_steps.STEP_TYPES:
        assert step_type in model.STEP_TYPES
        assert step_type in vela_core.BUILT_IN["workflowstep"]
        assert vela_core.refusal("workflowstep", step_type) is None


# -- the wait --------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "verdict"), [
    ({}, ("progressing", "Job shop/j: Active/Failed/Succeeded:0/0/0")),
    ({"active": 1}, ("progressing", "Job shop/j: Active/Failed/Succeeded:1/0/0")),
    ({"active": 1, "failed": 2}, ("progressing", "Job shop/j: Active/Failed/Succeeded:1/2/0")),
    ({"succeeded": 1}, ("healthy", "")),
    ({"succeeded": 1, "failed": 2}, ("healthy", "")),
    ({"failed": 3}, ("failed", "Job shop/j: 3 pod(s) failed, the command did not succeed "
                               "(its log: kubectl logs in the member)")),
    # the definition's fail is checked before its wait
    ({"failed": 3, "succeeded": 1}, ("failed", "Job shop/j: 3 pod(s) failed, the command "
                                               "did not succeed (its log: kubectl logs in "
                                               "the member)")),
    ({"failed": 1, "conditions": [{"type": "Failed", "status": "True",
                                   "reason": "DeadlineExceeded"}]},
     ("failed", "Job shop/j: 1 pod(s) failed, the command did not succeed (its log: "
                "kubectl logs in the member)")),
    ({"failed": "3"}, ("progressing", "Job shop/j: Active/Failed/Succeeded:0/0/0")),
])
def test_vela_cli_waits_for_a_succeeded_pod_and_fails_after_three_failed(
        status: JSON, verdict: tuple[str, str]) -> None:
    assert pod_steps.health("vela-cli", "Job shop/j", {"status": status}) == verdict


@pytest.mark.parametrize(("phase", "verdict"), [
    (None, ("progressing", "Pod shop/p: phase not reported")),
    ("Pending", ("progressing", "Pod shop/p: phase Pending")),
    ("Running", ("progressing", "Pod shop/p: phase Running")),
    ("Succeeded", ("healthy", "")),
    ("Failed", ("failed", "Pod shop/p: phase Failed (its log: kubectl logs in the member)")),
])
def test_build_push_image_waits_for_the_pod_to_succeed(phase: str | None,
                                                       verdict: tuple[str, str]) -> None:
    live = {"status": {"phase": phase} if phase else {}}
    assert pod_steps.health("build-push-image", "Pod shop/p", live) == verdict


def application(*steps: JSON) -> JSON:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": "shop", "namespace": "shop", "annotations": {}},
            "spec": {"components": [], "workflow": {"steps": list(steps)}}}


def live_of(mc: MC, kind: str) -> JSON:
    [found] = [o for k, o in mc.objects.items()
               if k[0] == "member1" and o.get("kind") == kind]
    return found


async def test_the_workflow_runs_until_the_job_succeeded() -> None:
    """Through the real reconciler: the Job is delivered to the local cluster's
    namespace, the step runs while the member reports nothing, succeeds once a pod
    succeeded, and the next step then runs."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    set_app(mc, application(cli_step(), {"name": "say", "type": "print-message-in-status",
                                         "properties": {"message": "done"}}))
    status = await reconcile(mc, 3)
    assert steps_of(status)["list-app"][0] == "running", status["workflow"]
    assert "say" not in steps_of(status) or steps_of(status)["say"][0] == "pending"
    job = live_of(mc, "Job")
    assert job["metadata"]["namespace"] == "shop"
    assert all(k[0] == "member1" for k, o in mc.objects.items() if o.get("kind") == "Job")
    job["status"] = {"succeeded": 1}
    mc.put("member1", job)
    status = await reconcile(mc, 6)
    assert status["workflow"]["phase"] == "succeeded", status["workflow"]
    assert steps_of(status)["say"] == ("succeeded", "done")


async def test_a_job_with_three_failed_pods_fails_the_workflow() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    set_app(mc, application(cli_step()))
    await reconcile(mc, 2)
    job = live_of(mc, "Job")
    job["status"] = {"failed": 2, "active": 1}
    mc.put("member1", job)
    status = await reconcile(mc, 3)
    assert steps_of(status)["list-app"][0] == "running"
    job = live_of(mc, "Job")
    job["status"] = {"failed": 3}
    mc.put("member1", job)
    status = await reconcile(mc, 3)
    assert status["workflow"]["phase"] == "failed", status["workflow"]
    phase, message = steps_of(status)["list-app"]
    assert phase == "failed" and "3 pod(s) failed" in message


async def test_the_kaniko_pod_succeeds_the_step_and_a_failed_one_fails_it() -> None:
    for phase, outcome in (("Succeeded", "succeeded"), ("Failed", "failed")):
        mc = MC(fakes.cluster_set(*fakes.MEMBERS))
        set_app(mc, application(build_step()))
        status = await reconcile(mc, 2)
        assert steps_of(status)["build"][0] == "running"
        pod = live_of(mc, "Pod")
        pod["status"] = {"phase": phase}
        mc.put("member1", pod)
        status = await reconcile(mc, 6)
        assert status["workflow"]["phase"] == outcome, status["workflow"]


def test_dry_run_says_what_the_steps_do(tmp_path: Path) -> None:
    app = tmp_path / "app.yaml"
    app.write_text("apiVersion: core.oam.dev/v1beta1\nkind: Application\n"
                   "metadata: {name: shop, namespace: shop}\nspec:\n  components: []\n"
                   "  workflow:\n    steps:\n"
                   "    - {name: ls, type: vela-cli, properties: {command: [vela, ls]}}\n")
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(app),
                                      "--local-cluster", "member1"])
    assert result.exit_code == 0, result.output
    assert "# step ls (vela-cli): writes a Job in the Application's namespace of the " \
        "local cluster" in result.output
    assert "kind: Job" in result.output


async def test_clean_jobs_after_vela_cli_makes_the_next_run_run_it_again() -> None:
    """The documented way to KubeVela's run-per-run: clean-jobs selecting the step's
    component label deletes the Job once it ran; a new revision writes it anew."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    clean = {"name": "clean", "type": "clean-jobs",
             "properties": {"labelselector": {"app.oam.dev/component": "list-app"}}}
    set_app(mc, application(cli_step(), clean))
    await reconcile(mc, 2)
    job = live_of(mc, "Job")
    name = job["metadata"]["name"]
    job["status"] = {"succeeded": 1}
    mc.put("member1", job)
    status = await reconcile(mc, 6)
    assert status["workflow"]["phase"] == "succeeded", status["workflow"]
    assert mc.find("member1", "Job", name, "shop") is None
    set_app(mc, application(cli_step(), clean, {"name": "say",
                                                "type": "print-message-in-status",
                                                "properties": {"message": "again"}}))
    status = await reconcile(mc, 2, until_done=False)
    assert steps_of(status)["list-app"][0] == "running", status["workflow"]
    assert mc.find("member1", "Job", name, "shop") is not None
