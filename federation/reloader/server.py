"""``fedctl reloader``: the ``Reconfigure`` sidecar served next to one workload process.

It serves KubeBlocks' config-manager service, ``proto.Reconfigure``
(:data:`SERVICE`, ``proto/config_manager.proto``: KubeBlocks' package, names and field
numbers, so a KubeBlocks controller's client calls it as is), and for one deprecation
period our first service, ``federation.reloader.v1.Reconfigure`` (:data:`LEGACY_SERVICE`,
the same calls with fields 2 and 3 swapped), so a control plane of the previous release
can still call an upgraded reloader. Both are served over gRPC with mutual TLS: the handshake
refuses any client certificate not signed by ``--tls-ca`` (the same CA files and the same
grpc.aio server setup as the work server in :mod:`federation.work.server`), and when
``allowed_clients`` is set, a certificate whose common name is not in it is
PERMISSION_DENIED before anything runs. ``OnlineUpgradeParams`` runs the configured
action (:mod:`federation.reloader.actions`) and answers ok/failed with its bounded
output and the config version; calls are serialised, so two reloads never overlap on one
process. ``StopContainer`` sends SIGTERM to the pid in ``pid_file``: the process exits
and its supervisor (the kubelet, systemd) starts it again with the new files.

It watches its config directory by polling (:meth:`Reloader.scan`, every
``poll_interval``): the version is a SHA-256 over the relative names and contents of the
regular files in it, so an atomic ConfigMap update (a symlink swap) is seen like an
in-place write and no inotify dependency is needed. With ``reload_on_change`` a changed
version runs the action with no parameters (a plain "reload your files").

``/healthz`` answers 200 while the loop runs; ``/readyz`` 200 once the gRPC server listens
and the config directory has been read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import hashlib
import logging
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import grpc.aio
from aiohttp import web

from federation.reloader import NAMESPACE_HEADER, actions
from federation.reloader.proto import config_manager_pb2 as pb
from federation.reloader.proto import reconfigure_pb2 as legacy_pb

log = logging.getLogger("federation.reloader")
SERVICE = "proto.Reconfigure"
"""KubeBlocks' config-manager service (its proto package is ``proto``)."""
ONLINE_UPGRADE = f"/{SERVICE}/OnlineUpgradeParams"
STOP_CONTAINER = f"/{SERVICE}/StopContainer"
LEGACY_SERVICE = "federation.reloader.v1.Reconfigure"
"""Deprecated: our first service, served until the release after the one that added
:data:`SERVICE` (control planes of that release call :data:`SERVICE` only)."""
LEGACY_ONLINE_UPGRADE = f"/{LEGACY_SERVICE}/OnlineUpgradeParams"
LEGACY_STOP_CONTAINER = f"/{LEGACY_SERVICE}/StopContainer"
MAX_FILE = 16 * 1024 * 1024
"""Bytes of one config file hashed: config files are small; a huge file is a mistake and
is hashed by its size and mtime instead of being read whole at every poll."""


@dataclasses.dataclass(frozen=True)
class ReloaderSettings:
    config_dir: Path
    action: actions.SignalAction | actions.ExecAction | actions.TemplateAction \
        | actions.HttpAction
    tls_cert: Path
    tls_key: Path
    tls_ca: Path
    pid_file: Path | None = None
    """The process StopContainer asks to exit; without it StopContainer fails (says so)."""
    allowed_clients: tuple[str, ...] = ()
    """Common names allowed to call; empty: any certificate the CA signed (the CA is
    then the whole trust boundary, so a dedicated CA is the safe choice)."""
    namespace: str = ""
    """The namespace of the workload served. A call must name it (gRPC metadata
    ``federation-namespace``): callers find reloaders in member EndpointSlices, which a
    namespace's owner can point at another namespace's pod, and every reloader shares
    one certificate name. Empty (tests of the server alone): no check."""
    poll_interval: float = 2.0
    """Seconds between scans of the config directory: a kubelet updates a mounted
    ConfigMap within about a minute, so 2 s adds little and costs one stat per file."""
    reload_on_change: bool = False
    """Off by default: with online rollouts the caller decides when the action runs."""


def config_version(directory: Path) -> str:
    """SHA-256 (first 16 hex digits) of the directory's regular files, names and contents;
    hidden entries (the kubelet's ``..data`` machinery) are followed, not hashed twice."""
    if not directory.is_dir():  # rglob would find nothing and call that a version
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(directory))
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        relative = path.relative_to(directory)
        if any(part.startswith("..") for part in relative.parts):
            continue  # the same bytes are reached through the top-level symlinks
        digest.update(str(relative).encode() + b"\0")
        stat = path.stat()
        if stat.st_size > MAX_FILE:
            digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
        else:
            digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


