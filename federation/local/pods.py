"""The local pod runner: the pods of a Deployment as local processes, as a kubelet runs them.

The local fleet's clusters have API servers and no kubelet. ``fedctl local pods
NAMESPACE/NAME --cluster C`` (started by :func:`start`) plays the kubelet for one Deployment
of cluster C: it reads the Deployment from the API server every :attr:`Settings.sync_period`
and runs ``spec.replicas`` pods of its template, each container a local process. What a
kubelet gives a container, the runner gives it:

- **ServiceAccount token.** Per pod, a token from the TokenRequest API for the pod's
  ServiceAccount (``expirationSeconds`` :attr:`Settings.token_expiration`), bound to a Secret
  ``<pod>-token-<n>`` that stands for the pod object (the fleet has no Pod objects: deleting
  that Secret revokes the token, as deleting a pod revokes its tokens). Written with the
  cluster's CA and the namespace, by the kubelet's atomic writer (a ``..data`` symlink swap),
  into ``<pod>/serviceaccount/``; the container is told where by
  :data:`federation.contexts.incluster.MOUNT_VARIABLE` (``/var/run/secrets`` is not ours to
  write). A new token replaces it every :attr:`Settings.token_rotate` seconds (default: at
  80% of its lifetime, the kubelet's rule); a replaced token's Secret is deleted when the
  token expires, and every token's when the pod goes.
- **Service variables.** ``KUBERNETES_SERVICE_HOST=127.0.0.1`` and
  ``KUBERNETES_SERVICE_PORT`` of the cluster's API server; ``HOSTNAME`` the pod's name; no
  ``KUBECONFIG`` and a ``HOME`` of the pod's own, so nothing but the mount reaches the
  cluster.
- **Command line.** The container's ``command`` (else the image's entrypoint ``fedctl``:
  ``python -m federation`` of this working tree; ``python3`` is this interpreter) and ``args``
  with ``$(VAR)`` expanded from its env; env from values, the downward API
  (:data:`~federation.local.podspec.FIELD_PATHS`), ConfigMap and Secret keys.
- **Ports.** Every replica would bind the same container ports, so each declared
  ``containerPort`` gets a free loopback port per pod; a bind address of a declared port in
  the args (``:8081``, ``0.0.0.0:9443``, ``--flag=:8443``) is rewritten to
  ``127.0.0.1:<that port>`` (:func:`~federation.local.podspec.remap_ports`). The map is in
  the pod's ``status.json``. A port given any other way is not rewritten.
- **Volumes.** emptyDir: a directory; Secret and ConfigMap: their files (``items``,
  ``defaultMode``), written at pod start and every :attr:`Settings.volume_refresh` seconds.
  A container path under a mount, in the args, env values or ``workingDir`` (whole, or after
  ``--flag=``), is rewritten to the volume's directory; a volume at ``/tmp`` is ``TMPDIR``
  and the working directory.
- **Lifecycle.** Init containers in order, each to success (a failure is retried with the
  back-off below); then the containers. ``restartPolicy: Always``: an exited container is
  started again, at once the first time, then after 10 s doubling to 300 s, reset after 10
  minutes of running (the kubelet's CrashLoopBackOff). Probes (``httpGet``, ``tcpSocket``)
  with their delays, periods, timeouts and thresholds: the startup probe gates the others,
  a failed liveness probe restarts the container, the readiness probe makes it ready. A pod
  stops with SIGTERM and, after ``terminationGracePeriodSeconds``, SIGKILL.
- **Security.** ``allowPrivilegeEscalation: false`` and ``capabilities.drop: [ALL]`` are
  applied by :mod:`federation.local.podexec` before the program starts.
- **Rollout.** A changed pod template replaces pods, ``Recreate`` all at once, a
  ``RollingUpdate`` (``maxSurge: 0``) ``maxUnavailable`` at a time as replicas become ready.
  The Deployment's ``status`` (replicas, updated, ready, available, ``Available``) is
  written back, so ``kubectl rollout status`` works on the fleet.

What the runner cannot honour it refuses by name (:mod:`federation.local.podspec`): it then
starts no pod of that template and says why in its log and ``status.json``. What it cannot
enforce (resources, ``runAsUser``, ``readOnlyRootFilesystem``...) is listed there with the
reason and named in the log of every pod that sets it.

Files, under ``<state-dir>/pods/<cluster>/<namespace>/<deployment>/``: ``runner.pid``,
``runner.log``, ``status.json`` (the pods, or the refusal), and per pod
``pods/<pod>/``: ``status.json`` (pid, ports, restarts, readiness of each container),
``<container>.log``, ``<container>.pid``, ``serviceaccount/``, ``volumes/``, ``home/``.

The stable interface (other parts of the fleet and the e2e tests use it): :func:`start`,
:func:`stop`, :func:`directory`, :func:`statuses`, :func:`wait_ready`, :class:`Settings` and
the ``status.json`` fields :class:`PodStatus` reads.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import dataclasses
import datetime
import json
import logging
import os
import random
import shutil
import signal
import ssl
import string
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from federation.contexts import client as kube
from federation.contexts import incluster, kubeconfig
from federation.local import podspec, processes, reloaders

log = logging.getLogger("federation.local.pods")

JSON = dict[str, Any]
SECRETS = kube.Resource("", "v1", "secrets", "Secret")
SERVICES = kube.Resource("", "v1", "services", "Service")
CONFIG_MAPS = kube.Resource("", "v1", "configmaps", "ConfigMap")
IMAGE = "ghcr.io/federation/fedctl"
"""fedctl's image repository (``federation.deploy.manifests.IMAGE``, held equal by a unit
test: this layer may not import the deploy package)."""
POD_LABEL = "pods.local.federation.io/pod"
"""On each token's binding Secret: the pod it stands for."""
RUNNER_LABEL = "pods.local.federation.io/deployment"
NODE_NAME = "local"
"""``spec.nodeName`` of every pod: the one node the runner is."""
BACKOFF_START, BACKOFF_MAX, BACKOFF_RESET = 10.0, 300.0, 600.0
"""The kubelet's container restart back-off (seconds)."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """How the runner plays the kubelet."""

    token_expiration: int = 600
    """The TokenRequest API's minimum (ten minutes); the kubelet asks for an hour."""
    token_rotate: float | None = None
    """Seconds between tokens; None: at 80% of :attr:`token_expiration`, as the kubelet.
    The fleet's e2e tests shorten it so a rotation happens while they watch."""
    sync_period: float = 1.0
    """Seconds between two reads of the Deployment (one GET: cheap on loopback)."""
    volume_refresh: float = 60.0
    """Seconds between rewrites of Secret and ConfigMap volumes (the kubelet's sync)."""
    image: str = IMAGE
    python: str = sys.executable
    services: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Service name -> a loopback port where the runner forwards TCP connections to the
    ready pods the Service selects (its first port's ``targetPort``), round-robin, as
    kube-proxy would: one stable address for the replicas' remapped ports."""

    @property
    def rotate_after(self) -> float:
        return self.token_rotate or 0.8 * self.token_expiration


class Api(Protocol):
    """What the runner asks of the cluster (a :class:`~federation.contexts.client.
    ClusterClient`; unit tests pass a fake)."""

    async def get(self, resource: kube.Resource, name: str,
                  namespace: str | None = None) -> JSON: ...

    async def create(self, resource: kube.Resource, body: JSON,
                     namespace: str | None = None) -> JSON: ...

    async def replace(self, resource: kube.Resource, body: JSON,
                      subresource: str | None = None) -> JSON: ...

    async def delete(self, resource: kube.Resource, name: str, namespace: str | None = None,
                     **body: Any) -> JSON: ...

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      timeout: float | None = None) -> JSON: ...


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The cluster the pods run in: its API server (loopback), CA and an admin context
    (the kubelet's identity: it requests tokens and reads Secrets for volumes)."""

    name: str
    port: int
    ca: Path
    context: kubeconfig.Context
    host: str = "127.0.0.1"


# -- the stable interface ---------------------------------------------------------------------


def directory(state_dir: Path, cluster: str, namespace: str, name: str) -> Path:
    return state_dir / "pods" / cluster / namespace / name


def start(state_dir: Path, kubeconfig_path: Path, cluster: str, namespace: str, name: str, *,
          settings: Settings = Settings()) -> Path:
    """Start the runner of Deployment ``namespace/name`` of ``cluster`` (a background
    process; idempotent); its directory."""
    where = directory(state_dir, cluster, namespace, name)
    pid_file = where / "runner.pid"
    if processes.owned_pid(pid_file) is not None:
        return where
    where.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "federation", "local", "pods", f"{namespace}/{name}",
            "--cluster", cluster, "--state-dir", str(state_dir),
            "--kubeconfig", str(kubeconfig_path),
            "--token-expiration", str(settings.token_expiration)]
    if settings.token_rotate is not None:
        argv += ["--token-rotate", f"{settings.token_rotate:g}"]
    for service, port in settings.services.items():
        argv += ["--service", f"{service}={port}"]
    processes.spawn(argv, pid_file, where / "runner.log",
                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return where


def stop(state_dir: Path, cluster: str, namespace: str, name: str) -> bool:
    """Stop the runner (it stops its pods, each within its grace period); True when one ran.
    Containers a killed runner left behind are stopped too."""
    where = directory(state_dir, cluster, namespace, name)
    stopped = processes.terminate(where / "runner.pid", timeout=120)
    for pid_file in where.glob("pods/*/*.pid"):
        stopped = processes.terminate(pid_file) or stopped
    return stopped


def stop_all(state_dir: Path) -> list[str]:
    """Every runner and container under ``state_dir`` (``fedctl local down``)."""
    stopped = []
    for pid_file in sorted(state_dir.glob("pods/*/*/*/runner.pid")):
        if processes.terminate(pid_file, timeout=120):
            stopped.append(str(pid_file.parent.relative_to(state_dir)))
    for pid_file in sorted(state_dir.glob("pods/*/*/*/pods/*/*.pid")):
        if processes.terminate(pid_file):
            stopped.append(str(pid_file.parent.relative_to(state_dir)))
    return stopped


@dataclasses.dataclass(frozen=True)
class ContainerStatus:
    name: str
    pid: int | None
    restarts: int
    ready: bool
    started: bool
    exit_code: int | None


@dataclasses.dataclass(frozen=True)
class PodStatus:
    name: str
    uid: str
    template_hash: str
    ready: bool
    ports: Mapping[str, int]
    """Container port name (or number) -> this pod's loopback port."""
    containers: Mapping[str, ContainerStatus]
    directory: Path
    token_binding: str
    """The Secret the current token is bound to."""

    @classmethod
    def read(cls, path: Path) -> PodStatus:
        data = json.loads(path.read_text())
        return cls(name=data["name"], uid=data["uid"], template_hash=data["template_hash"],
                   ready=bool(data["ready"]), ports=data["ports"], directory=path.parent,
                   token_binding=data.get("token_binding") or "",
                   containers={c["name"]: ContainerStatus(**c) for c in data["containers"]})


def statuses(state_dir: Path, cluster: str, namespace: str, name: str) -> list[PodStatus]:
    """The running pods (those being stopped are left out), oldest first."""
    where = directory(state_dir, cluster, namespace, name) / "status.json"
    try:
        names = json.loads(where.read_text())["pods"]
    except (OSError, ValueError, KeyError):
        return []
    found = []
    for pod in names:
        with contextlib.suppress(OSError, ValueError, KeyError):
            found.append(PodStatus.read(where.parent / "pods" / pod / "status.json"))
    return found


def refusal(state_dir: Path, cluster: str, namespace: str, name: str) -> str | None:
    """Why the runner starts no pod of the current template, if it refuses it."""
    where = directory(state_dir, cluster, namespace, name) / "status.json"
    try:
        refused = json.loads(where.read_text()).get("refused")
    except (OSError, ValueError, AttributeError):
        return None
    return str(refused) if refused else None


def wait_ready(state_dir: Path, cluster: str, namespace: str, name: str, count: int,
               timeout: float) -> list[PodStatus]:
    """Block until ``count`` pods of the current template are ready; raise TimeoutError
    naming the refusal or the runner's log otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        pods = statuses(state_dir, cluster, namespace, name)
        hashes = {p.template_hash for p in pods}
        if len(hashes) == 1 and sum(p.ready for p in pods) >= count:
            return pods
        refused = refusal(state_dir, cluster, namespace, name)
        if refused or time.monotonic() > deadline:
            where = directory(state_dir, cluster, namespace, name)
            raise TimeoutError(refused or f"{count} ready pods of {namespace}/{name} not "
                               f"within {timeout:.0f}s (see {where}/)")
        time.sleep(0.25)


# -- one container --------------------------------------------------------------------------


@dataclasses.dataclass
class ContainerState:
    spec: podspec.Container
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    ready: bool = False
    started: bool = False
    exit_code: int | None = None
    started_at: float = 0.0
    not_before: float = 0.0
    watcher: asyncio.Task[None] | None = None
    failures: int = 0
    """Exits in a row (each one without 10 minutes of running before it)."""

    def status(self) -> ContainerStatus:
        pid = self.proc.pid if self.proc is not None and self.proc.poll() is None else None
        return ContainerStatus(self.spec.name, pid, self.restarts, self.ready, self.started,
                               self.exit_code)


def backoff(failures: int) -> float:
    """Seconds before a restart after ``failures`` exits in a row."""
    if failures <= 1:
        return 0.0
    return float(min(BACKOFF_START * 2 ** (failures - 2), BACKOFF_MAX))


class ContainerConfigError(Exception):
    """A container cannot be configured yet (a referenced ConfigMap or Secret key is
    missing): the kubelet's CreateContainerConfigError; tried again at the next pass."""


async def check(probe: podspec.Probe, port: int) -> bool:
    """One probe: a connection (tcpSocket) or a GET answered 200-399 (httpGet; HTTPS
    unverified, as the kubelet probes)."""
    context = None
    if probe.kind == "http" and probe.scheme == "HTTPS":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(probe.timeout or 1.0):
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
            try:
                if probe.kind == "tcp":
                    return True
                writer.write(f"GET {probe.path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                             "User-Agent: kube-probe/local\r\nConnection: close\r\n\r\n"
                             .encode())
                line = (await reader.readline()).decode(errors="replace").split()
                return len(line) >= 2 and line[1].isdigit() and 200 <= int(line[1]) < 400
            finally:
                writer.close()
                with contextlib.suppress(OSError, ssl.SSLError):
                    await writer.wait_closed()
    except (OSError, TimeoutError, ssl.SSLError, UnicodeError):
        return False


# -- one pod -----------------------------------------------------------------------------------


def pod_name(deployment: str, template_hash: str) -> str:
    suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
    return f"{deployment}-{template_hash[:8]}-{suffix}"


def _decoded(obj: JSON, kind: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for key, value in (obj.get("data") or {}).items():
        out[key] = base64.b64decode(value) if kind == "secret" else str(value).encode()
    for key, value in (obj.get("binaryData") or {}).items():
        out[key] = base64.b64decode(value)
    return out


class Pod:
    """One replica: its directory, token, volumes and containers."""

    def __init__(self, plan: podspec.PodPlan, cluster: Cluster, client: Api,
                 root: Path, settings: Settings) -> None:
        self.plan, self.cluster, self.client, self.settings = plan, cluster, client, settings
        self.name = pod_name(plan.deployment, plan.template_hash)
        self.uid = str(uuid.uuid4())
        self.dir = root / "pods" / self.name
        self.containers = [ContainerState(c) for c in plan.containers]
        self.inits = [ContainerState(c) for c in plan.init_containers]
        self.ports = self._ports()
        self.stopping = False
        self.initialized = not self.inits
        self.tokens: list[tuple[str, float]] = []  # (binding Secret, expires at: monotonic)
        self.tokens_issued = 0
        """Tokens requested so far: each one's Secret is named by its number (a count of
        the live ones would name a new token after one still alive)."""
        self.token_due = 0.0
        self.volumes_due = 0.0
        self.problem = ""
        self.volume_problem = ""
        """Why a volume could not be written as asked; the pod's containers wait for it
        (those already running keep running, as under a kubelet)."""

    def _ports(self) -> dict[str, int]:
        """A free loopback port for each declared container port, by name."""
        return {name: reloaders.free_port()
                for c in (*self.plan.init_containers, *self.plan.containers)
                for name in c.ports}

    def named_port(self, target: str | int | None) -> int | None:
        """This pod's loopback port for a container port name or number."""
        if isinstance(target, str):
            return self.ports.get(target)
        for container in self.plan.containers:
            for name, number in container.ports.items():
                if number == target:
                    return self.ports[name]
        return None

    def port_map(self, container: podspec.Container) -> dict[int, int]:
        """Container port number -> this pod's port (for the args)."""
        return {number: self.ports[name] for name, number in container.ports.items()}

    @property
    def ready(self) -> bool:
        return (self.initialized and not self.stopping
                and all(c.ready for c in self.containers))

    # -- files ----------------------------------------------------------------------------

    def volume_dir(self, volume: str) -> Path:
        return self.dir / "volumes" / volume

    def container_mounts(self, container: podspec.Container) -> dict[str, str]:
        mounts = {m.path: str(self.volume_dir(m.volume)) for m in container.mounts}
        if self.plan.automount_token:
            mounts[podspec.SERVICE_ACCOUNT_MOUNT] = str(self.dir / "serviceaccount")
        return mounts

    async def prepare(self) -> None:
        """The pod's directory, token and volumes (before any container starts)."""
        for sub in ("home", "volumes"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o700)
        for volume in self.plan.volumes:
            self.volume_dir(volume.name).mkdir(exist_ok=True)
        self.write_status()

    async def refresh(self, now: float) -> None:
        """The token when due, expired tokens' Secrets, the Secret and ConfigMap volumes."""
        if self.plan.automount_token and now >= self.token_due:
            try:
                await self.rotate_token(now)
            except kube.ClientError as exc:  # the old token is still good: try again soon
                self.token_due = now + 5.0
                log.warning("%s: token request failed: %s", self.name, exc)
        for binding, _ in [t for t in self.tokens[:-1] if t[1] <= now]:
            await self.revoke(binding)
        if now >= self.volumes_due:
            problem = await self.write_volumes()
            if problem and problem != self.volume_problem:
                log.warning("%s: %s", self.name, problem)
            self.volume_problem = problem
            self.volumes_due = now + (5.0 if problem else self.settings.volume_refresh)

    async def rotate_token(self, now: float) -> None:
        self.tokens_issued += 1
        binding = f"{self.name}-token-{self.tokens_issued}"
        secret = await self.client.create(SECRETS, {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": binding, "namespace": self.plan.namespace,
                         "labels": {POD_LABEL: self.name,
                                    RUNNER_LABEL: self.plan.deployment}}})
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"expirationSeconds": self.settings.token_expiration,
                            "boundObjectRef": {"apiVersion": "v1", "kind": "Secret",
                                               "name": binding,
                                               "uid": secret["metadata"]["uid"]}}}
        path = (f"/api/v1/namespaces/{self.plan.namespace}/serviceaccounts/"
                f"{self.plan.service_account}/token")
        try:
            answer = await self.client.request("POST", path, body=request)
        except kube.ClientError:
            await self.revoke(binding)
            raise
        status = answer.get("status") or {}
        lifetime = _seconds_until(str(status.get("expirationTimestamp", "")))
        files = {"token": str(status.get("token", "")).encode(),
                 "ca.crt": self.cluster.ca.read_bytes(),
                 "namespace": self.plan.namespace.encode()}
        await asyncio.to_thread(reloaders.sync_config_dir, self.dir / "serviceaccount", files)
        self.tokens.append((binding, now + lifetime))
        self.token_due = now + min(self.settings.rotate_after, 0.8 * lifetime)
        log.info("%s: token %d written (bound to Secret %s/%s, valid %.0fs)", self.name,
                 self.tokens_issued, self.plan.namespace, binding, lifetime)
        self.write_status()

    async def revoke(self, binding: str) -> None:
        try:
            await self.client.delete(SECRETS, binding, self.plan.namespace)
        except kube.ApiError as exc:
            if exc.status != 404:
                log.warning("%s: deleting token Secret %s: %s", self.name, binding, exc)
                return
        except kube.ClientError as exc:
            log.warning("%s: deleting token Secret %s: %s", self.name, binding, exc)
            return
        self.tokens = [t for t in self.tokens if t[0] != binding]

    async def write_volumes(self) -> str:
        """Write the Secret and ConfigMap volumes; what could not be written, or ""."""
        problems = [await self.write_volume(v) for v in self.plan.volumes if v.kind != "emptyDir"]
        return next((p for p in problems if p), "")

    async def write_volume(self, volume: podspec.Volume) -> str:
        resource = SECRETS if volume.kind == "secret" else CONFIG_MAPS
        try:
            obj = await self.client.get(resource, volume.source, self.plan.namespace)
            content = _decoded(obj, volume.kind)
        except kube.ApiError as exc:
            if exc.status != 404 or not volume.optional:
                return (f"volume {volume.name}: {volume.kind} {volume.source}: "
                        f"{exc.reason or exc.status}")
            content = {}
        except (kube.ClientError, binascii.Error, ValueError) as exc:
            return f"volume {volume.name}: {volume.kind} {volume.source}: {type(exc).__name__}"
        pairs = volume.items if volume.items is not None else [(k, k) for k in content]
        missing = [key for key, _ in pairs if key not in content]
        if missing and not volume.optional:
            return f"volume {volume.name}: {volume.kind} {volume.source} has no key {missing[0]!r}"
        unsafe = [key for key, path in pairs if not podspec.safe_path(path)]
        if unsafe:  # a key named '..x' and no items: the kubelet refuses it too
            return f"volume {volume.name}: key {unsafe[0]!r} is not a file name"
        files = {path: content[key] for key, path in pairs if key in content}
        directory_ = self.volume_dir(volume.name)
        await asyncio.to_thread(reloaders.sync_config_dir, directory_, files)
        for path in files:
            await asyncio.to_thread((directory_ / path).resolve().chmod, volume.mode)
        return ""

    # -- containers -------------------------------------------------------------------------

    async def environment(self, container: podspec.Container) -> dict[str, str]:
        """The container's environment, as the kubelet builds it (its env in order, each
        value able to refer to the ones before it)."""
        mounts = self.container_mounts(container)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
               "HOSTNAME": self.name, "HOME": str(self.dir / "home"),
               "KUBERNETES_SERVICE_HOST": self.cluster.host,
               "KUBERNETES_SERVICE_PORT": str(self.cluster.port),
               "KUBERNETES_SERVICE_PORT_HTTPS": str(self.cluster.port)}
        if "PYTHONPATH" in os.environ:  # the image's code: this working tree's
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        if self.plan.automount_token:
            env[incluster.MOUNT_VARIABLE] = mounts[podspec.SERVICE_ACCOUNT_MOUNT]
        if "/tmp" in mounts:
            env["TMPDIR"] = mounts["/tmp"]
        for var in container.env:
            value = await self.env_value(var)
            if value is not None:
                env[var.name] = podspec.remap_paths(podspec.expand(value, env), mounts)
        return env

    async def env_value(self, var: podspec.EnvVar) -> str | None:
        if var.field is not None:
            return {"metadata.name": self.name, "metadata.namespace": self.plan.namespace,
                    "metadata.uid": self.uid, "spec.serviceAccountName":
                    self.plan.service_account, "spec.nodeName": NODE_NAME,
                    "status.podIP": "127.0.0.1", "status.hostIP": "127.0.0.1"}[var.field]
        if var.ref is None:
            return var.value
        resource = SECRETS if var.ref.kind == "Secret" else CONFIG_MAPS
        try:
            obj = await self.client.get(resource, var.ref.name, self.plan.namespace)
        except kube.ApiError as exc:
            if exc.status == 404 and var.ref.optional:
                return None
            raise ContainerConfigError(f"env {var.name}: {var.ref.kind} {var.ref.name}: "
                                       f"{exc.reason or exc.status}") from None
        content = _decoded(obj, "secret" if var.ref.kind == "Secret" else "configMap")
        if var.ref.key not in content:
            if var.ref.optional:
                return None
            raise ContainerConfigError(f"env {var.name}: {var.ref.kind} {var.ref.name} has "
                                       f"no key {var.ref.key!r}")
        return content[var.ref.key].decode(errors="replace")

    async def launch(self, state: ContainerState, now: float) -> None:
        spec = state.spec
        env = await self.environment(spec)
        mounts = self.container_mounts(spec)
        argv = podspec.command_line(spec, env, self.settings.python, self.port_map(spec),
                                    mounts)
        security = [*(["--no-new-privileges"] if spec.no_new_privileges else []),
                    *(["--drop-capabilities"] if spec.drop_capabilities else [])]
        launcher = [self.settings.python, "-m", "federation.local.podexec", *security, "--"]
        cwd = Path(podspec.remap_paths(spec.working_dir, mounts)) if spec.working_dir \
            else Path(mounts.get("/tmp") or self.dir / "home")
        state.proc = await asyncio.to_thread(
            processes.popen, [*launcher, *argv], self.dir / f"{spec.name}.pid",
            self.dir / f"{spec.name}.log", env=env, cwd=cwd)
        state.started_at, state.exit_code, state.ready = now, None, False
        state.started = spec.startup is None
        log.info("%s: container %s started (pid %d, restarts %d)", self.name, spec.name,
                 state.proc.pid, state.restarts)

    def write_status(self) -> None:
        data = {"name": self.name, "uid": self.uid, "template_hash": self.plan.template_hash,
                "ready": self.ready, "ports": self.ports,
                "problem": self.volume_problem or self.problem,
                "token_binding": self.tokens[-1][0] if self.tokens else "",
                "containers": [dataclasses.asdict(c.status())
                               for c in (*self.inits, *self.containers)]}
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / "status.json.tmp"
        tmp.write_text(json.dumps(data, indent=1))
        tmp.rename(self.dir / "status.json")


    # -- the kubelet's pass ------------------------------------------------------------------

    async def step(self, now: float) -> None:
        """One pass: token and volumes, then init containers or containers."""
        await self.refresh(now)
        running = any(c.proc is not None for c in (*self.inits, *self.containers))
        if self.volume_problem and not running and not any(c.restarts for c in self.containers):
            self.write_status()
            return  # held, as the kubelet holds a pod whose volumes it cannot mount
        if not self.initialized:
            await self.init_step(now)
        else:
            for state in self.containers:
                await self.container_step(state, now)
        self.write_status()

    async def init_step(self, now: float) -> None:
        for state in self.inits:
            if state.exit_code == 0:
                continue
            if state.proc is None:
                if now >= state.not_before:
                    await self.try_launch(state, now)
                return
            code = state.proc.poll()
            if code is None:
                return
            if code != 0:
                self.exited(state, code, now)
                return
            state.exit_code, state.proc = 0, None
            log.info("%s: init container %s completed", self.name, state.spec.name)
        self.initialized = True

    async def container_step(self, state: ContainerState, now: float) -> None:
        if state.proc is None:
            if now >= state.not_before:
                await self.try_launch(state, now)
                if state.proc is not None:
                    state.watcher = asyncio.create_task(
                        self.probes(state), name=f"probes of {self.name}/{state.spec.name}")
            return
        code = state.proc.poll()
        if code is not None:
            self.exited(state, code, now)

    async def try_launch(self, state: ContainerState, now: float) -> None:
        try:
            await self.launch(state, now)
            self.problem = ""
        except (ContainerConfigError, kube.ClientError, OSError) as exc:
            if str(exc) != self.problem:
                log.warning("%s: container %s cannot start: %s", self.name, state.spec.name,
                            exc)
            self.problem = str(exc)
            state.not_before = now + 5.0

    def exited(self, state: ContainerState, code: int, now: float) -> None:
        """restartPolicy Always: the kubelet's back-off before the next start."""
        if state.watcher is not None:
            state.watcher.cancel()
        if now - state.started_at >= BACKOFF_RESET:
            state.failures = 0
        state.failures += 1
        state.restarts += 1
        delay = backoff(state.failures)
        state.proc, state.exit_code, state.ready, state.started = None, code, False, False
        state.not_before = now + delay
        (self.dir / f"{state.spec.name}.pid").unlink(missing_ok=True)
        log.warning("%s: container %s exited with %d; restart %d in %.0fs", self.name,
                    state.spec.name, code, state.restarts, delay)

    # -- probes -----------------------------------------------------------------------------

    def probe_port(self, container: podspec.Container, probe: podspec.Probe) -> int:
        if isinstance(probe.port, str):
            return self.ports[probe.port] if probe.port in container.ports else 0
        named = [n for n, number in container.ports.items() if number == probe.port]
        return self.ports[named[0]] if named else probe.port

    async def probes(self, state: ContainerState) -> None:
        spec = state.spec
        if spec.startup is not None:
            if not await self.startup(state, spec.startup):
                await self.kill(state, "startup probe failed")
                return
            state.started = True
        await asyncio.gather(self.readiness(state), self.liveness(state))

    async def startup(self, state: ContainerState, probe: podspec.Probe) -> bool:
        """True at the first success; False after ``failures`` failures in a row."""
        port = self.probe_port(state.spec, probe)
        await asyncio.sleep(probe.initial_delay)
        for _ in range(max(probe.failures, 1)):
            if await check(probe, port):
                return True
            await asyncio.sleep(probe.period)
        return False

    async def readiness(self, state: ContainerState) -> None:
        """Ready after ``successes`` passes in a row, not after ``failures`` misses."""
        probe = state.spec.readiness
        if probe is None:
            state.ready = True
            return
        port = self.probe_port(state.spec, probe)
        await asyncio.sleep(probe.initial_delay)
        passed = missed = 0
        while True:
            if await check(probe, port):
                passed, missed = passed + 1, 0
            else:
                passed, missed = 0, missed + 1
            if passed >= probe.successes:
                state.ready = True
            if missed >= probe.failures:
                state.ready = False
            await asyncio.sleep(probe.period)

    async def liveness(self, state: ContainerState) -> None:
        probe = state.spec.liveness
        if probe is None:
            return
        port = self.probe_port(state.spec, probe)
        await asyncio.sleep(probe.initial_delay)
        bad_run = 0
        while True:
            bad_run = 0 if await check(probe, port) else bad_run + 1
            if bad_run >= probe.failures:
                await self.kill(state, "liveness probe failed")
                return
            await asyncio.sleep(probe.period)

    async def kill(self, state: ContainerState, why: str) -> None:
        log.warning("%s: container %s: %s; restarting it", self.name, state.spec.name, why)
        await self.terminate(state)

    async def terminate(self, state: ContainerState) -> None:
        """SIGTERM, and SIGKILL after the grace period."""
        proc = state.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(proc.wait, self.plan.grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.to_thread(proc.wait)

    async def stop(self) -> None:
        """The pod goes: its containers within the grace period, then its tokens."""
        self.stopping = True
        states = [*self.inits, *self.containers]
        for state in states:
            if state.watcher is not None:
                state.watcher.cancel()
        await asyncio.gather(*(self.terminate(s) for s in states))
        for state in states:
            (self.dir / f"{state.spec.name}.pid").unlink(missing_ok=True)
        for binding, _ in list(self.tokens):
            await self.revoke(binding)
        for state in states:
            state.ready = False
        # Revoked already; the files go too (the kubelet removes a pod's volumes).
        await asyncio.to_thread(shutil.rmtree, self.dir / "serviceaccount", True)
        self.write_status()
        log.info("%s: stopped", self.name)


# -- the Deployment ---------------------------------------------------------------------------


class Runner:
    """The kubelet of one Deployment: reads it, plans its pods, runs them."""

    def __init__(self, cluster: Cluster, namespace: str, name: str, root: Path,
                 client: Api, settings: Settings = Settings()) -> None:
        self.cluster, self.namespace, self.name = cluster, namespace, name
        self.root, self.client, self.settings = root, client, settings
        self.pods: list[Pod] = []
        self.retiring: set[asyncio.Task[None]] = set()
        self.refused: str | None = None
        self.said: set[str] = set()
        self.proxies = [ServiceProxy(self, service, port)
                        for service, port in settings.services.items()]

    async def run(self, stopping: asyncio.Event) -> None:
        for proxy in self.proxies:
            await proxy.start()
        while not stopping.is_set():
            for proxy in self.proxies:
                await proxy.refresh()
            await self.sync(time.monotonic())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.sync_period):
                    await stopping.wait()
        await self.shutdown()

    async def sync(self, now: float) -> None:
        try:
            deployment: JSON | None = await self.client.get(kube.DEPLOYMENTS, self.name,
                                                            self.namespace)
        except kube.ApiError as exc:
            if exc.status != 404:
                self.say(f"reading the Deployment: {exc}")
                deployment = {}
            else:
                deployment = None
        except kube.ClientError as exc:  # the API server away: the pods keep running
            self.say(f"reading the Deployment: {exc}")
            deployment = {}
        if deployment is None:
            for pod in list(self.pods):
                self.retire(pod)
        elif deployment:
            plan = self.plan(deployment)
            if plan is not None:
                await self.scale(plan)
        for pod in self.pods:
            await pod.step(now)
        self.write_status()
        if deployment:
            await self.report(deployment)

    def say(self, message: str) -> None:
        """Log ``message`` once (until another one is said)."""
        if message not in self.said:
            self.said = {message}
            log.warning("%s/%s: %s", self.namespace, self.name, message)

    def plan(self, deployment: JSON) -> podspec.PodPlan | None:
        try:
            plan = podspec.plan(deployment, self.settings.image)
        except podspec.PodSpecError as exc:
            self.refused = f"Deployment {self.namespace}/{self.name}: refused: {exc}"
            self.say(self.refused)
            return None
        self.refused = None
        if plan.waived:
            self.say(f"template {plan.template_hash}: not enforced here: " + "; ".join(
                f"{field} ({podspec.WAIVED[field]})" for field in plan.waived))
        return plan

    async def scale(self, plan: podspec.PodPlan) -> None:
        old = [p for p in self.pods if p.plan.template_hash != plan.template_hash]
        if plan.recreate and (old or self.retiring):
            for pod in old:
                self.retire(pod)
            return
        excess = len(self.pods) - plan.replicas
        by_preference = sorted(self.pods, key=lambda p: (p in old, not p.ready),
                               reverse=True)
        for pod in by_preference[:max(excess, 0)]:
            self.retire(pod)
        old = [p for p in old if p in self.pods]
        ready = sum(p.ready for p in self.pods)
        if excess <= 0 and old and plan.replicas - ready < plan.max_unavailable:
            self.retire(sorted(old, key=lambda p: p.ready)[0])
        while len(self.pods) < plan.replicas:
            pod = Pod(plan, self.cluster, self.client, self.root, self.settings)
            await pod.prepare()
            self.pods.append(pod)
            log.info("%s/%s: pod %s created", self.namespace, self.name, pod.name)

    def retire(self, pod: Pod) -> None:
        self.pods.remove(pod)
        task = asyncio.create_task(pod.stop(), name=f"stopping pod {pod.name}")
        self.retiring.add(task)
        task.add_done_callback(self.retiring.discard)

    def write_status(self) -> None:
        data = {"deployment": f"{self.namespace}/{self.name}", "refused": self.refused,
                "pods": [p.name for p in self.pods]}
        tmp = self.root / "status.json.tmp"
        tmp.write_text(json.dumps(data, indent=1))
        tmp.rename(self.root / "status.json")

    async def report(self, deployment: JSON) -> None:
        """The Deployment's status as the controllers would write it, when it changed."""
        current = deployment.get("status") or {}
        wanted = deployment_status(deployment, self.pods)
        keys = ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
                "availableReplicas", "unavailableReplicas")
        if all(current.get(k) == wanted.get(k) for k in keys) and \
                _condition(current) == _condition(wanted):
            return
        try:
            await self.client.replace(kube.DEPLOYMENTS, {**deployment, "status": wanted},
                                      subresource="status")
        except kube.ClientError as exc:  # 409: read again at the next pass
            if not (isinstance(exc, kube.ApiError) and exc.status == 409):
                self.say(f"writing the Deployment's status: {exc}")

    async def shutdown(self) -> None:
        for proxy in self.proxies:
            proxy.close()
        for pod in list(self.pods):
            self.retire(pod)
        if self.retiring:
            await asyncio.gather(*self.retiring, return_exceptions=True)
        self.write_status()


