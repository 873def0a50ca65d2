"""Options and helpers shared by the commands that talk to clusters."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from federation.contexts import client as kube
from federation.contexts import kubeconfig

F = TypeVar("F", bound=Callable[..., Any])


def cluster_options(func: F) -> F:
    """--kubeconfig and --hub-context, as `fedctl run` spells them."""
    func = click.option("--hub-context", default=None,
                        help="Context of the hub (default: the current context).")(func)
    func = click.option("--kubeconfig", "kubeconfig_path", type=click.Path(path_type=Path),
                        default=None,
                        help="Kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).")(func)
    return func


def clear_errors(func: F) -> F:
    """Expected failures (bad kubeconfig, unreachable cluster) as one line, exit status 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (kubeconfig.KubeconfigError, kube.ClientError, TimeoutError, OSError) as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]
