"""``fedctl run``: the control plane process (manager, caches, controllers).

The flags become settings values (the manager's, the clients', the controllers'), and
:func:`federation.controllers.setup.setup` receives the manager and the controllers'
:class:`~federation.controllers.setup.Settings`: that function is the one list of the
controllers (see docs/runtime.md). ``run`` then installs the hub API, runs the manager
until a signal or lost leadership, and reports cluster state as it changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from federation.contexts import client as kube
from federation.contexts import clusters, credentials, egress, incluster, kubeconfig
from federation.runtime import auth, leader, manager

if TYPE_CHECKING:
    from federation.controllers.applications import ApplicationSettings
    from federation.reloader.client import ClientTLS, UpgradeResult
    from federation.work.server import WorkServer

log = logging.getLogger("federation.run")

REPORT_INTERVAL = 60.0
"""Seconds between full state reports; changes are reported as they happen."""


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when installed: its TLS and socket paths are compiled, and this
    process spends most of its time in them (see docs/propagation.md for the measurement)."""
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def _split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def state_table(mgr: manager.Manager) -> str:
    lines = [f"{'CLUSTER':<16} {'ROLE':<7} {'STATE':<14} {'SYNCED':<7} {'OBJECTS':>7}  DETAIL"]
    for name, entry in mgr.cluster_report().items():
        objects = sum(i["objects"] for i in entry["informers"].values())
        lines.append(f"{name:<16} {entry['role']:<7} {entry['state']:<14} "
                     f"{'yes' if entry['synced'] else 'no':<7} {objects:>7}  {entry['detail']}")
    return "\n".join(lines)


async def report_state(mgr: manager.Manager) -> None:
    """Print the cluster table when caches start, then a line per change, and a table hourly."""
    await mgr.started.wait()
    click.echo(state_table(mgr))
    seen = {c.name: c.detail for c in mgr.clusters.clusters.values()}
    last_full = time.monotonic()
    while True:
        await asyncio.sleep(1.0)
        for cluster in mgr.clusters.clusters.values():
            if seen.get(cluster.name) != cluster.detail:
                click.echo(f"cluster {cluster.name}: {cluster.state}: {cluster.detail}")
                seen[cluster.name] = cluster.detail
        if time.monotonic() - last_full > REPORT_INTERVAL:
            click.echo(state_table(mgr))
            last_full = time.monotonic()


