"""A local fleet: one hub and N member clusters of real kube-apiserver + etcd.

Each cluster is one ``etcd`` and one ``kube-apiserver`` process on 127.0.0.1
with ports recorded in ``fleet.json`` in the state directory, so a cluster that
is stopped and started again comes back at the same address with the same data
and the kubeconfig written at ``up`` stays valid. Clusters share nothing:
separate data directories, certificate authorities and processes, so stopping
one (fault injection) leaves the others untouched.

Two kubeconfigs name the same contexts (``hub``, ``member1``..): ``local.yaml``
with an admin identity (``system:masters``) for kubectl, tests and ``fedctl
install``, and ``local-control-plane.yaml`` with the control plane's own
certificate (``federation:control-plane``), which may only do what the RBAC
``fedctl install`` applies grants it; ``fedctl run`` started by the fleet uses
that one.

``up`` is idempotent: it creates what is missing, starts what is not running
and leaves the rest alone. ``down`` stops only processes whose pid files prove
we started them (see :mod:`federation.local.processes`).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml

from federation.local import binaries, pki, processes

Progress = Callable[[str], None]
Role = Literal["hub", "member"]

READY_TIMEOUT = 120.0
"""Seconds to wait for /readyz. A lone apiserver is ready in 5 to 8 s here; four
starting at once on two cores take about four times that, and CI machines are slower."""

MAX_MEMBERS = 50
"""Each member costs about 350 MB of memory; 50 is already beyond a laptop."""

LOCATIONS: tuple[tuple[str, str, str], ...] = (
    ("us-east-1", "us-east-1a", "aws"),
    ("eu-west-1", "eu-west-1b", "gcp"),
    ("ap-south-1", "ap-south-1c", "azure"),
    ("us-west-2", "us-west-2b", "aws"),
    ("eu-central-1", "eu-central-1a", "gcp"),
)
"""Region, zone and provider of member i (cycling), so placements can select on all three."""


AUDIT_POLICY = """\
# Written by fedctl local: one Metadata line per write, nothing for reads, so that
# tests can attribute every write to the process that made it (by its User-Agent).
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
"""
"""The API servers' audit policy: writes only, metadata only (no bodies), to stay cheap."""

AUDIT_LOG_MAX_MB = 20
"""Audit log size before it is rotated (one old file kept): thousands of writes of
an e2e run fit many times over; a fleet left running for days stays bounded."""


def write_audit_policy(directory: Path) -> Path:
    """Write :data:`AUDIT_POLICY` into ``directory``; its path."""
    path = directory / "audit-policy.yaml"
    directory.mkdir(parents=True, exist_ok=True)
    path.write_text(AUDIT_POLICY)
    return path


class FleetError(Exception):
    """A fleet operation cannot proceed; the message is meant for the user as is."""


@dataclasses.dataclass
class SimulatorSettings:
    """How the data-plane simulator plays the members' node agents."""

    nodes: int = 3
    """Three nodes per member: enough to exercise first-fit packing across nodes."""
    node_cpu: str = "4"
    node_memory: str = "16Gi"
    node_pods: int = 110
    """110 is the kubelet's default max-pods; 3 x 110 pods per member by default."""
    ready_delay: float = 1.0
    """Seconds between a workload's new generation and its replicas reporting ready:
    long enough to observe the not-ready phase, short enough for fast tests."""
    pass_interval: float = 0.2
    """Seconds at least between two status passes of a member. A pass recomputes every
    workload of the member (packing is global), and a kubelet reports on its own sync
    period, not once per event: without a floor, a burst of 500 Deployments made a pass
    per watch event, and the simulator, which shares the machine with the API servers it
    stands in front of, used about a tenth of the two cores in the burst's window. A
    fifth of a second is lost in a ready delay of one."""
    enabled: bool = True


@dataclasses.dataclass
class ClusterSpec:
    name: str
    role: Role
    apiserver_port: int
    etcd_client_port: int
    etcd_peer_port: int
    region: str = ""
    zone: str = ""
    provider: str = ""
    labels: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def etcd_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.etcd_client_port}"


