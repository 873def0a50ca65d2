"""Options and helpers shared by the commands that talk to clusters."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from federation.commands import errors
from federation.contexts import client as kube
from federation.contexts import kubeconfig

F = TypeVar("F", bound=Callable[..., Any])


def cluster_options(func: F) -> F:
    """--kubeconfig and --hub-context (or kubectl's --context), as `fedctl run` spells them."""
    func = click.option("--hub-context", "--context", "hub_context", default=None,
                        help="Context of the hub (default: the current context); "
                             "--context is kubectl's spelling.")(func)
    func = click.option("--kubeconfig", "kubeconfig_path", type=click.Path(path_type=Path),
                        default=None,
                        help="Kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).")(func)
    return func


clear_errors = errors.clear_errors_for(kubeconfig.KubeconfigError, kube.ClientError,
                                      TimeoutError, OSError)
"""Expected failures (bad kubeconfig, unreachable cluster) as one error, exit status 1."""


def split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]
