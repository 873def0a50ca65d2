"""What the local pod runner makes of a Deployment: its pod template checked and planned.

The local fleet has API servers but no kubelet; :mod:`federation.local.pods` runs the pods
of a Deployment as local processes. This module is its pure half: :func:`plan` reads the
Deployment as the API server returns it (defaults filled in) into a frozen
:class:`PodPlan`, and the helpers say how a container's command line becomes a local one.
No I/O, no clock.

Every field of the pod template is in one of three tables, and nothing else is accepted:

- **honoured**: the runner does what a kubelet would (containers, init containers, their
  command and args with ``$(VAR)`` expansion, env from values, the downward API,
  ConfigMaps and Secrets, ports, probes, emptyDir/Secret/ConfigMap volumes, the
  ServiceAccount token, the grace period, ``capabilities.drop: [ALL]`` and
  ``allowPrivilegeEscalation: false``, replicas and the update strategy);
- **waived** (:data:`WAIVED`): constraints on the container runtime or the scheduler that
  a process on one machine cannot have, each with the reason; the runner names them in its
  log when it starts a pod, so none is silently dropped;
- anything else is **refused** by name (:class:`PodSpecError`, one line): the runner starts
  no pod from a template it cannot honour.

A field with a value other than the one the runner can honour is refused too (a
``restartPolicy`` other than ``Always``, ``enableServiceLinks`` not ``false``, an image
other than fedctl's, an ``exec`` probe...).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any, Literal

JSON = dict[str, Any]

SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the kubelet mounts the token; the runner writes it elsewhere and says where
(:data:`federation.contexts.incluster.MOUNT_VARIABLE`)."""
ENTRYPOINT = ("fedctl",)
"""The image's entrypoint (the Containerfile's ``ENTRYPOINT``)."""
PROGRAMS = {"fedctl": "fedctl", "/opt/venv/bin/fedctl": "fedctl",
            "python3": "python", "python3.11": "python", "python": "python",
            "/usr/bin/python3": "python", "/usr/bin/python3.11": "python"}
"""The image's programs (docs/install.md: fedctl and python3.11, nothing else)."""
FIELD_PATHS = ("metadata.name", "metadata.namespace", "metadata.uid",
               "spec.serviceAccountName", "spec.nodeName", "status.podIP", "status.hostIP")
"""Downward API fields an env var may take (the others are refused)."""

WAIVED: Mapping[str, str] = {
    "resources": "requests and limits: one machine, no scheduler and no cgroups here",
    "securityContext.runAsUser": "the process runs as the runner's user",
    "securityContext.runAsGroup": "the process runs as the runner's group",
    "securityContext.fsGroup": "volumes belong to the runner's user",
    "securityContext.readOnlyRootFilesystem": "no root filesystem of its own: the process "
                                              "sees this machine's files",
    "securityContext.seccompProfile": "no seccomp filter is installed",
    "affinity": "one node: every replica runs on it (only preferred rules are accepted)",
    "imagePullPolicy": "nothing is pulled: the image is this working tree's fedctl",
    "dnsPolicy": "no cluster DNS: names resolve as on this machine",
    "schedulerName": "no scheduler: one node",
    "terminationMessagePath": "no termination message is read",
    "terminationMessagePolicy": "no termination message is read",
    "emptyDir.medium": "a directory on this machine's disk",
    "emptyDir.sizeLimit": "not enforced",
    "revisionHistoryLimit": "no ReplicaSets are kept",
    "progressDeadlineSeconds": "no Progressing condition is written",
}
"""Fields the runner accepts but cannot enforce, each with why (logged per pod)."""


class PodSpecError(ValueError):
    """A field the runner cannot honour; the message names it (one line)."""


# -- the plan -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Probe:
    kind: Literal["http", "tcp"]
    port: int | str
    """A container port number or name."""
    path: str = "/"
    scheme: str = "HTTP"
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    failures: int = 3
    successes: int = 1


@dataclasses.dataclass(frozen=True)
class KeyRef:
    kind: Literal["ConfigMap", "Secret"]
    name: str
    key: str
    optional: bool = False


@dataclasses.dataclass(frozen=True)
class EnvVar:
    name: str
    value: str | None = None
    field: str | None = None
    """A downward API field path (:data:`FIELD_PATHS`)."""
    ref: KeyRef | None = None