@dataclasses.dataclass
class FleetConfig:
    clusters: list[ClusterSpec]
    simulator: SimulatorSettings = dataclasses.field(default_factory=SimulatorSettings)
    pull: list[str] = dataclasses.field(default_factory=list)
    """Members in pull mode (``up --pull``): no context for them in the control plane's
    kubeconfig; their agents run as local processes (or, :attr:`in_cluster`, as the pods
    of their shipped Deployments) and dial the work server."""
    work_port: int = 0
    """The control plane's work server port (chosen once, when a member is first pulled)."""
    agent_ports: dict[str, int] = dataclasses.field(default_factory=dict)
    """Each agent's /healthz, /readyz and /metrics port (host-process agents)."""
    in_cluster: bool = False
    """The control plane was started from the shipped manifests (``up --control-plane
    --in-cluster``): the pull members' agents are their Deployments' pods, run by the pod
    runner, not host processes."""
    profiling: bool = False
    """The API servers serve ``/debug/pprof`` (off unless asked: the benchmarks' member
    profiles need it; the fleet otherwise runs as a hardened cluster would)."""

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> FleetConfig:
        data = json.loads(text)
        return cls(
            clusters=[ClusterSpec(**c) for c in data["clusters"]],
            simulator=SimulatorSettings(**data.get("simulator", {})),
            pull=list(data.get("pull") or []), work_port=int(data.get("work_port") or 0),
            agent_ports={k: int(v) for k, v in (data.get("agent_ports") or {}).items()},
            in_cluster=bool(data.get("in_cluster")), profiling=bool(data.get("profiling")),
        )

    @property
    def members(self) -> list[ClusterSpec]:
        return [c for c in self.clusters if c.role == "member"]


@dataclasses.dataclass(frozen=True)
class ClusterStatus:
    name: str
    role: Role
    server: str
    etcd_pid: int | None
    apiserver_pid: int | None
    frozen: bool
    ready: bool
    region: str
    zone: str
    provider: str


def member_spec(index: int, ports: tuple[int, int, int]) -> ClusterSpec:
    region, zone, provider = LOCATIONS[(index - 1) % len(LOCATIONS)]
    name = f"member{index}"
    return ClusterSpec(
        name=name, role="member",
        apiserver_port=ports[0], etcd_client_port=ports[1], etcd_peer_port=ports[2],
        region=region, zone=zone, provider=provider,
        labels={
            "topology.kubernetes.io/region": region,
            "topology.kubernetes.io/zone": zone,
            "federation.io/provider": provider,
            "federation.io/cluster-name": name,
        },
    )


def parse_members(value: str | int) -> int:
    """Validate a member count given on the command line."""
    try:
        count = int(value)
    except (TypeError, ValueError):
        raise FleetError(f"--members must be a whole number, got {value!r}") from None
    if not 1 <= count <= MAX_MEMBERS:
        raise FleetError(f"--members must be between 1 and {MAX_MEMBERS}, got {count}")
    return count


def _free_port(taken: set[int]) -> int:
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in taken:
            taken.add(port)
            return port