def _condition(status: JSON) -> str | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Available":
            return str(condition.get("status"))
    return None


def deployment_status(deployment: JSON, pods: list[Pod]) -> JSON:
    """``status`` of ``deployment`` run by ``pods`` (ready counts as available:
    ``minReadySeconds`` is 0, the only value the runner accepts)."""
    spec = deployment.get("spec") or {}
    wanted = int(spec.get("replicas", 1))
    current_hash = podspec.template_hash(spec.get("template") or {})
    ready = sum(p.ready for p in pods)
    available = ready >= wanted - _max_unavailable(spec, wanted)
    status: JSON = {"observedGeneration": (deployment.get("metadata") or {}).get("generation"),
                    "replicas": len(pods),
                    "updatedReplicas": sum(p.plan.template_hash == current_hash for p in pods),
                    "readyReplicas": ready, "availableReplicas": ready}
    if wanted > ready:
        status["unavailableReplicas"] = wanted - ready
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status["conditions"] = [{
        "type": "Available", "status": "True" if available else "False",
        "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
        "message": "written by the local pod runner", "lastUpdateTime": now,
        "lastTransitionTime": now}]
    return {k: v for k, v in status.items() if v is not None}


def _max_unavailable(spec: JSON, wanted: int) -> int:
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return wanted
    value = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1)
    try:
        return podspec.count(value, wanted, "maxUnavailable")
    except podspec.PodSpecError:
        return 0


