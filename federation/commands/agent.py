"""``fedctl agent``: run a pull member's agent (see :mod:`federation.agent.agent`).

Every path and address is checked before anything starts: a missing certificate file or a
certificate that names another cluster is one ``error:`` line naming the flag, exit 1. With
``--tls-secret`` (in a pod) the Secret is read first, and one that cannot be read or holds
another cluster's certificate is such a line too, naming the Secret.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import click

from federation.commands import common
from federation.contexts import client as kube
from federation.contexts import incluster, kubeconfig

log = logging.getLogger("federation.agent")


def _read(flag: str, path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise click.ClickException(f"{flag} {path}: {exc.strerror}") from None


@click.command()
@click.option("--hub-address", required=True,
              help="The control plane's work server, HOST:PORT (its --work-bind-address); "
                   "with a sharded control plane one per replica may be given, comma-"
                   "separated (one address behind a Service reaches them all too).")
@click.option("--cluster-name", required=True, help="This member's name on the hub.")
@click.option("--kubeconfig", "kubeconfig_path", type=click.Path(path_type=Path),
              default=None, help="Kubeconfig of this member (default: $KUBECONFIG, else "
                                 "~/.kube/config); the agent applies with these credentials.")
@click.option("--context", default=None, help="Its context (default: the current one).")
@click.option("--tls-cert", type=click.Path(path_type=Path), default=None,
              help="The agent's client certificate (from `fedctl join NAME --mode pull`); "
                   "renewed in place, for the same key, before it expires.")
@click.option("--tls-key", type=click.Path(path_type=Path), default=None,
              help="Its private key (mode 0600).")
@click.option("--tls-ca", type=click.Path(path_type=Path), default=None,
              help="The work CA, to verify the hub's certificate.")
@click.option("--tls-secret", default=None, metavar="NAMESPACE/NAME",
              help="Instead of the three files: a Secret of this member holding tls.crt, "
                   "tls.key and ca.crt, read with the agent's credentials; renewals are "
                   "written back to it (needs get and update of it).")
@click.option("--tls-server-name", default=None,
              help="Name to verify in the hub's certificate when --hub-address is not in it.")
@click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False),
              default=Path(".federation-agent"), show_default=True,
              help="Where the generations applied are kept (resume without re-applying); "
                   "made or tightened to mode 0700, and no Secret's data is written there.")
@click.option("--health-probe-bind-address", default="127.0.0.1:8091", show_default=True,
              help='/healthz and /readyz address; "0" disables.')
@click.option("--metrics-bind-address", default="127.0.0.1:8090", show_default=True,
              help='/metrics address; "0" disables.')
@common.clear_errors
def agent(hub_address: str, cluster_name: str, kubeconfig_path: Path | None,
          context: str | None, tls_cert: Path | None, tls_key: Path | None,
          tls_ca: Path | None, tls_secret: str | None, tls_server_name: str | None,
          state_dir: Path, health_probe_bind_address: str, metrics_bind_address: str) -> None:
    """Run a pull member's agent: dial the hub, apply its work, stream state back."""
    from federation.agent import credentials
    from federation.agent.agent import Agent, AgentSettings

    if logging.getLogger().level > logging.INFO:
        logging.getLogger().setLevel(logging.INFO)
    secret_ref = _credential_source(tls_cert, tls_key, tls_ca, tls_secret, cluster_name)
    try:  # no kubeconfig in a pod: the pod's ServiceAccount (contexts.incluster)
        client = kube.ClusterClient(incluster.load(kubeconfig_path).context(context))
    except kubeconfig.KubeconfigError as exc:
        raise click.ClickException(str(exc)) from None
    client.user_agent = kube.user_agent(f"agent {cluster_name}")
    settings = AgentSettings(hub_address=hub_address, cluster=cluster_name, tls_cert=tls_cert,
                             tls_key=tls_key, tls_ca=tls_ca, state_dir=state_dir,
                             tls_server_name=tls_server_name, tls_secret=secret_ref)
    try:
        the_agent = Agent(settings, client)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, task.cancel)
        try:  # a Secret that cannot be used stops the start, naming it
            await the_agent.load()
        except (credentials.CredentialsError, kube.ClientError) as exc:
            await client.close()
            raise click.ClickException(str(exc)) from None
        runners = await the_agent.serve(_address(health_probe_bind_address),
                                        _address(metrics_bind_address))
        try:
            await the_agent.run()
        except asyncio.CancelledError:
            log.info("agent of %s stopping", cluster_name)
        finally:
            await the_agent.worker.stop()
            for runner in runners:
                await runner.cleanup()
            await client.close()

    asyncio.run(main())


def _credential_source(tls_cert: Path | None, tls_key: Path | None, tls_ca: Path | None,
                       tls_secret: str | None, cluster: str) -> tuple[str, str] | None:
    """The Secret named by ``--tls-secret``, or None after checking the three files."""
    from federation.agent import credentials
    from federation.work import identity

    files = {"--tls-cert": tls_cert, "--tls-key": tls_key, "--tls-ca": tls_ca}
    if tls_secret is not None:
        given = [flag for flag, path in files.items() if path is not None]
        if given:
            raise click.ClickException(f"--tls-secret and {', '.join(given)} are exclusive: "
                                       "the credentials come from one place")
        try:
            return credentials.parse_secret_ref(tls_secret)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
    missing = [flag for flag, path in files.items() if path is None]
    if missing:
        raise click.ClickException(f"missing {', '.join(missing)} (or give --tls-secret)")
    assert tls_cert is not None and tls_key is not None and tls_ca is not None
    cert = _read("--tls-cert", tls_cert)
    _read("--tls-key", tls_key)
    _read("--tls-ca", tls_ca)
    try:
        named = identity.common_name(cert)
    except ValueError:
        raise click.ClickException(f"--tls-cert {tls_cert}: not a PEM certificate") from None
    if named != cluster:
        raise click.ClickException(f"--tls-cert {tls_cert} names cluster {named!r}, not "
                                   f"--cluster-name {cluster!r}")
    return None


def _address(value: str) -> str | None:
    return None if value == "0" else value