def port_in_use(port: int) -> bool:
    """True when something listens on 127.0.0.1:port (TIME_WAIT leftovers do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


class Fleet:
    """The local fleet rooted at ``state_dir``, publishing its kubeconfig at ``kubeconfig``."""

    def __init__(self, state_dir: Path, kubeconfig: Path) -> None:
        self.state_dir = state_dir.resolve()
        self.kubeconfig = kubeconfig.resolve()

    # -- configuration -----------------------------------------------------------------

    @property
    def config_file(self) -> Path:
        return self.state_dir / "fleet.json"

    @property
    def clusters_file(self) -> Path:
        """The members in ``fedctl plan --clusters`` format, next to the kubeconfig."""
        return self.kubeconfig.with_name(self.kubeconfig.stem + "-clusters.yaml")

    @property
    def control_plane_kubeconfig(self) -> Path:
        """The control plane's least-privilege kubeconfig, next to the admin one."""
        return self.kubeconfig.with_name(self.kubeconfig.stem + "-control-plane.yaml")

    def exists(self) -> bool:
        return self.config_file.exists()

    def load(self) -> FleetConfig:
        if not self.exists():
            raise FleetError(f"no local fleet in {self.state_dir}; run `fedctl local up` first")
        try:
            return FleetConfig.from_json(self.config_file.read_text())
        except (ValueError, KeyError, TypeError) as exc:
            raise FleetError(f"{self.config_file} is damaged ({exc}); run `fedctl local down`"
                             ) from None

    def _save(self, config: FleetConfig) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.config_file.with_suffix(".tmp")
        tmp.write_text(config.to_json())
        tmp.rename(self.config_file)

    def _plan(self, members: int, base_port: int | None,
              simulator: SimulatorSettings | None) -> FleetConfig:
        config = self.load() if self.exists() else FleetConfig(clusters=[])
        if simulator is not None and not config.clusters:
            config.simulator = simulator
        have = len(config.members)
        if members < have:
            raise FleetError(
                f"the fleet in {self.state_dir} has {have} members; `up` never removes "
                f"clusters (run `fedctl local down` first to start over with {members})"
            )
        taken = {p for c in config.clusters
                 for p in (c.apiserver_port, c.etcd_client_port, c.etcd_peer_port)}

        def ports(index: int) -> tuple[int, int, int]:
            if base_port is None:
                return _free_port(taken), _free_port(taken), _free_port(taken)
            start = base_port + 3 * index
            if start + 2 > 65535:
                raise FleetError(f"--base-port {base_port} leaves no room for {members} members")
            return start, start + 1, start + 2

        if not config.clusters:
            hub = ports(0)
            config.clusters.append(ClusterSpec("hub", "hub", hub[0], hub[1], hub[2],
                                               labels={"federation.io/cluster-name": "hub"}))
        for index in range(have + 1, members + 1):
            config.clusters.append(member_spec(index, ports(index)))
        return config

    def spec(self, name: str) -> ClusterSpec:
        config = self.load()
        for cluster in config.clusters:
            if cluster.name == name:
                return cluster
        names = ", ".join(c.name for c in config.clusters)
        raise FleetError(f"no cluster named {name!r} in the local fleet (have: {names})")

    # -- paths -------------------------------------------------------------------------

    def cluster_dir(self, name: str) -> Path:
        return self.state_dir / "clusters" / name

    def pki(self, name: str) -> pki.ClusterPKI:
        return pki.ClusterPKI(self.cluster_dir(name) / "pki")

    def _pid_file(self, name: str, component: str) -> Path:
        return self.cluster_dir(name) / f"{component}.pid"

    def _log_file(self, name: str, component: str) -> Path:
        return self.cluster_dir(name) / f"{component}.log"

    @property
    def simulator_pid_file(self) -> Path:
        return self.state_dir / "simulator.pid"

    @property
    def simulator_log_file(self) -> Path:
        return self.state_dir / "simulator.log"

    # -- lifecycle ---------------------------------------------------------------------

    def up(self, members: int = 3, base_port: int | None = None, *,
           simulator: SimulatorSettings | None = None,
           progress: Progress = lambda _: None, profiling: bool = False) -> FleetConfig:
        """Start (or top up) the fleet; ``profiling`` applies to a new fleet only (its API
        servers serve ``/debug/pprof``), as the simulator's settings do."""
        kube = binaries.find_binaries()
        config = self._plan(members, base_port, simulator)
        if profiling and not self.exists():
            config.profiling = True
        self._save(config)
        for cluster in config.clusters:
            pki.ensure(self.pki(cluster.name).directory, cluster.name)
        self._check_ports(config.clusters)
        started = [c for c in config.clusters if self._start_cluster(c, kube, progress)]
        self.write_kubeconfig(config)
        self.wait_ready(config.clusters, progress)
        if config.simulator.enabled:
            self.start_simulator(progress)
        if started:
            progress(f"started {', '.join(c.name for c in started)}")
        else:
            progress("fleet already running")
        return config

    def start(self, name: str, progress: Progress = lambda _: None) -> None:
        """Start one stopped cluster again (fault injection: recovery)."""
        cluster = self.spec(name)
        self.thaw(name)
        self._check_ports([cluster])
        self._start_cluster(cluster, binaries.find_binaries(), progress)
        self.wait_ready([cluster], progress)

    def stop(self, name: str, progress: Progress = lambda _: None) -> None:
        """Stop one cluster's processes, keeping its data (fault injection: outage)."""
        self.spec(name)
        for component in ("kube-apiserver", "etcd"):
            if processes.terminate(self._pid_file(name, component)):
                progress(f"stopped {name} {component}")

    def freeze(self, name: str) -> None:
        """SIGSTOP the API server: connections hang instead of being refused."""
        self.spec(name)
        if not processes.send(self._pid_file(name, "kube-apiserver"), signal.SIGSTOP):
            raise FleetError(f"{name} is not running")

    def thaw(self, name: str) -> None:
        processes.send(self._pid_file(name, "kube-apiserver"), signal.SIGCONT)

    def down(self, keep_data: bool = False, progress: Progress = lambda _: None) -> None:
        if not self.state_dir.exists():
            progress("no local fleet to stop")
            return
        if processes.terminate(self.control_plane_pid_file):
            progress("stopped control plane")
        from federation.local import pods  # imports the client: only when there are pods

        for stopped in pods.stop_all(self.state_dir):
            progress(f"stopped {stopped}")
        if processes.terminate(self.simulator_pid_file):
            progress("stopped simulator")
        for pid_file in self.state_dir.glob("reloaders/*/*/*/reloader.pid"):
            # The simulator stops its reloaders when it exits; these are the ones a killed
            # simulator could not.
            if processes.terminate(pid_file):
                progress(f"stopped reloader {pid_file.parent.relative_to(self.state_dir)}")
        for pid_file in self.state_dir.glob("agents/*/agent.pid"):
            if processes.terminate(pid_file):
                progress(f"stopped the agent of {pid_file.parent.name}")
        with contextlib.suppress(FleetError):
            for cluster in self.load().clusters:
                self.stop(cluster.name, progress)
        # Pid files of clusters missing from a damaged fleet.json still count.
        for pid_file in self.state_dir.glob("clusters/*/*.pid"):
            if processes.terminate(pid_file):
                progress(f"stopped {pid_file.parent.name} {pid_file.stem}")
        if not keep_data:
            shutil.rmtree(self.state_dir, ignore_errors=True)
            for path in (self.kubeconfig, self.clusters_file, self.control_plane_kubeconfig,
                         *self.kubeconfig.parent.glob(self.kubeconfig.stem + "-agent-*.yaml")):
                path.unlink(missing_ok=True)
            progress(f"removed {self.state_dir}")

    # -- processes ---------------------------------------------------------------------

    def _not_running(self, cluster: ClusterSpec) -> list[str]:
        return [component for component in ("etcd", "kube-apiserver")
                if processes.owned_pid(self._pid_file(cluster.name, component)) is None]

    def _check_ports(self, clusters: Iterable[ClusterSpec]) -> None:
        """Refuse to start anything when a port we need is taken: nothing half-started."""
        for cluster in clusters:
            ports = {"etcd": [(cluster.etcd_client_port, "etcd client"),
                              (cluster.etcd_peer_port, "etcd peer")],
                     "kube-apiserver": [(cluster.apiserver_port, "kube-apiserver")]}
            for component in self._not_running(cluster):
                for port, what in ports[component]:
                    if port_in_use(port):
                        raise FleetError(
                            f"port {port} ({cluster.name} {what}) is in use by another "
                            "process; free it or start over with `fedctl local down` and "
                            "another --base-port"
                        )

    def _start_cluster(self, cluster: ClusterSpec, kube: binaries.KubeBinaries,
                       progress: Progress) -> bool:
        missing = self._not_running(cluster)
        if "etcd" in missing:
            processes.spawn(self._etcd_argv(cluster, kube.etcd),
                            self._pid_file(cluster.name, "etcd"),
                            self._log_file(cluster.name, "etcd"))
            progress(f"{cluster.name}: etcd started on :{cluster.etcd_client_port}")
        if "kube-apiserver" in missing:
            processes.spawn(self._apiserver_argv(cluster, kube.kube_apiserver,
                                                 self.load().profiling),
                            self._pid_file(cluster.name, "kube-apiserver"),
                            self._log_file(cluster.name, "kube-apiserver"))
            progress(f"{cluster.name}: kube-apiserver started on :{cluster.apiserver_port}")
        return bool(missing)

    def _etcd_argv(self, cluster: ClusterSpec, etcd: Path) -> list[str]:
        peer = f"http://127.0.0.1:{cluster.etcd_peer_port}"
        return [
            str(etcd),
            f"--name={cluster.name}",
            f"--data-dir={self.cluster_dir(cluster.name) / 'etcd-data'}",
            f"--listen-client-urls={cluster.etcd_endpoint}",
            f"--advertise-client-urls={cluster.etcd_endpoint}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster={cluster.name}={peer}",
            "--initial-cluster-state=new",
            "--log-level=warn",
        ]

    def _apiserver_argv(self, cluster: ClusterSpec, apiserver: Path,
                        profiling: bool = False) -> list[str]:
        keys = self.pki(cluster.name)
        return [
            str(apiserver),
            f"--etcd-servers={cluster.etcd_endpoint}",
            f"--secure-port={cluster.apiserver_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--cert-dir={self.cluster_dir(cluster.name) / 'pki'}",
            f"--tls-cert-file={keys.server_cert}",
            f"--tls-private-key-file={keys.server_key}",
            f"--client-ca-file={keys.ca_cert}",
            f"--token-auth-file={keys.token_file}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={keys.service_account_pub}",
            f"--service-account-signing-key-file={keys.service_account_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            f"--audit-policy-file={write_audit_policy(self.cluster_dir(cluster.name))}",
            f"--audit-log-path={self.cluster_dir(cluster.name) / 'audit.log'}",
            f"--audit-log-maxsize={AUDIT_LOG_MAX_MB}",
            "--audit-log-maxbackup=1",
            f"--profiling={'true' if profiling else 'false'}",
            "--v=0",
        ]

    # -- readiness ---------------------------------------------------------------------

    def ssl_context(self, name: str) -> ssl.SSLContext:
        keys = self.pki(name)
        context = ssl.create_default_context(cafile=str(keys.ca_cert))
        context.load_cert_chain(str(keys.admin_cert), str(keys.admin_key))
        return context

    def probe(self, cluster: ClusterSpec, path: str = "/readyz", timeout: float = 2.0) -> bool:
        """One verified-TLS request to the cluster; True on HTTP 200."""
        request = urllib.request.Request(cluster.server + path)
        try:
            with urllib.request.urlopen(request, timeout=timeout,
                                        context=self.ssl_context(cluster.name)) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError, ssl.SSLError):
            return False

    def wait_ready(self, clusters: Iterable[ClusterSpec], progress: Progress,
                   timeout: float = READY_TIMEOUT) -> None:
        pending = {c.name: c for c in clusters}
        started = time.monotonic()
        last_report = 0.0
        while pending:
            for name, cluster in list(pending.items()):
                self._check_alive(cluster)
                if self.probe(cluster):
                    del pending[name]
                    progress(f"{name}: ready ({time.monotonic() - started:.1f}s)")
            elapsed = time.monotonic() - started
            if not pending:
                break
            if elapsed > timeout:
                raise FleetError(f"{', '.join(pending)} not ready after {timeout:.0f}s; "
                                 f"see {self.cluster_dir(next(iter(pending)))}/*.log")
            if elapsed - last_report >= 2:
                last_report = elapsed
                progress(f"waiting for /readyz of {', '.join(sorted(pending))} ({elapsed:.0f}s)")
            time.sleep(0.25)

    def _check_alive(self, cluster: ClusterSpec) -> None:
        for component in ("etcd", "kube-apiserver"):
            if processes.owned_pid(self._pid_file(cluster.name, component)) is None:
                log = self._log_file(cluster.name, component)
                last = _last_line(log)
                raise FleetError(f"{cluster.name} {component} exited: {last} (log: {log})")

    # -- outputs -----------------------------------------------------------------------

    def write_kubeconfig(self, config: FleetConfig) -> None:
        """The admin kubeconfig, the control plane's, and the members' placement file."""
        _write_private_yaml(self.kubeconfig, self._kubeconfig_document(config, "admin"))
        _write_private_yaml(self.control_plane_kubeconfig,
                            self._kubeconfig_document(config, "control-plane",
                                                      skip=set(config.pull)))
        for name in config.pull:  # each agent: its own cluster only, least privilege
            _write_private_yaml(self.agent_kubeconfig(name), self._kubeconfig_document(
                config, "control-plane", only={name}))
        members = [{"name": c.name, "labels": c.labels, "region": c.region, "zone": c.zone,
                    "provider": c.provider, "taints": []} for c in config.members]
        _write_private_yaml(self.clusters_file, {"clusters": members})

    def _kubeconfig_document(self, config: FleetConfig,
                             identity: Literal["admin", "control-plane"], *,
                             skip: set[str] | None = None, only: set[str] | None = None
                             ) -> dict[str, Any]:
        clusters, users, contexts = [], [], []
        for cluster in config.clusters:
            if cluster.name in (skip or ()) or (only is not None and cluster.name not in only):
                continue
            keys = self.pki(cluster.name)
            cert, key = ((keys.admin_cert, keys.admin_key) if identity == "admin"
                         else (keys.control_plane_cert, keys.control_plane_key))
            clusters.append({"name": cluster.name, "cluster": {
                "server": cluster.server,
                "certificate-authority-data": _b64(keys.ca_cert),
                # loopback: gzipped answers only cost CPU on both ends (kubectl >= 1.26
                # reads the field too)
                "disable-compression": True,
            }})
            users.append({"name": f"{cluster.name}-{identity}", "user": {
                "client-certificate-data": _b64(cert), "client-key-data": _b64(key),
            }})
            contexts.append({"name": cluster.name, "context": {
                "cluster": cluster.name, "user": f"{cluster.name}-{identity}",
            }})
        current = "hub" if only is None else sorted(only)[0]
        return {"apiVersion": "v1", "kind": "Config", "preferences": {},
                "current-context": current, "clusters": clusters, "users": users,
                "contexts": contexts}

    def ensure_control_plane_identity(self) -> Path:
        """The control plane's certificates and kubeconfig (a fleet started by an older
        version has neither); the kubeconfig's path."""
        config = self.load()
        for cluster in config.clusters:
            pki.ensure(self.pki(cluster.name).directory, cluster.name)
        if not self.control_plane_kubeconfig.exists():
            self.write_kubeconfig(config)
        return self.control_plane_kubeconfig

    def process_ids(self) -> dict[str, list[int]]:
        """The running processes of the fleet by owner: each cluster's etcd and API server,
        and ``simulator`` (for benchmarks that measure where CPU time lands)."""
        found: dict[str, list[int]] = {}
        for cluster in self.load().clusters:
            found[cluster.name] = [pid for component in ("etcd", "kube-apiserver")
                                   if (pid := processes.owned_pid(
                                       self._pid_file(cluster.name, component))) is not None]
        simulator = processes.owned_pid(self.simulator_pid_file)
        found["simulator"] = [simulator] if simulator is not None else []
        return found

    def status(self) -> list[ClusterStatus]:
        result = []
        for cluster in self.load().clusters:
            apiserver_pid = processes.owned_pid(self._pid_file(cluster.name, "kube-apiserver"))
            frozen = processes.is_frozen(self._pid_file(cluster.name, "kube-apiserver"))
            result.append(ClusterStatus(
                name=cluster.name, role=cluster.role, server=cluster.server,
                etcd_pid=processes.owned_pid(self._pid_file(cluster.name, "etcd")),
                apiserver_pid=apiserver_pid, frozen=frozen,
                ready=bool(apiserver_pid) and not frozen and self.probe(cluster, timeout=1.0),
                region=cluster.region, zone=cluster.zone, provider=cluster.provider,
            ))
        return result

    # -- simulator ---------------------------------------------------------------------

    def start_simulator(self, progress: Progress) -> None:
        if processes.owned_pid(self.simulator_pid_file) is not None:
            return
        argv = [sys.executable, "-m", "federation", "local", "simulate",
                "--state-dir", str(self.state_dir), "--kubeconfig", str(self.kubeconfig)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        processes.spawn(argv, self.simulator_pid_file, self.simulator_log_file, env=env)
        progress(f"simulator started (log: {self.simulator_log_file})")

    def stop_simulator(self) -> bool:
        """Stop the simulator (benchmarks pause it to count only the control plane's
        member writes); True when it was running."""
        return processes.terminate(self.simulator_pid_file)

    # -- control plane -------------------------------------------------------------------

    @property
    def control_plane_pid_file(self) -> Path:
        return self.state_dir / "control-plane.pid"

    @property
    def control_plane_log_file(self) -> Path:
        return self.state_dir / "control-plane.log"

    def start_control_plane(self, progress: Progress, extra_args: Sequence[str] = (), *,
                            in_cluster: bool = False, token_rotate: float | None = None
                            ) -> None:
        """`fedctl install` as admin (CRDs, MemberClusters, RBAC on hub and members), then
        `fedctl run` with the control plane's own, least-privilege kubeconfig; or, with
        ``in_cluster``, the shipped manifests run by the pod runner (:meth:`_in_cluster`)."""
        from federation.local import pods

        namespace, name = self.CONTROL_PLANE
        runner = pods.directory(self.state_dir, "hub", namespace, name) / "runner.pid"
        host = processes.owned_pid(self.control_plane_pid_file) is not None
        pods_run = processes.owned_pid(runner) is not None
        if (host and in_cluster) or (pods_run and not in_cluster):
            running = "a host-process control plane" if host else "an in-cluster one"
            raise FleetError(f"{running} already runs in this fleet; `fedctl local down` "
                             "first to switch")
        if host or pods_run:
            progress("control plane already running")
            return
        config = self.load()
        config.in_cluster = in_cluster
        self._save(config)
        if in_cluster:
            self._in_cluster(progress, extra_args, token_rotate)
            return
        identity = self.ensure_control_plane_identity()
        fedctl = [sys.executable, "-m", "federation"]
        hub = ["--hub-context", "hub"]
        self._fedctl("install", "--kubeconfig", str(self.kubeconfig), *hub,
                     "--clusters", str(self.clusters_file), progress=progress)
        for name in config.pull:
            self.join_pull(name, progress)
        work = ["--work-bind-address", f"127.0.0.1:{config.work_port}"] if config.pull else []
        argv = [*fedctl, "run", "--kubeconfig", str(identity), *hub,
                "--metrics-bind-address", "127.0.0.1:0",
                "--health-probe-bind-address", "127.0.0.1:0", *work,
                # the simulated reloaders listen on loopback (docs/rollouts.md)
                "--reloader-allow", "127.0.0.0/8", *extra_args]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        processes.spawn(argv, self.control_plane_pid_file, self.control_plane_log_file, env=env)
        progress(f"control plane started: fedctl run as {pki.CONTROL_PLANE_USER} "
                 f"(log: {self.control_plane_log_file})")
        for name in config.pull:
            self.start_agent(name, progress)

    def _fedctl(self, *args: str, progress: Progress) -> None:
        """One `fedctl` command as the fleet's admin; its output as progress."""
        done = subprocess.run([sys.executable, "-m", "federation", *args],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise FleetError(f"fedctl {args[0]} failed: {done.stderr.strip()}")
        progress(done.stdout.strip().replace("\n", "; "))

    # -- the control plane in-cluster ----------------------------------------------------------

    CONTROL_PLANE = ("federation-system", "federation-controller-manager")
    """The shipped Deployment (``federation.deploy.manifests``: its namespace and NAME)."""
    WORK_SERVICE = "federation-work"

    def _in_cluster(self, progress: Progress, extra_args: Sequence[str],
                    token_rotate: float | None) -> None:
        """What an operator does on a real hub (docs/install.md): `fedctl install
        --control-plane` applies the shipped manifests; `fedctl join --create-service-account`
        stores each push member's least-privilege token in a hub Secret, where the
        control plane, with no kubeconfig, finds its members; `fedctl join --mode pull
        --apply-agent` registers each pull member and applies its agent's shipped manifests
        to it. The fleet's own overlay (:meth:`overlay_args`) is applied to the Deployment;
        the pod runner runs its pods, and each pull member's agent Deployment's pod."""
        from federation.local import pods

        config = self.load()
        self.ensure_control_plane_identity()
        self._fedctl("install", "--kubeconfig", str(self.kubeconfig), "--hub-context", "hub",
                     "--clusters", str(self.clusters_file), "--control-plane",
                     progress=progress)
        for member in config.members:
            if member.name not in config.pull:
                self._fedctl("join", member.name, "--kubeconfig", str(self.kubeconfig),
                             "--context", member.name, "--create-service-account",
                             "--hub-kubeconfig", str(self.kubeconfig), "--hub-context", "hub",
                             "--region", member.region, "--zone", member.zone,
                             "--provider", member.provider, progress=progress)
        for name in config.pull:
            self.join_pull_with_agent(name, progress)
        self.patch_manager_args([*self.overlay_args(config), *extra_args])
        services = {self.WORK_SERVICE: config.work_port} if config.pull else {}
        namespace, name = self.CONTROL_PLANE
        where = pods.start(self.state_dir, self.kubeconfig, "hub", namespace, name,
                           settings=pods.Settings(token_rotate=token_rotate,
                                                  services=services))
        progress(f"control plane: the pods of Deployment {namespace}/{name} run locally "
                 f"(pod runner: {where})")
        for pull in config.pull:
            self.start_agent(pull, progress)

    @staticmethod
    def overlay_args(config: FleetConfig) -> list[str]:
        """The fleet's overlay of the manager's args: the simulated reloaders listen on
        loopback (an operator allows the members' pod CIDRs instead), and the pull agents
        reach the work server at 127.0.0.1 (an operator adds the address it exposes)."""
        args = ["--reloader-allow=127.0.0.0/8"]
        if config.pull:
            args.append("--work-hosts=federation-work.federation-system.svc,127.0.0.1")
        return args

    def patch_manager_args(self, extra: Sequence[str]) -> None:
        """Append ``extra`` to the manager container's args in the hub's Deployment, by a
        server-side apply of its own (field manager ``fedctl-local``), as an overlay
        would; `fedctl install --control-plane` puts the shipped args back."""
        if not extra:
            return
        import asyncio

        from federation.contexts import client as kube
        from federation.contexts import kubeconfig as kubeconfigs

        namespace, name = self.CONTROL_PLANE

        async def patch() -> None:
            context = kubeconfigs.load(self.kubeconfig).context("hub")
            async with kube.connect(context) as hub:
                current = await hub.get(kube.DEPLOYMENTS, name, namespace)
                container = current["spec"]["template"]["spec"]["containers"][0]
                body = {"apiVersion": "apps/v1", "kind": "Deployment",
                        "metadata": {"name": name, "namespace": namespace},
                        "spec": {"template": {"spec": {"containers": [
                            {"name": container["name"],
                             "args": [*container.get("args", []), *extra]}]}}}}
                await hub.apply(kube.DEPLOYMENTS, body, "fedctl-local", force=True)

        asyncio.run(patch())

    # -- pull members ----------------------------------------------------------------------

    def set_pull(self, names: Sequence[str]) -> FleetConfig:
        """Make ``names`` pull members (checked against the fleet's members); the control
        plane's kubeconfig loses their contexts, each gets an agent kubeconfig."""
        config = self.load()
        members = {c.name for c in config.members}
        for name in names:
            if name not in members:
                raise FleetError(f"--pull {name}: no such member (have: "
                                 f"{', '.join(sorted(members))})")
        config.pull = sorted(set(config.pull) | set(names))
        taken = {p for c in config.clusters
                 for p in (c.apiserver_port, c.etcd_client_port, c.etcd_peer_port)}
        if config.pull and not config.work_port:
            config.work_port = _free_port(taken)
        for name in config.pull:
            config.agent_ports.setdefault(name, _free_port(taken | {config.work_port}))
        self._save(config)
        self.write_kubeconfig(config)
        return config

    def agent_dir(self, name: str) -> Path:
        return self.state_dir / "agents" / name

    def agent_kubeconfig(self, name: str) -> Path:
        return self.kubeconfig.with_name(f"{self.kubeconfig.stem}-agent-{name}.yaml")

    def agent_pid_file(self, name: str) -> Path:
        return self.agent_dir(name) / "agent.pid"

    def agent_log_file(self, name: str) -> Path:
        return self.agent_dir(name) / "agent.log"

    def join_pull(self, name: str, progress: Progress) -> None:
        """`fedctl join NAME --mode pull` as admin: the work CA, the MemberCluster in pull
        mode, the agent's certificate in the agent's directory (once)."""
        directory = self.agent_dir(name)
        joined = subprocess.run(
            [sys.executable, "-m", "federation", "join", name, "--mode", "pull",
             "--hub-kubeconfig", str(self.kubeconfig), "--hub-context", "hub",
             "--out-dir", str(directory / "tls"),
             "--hub-address", f"127.0.0.1:{self.load().work_port}"],
            capture_output=True, text=True)
        if joined.returncode != 0:
            raise FleetError(f"fedctl join {name} --mode pull failed: {joined.stderr.strip()}")
        progress(f"{name} joined in pull mode (agent files: {directory / 'tls'})")

    AGENT = ("federation-agent", "federation-agent")
    """The pull agent's shipped Deployment in a member (``federation.deploy.manifests``:
    AGENT_NAMESPACE and AGENT_NAME, held equal by a unit test: this layer may not import
    the deploy package)."""

    def join_pull_with_agent(self, name: str, progress: Progress) -> None:
        """`fedctl join NAME --mode pull --apply-agent` as admin of the hub and of the
        member: the MemberCluster in pull mode, and the agent's shipped manifests applied
        to the member with its certificate in the agent's Secret there (no file here)."""
        self._fedctl("join", name, "--mode", "pull", "--apply-agent",
                     "--kubeconfig", str(self.kubeconfig), "--context", name,
                     "--hub-kubeconfig", str(self.kubeconfig), "--hub-context", "hub",
                     "--hub-address", f"127.0.0.1:{self.load().work_port}",
                     progress=progress)

    def clear_pull(self) -> FleetConfig:
        """No member in pull mode any more (the control plane's kubeconfig has them all
        again): what a test that pulled a member puts back for the next."""
        config = self.load()
        config.pull = []
        self._save(config)
        self.write_kubeconfig(config)
        return config

    def agent_argv(self, name: str) -> list[str]:
        config = self.load()
        tls = self.agent_dir(name) / "tls"
        port = config.agent_ports[name]
        return [sys.executable, "-m", "federation", "agent",
                "--hub-address", f"127.0.0.1:{config.work_port}", "--cluster-name", name,
                "--kubeconfig", str(self.agent_kubeconfig(name)),
                "--tls-cert", str(tls / "tls.crt"), "--tls-key", str(tls / "tls.key"),
                "--tls-ca", str(tls / "ca.crt"), "--state-dir", str(self.agent_dir(name)),
                "--health-probe-bind-address", f"127.0.0.1:{port}",
                "--metrics-bind-address", f"127.0.0.1:{port}"]

    def start_agent(self, name: str, progress: Progress = lambda _: None) -> None:
        """Start a pull member's agent: its Deployment's pod (in-cluster) or a process."""
        config = self.load()
        if name not in config.pull:
            raise FleetError(f"{name} is not a pull member (`fedctl local up --pull {name}`)")
        if config.in_cluster:
            from federation.local import pods

            where = pods.start(self.state_dir, self.kubeconfig, name, *self.AGENT)
            progress(f"agent of {name}: the pod of Deployment {'/'.join(self.AGENT)} runs "
                     f"locally (pod runner: {where})")
            return
        if processes.owned_pid(self.agent_pid_file(name)) is not None:
            return
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        processes.spawn(self.agent_argv(name), self.agent_pid_file(name),
                        self.agent_log_file(name), env=env)
        progress(f"agent of {name} started (log: {self.agent_log_file(name)})")

    def stop_agent(self, name: str, progress: Progress = lambda _: None) -> bool:
        """Stop a pull member's agent (its pod runner in-cluster); True when one ran."""
        if self.load().in_cluster:
            from federation.local import pods

            if pods.stop(self.state_dir, name, *self.AGENT):
                progress(f"stopped the agent of {name} (its pod)")
                return True
            return False
        if processes.terminate(self.agent_pid_file(name)):
            progress(f"stopped the agent of {name}")
            return True
        return False


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _write_private_yaml(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.touch(mode=0o600, exist_ok=True)
    tmp.write_text(yaml.safe_dump(document, sort_keys=False))
    tmp.rename(path)


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "no output"
