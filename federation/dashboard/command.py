"""``fedctl dashboard``: serve the dashboard with the user's kubeconfig identity."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import sys
from pathlib import Path

import click
from aiohttp import web

from federation.commands import run as run_command
from federation.commands.common import clear_errors, cluster_options
from federation.contexts import client as kube
from federation.contexts import incluster, kubeconfig
from federation.dashboard import incluster as users
from federation.dashboard import server
from federation.dashboard.mirror import Mirror
from federation.runtime import auth


def loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


@click.command("dashboard")
@cluster_options
@click.option("--address", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but loopback lets others on that network "
                   "reach the dashboard (they still need the printed link).")
@click.option("--port", type=click.IntRange(0, 65535), default=8090, show_default=True,
              help="Port to listen on (0: any free port).")
@click.option("-n", "--namespace", "namespaces", multiple=True,
              help="Read only this namespace (repeatable). Default: every namespace, or the "
                   "context's namespace when you may not list cluster-wide.")
@click.option("--in-cluster", is_flag=True,
              help="Serve many users over HTTPS, each by their own bearer token (TokenReview "
                   "with this identity, then every read and write with the user's token): "
                   "the control plane's Deployment runs it so (config/dashboard).")
@click.option("--cert-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="With --in-cluster: tls.crt and tls.key (default: a self-signed "
                   "certificate made at start).")
@click.option("--public-host", "public_hosts", multiple=True,
              help="With --in-cluster: a name the dashboard is reached by (repeatable); the "
                   "Host header must be one. Default: any.")
@clear_errors
def dashboard(kubeconfig_path: Path | None, hub_context: str | None, address: str, port: int,
              namespaces: tuple[str, ...], in_cluster: bool, cert_dir: Path | None,
              public_hosts: tuple[str, ...]) -> None:
    """Serve the fleet dashboard, reading and acting with your kubeconfig identity."""
    if not in_cluster and (cert_dir or public_hosts):
        raise click.UsageError("--cert-dir and --public-host are for --in-cluster")
    context = incluster.load(kubeconfig_path).context(hub_context)
    if not in_cluster and not loopback(address):
        click.echo(f"warning: serving on {address}, not loopback: anyone who can reach it and "
                   "holds the link acts on the hub as you", err=True)
    factory = run_command.event_loop_factory()
    with asyncio.Runner(loop_factory=factory) as runner:
        if in_cluster:
            runner.run(serve_users(context, address, port, namespaces, cert_dir,
                                   public_hosts))
        else:
            runner.run(serve(context, address, port, namespaces))


def listen(address: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is served (``--port 0`` then has its
    real port for the Host and Origin checks)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve(context: kubeconfig.Context, address: str, port: int,
                namespaces: tuple[str, ...]) -> None:
    sock = listen(address, port)
    settings = server.Settings(context, address, int(sock.getsockname()[1]))
    client = kube.ClusterClient(context)
    mirror = Mirror(client, namespaces, context.namespace)
    runner = web.AppRunner(server.Dashboard(settings, client, mirror).app(), access_log=None)
    try:
        await runner.setup()
        await web.SockSite(runner, sock).start()
        click.echo(f"dashboard: {settings.link()}")
        click.echo("  (the link holds this session's key: do not share it; Ctrl-C stops)")
        sys.stdout.flush()
        await mirror.run()
    finally:
        await runner.cleanup()
        await client.close()


async def serve_users(context: kubeconfig.Context, address: str, port: int,
                      namespaces: tuple[str, ...], cert_dir: Path | None,
                      public_hosts: tuple[str, ...]) -> None:
    """``--in-cluster``: HTTPS; our identity only for TokenReviews (:mod:`.incluster`)."""
    tls, fingerprint = auth.server_tls(cert_dir, address)
    sock = listen(address, port)
    front = users.Front(int(sock.getsockname()[1]), public_hosts)
    settings = auth.AuthSettings()
    own = kube.ClusterClient(context, kube.ClientSettings(qps=settings.review_qps,
                                                          burst=settings.review_burst))
    sessions = users.Sessions(context, front, auth.Reviewer(own, settings), namespaces)
    runner = web.AppRunner(users.app(sessions), access_log=None)
    try:
        await runner.setup()
        await web.SockSite(runner, sock, ssl_context=tls).start()
        click.echo(f"dashboard: https://{address}:{front.port}/ (each user signs in with "
                   f"their own token; TLS certificate SHA-256 {fingerprint})")
        sys.stdout.flush()
        await sessions.run()
    finally:
        await runner.cleanup()
        await own.close()
