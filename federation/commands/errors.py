"""Expected failures as one clear error on stderr, for every ``fedctl`` command.

Kept free of heavy imports so that commands which never touch the client stack
(``fedctl local status``) do not load it just to report an error.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def clear_errors_for(*expected: type[BaseException]) -> Callable[[F], F]:
    """A decorator turning ``expected`` exceptions into ``error: ...`` and exit status 1."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except expected as exc:
                click.echo(f"error: {str(exc) or type(exc).__name__}", err=True)
                sys.exit(1)

        return wrapper  # type: ignore[return-value]

    return decorate