@dataclasses.dataclass(frozen=True)
class Mount:
    volume: str
    path: str
    read_only: bool = False


@dataclasses.dataclass(frozen=True)
class Container:
    name: str
    command: tuple[str, ...]
    """The image's entrypoint unless the container gives one."""
    args: tuple[str, ...]
    env: tuple[EnvVar, ...] = ()
    ports: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Declared container ports by name (unnamed ones by their number)."""
    mounts: tuple[Mount, ...] = ()
    readiness: Probe | None = None
    liveness: Probe | None = None
    startup: Probe | None = None
    drop_capabilities: bool = False
    no_new_privileges: bool = False
    working_dir: str | None = None


@dataclasses.dataclass(frozen=True)
class Volume:
    name: str
    kind: Literal["emptyDir", "secret", "configMap"]
    source: str = ""
    """The Secret's or ConfigMap's name."""
    items: tuple[tuple[str, str], ...] | None = None
    optional: bool = False
    mode: int = 0o644


@dataclasses.dataclass(frozen=True)
class PodPlan:
    namespace: str
    deployment: str
    generation: int
    replicas: int
    template_hash: str
    labels: Mapping[str, str]
    service_account: str
    automount_token: bool
    grace: float
    init_containers: tuple[Container, ...]
    containers: tuple[Container, ...]
    volumes: tuple[Volume, ...]
    recreate: bool
    max_unavailable: int
    waived: tuple[str, ...]
    """The :data:`WAIVED` fields this template sets."""


# -- checking fields -------------------------------------------------------------------------


class _Reader:
    """Walks one object, taking known keys; :meth:`done` refuses whatever is left."""

    def __init__(self, obj: Any, where: str, waived: list[str]) -> None:
        if not isinstance(obj, dict):
            raise PodSpecError(f"{where}: not an object")
        self.obj, self.where, self.waived = obj, where, waived
        self.taken: set[str] = set()

    def take(self, key: str, default: Any = None) -> Any:
        self.taken.add(key)
        return self.obj.get(key, default)

    def waive(self, key: str, label: str | None = None) -> None:
        if key in self.obj:
            self.taken.add(key)
            self.waived.append(label or key)

    def only(self, key: str, allowed: Sequence[Any], default: Any = None) -> Any:
        value = self.take(key, default)
        if value not in allowed:
            wanted = " or ".join(json.dumps(a) for a in allowed)
            raise PodSpecError(f"{self.at(key)}: {json.dumps(value)} is not supported by the "
                               f"local pod runner (only {wanted})")
        return value

    def at(self, key: str) -> str:
        return f"{self.where}.{key}"

    def child(self, key: str, default: Any = None) -> _Reader:
        return _Reader(self.take(key, {} if default is None else default), self.at(key),
                       self.waived)

    def done(self) -> None:
        for key in self.obj:
            if key not in self.taken:
                raise PodSpecError(f"{self.at(key)}: not supported by the local pod runner")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise PodSpecError(f"{where}: must be a non-empty string")
    return value


def _number(value: Any, where: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise PodSpecError(f"{where}: must be a non-negative number")
    return float(value)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PodSpecError(f"{where}: must be a list of strings")
    return tuple(value)


def _probe(value: Any, where: str, waived: list[str]) -> Probe | None:
    if value is None:
        return None
    r = _Reader(value, where, waived)

    def seconds(key: str, default: float) -> float:
        return _number(r.take(key), r.at(key), default)

    delay, period = seconds("initialDelaySeconds", 0.0), seconds("periodSeconds", 10.0)
    timeout = seconds("timeoutSeconds", 1.0)
    failures, successes = int(seconds("failureThreshold", 3)), int(seconds("successThreshold", 1))
    http, tcp = r.take("httpGet"), r.take("tcpSocket")
    r.done()
    if (http is None) == (tcp is None):
        raise PodSpecError(f"{where}: only an httpGet or a tcpSocket probe is supported by "
                           "the local pod runner")
    h = _Reader(http if http is not None else tcp, r.at("httpGet" if http else "tcpSocket"),
                waived)
    port = _port_ref(h.take("port"), h.at("port"))
    path, scheme = "/", "HTTP"
    if http is not None:
        path, scheme = str(h.take("path", "/")), h.only("scheme", ["HTTP", "HTTPS"], "HTTP")
    h.done()
    return Probe("http" if http is not None else "tcp", port, path, scheme, delay, period,
                 timeout, failures, successes)


def _port_ref(value: Any, where: str) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536:
        return value
    if isinstance(value, str) and value:
        return int(value) if value.isdigit() else value
    raise PodSpecError(f"{where}: must be a port number or name")


def _key_ref(kind: Literal["ConfigMap", "Secret"], value: Any, where: str,
             waived: list[str]) -> KeyRef:
    r = _Reader(value, where, waived)
    ref = KeyRef(kind, _text(r.take("name"), r.at("name")), _text(r.take("key"), r.at("key")),
                 r.take("optional") is True)
    r.done()
    return ref


def _env(value: Any, where: str, waived: list[str]) -> EnvVar:
    r = _Reader(value, where, waived)
    name = _text(r.take("name"), r.at("name"))
    plain, source = r.take("value"), r.take("valueFrom")
    r.done()
    if source is None:
        return EnvVar(name, value="" if plain is None else str(plain))
    s = _Reader(source, f"{where}.valueFrom", waived)
    field, config, secret = s.take("fieldRef"), s.take("configMapKeyRef"), s.take("secretKeyRef")
    s.done()
    if field is not None:
        f = _Reader(field, s.at("fieldRef"), waived)
        f.only("apiVersion", ["v1"], "v1")
        path = f.only("fieldPath", list(FIELD_PATHS))
        f.done()
        return EnvVar(name, field=path)
    if config is not None:
        return EnvVar(name, ref=_key_ref("ConfigMap", config, s.at("configMapKeyRef"), waived))
    if secret is not None:
        return EnvVar(name, ref=_key_ref("Secret", secret, s.at("secretKeyRef"), waived))
    raise PodSpecError(f"{where}.valueFrom: empty")


def _ports(value: Any, where: str, waived: list[str]) -> dict[str, int]:
    ports: dict[str, int] = {}
    for i, item in enumerate(value or []):
        r = _Reader(item, f"{where}[{i}]", waived)
        number = r.take("containerPort")
        if not isinstance(number, int) or isinstance(number, bool) or not 0 < number < 65536:
            raise PodSpecError(f"{r.at('containerPort')}: must be a port number")
        r.only("protocol", ["TCP"], "TCP")
        name = r.take("name") or str(number)
        r.done()
        ports[str(name)] = number
    return ports


def _security(value: Any, where: str, waived: list[str]) -> tuple[bool, bool]:
    """(drop every capability, no new privileges) from a container's securityContext."""
    r = _Reader(value or {}, where, waived)
    escalation = r.only("allowPrivilegeEscalation", [False, True, None])
    _run_as_non_root(r)
    for key in ("runAsUser", "runAsGroup", "readOnlyRootFilesystem"):
        r.waive(key, f"securityContext.{key}")
    _seccomp(r)
    capabilities = r.child("capabilities")
    drop = capabilities.take("drop") or []
    if drop not in ([], ["ALL"]):
        raise PodSpecError(f"{capabilities.at('drop')}: only [ALL] is supported by the local "
                           "pod runner")
    if capabilities.take("add"):
        raise PodSpecError(f"{capabilities.at('add')}: adding capabilities is not supported "
                           "by the local pod runner")
    capabilities.done()
    r.done()
    return drop == ["ALL"], escalation is False


