"""``fedctl reloader``: serve Reconfigure next to a process (see :mod:`federation.reloader`).

Every path and the action file are checked before anything listens: a missing certificate
file or a bad action field is one ``error:`` line naming the flag or the field, exit 1.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import click

from federation.commands import common

log = logging.getLogger("federation.reloader")


def _check_file(flag: str, path: Path) -> None:
    try:
        path.read_bytes()
    except OSError as exc:
        raise click.ClickException(f"{flag} {path}: {exc.strerror}") from None


@click.command()
@click.option("--config-dir", type=click.Path(path_type=Path, file_okay=False),
              required=True, help="The workload's config directory (its mounted ConfigMap).")
@click.option("--action", "action_file", type=click.Path(path_type=Path), required=True,
              help="YAML file with the action OnlineUpgradeParams runs (kind: signal, exec, "
                   "http or template; see docs/rollouts.md).")
@click.option("--pid-file", type=click.Path(path_type=Path), default=None,
              help="The process StopContainer sends SIGTERM to.")
@click.option("--bind-address", default="127.0.0.1:9901", show_default=True,
              help="Where Reconfigure is served (gRPC, mutual TLS).")
@click.option("--tls-cert", type=click.Path(path_type=Path), required=True,
              help="The reloader's serving certificate.")
@click.option("--tls-key", type=click.Path(path_type=Path), required=True,
              help="Its private key (mode 0600).")
@click.option("--tls-ca", type=click.Path(path_type=Path), required=True,
              help="The CA that signs the callers' client certificates.")
@click.option("--allow-client", "allowed_clients", multiple=True,
              help="A client certificate common name allowed to call (repeatable; default: "
                   "any certificate --tls-ca signed).")
@click.option("--namespace", envvar="POD_NAMESPACE", required=True,
              help="The namespace of the workload this reloader serves (default: "
                   "$POD_NAMESPACE, from the downward API). A call meant for another "
                   "namespace's workload is refused: EndpointSlices, where callers find "
                   "reloaders, can be shaped by a namespace's owner.")
@click.option("--poll-interval", type=click.FloatRange(min=0.1), default=2.0,
              show_default=True, help="Seconds between scans of --config-dir.")
@click.option("--reload-on-change", is_flag=True,
              help="Also run the action (no parameters) when --config-dir changes.")
@click.option("--health-probe-bind-address", default="127.0.0.1:9902", show_default=True,
              help='/healthz and /readyz address; "0" disables.')
@common.clear_errors
def reloader(config_dir: Path, action_file: Path, pid_file: Path | None, bind_address: str,
             tls_cert: Path, tls_key: Path, tls_ca: Path, allowed_clients: tuple[str, ...],
             namespace: str, poll_interval: float, reload_on_change: bool,
             health_probe_bind_address: str) -> None:
    """Serve Reconfigure (OnlineUpgradeParams, StopContainer) for one process."""
    from federation.reloader import actions
    from federation.reloader.server import Reloader, ReloaderSettings

    if logging.getLogger().level > logging.INFO:
        logging.getLogger().setLevel(logging.INFO)
    for flag, path in (("--tls-cert", tls_cert), ("--tls-key", tls_key),
                       ("--tls-ca", tls_ca)):
        _check_file(flag, path)
    if not config_dir.is_dir():
        raise click.ClickException(f"--config-dir {config_dir}: not a directory")
    if not namespace:
        raise click.ClickException("--namespace (or $POD_NAMESPACE) is empty: name the "
                                   "namespace of the workload this reloader serves")
    try:
        action = actions.load(action_file)
    except actions.ActionError as exc:
        raise click.ClickException(f"--action {exc}") from None
    if isinstance(action, actions.SignalAction) and pid_file is None:
        pid_file = action.pid_file
    settings = ReloaderSettings(config_dir=config_dir, action=action, tls_cert=tls_cert,
                                tls_key=tls_key, tls_ca=tls_ca, pid_file=pid_file,
                                allowed_clients=allowed_clients, namespace=namespace,
                                poll_interval=poll_interval,
                                reload_on_change=reload_on_change)
    the_reloader = Reloader(settings)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, task.cancel)
        await the_reloader.scan()
        await the_reloader.start(bind_address)
        runner = None
        if health_probe_bind_address != "0":
            runner = await the_reloader.serve_health(health_probe_bind_address)
        try:
            await the_reloader.watch()
        except asyncio.CancelledError:
            log.info("reloader stopping")
        finally:
            await the_reloader.stop()
            if runner is not None:
                await runner.cleanup()

    asyncio.run(main())