def quiet_closed_tls(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler, minus one known false alarm.

    uvloop reports "Fatal error on SSL protocol ... the handler is closed" when TLS
    bytes arrive for a connection we already closed, which is what cancelling an
    in-flight request (leadership lost, shutdown) does: the request is abandoned on
    purpose, so this is logged at DEBUG; everything else goes to the default handler.
    """
    error = context.get("exception")
    if (str(context.get("message", "")).startswith("Fatal error on SSL protocol")
            and isinstance(error, RuntimeError) and "handler is closed" in str(error)):
        log.debug("TLS data after close ignored: %s", error)
        return
    loop.default_exception_handler(context)


class ReloaderCaller:
    """The rollout controller's :class:`~federation.controllers.rollouts.OnlineUpgrade`:
    :func:`federation.reloader.client.online_upgrade` with the control plane's client
    certificate (CN ``federation-reconfigure``), issued in memory from the reloaders' CA
    when ``run`` starts (:meth:`prepare`) and never written anywhere.

    The CA is the hub Secret ``federation-system/federation-reloader-ca``, made here when
    missing and the credentials allow it (an admin's, as in the local fleet; ``fedctl local
    simulate`` makes it too). With the least-privilege RBAC the control plane may only read
    it: then a missing CA is a warning at start, and every online step fails naming it,
    never reported done."""

    def __init__(self) -> None:
        self.tls: ClientTLS | None = None
        self.problem = "the reloaders' client certificate is not loaded yet"

    async def prepare(self, hub: kube.ObjectClient) -> None:
        from federation.commands import reloader_ca
        from federation.hub.rollouts import RELOADER_CA_SECRET
        from federation.work import identity

        try:
            ca = await identity.ensure_ca(hub, RELOADER_CA_SECRET)
        except (kube.ClientError, identity.IdentityError) as exc:
            self.problem = (f"no usable reloader CA (hub Secret {identity.SECRET_NAMESPACE}/"
                            f"{RELOADER_CA_SECRET}): {exc}")
            log.warning("online reconfiguration disabled: %s", self.problem)
            return
        self.tls = reloader_ca.client_tls_from(ca)

    async def __call__(self, address: str, *, namespace: str, config_spec: str,
                       config_file: str, params: Mapping[str, str], timeout: float
                       ) -> UpgradeResult:
        if self.tls is None:
            from federation.controllers.rollouts.view import CallerNotReady
            raise CallerNotReady(self.problem)
        from federation.reloader import client

        return await client.online_upgrade(address, self.tls, namespace=namespace,
                                           config_spec=config_spec, config_file=config_file,
                                           params=params, timeout=timeout)


def own_addresses(*bind_addresses: str) -> frozenset[egress.Address]:
    """The addresses this process listens on, for the outbound policy to refuse: each bind
    address's host, and for a wildcard bind every address of this host's name."""
    hosts: set[str] = set()
    for bind in bind_addresses:
        if bind == "0":
            continue
        host = bind.rpartition(":")[0].strip("[]")
        if host in ("", "0.0.0.0", "::"):
            with contextlib.suppress(OSError):
                hosts.update(str(info[4][0]) for info in socket.getaddrinfo(
                    socket.gethostname(), None))
        else:
            hosts.add(host)
    found: set[egress.Address] = set()
    for host in hosts:
        with contextlib.suppress(ValueError):
            found.add(ipaddress.ip_address(host.split("%")[0]))
    return frozenset(found)


async def serve(mgr: manager.Manager, work: WorkServer | None = None,
                work_address: str | None = None,
                reloaders: ReloaderCaller | None = None) -> None:
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(quiet_closed_tls)
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _stopping, mgr, work, signum)
    from federation.controllers import install

    hub_client = mgr.clusters.hub.client
    assert hub_client is not None
    reporter = asyncio.create_task(report_state(mgr), name="cluster state reporter")
    try:
        installed = await install.install_crds(hub_client, only_changed=True)
        log.info("hub API installed: %d CRDs", len(installed))
        if reloaders is not None:
            await reloaders.prepare(hub_client)
        if work is not None and work_address is not None:
            from federation.work import identity
            await work.start(work_address, await identity.load_ca(hub_client))
        await mgr.run()
    finally:
        reporter.cancel()
        if work is not None:
            await work.stop()
        await mgr.close()  # every exit path: no connection is left for the GC to report


def _stopping(mgr: manager.Manager, work: WorkServer | None, signum: int) -> None:
    log.info("%s: stopping", signal.Signals(signum).name)
    mgr.stop()
    if work is not None:
        work.stopping()


def _sharding(shards: int) -> bool:
    """Whether ``--shards`` asks for a leader (it always does: cluster-wide duties). A work
    server is welcome: every shard holder serves its agents (see :func:`_work_server`)."""
    return bool(shards)


def leader_settings(leader_elect: bool, namespace: str, name: str,
                    timings: dict[str, float | None]) -> leader.LeaderSettings:
    """The election's settings from the flags (None: the default); a timing given without
    ``--leader-elect`` (it would do nothing) or out of order is a ValueError."""
    given = [key for key, value in timings.items() if value is not None]
    if given and not leader_elect:
        raise ValueError(f"--leader-elect-{given[0].replace('_', '-')} needs --leader-elect")
    defaults = leader.LeaderSettings()

    def chosen(key: str) -> float:
        value = timings[key]
        return float(getattr(defaults, key)) if value is None else value

    return leader.LeaderSettings(
        namespace=namespace, name=name, lease_duration=chosen("lease_duration"),
        renew_deadline=chosen("renew_deadline"), retry_period=chosen("retry_period"))


@click.command()
@click.option("--kubeconfig", "kubeconfig_path", type=click.Path(path_type=Path), default=None,
              help="Kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).")
@click.option("--hub-context", "--context", "hub_context", default=None,
              help="Context of the hub cluster (default: the current context; --context is "
                   "kubectl's spelling).")
@click.option("--contexts", default=None,
              help="Member contexts, comma-separated (default: every context but the hub).")
@click.option("--disabled-contexts", default="",
              help="Member contexts to keep known but disabled: writes to them fail.")
@click.option("--metrics-bind-address", default="127.0.0.1:8080", show_default=True,
              help='Prometheus /metrics address (":8080" for every interface); "0" disables.')
@click.option("--health-probe-bind-address", default="127.0.0.1:8081", show_default=True,
              help='/healthz and /readyz address (":8081" for every interface); "0" disables.')
@click.option("--metrics-secure", is_flag=True,
              help="Serve metrics over HTTPS; every request needs a bearer token the hub "
                   "accepts (TokenReview) for a user allowed to get /metrics "
                   "(SubjectAccessReview).")
@click.option("--metrics-cert-dir", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Directory with tls.crt and tls.key for --metrics-secure "
                                 "(default: a self-signed certificate made at start).")
@click.option("--leader-elect", is_flag=True,
              help="Elect a leader with a Lease on the hub (for more than one replica).")
@click.option("--leader-election-namespace", default="kube-system", show_default=True)
@click.option("--leader-election-id", default="federation-controller-manager",
              show_default=True, help="Name of the Lease.")
@click.option("--leader-elect-lease-duration", type=int, default=None,
              help="Whole seconds a standby waits without seeing the Lease renewed before "
                   "it takes over (default 15).")
@click.option("--leader-elect-renew-deadline", type=float, default=None,
              help="Seconds the leader keeps trying to renew before it stops leading and "
                   "writing; less than the lease duration (default 10).")
@click.option("--leader-elect-retry-period", type=float, default=None,
              help="Seconds between attempts to acquire or renew the Lease (default 2).")
@click.option("--shards", type=click.IntRange(0, 16), default=0, show_default=True,
              help="Active-active: divide templates, Applications, rollouts and clean-up "
                   "among up to N replicas, each holding one shard Lease (implies "
                   "--leader-elect: cluster-wide duties stay with the leader). Run N "
                   "replicas; more stand by. 0: one replica does all (docs/runtime.md).")
@click.option("--cache-sync-timeout", type=float, default=30.0, show_default=True,
              help="Seconds to wait for each cluster's caches before starting controllers.")
@click.option("--cleanup-wait", type=float, default=30.0, show_default=True,
              help="Seconds the copies of a deleted template or Application may stay on "
                   "unreachable members before a CleanupPending Warning event says so "
                   "(they are deleted when the members return).")
@click.option("--allow-exec-command", "allow_exec", multiple=True,
              help="Exec-plugin command (bare name or absolute path) the kubeconfig's and "
                   "joined clusters' contexts may use, beyond the built-in allowlist "
                   "(repeatable; match what `fedctl join` was allowed).")
@click.option("--kube-api-qps", type=float, default=None,
              help="Client-side limit of requests per second to each cluster (the hub "
                   "included). Default: none, the API servers' Priority and Fairness "
                   "decides (docs/runtime.md).")
@click.option("--kube-api-burst", type=int, default=None,
              help="Requests allowed at once above --kube-api-qps (default: twice it).")
@click.option("--workers", type=int, default=64, show_default=True,
              help="Concurrent propagation reconciles (why 64: PropagationSettings.workers).")
@click.option("--propagation-deny", "propagation_deny", multiple=True, metavar="RULES",
              help="Change the deny list of kinds no policy propagates: GROUP/KIND"
                   "[:namespace=NS][:type=TYPE] adds a rule, -RULE removes a default one "
                   "(comma-separated or repeated; see docs/propagation.md).")
@click.option("--app-local-cluster", default=None, metavar="NAME",
              help="The member KubeVela's topology cluster name `local` stands for (the "
                   "hub runs no workloads); without it `local` is refused.")
@click.option("--definition-namespaces", default="vela-system,federation-system",
              show_default=True, metavar="NS[,NS...]",
              help="Namespaces whose ComponentDefinitions and TraitDefinitions Applications "
                   "may use (only administrators should write there; a definition in any "
                   "other namespace is never used; the first listed wins a name).")
@click.option("--work-bind-address", default="0", show_default=True,
              help='Address of the work server pull members\' agents dial (gRPC, mutual '
                   'TLS; e.g. "0.0.0.0:9443"); "0" serves none (docs/agent.md).')
@click.option("--work-hosts", default="127.0.0.1,localhost", show_default=True,
              help="Names and addresses the work server's certificate is valid for (the "
                   "agents' --hub-address hosts), comma-separated.")
@click.option("--notification-allow", "notification_allow", multiple=True, metavar="CIDR",
              help="Networks Application notification steps may POST to although private, "
                   "loopback or link-local (repeatable; default: public addresses only; "
                   "docs/security.md, Outbound connections).")
@click.option("--request-allow", "request_allow", multiple=True, metavar="CIDR",
              help="Networks Application request and check-metrics steps may call, and "
                   "read the answer of, although private, loopback or link-local "
                   "(repeatable; e.g. an in-cluster Prometheus; default: public addresses "
                   "only; docs/security.md, Applications: HTTP steps).")
@click.option("--reloader-allow", "reloader_allow", multiple=True, metavar="CIDR",
              help="Networks of reloader addresses online configuration steps may dial "
                   "(repeatable; the members' pod CIDRs; default: public addresses only).")
@click.option("--chart-allow", "chart_allow", multiple=True, metavar="CIDR",
              help="Networks helmchart components may fetch charts from although private, "
                   "loopback or link-local (repeatable; default: public addresses only; "
                   "docs/security.md, Applications: Helm charts).")
@click.option("--export-service-allow", "export_service_allow", multiple=True,
              metavar="CIDR[,CIDR...]",
              help="Address ranges Application export-service steps may point a Service's "
                   "Endpoints at in members (repeatable; default: none, every export-service "
                   "step is refused; loopback, link-local, unspecified and multicast never; "
                   "the member role needs `fedctl install --export-service`; "
                   "docs/security.md, Applications: export-service).")
@click.option("--helm", "helm_path", default=None, metavar="PATH",
              help="The Helm v3 binary helmchart components render with (default: "
                   "$FEDERATION_HELM, helm on PATH, then `fedctl local install-helm`'s).")
def run(kubeconfig_path: Path | None, hub_context: str | None, contexts: str | None,
        disabled_contexts: str, metrics_bind_address: str, health_probe_bind_address: str,
        metrics_secure: bool, metrics_cert_dir: Path | None, leader_elect: bool,
        leader_election_namespace: str, leader_election_id: str, cleanup_wait: float,
        leader_elect_lease_duration: int | None, leader_elect_renew_deadline: float | None,
        leader_elect_retry_period: float | None, shards: int, cache_sync_timeout: float,
        allow_exec: tuple[str, ...], kube_api_qps: float | None, kube_api_burst: int | None,
        workers: int, propagation_deny: tuple[str, ...], app_local_cluster: str | None,
        definition_namespaces: str, work_bind_address: str, work_hosts: str,
        notification_allow: tuple[str, ...], request_allow: tuple[str, ...],
        reloader_allow: tuple[str, ...], chart_allow: tuple[str, ...],
        export_service_allow: tuple[str, ...], helm_path: str | None) -> None:
    """Run the federation control plane against the hub and member contexts."""
    if logging.getLogger().level > logging.INFO:
        logging.getLogger().setLevel(logging.INFO)
    leader_elect = leader_elect or _sharding(shards)
    try:
        election = leader_settings(leader_elect, leader_election_namespace, leader_election_id,
                                   {"lease_duration": leader_elect_lease_duration,
                                    "renew_deadline": leader_elect_renew_deadline,
                                    "retry_period": leader_elect_retry_period})
    except ValueError as exc:
        _fail(str(exc))
    settings = manager.ManagerSettings(
        metrics_bind_address=metrics_bind_address,
        health_probe_bind_address=health_probe_bind_address, metrics_secure=metrics_secure,
        metrics_cert_dir=metrics_cert_dir, leader_elect=leader_elect, leader=election,
        cache_sync_timeout=cache_sync_timeout, shards=shards)
    from federation.hub import deny

    try:
        deny_list = deny.DenyList.configured(propagation_deny)
    except deny.DenyError as exc:
        _fail(f"--propagation-deny: {exc}")
    try:
        _check_serving(settings, work_bind_address)
        own = own_addresses(metrics_bind_address, health_probe_bind_address,
                            work_bind_address)
        policies = _egress_policies(own, notification=notification_allow,
                                    request=request_allow, reloader=reloader_allow)
        apps = _application_settings(app_local_cluster, cleanup_wait, definition_namespaces,
                                     chart_allow, own, helm_path, export_service_allow)
        cluster_set = _cluster_set(kubeconfig_path, hub_context, contexts, disabled_contexts,
                                   kube.ClientSettings(
                                       qps=kube_api_qps, burst=kube_api_burst,
                                       exec_allowlist=credentials.ExecAllowlist.of(allow_exec)))
    except (kubeconfig.KubeconfigError, ValueError) as exc:
        _fail(str(exc))
    mgr = manager.Manager(cluster_set, settings)
    work = _work_server(work_bind_address, work_hosts, mgr)
    from federation.controllers import propagation, rollouts
    from federation.controllers import setup as controllers_setup
    reloaders = ReloaderCaller()
    controllers_setup.setup(mgr, controllers_setup.Settings(
        propagation=propagation.PropagationSettings(
            cleanup_wait=cleanup_wait, workers=workers, deny_list=deny_list),
        allowed_exec=allow_exec, work=work, **policies,
        applications=apps,
        reconfigure=rollouts.ReconfigureSettings(caller=reloaders)))
    _serve_until_stopped(mgr, work, work_bind_address, reloaders)


def _egress_policies(own: frozenset[egress.Address], **allowed: tuple[str, ...]
                     ) -> dict[str, egress.EgressPolicy]:
    """The outbound policy of each purpose (``notification``, ``request``, ``reloader``)
    from its ``--PURPOSE-allow`` CIDRs, as the Settings' ``PURPOSE_egress`` fields."""
    return {f"{purpose}_egress": egress.EgressPolicy(egress.parse_networks(cidrs), own)
            for purpose, cidrs in allowed.items()}


def _application_settings(local_cluster: str | None, cleanup_wait: float,
                          definition_namespaces: str, chart_allow: tuple[str, ...],
                          own: frozenset[egress.Address], helm_path: str | None,
                          export_allow: tuple[str, ...] = ()) -> ApplicationSettings:
    """The applications controller's settings from its flags (ValueError names a bad
    network)."""
    from federation.applications.export_service import Allow
    from federation.controllers import applications
    from federation.controllers.applications import charts
    from federation.local import helm

    found = helm.find(helm_path)
    if helm_path and found is None:
        _fail(f"--helm: {helm_path!r} is not an executable file")
    if found is None:
        # Debug only: a helmchart component's refusal says how to install Helm where its
        # user reads it, and an info line here would precede every start-up error.
        logging.getLogger(__name__).debug("no Helm binary: %s", helm.MISSING)
    return applications.ApplicationSettings(
        local_cluster=local_cluster, cleanup_wait=cleanup_wait,
        definition_namespaces=tuple(n.strip() for n in definition_namespaces.split(",")
                                    if n.strip()),
        charts=charts.ChartSettings(policy=egress.EgressPolicy(
            egress.parse_networks(chart_allow), own), helm=found),
        export_allow=Allow.parse(export_allow))


def _work_server(work_bind_address: str, work_hosts: str,
                 mgr: manager.Manager) -> WorkServer | None:
    """The pull members' work server, unless ``--work-bind-address 0``. A replica that does
    not serve (does not lead; with ``--shards``, holds no shard) says so to the agents that
    reach it: they dial again. With shards every holder serves, numbering its own writes,
    and records the renewals of the clusters whose renewal key it owns (docs/runtime.md,
    "Pull members with shards")."""
    if work_bind_address == "0":
        return None
    from federation.work.server import WorkServer, renewal_key
    hosts = _split(work_hosts) or ["127.0.0.1"]
    shards = mgr.settings.shards
    if not shards:
        work = WorkServer(hosts=hosts)
        work.leading = lambda: mgr.is_leader
        return work
    work = WorkServer(hosts=hosts, replica=mgr.identity, replicas=shards)

    def holding() -> bool:
        """Serving: it holds a shard (its keys' writes) or leads (the members' health)."""
        peers = mgr.peers
        return mgr.is_leader or (peers is not None and peers.shard is not None and
                                 peers.revoked is None)

    def serving() -> int:
        """The replicas an agent should stream to: the shards' holders and the leader."""
        replicas = mgr.peers.holders() if mgr.peers is not None else set()
        leader = mgr.identity if mgr.is_leader else \
            (mgr.elector.holder if mgr.elector is not None else "")
        return len(replicas | ({leader} if leader else set())) or 1

    def renews(cluster: str) -> str | None:
        peers = mgr.peers
        return "no shard yet" if peers is None else peers.permit(renewal_key(cluster))

    work.leading = holding
    work.serving = serving
    work.renews = renews
    return work


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def _check_serving(settings: manager.ManagerSettings, work_bind_address: str) -> None:
    """Refuse bad serving flags before anything starts (ValueError naming the flag)."""
    manager.parse_bind_address(settings.metrics_bind_address)
    manager.parse_bind_address(settings.health_probe_bind_address)
    if settings.metrics_cert_dir is not None:
        if not settings.metrics_secure:
            raise ValueError("--metrics-cert-dir is only used with --metrics-secure")
        auth.server_tls(settings.metrics_cert_dir, "localhost")  # fail now, naming the file


def _cluster_set(kubeconfig_path: Path | None, hub_context: str | None, contexts: str | None,
                 disabled_contexts: str, client_settings: kube.ClientSettings
                 ) -> clusters.ClusterSet:
    """The hub and static members (the allowlist covers their exec plugins too)."""
    config = incluster.load(kubeconfig_path)  # no kubeconfig in a pod: its ServiceAccount
    return clusters.ClusterSet.from_kubeconfig(
        config, hub_context=hub_context, contexts=_split(contexts),
        disabled=_split(disabled_contexts) or [],
        settings=clusters.ClusterSettings(client=client_settings))


def _serve_until_stopped(mgr: manager.Manager, work: WorkServer | None, work_bind_address: str,
                         reloaders: ReloaderCaller) -> None:
    """Run the manager (and the work server) until a signal; errors exit 1 with a line."""
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(serve(mgr, work, work_bind_address, reloaders))
    except manager.LeadershipLost as exc:
        _fail(str(exc))
    except (kube.ClientError, TimeoutError) as exc:
        hint = ""
        if isinstance(exc, kube.ApiError) and exc.status == 403:
            hint = " (run `fedctl install` as an admin of the hub first: it creates the CRDs "\
                   "and the control plane's RBAC)"
        _fail(f"cannot install the hub API: {exc}{hint}")
    except (ValueError, OSError) as exc:  # a port in use, a certificate that will not load
        # (the work CA Secret missing or unusable is an IdentityError, a ValueError)
        _fail(str(exc))