def _run_as_non_root(r: _Reader) -> None:
    """runAsNonRoot is a check the kubelet makes against the user; a runAsUser of 0 with
    it is refused, as the kubelet refuses to start such a container."""
    if r.take("runAsNonRoot") is True and r.obj.get("runAsUser") == 0:
        raise PodSpecError(f"{r.at('runAsUser')}: 0 contradicts runAsNonRoot")


def _seccomp(r: _Reader) -> None:
    profile = r.child("seccompProfile")
    if profile.obj:
        profile.only("type", ["RuntimeDefault"])
        profile.done()
        r.waived.append("securityContext.seccompProfile")


def _mounts(value: Any, where: str, waived: list[str]) -> tuple[Mount, ...]:
    mounts = []
    for i, item in enumerate(value or []):
        r = _Reader(item, f"{where}[{i}]", waived)
        path = _text(r.take("mountPath"), r.at("mountPath"))
        if not path.startswith("/") or "/../" in f"{path}/":
            raise PodSpecError(f"{r.at('mountPath')}: must be an absolute path without '..'")
        mounts.append(Mount(_text(r.take("name"), r.at("name")), path.rstrip("/") or "/",
                            r.take("readOnly") is True))
        r.done()
    return tuple(mounts)


def _container(value: Any, where: str, waived: list[str], image: str) -> Container:
    r = _Reader(value, where, waived)
    name = _text(r.take("name"), r.at("name"))
    _image(r.take("image"), r.at("image"), image)
    for key in ("imagePullPolicy", "resources", "terminationMessagePath",
                "terminationMessagePolicy"):
        r.waive(key)
    command = _strings(r.take("command"), r.at("command")) or ENTRYPOINT
    if command[0] not in PROGRAMS:
        raise PodSpecError(f"{r.at('command')}[0]: {command[0]!r} is not a program of the "
                           f"image (only {', '.join(sorted(PROGRAMS))})")
    drop, no_new = _security(r.take("securityContext"), r.at("securityContext"), waived)
    working_dir = r.take("workingDir")
    container = Container(
        name=name, command=command, args=_strings(r.take("args"), r.at("args")),
        env=tuple(_env(e, f"{r.at('env')}[{i}]", waived)
                  for i, e in enumerate(r.take("env") or [])),
        ports=_ports(r.take("ports"), r.at("ports"), waived),
        mounts=_mounts(r.take("volumeMounts"), r.at("volumeMounts"), waived),
        readiness=_probe(r.take("readinessProbe"), r.at("readinessProbe"), waived),
        liveness=_probe(r.take("livenessProbe"), r.at("livenessProbe"), waived),
        startup=_probe(r.take("startupProbe"), r.at("startupProbe"), waived),
        drop_capabilities=drop, no_new_privileges=no_new,
        working_dir=None if working_dir is None else _text(working_dir, r.at("workingDir")))
    r.done()
    return container


