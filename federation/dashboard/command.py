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
from federation.contexts import kubeconfig
from federation.dashboard import server
from federation.dashboard.mirror import Mirror


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
@clear_errors
def dashboard(kubeconfig_path: Path | None, hub_context: str | None, address: str, port: int,
              namespaces: tuple[str, ...]) -> None:
    """Serve the fleet dashboard, reading and acting with your kubeconfig identity."""
    context = kubeconfig.load(kubeconfig_path).context(hub_context)
    if not loopback(address):
        click.echo(f"warning: serving on {address}, not loopback: anyone who can reach it and "
                   "holds the link acts on the hub as you", err=True)
    factory = run_command.event_loop_factory()
    with asyncio.Runner(loop_factory=factory) as runner:
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
