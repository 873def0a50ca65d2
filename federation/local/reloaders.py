"""Simulated reloaders: a real ``fedctl reloader`` process per simulated workload.

The local fleet has no pods, so no workload could serve ``Reconfigure``; the simulator
stands in for the sidecar. A member Deployment or StatefulSet whose pod template carries
``reloader.federation.io/simulate: "true"`` gets, for that member, one real ``fedctl
reloader`` process (gRPC, mutual TLS against the reloaders' CA, ``--allow-client
federation-reconfigure``) on a free loopback port, so a rollout's online update travels the
same path it would in a real cluster. Per workload, under
``<state-dir>/reloaders/<cluster>/<namespace>/<name>/``:

- ``config/``: the files of the ConfigMaps and Secrets the pod template's volumes mount,
  written as the kubelet writes them (a ``..<version>`` directory, an atomic ``..data``
  symlink swap, one top-level symlink per file), so the reloader sees a mounted volume;
- ``applied.jsonl``: one line per successful online update, written by the action, an exec
  of :mod:`federation.local.record_params` (the e2e tests' observable);
- ``fail``: present while the workload (or its pod template) says
  ``reloader.federation.io/simulate-fail: "true"``: the action then exits 1, so the update
  is reported failed (no restart is needed to switch it);
- ``reloader.pid`` / ``reloader.log``: the process, tracked as the fleet's others are.

It is found the way the rollout controller finds any reloader: an EndpointSlice in the
member labelled ``kubernetes.io/service-name: <name>-reloader`` with one ready endpoint,
``127.0.0.1`` (a v1.20 API server accepts a loopback address in an IPv4 slice; it refuses
one in core Endpoints), and the port named ``reloader``. The slice is written once the
process accepts connections and deleted when the workload goes; the process stops then
too, and every process stops when the simulator does.

Everything here is level-triggered from the watched objects: :func:`wanted` says which
workloads want a reloader, :func:`desired_files` what their config directory holds and
:func:`endpoint_slice` what their slice says; :class:`ReloaderSync` compares that with the
processes it runs and the slices it sees, and fixes the difference.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import dataclasses
import logging
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from federation.contexts import client as kube
from federation.local import processes

log = logging.getLogger("federation.simulator.reloaders")

JSON = dict[str, Any]
SIMULATE_ANNOTATION = "reloader.federation.io/simulate"
FAIL_ANNOTATION = "reloader.federation.io/simulate-fail"
CLIENT_NAME = "federation-reconfigure"
"""The rollout controller's certificate name (``federation.hub.rollouts.
RELOADER_CLIENT_NAME``, held equal by a unit test: this layer may not import the hub's)."""
PORT_NAME = "reloader"
"""The EndpointSlice port name (``RELOADER_PORT_NAME``, held equal by the same test)."""
MANAGED_BY = "simulator.federation.io"
SECRETS = kube.Resource("", "v1", "secrets", "Secret")
ENDPOINT_SLICES = kube.Resource("discovery.k8s.io", "v1beta1", "endpointslices",
                                "EndpointSlice")
MANAGED_SELECTOR = f"endpointslice.kubernetes.io/managed-by={MANAGED_BY}"
READY_TIMEOUT = 30.0
"""Seconds a new reloader may take to accept connections: a Python process importing
grpc takes about a second, many more on a loaded 2-core machine."""
ACTION_TIMEOUT = 10.0
"""Seconds the recorder may take: it appends a line, so only a stalled machine hits it."""

Key = tuple[str, str, str]  # (kind, namespace, name)


@dataclasses.dataclass(frozen=True)
class TLSFiles:
    """The reloaders' serving certificate, key and CA (written by ``fedctl local simulate``)."""

    cert: Path
    key: Path
    ca: Path


# -- which workloads, which files, which slice (pure) -----------------------------------------

def _annotated(workload: JSON, annotation: str, *, template_only: bool) -> bool:
    spec = workload.get("spec") or {}
    template = (spec.get("template") or {}).get("metadata") or {}
    places = [template] if template_only else [workload.get("metadata") or {}, template]
    return any((meta.get("annotations") or {}).get(annotation) == "true" for meta in places)


