"""vela-core's ``vela-cli`` and ``build-push-image`` workflow steps
(vela-templates/definitions/internal/workflowstep/vela-cli.cue, build-push-image.cue), as
deploy steps of the one object each writes, in the Application's own namespace, to the
local cluster (``--local-cluster``; KubeVela applies them to its control plane), built as
the Terraform steps are (:mod:`.terraform_steps`). The member runs the pod, under a
ServiceAccount of that namespace: the pod's own identity, never the control plane's, so
neither step does more than a ``task`` component or a ``k8s-objects`` Pod could.

- ``vela-cli``: a Job of one container ``vela-cli`` of ``image`` (default
  ``oamdev/vela-cli:v1.6.4``) running ``command``, ``restartPolicy: Never``,
  ``backoffLimit: 3``, its pods labelled ``workflow.oam.dev/step-name: <app>-<step>``,
  under ``serviceAccountName``, with the volumes of ``storage.secret[]`` (``secret-<name>``:
  the namespace's Secret ``secretName``, ``defaultMode`` 420, ``items`` of ``mode`` 511 by
  default; the mount's ``subPath``) and ``storage.hostPath[]`` (``hostpath-<name>``:
  ``path``, ``type`` Directory by default) mounted at ``mountPath`` (volumes
  de-duplicated by name, the first kept, as the definition's ``deDupVolumesArray``). The
  step fails once the Job reports more than 2 failed pods and succeeds once it reports
  one succeeded, as the definition's ``fail`` and ``wait``.
- ``build-push-image``: a Pod of one container ``kaniko`` of ``kanikoExecutor`` (default
  ``oamdev/kaniko-executor:v1.9.1``) with the arguments ``--dockerfile`` (``./Dockerfile``),
  ``--context`` (``context``: a string, or ``git`` and ``branch`` (master) as
  ``git://<git>#refs/heads/<branch>``), ``--destination`` (``image``), ``--verbosity``
  (info), ``--customPlatform`` (``platform``) and a ``--build-arg`` per ``buildArgs``;
  ``credentials.image`` (``name``, ``key`` .dockerconfigjson) mounted as kaniko's
  ``/kaniko/.docker/config.json``, ``credentials.git`` (``name``, ``key``) as
  ``GIT_TOKEN``. The step succeeds once the Pod's phase is Succeeded.

Where this differs from KubeVela:

- ``serviceAccountName``: KubeVela's default ``kubevela-vela-core`` puts the Job in
  ``vela-system`` under the KubeVela controller's own account. Here the Job is always in
  the Application's namespace; without ``serviceAccountName`` it runs as the namespace's
  ``default`` ServiceAccount, and naming ``kubevela-vela-core`` is refused (a controller's
  identity is not a tenant's to borrow). KubeVela writes the deprecated ``serviceAccount``
  field; here ``serviceAccountName``.
- ``storage.hostPath``: KubeVela writes ``path`` beside the volume's name, a field a
  Volume does not have, so the API server's defaulting makes it an emptyDir and ``type``
  is unused. Here it is the hostPath volume the parameters declare, as the ``storage``
  trait renders it: whether the namespace's pods may mount a node's directory is the
  member's Pod Security admission to decide (``baseline`` refuses it).
- Names: KubeVela names the Job ``<app>-<step>-<stepSessionID>`` and the Pod
  ``<app>-<stepSessionID>-kaniko``, new on each workflow run. Here both are
  ``<app>-<step>-<digest>`` (:func:`name`): ``<app>-<step>`` cut to 54 characters and 8
  hex digits of a digest of the Application, the step and the object's content, so the
  name fits 63 characters, two steps never share one, and a changed step is a new object
  (a Job's or Pod's spec cannot be updated) while the same step renders the same name on
  every reconcile: a run of the workflow that renders the same object finds it as it
  was (a command that ran is not run again; KubeVela's next run runs it anew).
- ``build-push-image``'s Pod does not mount a ServiceAccount token
  (``automountServiceAccountToken: false``): kaniko never calls the Kubernetes API, and
  the ``RUN`` lines of the Dockerfile it builds run in that Pod. A Pod whose phase is
  Failed fails the step (kaniko's Pod is never restarted; KubeVela waits for the step's
  timeout).
- ``log``: KubeVela streams the pod's log into its workflow's log store. Nothing is
  streamed here (the control plane reads no pod log); the log is the member's: ``kubectl
  logs -n <namespace> -l workflow.oam.dev/step-name=<app>-<step>`` (vela-cli) or
  ``kubectl logs -n <namespace> <pod>`` (build-push-image) in the local cluster.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from federation.applications import shapes, steps
from federation.applications.model import AppError, AppSpec, PolicySpec, Step

JSON = dict[str, Any]
STEP_TYPES = ("vela-cli", "build-push-image")
VELA_CLI_IMAGE = "oamdev/vela-cli:v1.6.4"
KANIKO_IMAGE = "oamdev/kaniko-executor:v1.9.1"
CONTROLLER_ACCOUNT = "kubevela-vela-core"
"""The KubeVela controller's ServiceAccount, vela-cli's upstream default (in vela-system)."""
STEP_LABEL = "workflow.oam.dev/step-name"
FAILURES = 2
"""vela-cli's step fails once its Job reports more failed pods than this (the
definition's ``status.failed > 2``)."""
_HOST_PATH_TYPES = ("Directory", "DirectoryOrCreate", "FileOrCreate", "File", "Socket",
                    "CharDevice", "BlockDevice")