def _image(value: Any, where: str, image: str) -> None:
    reference = _text(value, where)
    name = reference.split("@", 1)[0]
    repository = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
    if repository != image:
        raise PodSpecError(f"{where}: {reference!r} is not fedctl's image ({image}); the "
                           "local pod runner runs only that one")


def _volume(value: Any, where: str, waived: list[str]) -> Volume:
    r = _Reader(value, where, waived)
    name = _text(r.take("name"), r.at("name"))
    empty, secret, config = r.take("emptyDir"), r.take("secret"), r.take("configMap")
    r.done()
    if empty is not None:
        e = _Reader(empty, r.at("emptyDir"), waived)
        e.waive("medium", "emptyDir.medium")
        e.waive("sizeLimit", "emptyDir.sizeLimit")
        e.done()
        return Volume(name, "emptyDir")
    if secret is not None:
        return _source_volume(name, "secret", secret, r.at("secret"), "secretName", waived)
    if config is not None:
        return _source_volume(name, "configMap", config, r.at("configMap"), "name", waived)
    raise PodSpecError(f"{where}: only emptyDir, secret and configMap volumes are supported "
                       "by the local pod runner")


def _source_volume(name: str, kind: Literal["secret", "configMap"], value: Any, where: str,
                   name_key: str, waived: list[str]) -> Volume:
    r = _Reader(value, where, waived)
    source = _text(r.take(name_key), r.at(name_key))
    mode = r.take("defaultMode", 0o644)
    if not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o777:
        raise PodSpecError(f"{r.at('defaultMode')}: must be a file mode (0 to 0777)")
    items = None
    if r.take("items") is not None:
        items = []
        for i, item in enumerate(r.obj["items"]):
            it = _Reader(item, f"{r.at('items')}[{i}]", waived)
            path = _text(it.take("path"), it.at("path"))
            if not safe_path(path):
                raise PodSpecError(f"{it.at('path')}: must be relative, without '..' and not "
                                   "start with '..'")
            items.append((_text(it.take("key"), it.at("key")), path))
            it.done()
    optional = r.take("optional") is True
    r.done()
    return Volume(name, kind, source, None if items is None else tuple(items), optional, mode)