class ServiceProxy:
    """One Service's loopback address: each connection goes to the next ready pod the
    Service selects, on the pod's port for the Service's first ``targetPort``."""

    def __init__(self, runner: Runner, service: str, port: int) -> None:
        self.runner, self.service, self.port = runner, service, port
        self.selector: dict[str, str] = {}
        self.target: str | int | None = None
        self.turn = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> None:
        self.server = await asyncio.start_server(self.connect, "127.0.0.1", self.port)

    async def refresh(self) -> None:
        try:
            body = await self.runner.client.get(SERVICES, self.service, self.runner.namespace)
        except kube.ClientError as exc:
            self.runner.say(f"Service {self.service}: {exc}")
            return
        spec = body.get("spec") or {}
        self.selector = {str(k): str(v) for k, v in (spec.get("selector") or {}).items()}
        ports = spec.get("ports") or [{}]
        target = ports[0].get("targetPort", ports[0].get("port"))
        self.target = int(target) if isinstance(target, str) and target.isdigit() else target

    def endpoint(self) -> int | None:
        ready = [p for p in self.runner.pods if p.ready and self.selector and all(
            p.plan.labels.get(k) == v for k, v in self.selector.items())]
        ports = [port for pod in ready if (port := pod.named_port(self.target))]
        if not ports:
            return None
        self.turn += 1
        return ports[self.turn % len(ports)]

    async def connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        port = self.endpoint()
        try:
            if port is None:
                return
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return
        finally:
            if port is None:
                writer.close()
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def serve(cluster: Cluster, namespace: str, name: str, root: Path,
                settings: Settings) -> None:
    """Run the Deployment's pods until SIGTERM or SIGINT, then stop them (``fedctl local
    pods``)."""
    await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    async with kube.connect(cluster.context) as client:
        runner = Runner(cluster, namespace, name, root, client, settings)
        log.info("running the pods of Deployment %s/%s in %s", namespace, name, cluster.name)
        await runner.run(stopping)


def _seconds_until(stamp: str) -> float:
    try:
        when = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return 600.0
    return max(60.0, (when - datetime.datetime.now(datetime.UTC)).total_seconds())