VELA_CLI = {
    "command": shapes.Default([str], []),
    "image": shapes.Default(str, VELA_CLI_IMAGE),
    "serviceAccountName?": str,
    "storage?": {
        "secret?": [{"name": str, "mountPath": str, "subPath?": str,
                     "defaultMode": shapes.Default(shapes.Range(0, 511), 420),
                     "secretName": str,
                     "items?": [{"key": str, "path": str,
                                 "mode": shapes.Default(shapes.Range(0, 511), 511)}]}],
        "hostPath?": [{"name": str, "path": str, "mountPath": str,
                       "type": shapes.Default(shapes.Enum(*_HOST_PATH_TYPES), "Directory")}]},
}
_GIT = {"git": str, "branch": shapes.Default(str, "master")}
_SECRET_KEY = {"name": str, "key": str}
BUILD_PUSH_IMAGE = {
    "kanikoExecutor": shapes.Default(str, KANIKO_IMAGE),
    "dockerfile": shapes.Default(str, "./Dockerfile"),
    "image": str,
    "platform?": str,
    "buildArgs?": [str],
    "credentials?": {"git?": _SECRET_KEY,
                     "image?": {"name": str, "key": shapes.Default(str, ".dockerconfigjson")}},
    "verbosity": shapes.Default(shapes.Enum("info", "panic", "fatal", "error", "warn", "debug",
                                            "trace"), "info"),
}
KEYS = {"vela-cli": frozenset(k.rstrip("?") for k in VELA_CLI),
        "build-push-image": frozenset({"context",
                                       *(k.rstrip("?") for k in BUILD_PUSH_IMAGE)})}
"""Each step's parameters (``context``, a string or a map, is read by :func:`_context`)."""
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
"""A DNS label: a volume's name."""
_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
"""A Secret's key."""

WORDS = {
    "vela-cli": ": writes a Job in the Application's namespace of the local cluster, run as "
                "a ServiceAccount of that namespace; the step waits until one of its pods "
                "succeeded, and fails after 3 failed",
    "build-push-image": ": writes a kaniko Pod in the Application's namespace of the local "
                        "cluster (its credentials Secrets read by the member's kubelet); "
                        "the step waits until the Pod succeeded",
}


def deploy_step(step: Step, spec: AppSpec, app: str, namespace: str, where: str
                ) -> tuple[AppSpec, PolicySpec]:
    """The step as a deploy step: the spec of its one component (a ``k8s-objects`` of the
    Job or Pod, named after the step), and its topology (the local cluster)."""
    here = f"{where}.properties"
    made = job(step.properties, app, step.name, namespace, here) \
        if step.type == "vela-cli" else \
        kaniko(step.properties, app, step.name, namespace, here)
    component = steps.step_component(step, [made], where, f"the {made['kind']}")
    topology = PolicySpec(name=where, type="topology",
                          properties={"clusters": [steps.LOCAL]})
    return spec.model_copy(update={"components": (component,)}), topology


