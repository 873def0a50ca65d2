"""``fedctl completion bash|zsh|fish``: print the shell's completion script.

Click completes sub-commands, options and choices itself once the shell asks it through
``_FEDCTL_COMPLETE``; this command prints the hook that makes the shell ask, as
``kubectl completion bash`` does, so a user can ``source <(fedctl completion bash)``.
"""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

SHELLS = ("bash", "zsh", "fish")
PROGRAM = "fedctl"
VARIABLE = "_FEDCTL_COMPLETE"
"""The environment variable the script sets when it asks fedctl for completions (click's
rule: ``_<PROG>_COMPLETE``)."""


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print SHELL's completion script: `source <(fedctl completion bash)`."""
    from federation.cli import cli

    found = get_completion_class(shell)
    assert found is not None  # every name in SHELLS is one click ships
    click.echo(found(cli, {}, PROGRAM, VARIABLE).source())