def safe_path(path: str) -> bool:
    """A path a volume may hold (the kubelet's rule): relative, no ``..`` element, not
    starting with ``..`` (the atomic writer's own names)."""
    parts = PurePosixPath(path).parts
    return (bool(parts) and not PurePosixPath(path).is_absolute() and ".." not in parts
            and not parts[0].startswith("..") and "\0" not in path)


# -- the Deployment ----------------------------------------------------------------------------


def template_hash(template: JSON) -> str:
    """A short digest of the pod template: pods of another hash are of an older version."""
    text = json.dumps(template, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def plan(deployment: JSON, image: str) -> PodPlan:
    """The pods ``deployment`` asks for; :class:`PodSpecError` names the first field the
    runner cannot honour. ``image``: fedctl's image repository (no tag)."""
    waived: list[str] = []
    meta = deployment.get("metadata") or {}
    spec = _Reader(deployment.get("spec"), "spec", waived)
    replicas = spec.take("replicas", 1)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise PodSpecError("spec.replicas: must be a whole number")
    template_value = spec.take("template")
    template = _Reader(template_value, "spec.template", waived)
    labels = _labels(template, spec)
    recreate, max_unavailable = _strategy(spec.child("strategy"), replicas)
    for key in ("revisionHistoryLimit", "progressDeadlineSeconds"):
        spec.waive(key)
    spec.only("minReadySeconds", [0, None])
    spec.only("paused", [False, None])
    spec.done()
    pod = template.child("spec")
    template.done()
    body = _pod(pod, waived, image)
    return PodPlan(namespace=str(meta.get("namespace") or "default"),
                   deployment=str(meta.get("name") or ""),
                   generation=int(meta.get("generation") or 0), replicas=replicas,
                   template_hash=template_hash(template_value), labels=labels,
                   waived=tuple(dict.fromkeys(waived)), recreate=recreate,
                   max_unavailable=max_unavailable, **body)


def _labels(template: _Reader, spec: _Reader) -> dict[str, str]:
    metadata = template.child("metadata")
    labels = metadata.take("labels") or {}
    metadata.take("annotations")  # the pod's own: nothing reads them here
    metadata.only("creationTimestamp", [None])  # the server's null
    metadata.done()
    selector = spec.child("selector")
    wanted = selector.take("matchLabels") or {}
    selector.done()
    if not wanted or any(labels.get(k) != v for k, v in wanted.items()):
        raise PodSpecError("spec.selector.matchLabels: must be non-empty and match the pod "
                           "template's labels (matchExpressions are not supported)")
    return {str(k): str(v) for k, v in labels.items()}


def _strategy(strategy: _Reader, replicas: int) -> tuple[bool, int]:
    kind = strategy.only("type", ["RollingUpdate", "Recreate"], "RollingUpdate")
    rolling = strategy.child("rollingUpdate")
    strategy.done()
    if kind == "Recreate":
        rolling.done()
        return True, replicas
    surge = rolling.take("maxSurge", 0)
    if surge not in (0, "0%", None):
        raise PodSpecError("spec.strategy.rollingUpdate.maxSurge: only 0 is supported by the "
                           "local pod runner")
    unavailable = rolling.take("maxUnavailable", 1)
    rolling.done()
    return False, max(1, count(unavailable, replicas, "spec.strategy.rollingUpdate."
                                                       "maxUnavailable"))


def count(value: Any, total: int, where: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and re.fullmatch(r"\d+%", value):
        return int(total * int(value[:-1]) / 100)
    raise PodSpecError(f"{where}: must be a whole number or a percentage")


def _pod(pod: _Reader, waived: list[str], image: str) -> dict[str, Any]:
    account = pod.take("serviceAccountName") or "default"
    pod.only("serviceAccount", [account, None])  # the deprecated alias the server fills
    pod.only("restartPolicy", ["Always"], "Always")
    pod.only("enableServiceLinks", [False])
    _affinity(pod.child("affinity"))
    for key in ("dnsPolicy", "schedulerName"):
        pod.waive(key)
    _pod_security(pod.child("securityContext"))
    grace = _number(pod.take("terminationGracePeriodSeconds"),
                    pod.at("terminationGracePeriodSeconds"), 30.0)
    automount = pod.take("automountServiceAccountToken") is not False
    volumes = tuple(_volume(v, f"{pod.at('volumes')}[{i}]", waived)
                    for i, v in enumerate(pod.take("volumes") or []))
    containers = tuple(_container(c, f"{pod.at('containers')}[{i}]", waived, image)
                       for i, c in enumerate(pod.take("containers") or []))
    inits = tuple(_container(c, f"{pod.at('initContainers')}[{i}]", waived, image)
                  for i, c in enumerate(pod.take("initContainers") or []))
    pod.done()
    if not containers:
        raise PodSpecError(f"{pod.at('containers')}: none")
    _check_mounts(pod.where, (*inits, *containers), volumes)
    return {"service_account": str(account), "automount_token": automount, "grace": grace,
            "init_containers": inits, "containers": containers, "volumes": volumes}


def _affinity(affinity: _Reader) -> None:
    if not affinity.obj:
        affinity.done()
        return
    anti = affinity.child("podAntiAffinity")
    affinity.done()
    anti.take("preferredDuringSchedulingIgnoredDuringExecution")
    anti.done()
    affinity.waived.append("affinity")


def _pod_security(security: _Reader) -> None:
    _run_as_non_root(security)
    for key in ("runAsUser", "runAsGroup", "fsGroup"):
        security.waive(key, f"securityContext.{key}")
    _seccomp(security)
    security.done()


def _check_mounts(where: str, containers: Sequence[Container],
                  volumes: Sequence[Volume]) -> None:
    names = {v.name for v in volumes}
    for container in containers:
        for mount in container.mounts:
            if mount.volume not in names:
                raise PodSpecError(f"{where}: container {container.name} mounts volume "
                                   f"{mount.volume!r}, which the pod does not have")
            if mount.path == SERVICE_ACCOUNT_MOUNT:
                raise PodSpecError(f"{where}: container {container.name} mounts a volume at "
                                   "the ServiceAccount token's path")
        paths = [m.path for m in container.mounts]
        if container.working_dir is not None and remap_paths(
                container.working_dir, dict.fromkeys(paths, "")) == container.working_dir:
            raise PodSpecError(f"{where}: container {container.name}'s workingDir must be "
                               "under one of its volume mounts (the runner has no image "
                               "filesystem to start in)")


# -- the command line ----------------------------------------------------------------------------

_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: a defined variable is replaced, an undefined
    reference is left as written, ``$$`` is one ``$``."""
    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)
    return _REFERENCE.sub(one, text)


def program(command: Sequence[str], python: str) -> list[str]:
    """The image's program as this machine runs it: ``fedctl`` is ``python -m federation``
    and ``python3`` this interpreter (the working tree's code, its virtualenv)."""
    head = PROGRAMS[command[0]]
    return [python, "-m", "federation"] if head == "fedctl" else [python]


_BIND = re.compile(r"^(?P<prefix>(?:--[\w-]+=)?)(?P<host>|0\.0\.0\.0|\[::\]|::|127\.0\.0\.1|"
                   r"localhost):(?P<port>\d+)$")


def remap_ports(arg: str, ports: Mapping[int, int]) -> str:
    """A bind address of a declared container port (``:8081``, ``0.0.0.0:9443``,
    ``--flag=:8443``...) becomes ``127.0.0.1:<the replica's port>``; anything else is
    left as it is."""
    match = _BIND.match(arg)
    if match is None or int(match["port"]) not in ports:
        return arg
    return f"{match['prefix']}127.0.0.1:{ports[int(match['port'])]}"


def remap_paths(text: str, mounts: Mapping[str, str]) -> str:
    """A container path under a mount (the whole text, or after ``=``) becomes the same
    path under the mount's local directory; the longest mount path wins."""
    head, sep, tail = text.partition("=") if text.startswith("--") else ("", "", text)
    for container_path in sorted(mounts, key=len, reverse=True):
        if tail == container_path or tail.startswith(container_path.rstrip("/") + "/"):
            return f"{head}{sep}{mounts[container_path]}{tail[len(container_path):]}"
    return text


def command_line(container: Container, env: Mapping[str, str], python: str,
                 ports: Mapping[int, int], mounts: Mapping[str, str]) -> list[str]:
    """The container's local argv: ``$(VAR)`` expanded, the program mapped, bind addresses
    and mounted paths rewritten."""
    words = [expand(word, env) for word in (*container.command[1:], *container.args)]
    return [*program(container.command, python),
            *(remap_paths(remap_ports(word, ports), mounts) for word in words)]
