"""``fedctl reloader-cert``: a reloader's server certificate from the hub's reloader CA.

The rollout controller calls reloaders with a client certificate from the hub Secret
``federation-system/federation-reloader-ca`` and accepts only servers that CA signed for
the name ``reloader.federation.io`` (docs/rollouts.md). The local fleet's simulator makes
its reloaders' files itself; for real sidecars an admin runs this once with hub credentials
that may create Secrets in ``federation-system`` (``fedctl run`` under its least-privilege
RBAC may only read the CA): it makes the CA when it is missing and writes ``tls.crt``,
``tls.key`` (0600) and ``ca.crt`` for the sidecar's Secret. Every reloader may share one
certificate: it names the service, not a pod.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from federation.commands import reloader_ca
from federation.contexts import client as kube
from federation.contexts import kubeconfig
from federation.hub.rollouts import RELOADER_CLIENT_NAME


@click.command("reloader-cert")
@click.option("--out-dir", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Where tls.crt, tls.key and ca.crt are written.")
@click.option("--hub-kubeconfig", type=click.Path(path_type=Path), default=None,
              help="Kubeconfig of the hub (default: $KUBECONFIG or ~/.kube/config).")
@click.option("--hub-context", "--context", "hub_context", default=None,
              help="Context of the hub (default: current; --context is kubectl's spelling).")
def reloader_cert(out_dir: Path, hub_kubeconfig: Path | None, hub_context: str | None) -> None:
    """Write a reloader's server certificate (the CA is made on first use)."""
    try:
        context = kubeconfig.load(hub_kubeconfig).context(hub_context)
    except kubeconfig.KubeconfigError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        paths = asyncio.run(_write(context, out_dir))
    except kube.ClientError as exc:
        raise click.ClickException(f"the reloaders' CA on the hub: {exc}") from None
    click.echo(f"wrote {paths['cert']}, {paths['key']} and {paths['ca']}; serve with:\n"
               f"  fedctl reloader --tls-cert {paths['cert']} --tls-key {paths['key']} "
               f"--tls-ca {paths['ca']} --allow-client {RELOADER_CLIENT_NAME} "
               "--namespace <the workload's namespace, or $POD_NAMESPACE> ...")


async def _write(context: kubeconfig.Context, out_dir: Path) -> dict[str, Path]:
    async with kube.connect(context) as hub:
        return await reloader_ca.server_files(hub, out_dir)