def wants_reloader(workload: JSON) -> bool:
    """The pod template asks for a simulated reloader (and the workload is not going)."""
    if (workload.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return _annotated(workload, SIMULATE_ANNOTATION, template_only=True)


def fails(workload: JSON) -> bool:
    """The workload (or its pod template) asks for its reloads to fail."""
    return _annotated(workload, FAIL_ANNOTATION, template_only=False)


def wanted(workloads: Iterable[tuple[str, JSON]]) -> dict[Key, JSON]:
    """The workloads, by (kind, namespace, name), that want a reloader."""
    return {(kind, w["metadata"].get("namespace", ""), w["metadata"]["name"]): w
            for kind, w in workloads if wants_reloader(w)}


@dataclasses.dataclass(frozen=True)
class Source:
    kind: str  # ConfigMap | Secret
    name: str
    items: tuple[tuple[str, str], ...] | None  # (key, path); None: every key at its name
    optional: bool = False


def _source(kind: str, volume: JSON, name_field: str) -> Source | None:
    name = volume.get(name_field)
    if not name:
        return None
    items = volume.get("items")
    listed = None if items is None else tuple((str(i.get("key", "")), str(i.get("path", "")))
                                             for i in items)
    return Source(kind, str(name), listed, volume.get("optional") is True)


def mounted_sources(workload: JSON) -> list[Source]:
    """The ConfigMaps and Secrets the pod template's volumes mount, in volume order
    (projected volumes' sources included)."""
    spec = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
    found: list[Source | None] = []
    for volume in spec.get("volumes") or []:
        found.append(_source("ConfigMap", volume.get("configMap") or {}, "name"))
        found.append(_source("Secret", volume.get("secret") or {}, "secretName"))
        for projected in (volume.get("projected") or {}).get("sources") or []:
            found.append(_source("ConfigMap", projected.get("configMap") or {}, "name"))
            found.append(_source("Secret", projected.get("secret") or {}, "name"))
    return [s for s in found if s is not None]


def safe_path(path: str) -> bool:
    """A path the volume may hold: relative, no ``..`` element, no hidden top-level name
    (the ``..data`` machinery is ours)."""
    parts = PurePosixPath(path).parts
    return (bool(parts) and not PurePosixPath(path).is_absolute() and ".." not in parts
            and not parts[0].startswith("..") and "\0" not in path)


def _contents(obj: JSON) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    decode_data = obj.get("kind") == "Secret"
    for key, value in (obj.get("data") or {}).items():
        out[key] = base64.b64decode(value) if decode_data else str(value).encode()
    for key, value in (obj.get("binaryData") or {}).items():
        out[key] = base64.b64decode(value)
    return out


@dataclasses.dataclass(frozen=True)
class Files:
    files: dict[str, bytes]
    missing: tuple[str, ...]
    """Mounted objects that do not exist (and are not ``optional``): the kubelet would not
    start the pod yet, so no reloader starts before they appear."""
    problems: tuple[str, ...]
    """What could not be placed (a missing object or key, an unsafe path, a clash): the
    kubelet would hold the pod; we start the reloader with the rest and say so."""


def desired_files(workload: JSON, config_maps: Mapping[str, JSON],
                  secrets: Mapping[str, JSON]) -> Files:
    """The config directory's files (path -> bytes) from the mounted objects, found by
    name in the workload's namespace."""
    files: dict[str, bytes] = {}
    problems: list[str] = []
    missing: list[str] = []
    for source in mounted_sources(workload):
        obj = (config_maps if source.kind == "ConfigMap" else secrets).get(source.name)
        if obj is None:
            if not source.optional:
                missing.append(f"{source.kind} {source.name}")
            continue
        try:
            content = _contents({**obj, "kind": source.kind})
        except (binascii.Error, ValueError):
            problems.append(f"{source.kind} {source.name}: data is not base64")
            continue
        pairs = source.items if source.items is not None else [(k, k) for k in content]
        for key, path in pairs:
            if key not in content:
                problems.append(f"{source.kind} {source.name} has no key {key!r}")
            elif not safe_path(path):
                problems.append(f"{source.kind} {source.name}: path {path!r} refused")
            elif path in files:
                problems.append(f"{source.kind} {source.name}: path {path!r} already "
                                "mounted by an earlier volume")
            else:
                files[path] = content[key]
    return Files(files, tuple(missing), tuple(problems))


def service_name(name: str) -> str:
    return f"{name}-reloader"


def endpoint_slice(namespace: str, name: str, port: int) -> JSON:
    """The EndpointSlice listing workload ``name``'s simulated reloader on ``port``."""
    return {
        "apiVersion": "discovery.k8s.io/v1beta1", "kind": "EndpointSlice",
        "metadata": {"name": f"{service_name(name)}-simulated", "namespace": namespace,
                     "labels": {"kubernetes.io/service-name": service_name(name),
                                "endpointslice.kubernetes.io/managed-by": MANAGED_BY}},
        "addressType": "IPv4",
        "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
    }


def slice_differs(current: JSON, wanted_slice: JSON) -> bool:
    labels = (current.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in wanted_slice["metadata"]["labels"].items()):
        return True
    return any(current.get(field) != wanted_slice[field]
               for field in ("addressType", "ports", "endpoints"))


# -- the config directory, as the kubelet writes a volume -------------------------------------

def _read_tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


def sync_config_dir(directory: Path, files: Mapping[str, bytes]) -> bool:
    """Make ``directory`` hold ``files``; True when it changed. Like the kubelet's atomic
    writer: the new content goes into a fresh ``..<random>`` directory, ``..data`` is
    swapped to it with one rename, top-level names are symlinks through ``..data``, and
    the old version is removed after the swap, so a reader never sees half an update."""
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "..data"
    tops = {PurePosixPath(path).parts[0] for path in files}
    links = {p.name for p in directory.iterdir() if not p.name.startswith("..")}
    old = directory / os.readlink(data) if data.is_symlink() else None
    if old is not None and old.is_dir() and _read_tree(old) == dict(files) and links == tops:
        return False
    version = Path(tempfile.mkdtemp(prefix="..", dir=directory))
    for path, content in files.items():
        target = version / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    version.chmod(0o755)
    swap = directory / "..data_tmp"
    swap.unlink(missing_ok=True)
    swap.symlink_to(version.name)
    os.replace(swap, data)
    for top in tops:
        link = directory / top
        if not link.is_symlink():
            if link.is_dir():
                shutil.rmtree(link)
            else:
                link.unlink(missing_ok=True)
            link.symlink_to(f"..data/{top}")
    for stale in links - tops:
        (directory / stale).unlink(missing_ok=True)
    if old is not None and old.is_dir() and old != version:
        shutil.rmtree(old, ignore_errors=True)
    return True


# -- the processes ------------------------------------------------------------------------------

def free_port() -> int:
    """A loopback port free now (the reloader binds it a moment later; a lost race shows
    as a process that exits, and the next pass starts another on another port)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclasses.dataclass
class Running:
    port: int
    pid_file: Path
    ready: bool = False


class ReloaderProcesses:
    """The reloader processes of one member, one per workload key; files under ``root``
    (``<state-dir>/reloaders/<cluster>``). The process calls are injectable for tests."""

    def __init__(self, root: Path, tls: TLSFiles, *,
                 spawn: Callable[[list[str], Path, Path], int] = processes.spawn,
                 alive: Callable[[Path], int | None] = processes.owned_pid,
                 terminate: Callable[[Path], bool] = processes.terminate,
                 port: Callable[[], int] = free_port) -> None:
        self.root = root
        self.tls = tls
        self._spawn, self._alive, self._terminate, self._port = spawn, alive, terminate, port
        self.running: dict[Key, Running] = {}

    def directory(self, key: Key) -> Path:
        _, namespace, name = key
        return self.root / namespace / name

    def argv(self, key: Key, port: int) -> list[str]:
        directory = self.directory(key)
        return [sys.executable, "-m", "federation", "reloader", "--namespace", key[1],
                "--config-dir", str(directory / "config"),
                "--action", str(directory / "action.yaml"),
                "--tls-cert", str(self.tls.cert), "--tls-key", str(self.tls.key),
                "--tls-ca", str(self.tls.ca), "--allow-client", CLIENT_NAME,
                "--bind-address", f"127.0.0.1:{port}",
                "--health-probe-bind-address", "0", "--poll-interval", "0.5"]

    def action(self, key: Key) -> JSON:
        directory = self.directory(key)
        return {"kind": "exec", "timeout": ACTION_TIMEOUT,
                "command": [sys.executable, "-m", "federation.local.record_params",
                            str(directory / "applied.jsonl"), str(directory / "fail")]}

    def set_failing(self, key: Key, failing: bool) -> None:
        marker = self.directory(key) / "fail"
        if failing:
            marker.touch()
        else:
            marker.unlink(missing_ok=True)

    def ensure(self, key: Key) -> Running:
        """The key's process, started when it is not running (a stale one from an earlier
        simulator, whose port nobody knows, is stopped first)."""
        current = self.running.get(key)
        if current is not None and self._alive(current.pid_file) is not None:
            return current
        directory = self.directory(key)
        pid_file = directory / "reloader.pid"
        if current is not None:
            log.warning("reloader of %s/%s exited; starting it again (log: %s)", key[1],
                        key[2], directory / "reloader.log")
        self._terminate(pid_file)
        (directory / "config").mkdir(parents=True, exist_ok=True)
        (directory / "action.yaml").write_text(yaml.safe_dump(self.action(key)))
        port = self._port()
        self._spawn(self.argv(key, port), pid_file, directory / "reloader.log")
        self.running[key] = started = Running(port, pid_file)
        log.info("started the reloader of %s %s/%s on 127.0.0.1:%d", key[0], key[1], key[2],
                 port)
        return started

    def stop(self, key: Key) -> None:
        running = self.running.pop(key, None)
        self._terminate(running.pid_file if running else self.directory(key) / "reloader.pid")

    def stop_all(self) -> None:
        for key in list(self.running):
            self.stop(key)


async def accepts(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


# -- one member's reconciliation ---------------------------------------------------------------

class ReloaderSync:
    """Keeps one member's reloaders, config directories and EndpointSlices in line with its
    workloads; :meth:`reconcile` is one level-triggered pass over the watched objects."""

    def __init__(self, client: kube.ObjectClient, procs: ReloaderProcesses,
                 on_change: Callable[[], None],
                 probe: Callable[[int], Any] = accepts,
                 sleep: Callable[[float], Any] = asyncio.sleep) -> None:
        self.client = client
        self.procs = procs
        self.on_change = on_change
        self.probe = probe
        self.sleep = sleep
        self._waiters: dict[Key, tuple[Running, asyncio.Task[None]]] = {}
        self._reported: dict[Key, tuple[str, ...]] = {}

    async def reconcile(self, objects: Mapping[str, Mapping[tuple[str, str], JSON]]) -> None:
        workloads = [(kind, obj) for plural, kind in (("deployments", "Deployment"),
                                                      ("statefulsets", "StatefulSet"))
                     for obj in objects.get(plural, {}).values()]
        want = wanted(workloads)
        slices = objects.get("endpointslices", {})
        for key, workload in want.items():
            await self._one(key, workload, objects, slices.get((key[1], self._slice(key))))
        for key in [k for k in self.procs.running if k not in want]:
            log.info("%s: %s %s/%s is gone: stopping its reloader", self.client.name, *key)
            self._forget(key)
            await asyncio.to_thread(self.procs.stop, key)
        wanted_slices = {(k[1], self._slice(k)) for k in want}
        for (namespace, name), _ in list(slices.items()):
            if (namespace, name) not in wanted_slices:
                await self._delete_slice(namespace, name)

    @staticmethod
    def _slice(key: Key) -> str:
        return str(endpoint_slice(key[1], key[2], 0)["metadata"]["name"])

    async def _one(self, key: Key, workload: JSON,
                   objects: Mapping[str, Mapping[tuple[str, str], JSON]],
                   current_slice: JSON | None) -> None:
        namespace = key[1]
        config_maps = {n: o for (ns, n), o in objects.get("configmaps", {}).items()
                       if ns == namespace}
        secrets = {n: o for (ns, n), o in objects.get("secrets", {}).items() if ns == namespace}
        files = desired_files(workload, config_maps, secrets)
        said = files.problems + tuple(f"waiting for {m}" for m in files.missing)
        if said != self._reported.get(key, ()):
            self._reported[key] = said
            for problem in files.problems:
                log.warning("%s: %s %s/%s: %s", self.client.name, *key, problem)
            for waiting in files.missing:  # usual for a moment: the workload came first
                log.info("%s: %s %s/%s: waiting for %s", self.client.name, *key, waiting)
        if files.missing and key not in self.procs.running:
            return  # waiting for its volumes, like a pod in ContainerCreating
        running = await asyncio.to_thread(self.procs.ensure, key)
        directory = self.procs.directory(key)
        if await asyncio.to_thread(sync_config_dir, directory / "config", files.files):
            log.info("%s: config of %s %s/%s synced (%d files)", self.client.name, *key,
                     len(files.files))
        self.procs.set_failing(key, fails(workload))
        if not running.ready:
            self._wait_ready(key, running)
            return
        wanted_slice = endpoint_slice(namespace, key[2], running.port)
        if current_slice is None or slice_differs(current_slice, wanted_slice):
            await self._write_slice(wanted_slice, current_slice)

    def _wait_ready(self, key: Key, running: Running) -> None:
        waiter = self._waiters.get(key)
        if waiter is not None and waiter[0] is running and not waiter[1].done():
            return
        if waiter is not None:  # it waited for a process that has since been replaced
            waiter[1].cancel()
        self._waiters[key] = (running, asyncio.create_task(self._ready(key, running),
                                                           name=f"reloader ready {key}"))

    async def _ready(self, key: Key, running: Running) -> None:
        waited = 0.0
        while waited < READY_TIMEOUT:
            if await self.probe(running.port):
                running.ready = True
                self.on_change()
                return
            await self.sleep(0.1)
            waited += 0.1
        log.warning("%s: the reloader of %s/%s does not accept connections on port %d "
                    "after %.0fs; restarting it", self.client.name, key[1], key[2],
                    running.port, READY_TIMEOUT)
        if self.procs.running.get(key) is running:
            await asyncio.to_thread(self.procs.stop, key)
        self.on_change()

    def _forget(self, key: Key) -> None:
        waiter = self._waiters.pop(key, None)
        if waiter is not None:
            waiter[1].cancel()
        self._reported.pop(key, None)

    async def _write_slice(self, wanted_slice: JSON, current: JSON | None) -> None:
        meta = wanted_slice["metadata"]
        try:
            if current is None:
                await self.client.create(ENDPOINT_SLICES, wanted_slice)
            else:
                body = {**wanted_slice, "metadata": {
                    **meta, "resourceVersion": current["metadata"].get("resourceVersion")}}
                await self.client.replace(ENDPOINT_SLICES, body)
        except kube.ApiError as exc:
            if exc.status != 409:  # 409: the watch brings the current one; the next pass
                log.warning("%s: EndpointSlice %s/%s: %s", self.client.name,
                            meta["namespace"], meta["name"], exc)
            return
        log.info("%s: EndpointSlice %s/%s lists the reloader on port %d", self.client.name,
                 meta["namespace"], meta["name"], wanted_slice["ports"][0]["port"])

    async def _delete_slice(self, namespace: str, name: str) -> None:
        try:
            await self.client.delete(ENDPOINT_SLICES, name, namespace)
        except kube.ApiError as exc:
            if exc.status != 404:
                log.warning("%s: EndpointSlice %s/%s: %s", self.client.name, namespace,
                            name, exc)
                return
        log.info("%s: EndpointSlice %s/%s deleted", self.client.name, namespace, name)

    def close(self) -> None:
        """Stop every process (the simulator is exiting)."""
        for key in list(self._waiters):
            self._forget(key)
        self.procs.stop_all()
