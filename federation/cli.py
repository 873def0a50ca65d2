"""The ``fedctl`` command line.

Sub-commands live in :mod:`federation.commands`, one module per command group,
and are imported only when invoked: ``fedctl local status`` must not pay for
importing the asyncio client stack, and a command group that fails to import
must not take the others down with it.
"""

from __future__ import annotations

import importlib
import logging
import sys

import click

#: command name -> "module:attribute" of the click command implementing it.
COMMANDS: dict[str, tuple[str, str]] = {
    "app": ("federation.commands.app:app",
            "KubeVela Applications: dry-run, status, revisions, resume, restart, rollback."),
    "agent": ("federation.commands.agent:agent",
              "Run a pull member's agent: dial the hub's work server, apply its work."),
    "completion": ("federation.commands.completion:completion",
                   "Print a shell completion script (bash, zsh, fish)."),
    "dashboard": ("federation.dashboard.command:dashboard",
                  "Serve the fleet dashboard in a browser, as you (127.0.0.1)."),
    "get": ("federation.commands.get:get", "Show objects of a kind across member clusters."),
    "install": ("federation.commands.install:install",
                "Install the hub API (CRDs) and the control plane's RBAC."),
    "interpret": ("federation.commands.interpret:interpret",
                  "Run or check a ResourceInterpreterCustomization offline."),
    "join": ("federation.commands.join:join",
             "Register a member cluster with only its own credentials."),
    "local": ("federation.commands.local:local", "Run a local fleet of real API servers."),
    "plan": ("federation.commands.plan:plan", "Compute placements offline from policy files."),
    "rbac": ("federation.commands.rbac:rbac",
             "Print the control plane's least-privilege RBAC for hub and members."),
    "reloader": ("federation.commands.reloader:reloader",
                 "Serve Reconfigure next to a process: reload it online, or stop it."),
    "reloader-cert": ("federation.commands.reloader_cert:reloader_cert",
                      "Write a reloader's server certificate from the hub's reloader CA."),
    "run": ("federation.commands.run:run", "Run the federation control plane."),
    "unjoin": ("federation.commands.join:unjoin",
               "Remove a member cluster after its workloads moved away (or --orphan)."),
    "version": ("federation.commands.version:version",
                "Print fedctl's version and the Python it runs on."),
}


class LazyGroup(click.Group):
    """A group whose sub-commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module_name, _, attr = COMMANDS[cmd_name][0].partition(":")
        module = importlib.import_module(module_name)
        command = getattr(module, attr)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, help_text) in sorted(COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """fedctl: a multi-cluster Kubernetes federation control plane."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main() -> None:
    try:
        cli(standalone_mode=True)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