def name(app: str, step: str, content: Mapping[str, Any]) -> str:
    """``<app>-<step>`` cut to 54 characters, then 8 hex digits of a digest of the app,
    the step and the object's content: at most 63 characters (a Job's name is its pods'
    ``job-name`` label), one per step and per content."""
    text = json.dumps({"app": app, "step": step, "content": content}, sort_keys=True,
                      separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{_cut(f'{app}-{step}', 54)}-{digest}"


def _cut(text: str, length: int) -> str:
    """The first ``length`` characters, ending with a letter or digit (a name's and a
    label value's last character)."""
    return text[:length].rstrip("-._")


def job(props: Mapping[str, Any], app: str, step: str, namespace: str, where: str) -> JSON:
    """vela-cli's Job (the module docstring)."""
    found = shapes.check(dict(props), VELA_CLI, where)
    account = _account(found.get("serviceAccountName"), f"{where}.serviceAccountName")
    container: JSON = {"name": "vela-cli", "image": found["image"]}
    if found["command"]:
        container["command"] = list(found["command"])
    mounts, volumes = _storage(found.get("storage") or {}, f"{where}.storage")
    if mounts:
        container["volumeMounts"] = mounts
    pod: JSON = {"containers": [container], "restartPolicy": "Never",
                 "serviceAccountName": account}
    if volumes:
        pod["volumes"] = volumes
    spec: JSON = {"backoffLimit": 3, "template": {
        "metadata": {"labels": {STEP_LABEL: _cut(f"{app}-{step}", 63)}}, "spec": pod}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name(app, step, spec), "namespace": namespace},
            "spec": spec}


def _account(given: str | None, where: str) -> str:
    """The pod's ServiceAccount, of the Application's namespace: ``default`` unless named;
    the KubeVela controller's own is refused by name."""
    if given is None:
        return "default"
    if given == CONTROLLER_ACCOUNT:
        raise AppError(f"{where}: {CONTROLLER_ACCOUNT!r} is the KubeVela controller's own "
                       "ServiceAccount (KubeVela's default runs the Job in vela-system with "
                       "it): a step runs as a ServiceAccount of the Application's namespace "
                       "(leave it out for the namespace's default)")
    return steps.object_name(given, where)


def _storage(storage: Mapping[str, Any], where: str) -> tuple[list[JSON], list[JSON]]:
    """The mounts and the pod volumes of ``storage.secret[]`` then ``storage.hostPath[]``:
    a mount per entry, a volume per name (the first of a name kept)."""
    mounts: list[JSON] = []
    volumes: dict[str, JSON] = {}
    for index, entry in enumerate(storage.get("secret") or ()):
        here = f"{where}.secret[{index}]"
        volume = _volume_name("secret", entry["name"], here)
        mount: JSON = {"name": volume, "mountPath": _path(entry["mountPath"], here)}
        if entry.get("subPath") is not None:
            mount["subPath"] = entry["subPath"]
        mounts.append(mount)
        source: JSON = {"defaultMode": entry["defaultMode"],
                        "secretName": steps.object_name(entry["secretName"],
                                                        f"{here}.secretName")}
        if entry.get("items") is not None:
            source["items"] = [_item(item, f"{here}.items[{number}]")
                               for number, item in enumerate(entry["items"])]
        volumes.setdefault(volume, {"name": volume, "secret": source})
    for index, entry in enumerate(storage.get("hostPath") or ()):
        here = f"{where}.hostPath[{index}]"
        volume = _volume_name("hostpath", entry["name"], here)
        mounts.append({"name": volume, "mountPath": _path(entry["mountPath"], here)})
        volumes.setdefault(volume, {"name": volume, "hostPath": {
            "path": _path(entry["path"], here, "path"), "type": entry["type"]}})
    return mounts, list(volumes.values())


def _volume_name(prefix: str, given: str, where: str) -> str:
    volume = f"{prefix}-{given}"
    if len(volume) > 63 or not _LABEL.match(volume):
        raise AppError(f"{where}.name: {prefix}-<name> names the pod's volume: lower-case "
                       "letters, digits and '-', at most 63 characters in all")
    return volume


def _path(value: str, where: str, field: str = "mountPath") -> str:
    if not value.startswith("/"):
        raise AppError(f"{where}.{field}: must be an absolute path")
    return value


def _item(item: Mapping[str, Any], where: str) -> JSON:
    if not _KEY.match(item["key"]):
        raise AppError(f"{where}.key: not a Secret key (letters, digits, '-', '_', '.')")
    return {"key": item["key"], "path": item["path"], "mode": item["mode"]}