class Reloader:
    def __init__(self, settings: ReloaderSettings) -> None:
        self.settings = settings
        self.version = ""
        """The config directory's version at the last scan ("" before the first)."""
        self.calls = 0
        self.refused = 0
        """Calls refused for a client certificate not in ``allowed_clients`` (a metric)."""
        self.port: int | None = None
        self._lock = asyncio.Lock()
        self._server: grpc.aio.Server | None = None

    # -- the config directory ---------------------------------------------------------------

    async def scan(self) -> bool:
        """Read the directory's version; True when it changed since the last scan."""
        try:
            version = await asyncio.to_thread(config_version, self.settings.config_dir)
        except OSError as exc:
            log.warning("config directory %s: %s", self.settings.config_dir, exc.strerror)
            return False
        changed = bool(self.version) and version != self.version
        first = not self.version
        self.version = version
        if first:
            log.info("config directory %s at version %s", self.settings.config_dir, version)
        elif changed:
            log.info("config directory changed: version %s", version)
            if self.settings.reload_on_change:
                outcome = await self.apply(actions.Request("", "", {}))
                log.info("reload on change: %s", "ok" if outcome.ok else outcome.message)
        return changed

    async def watch(self, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
                    ) -> None:
        while True:
            await self.scan()
            await sleep(self.settings.poll_interval)

    # -- the actions ------------------------------------------------------------------------

    async def apply(self, request: actions.Request) -> actions.Outcome:
        async with self._lock:
            self.calls += 1
            try:
                outcome = await actions.run(self.settings.action, request)
            except Exception as exc:  # never a gRPC UNKNOWN: the caller gets an outcome
                log.warning("%s action raised %s", self.settings.action.kind,
                            type(exc).__name__)
                outcome = actions.Outcome(False, f"the {self.settings.action.kind} action "
                                                 f"failed ({type(exc).__name__})")
        log.info("%s action for %s (parameters %s): %s", self.settings.action.kind,
                 request.config_file or "the config directory",
                 ", ".join(sorted(request.params)) or "none",
                 "ok" if outcome.ok else f"failed: {outcome.message}")
        return outcome

    def stop_container(self) -> actions.Outcome:
        if self.settings.pid_file is None:
            return actions.Outcome(False, "the reloader has no --pid-file: nothing to stop")
        outcome = actions.send(self.settings.pid_file, signal.SIGTERM)
        log.info("StopContainer: %s", outcome.output if outcome.ok else outcome.message)
        return outcome

    # -- gRPC -------------------------------------------------------------------------------

    def _denied(self, context: grpc.aio.ServicerContext[object, object]) -> str | None:
        why = self._client_denied(context) or self._namespace_denied(context)
        if why is not None:
            self.refused += 1
        return why

    def _client_denied(self, context: grpc.aio.ServicerContext[object, object]) -> str | None:
        if not self.settings.allowed_clients:
            return None
        names = [n.decode(errors="replace") for n in
                 context.auth_context().get("x509_common_name", [])]
        if any(name in self.settings.allowed_clients for name in names):
            return None
        return f"client {', '.join(names) or '(no name)'} may not reconfigure this process"

    def _namespace_denied(self, context: grpc.aio.ServicerContext[object, object]
                          ) -> str | None:
        if not self.settings.namespace:
            return None
        meant = next((str(value) for key, value in context.invocation_metadata() or ()
                      if key == NAMESPACE_HEADER), "")
        if meant == self.settings.namespace:
            return None
        return (f"this reloader serves namespace {self.settings.namespace}; the call was "
                f"meant for {meant[:63] or 'no namespace'}")

    async def _authorize(self, context: grpc.aio.ServicerContext[object, object],
                         method: str) -> None:
        """Abort the call with PERMISSION_DENIED when its client may not call us."""
        why = self._denied(context)
        if why is not None:
            log.warning("%s refused: %s", method, why)
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, why)

    async def _upgrade(self, context: grpc.aio.ServicerContext[object, object],
                       config_spec: str, config_file: str, params: dict[str, str]
                       ) -> actions.Outcome:
        await self._authorize(context, "OnlineUpgradeParams")
        outcome = await self.apply(actions.Request(config_spec, config_file, params))
        await self.scan()  # the version the process now runs with, as far as files go
        if not outcome.ok and not outcome.message:  # KubeBlocks reads "" as success
            return dataclasses.replace(outcome, message="the action failed")
        return outcome

    async def _online_upgrade(self, request: pb.OnlineUpgradeParamsRequest,
                              context: grpc.aio.ServicerContext[object, object]
                              ) -> pb.OnlineUpgradeParamsResponse:
        outcome = await self._upgrade(context, request.config_spec, request.config_file,
                                      dict(request.params))
        return pb.OnlineUpgradeParamsResponse(
            err_message="" if outcome.ok else outcome.message, output=outcome.output,
            config_version=self.version)

    async def _stop_container(self, request: pb.StopContainerRequest,
                              context: grpc.aio.ServicerContext[object, object]
                              ) -> pb.StopContainerResponse:
        await self._authorize(context, "StopContainer")
        if request.container_ids:  # KubeBlocks' caller chose containers; we serve one process
            return pb.StopContainerResponse(
                err_message="this reloader stops the one process in its --pid-file; "
                            "containerIDs are not taken")
        outcome = self.stop_container()
        return pb.StopContainerResponse(err_message="" if outcome.ok else outcome.message)

    async def _legacy_online_upgrade(self, request: legacy_pb.OnlineUpgradeParamsRequest,
                                     context: grpc.aio.ServicerContext[object, object]
                                     ) -> legacy_pb.OnlineUpgradeParamsResponse:
        outcome = await self._upgrade(context, request.config_spec, request.config_file,
                                      dict(request.params))
        return legacy_pb.OnlineUpgradeParamsResponse(
            ok=outcome.ok, err_message=outcome.message, output=outcome.output,
            config_version=self.version)

    async def _legacy_stop_container(self, request: legacy_pb.StopContainerRequest,
                                     context: grpc.aio.ServicerContext[object, object]
                                     ) -> legacy_pb.StopContainerResponse:
        await self._authorize(context, "StopContainer")
        outcome = self.stop_container()
        return legacy_pb.StopContainerResponse(ok=outcome.ok, err_message=outcome.message)

    def _services(self) -> list[grpc.GenericRpcHandler[object, object]]:
        current = {
            "OnlineUpgradeParams": grpc.unary_unary_rpc_method_handler(
                self._online_upgrade,
                request_deserializer=pb.OnlineUpgradeParamsRequest.FromString,
                response_serializer=pb.OnlineUpgradeParamsResponse.SerializeToString),
            "StopContainer": grpc.unary_unary_rpc_method_handler(
                self._stop_container, request_deserializer=pb.StopContainerRequest.FromString,
                response_serializer=pb.StopContainerResponse.SerializeToString),
        }
        legacy = {
            "OnlineUpgradeParams": grpc.unary_unary_rpc_method_handler(
                self._legacy_online_upgrade,
                request_deserializer=legacy_pb.OnlineUpgradeParamsRequest.FromString,
                response_serializer=legacy_pb.OnlineUpgradeParamsResponse.SerializeToString),
            "StopContainer": grpc.unary_unary_rpc_method_handler(
                self._legacy_stop_container,
                request_deserializer=legacy_pb.StopContainerRequest.FromString,
                response_serializer=legacy_pb.StopContainerResponse.SerializeToString),
        }
        return [grpc.method_handlers_generic_handler(SERVICE, current),
                grpc.method_handlers_generic_handler(LEGACY_SERVICE, legacy)]

    async def start(self, address: str) -> int:
        """Listen on ``address`` (host:port; port 0 picks one) with mutual TLS; the port."""
        settings = self.settings
        credentials = grpc.ssl_server_credentials(
            [(settings.tls_key.read_bytes(), settings.tls_cert.read_bytes())],
            root_certificates=settings.tls_ca.read_bytes(), require_client_auth=True)
        server = grpc.aio.server()
        server.add_generic_rpc_handlers(self._services())
        self.port = server.add_secure_port(address, credentials)
        if not self.port:
            raise OSError(f"reloader: cannot listen on {address}")
        await server.start()
        self._server = server
        log.info("reloader serving Reconfigure on %s (port %d)", address, self.port)
        return self.port

    async def stop(self, grace: float = 1.0) -> None:
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None

    # -- health -----------------------------------------------------------------------------

    async def serve_health(self, address: str) -> web.AppRunner:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        host, _, port = address.rpartition(":")
        await web.TCPSite(runner, host or "127.0.0.1", int(port)).start()
        return runner

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self._server is None:
            return web.Response(text="the Reconfigure server is not listening\n", status=503)
        if not self.version:
            return web.Response(text=f"config directory {self.settings.config_dir} not read\n",
                                status=503)
        return web.Response(text=f"ok (config version {self.version})\n")
