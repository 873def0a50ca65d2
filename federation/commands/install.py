"""``fedctl install``: the hub API (CRDs), and optionally MemberClusters from a file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click
import yaml

from federation.commands import common
from federation.contexts import client as kube
from federation.contexts import kubeconfig
from federation.controllers import install as installer


@click.command()
@common.cluster_options
@click.option("--clusters", "clusters_file", type=click.Path(exists=True, path_type=Path),
              default=None, help="Register MemberClusters from a `fedctl plan --clusters` file "
                                 "(each name is also the member's context).")
@common.clear_errors
def install(kubeconfig_path: Path | None, hub_context: str | None,
            clusters_file: Path | None) -> None:
    """Install the federation CRDs on the hub (idempotent)."""
    config = kubeconfig.load(kubeconfig_path)
    context = config.context(hub_context)
    entries = []
    if clusters_file is not None:
        document = yaml.safe_load(clusters_file.read_text()) or {}
        entries = list(document.get("clusters") or [])
        if not all(isinstance(e, dict) and e.get("name") for e in entries):
            raise click.ClickException(f"{clusters_file}: clusters[] entries need a name")

    async def go() -> tuple[list[str], list[str]]:
        async with kube.connect(context) as hub:
            crds = await installer.install_crds(hub)
            registered = await installer.register_clusters(hub, entries)
            return crds, registered

    crds, registered = asyncio.run(go())
    click.echo(f"installed {len(crds)} CRDs on {context.name}")
    if registered:
        click.echo(f"registered MemberClusters: {', '.join(registered)}")