def kaniko(props: Mapping[str, Any], app: str, step: str, namespace: str, where: str
           ) -> JSON:
    """build-push-image's Pod (the module docstring)."""
    raw = dict(props)
    context = _context(raw.pop("context", None), f"{where}.context")
    found = shapes.check(raw, {**BUILD_PUSH_IMAGE, "context?": shapes.OPEN_MAP}, where)
    args = [f"--dockerfile={found['dockerfile']}", f"--context={context}",
            f"--destination={found['image']}", f"--verbosity={found['verbosity']}"]
    if found.get("platform") is not None:
        args.append(f"--customPlatform={found['platform']}")
    args += [f"--build-arg={arg}" for arg in found.get("buildArgs") or ()]
    container: JSON = {"name": "kaniko", "image": found["kanikoExecutor"], "args": args}
    pod: JSON = {"containers": [container], "restartPolicy": "Never",
                 "automountServiceAccountToken": False}
    credentials = found.get("credentials") or {}
    if "image" in credentials:
        image = _secret_key(credentials["image"], f"{where}.credentials.image")
        container["volumeMounts"] = [{"name": "registry-credentials",
                                      "mountPath": "/kaniko/.docker/"}]
        pod["volumes"] = [{"name": "registry-credentials", "secret": {
            "defaultMode": 420, "secretName": image["name"],
            "items": [{"key": image["key"], "path": "config.json"}]}}]
    if "git" in credentials:
        git = _secret_key(credentials["git"], f"{where}.credentials.git")
        container["env"] = [{"name": "GIT_TOKEN", "valueFrom": {"secretKeyRef": git}}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name(app, step, pod), "namespace": namespace},
            "spec": pod}


def _context(value: Any, where: str) -> str:
    """kaniko's ``--context``: a string as given, or ``{git, branch}`` as
    ``git://<git without git://>#refs/heads/<branch>``."""
    if isinstance(value, str):
        if not value:
            raise AppError(f"{where}: must not be empty")
        return value
    if not isinstance(value, dict):
        raise AppError(f"{where}: required, a string or a map of git and branch")
    found = shapes.check(value, _GIT, where)
    return f"git://{found['git'].removeprefix('git://')}#refs/heads/{found['branch']}"


def _secret_key(reference: Mapping[str, str], where: str) -> dict[str, str]:
    """A Secret of the pod's namespace and one of its keys, read by the member's kubelet
    (the control plane never reads it)."""
    if not _KEY.match(reference["key"]):
        raise AppError(f"{where}.key: not a Secret key (letters, digits, '-', '_', '.')")
    return {"name": steps.object_name(reference["name"], f"{where}.name"),
            "key": reference["key"]}


Verdict = tuple[Literal["healthy", "progressing", "failed"], str]


def health(step_type: str, what: str, live: Mapping[str, Any]) -> Verdict:
    """The step's wait, on its object read back from the member: vela-cli's Job failed
    once it reports more than :data:`FAILURES` failed pods (or the Job controller's
    ``Failed`` condition), healthy once one succeeded; build-push-image's Pod healthy in
    phase Succeeded, failed in phase Failed. The pods' messages are not copied (a
    command's output is the member's log)."""
    status = live.get("status") or {}
    if not isinstance(status, dict):
        status = {}
    if step_type == "build-push-image":
        phase = str(status.get("phase") or "")
        if phase == "Succeeded":
            return "healthy", ""
        if phase == "Failed":
            return "failed", f"{what}: phase Failed (its log: kubectl logs in the member)"
        return "progressing", f"{what}: phase {phase[:64] or 'not reported'}"
    failed, succeeded = _count(status, "failed"), _count(status, "succeeded")
    gave_up = any(isinstance(c, dict) and c.get("type") == "Failed" and
                  c.get("status") == "True" for c in status.get("conditions") or ())
    if failed > FAILURES or gave_up:
        return "failed", (f"{what}: {failed} pod(s) failed, the command did not succeed "
                          "(its log: kubectl logs in the member)")
    if succeeded > 0:
        return "healthy", ""
    return "progressing", (f"{what}: Active/Failed/Succeeded:{_count(status, 'active')}"
                           f"/{failed}/{succeeded}")


def _count(status: Mapping[str, Any], key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
