"""``fedctl version``: which fedctl this is, and on which Python.

One line, so an image's smoke test, a bug report or ``kubectl exec`` into a pod can tell the
version without a shell: ``fedctl 0.1.0 (Python 3.11.2, Linux x86_64)``. The version is the
one the User-Agent of every request carries (:data:`federation.__version__`).
"""

from __future__ import annotations

import platform

import click

from federation import __version__


def line() -> str:
    """The version line."""
    return (f"fedctl {__version__} (Python {platform.python_version()}, "
            f"{platform.system()} {platform.machine()})")


@click.command()
def version() -> None:
    """Print fedctl's version and the Python it runs on."""
    click.echo(line())
