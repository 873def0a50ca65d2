"""``fedctl interpret``: run or check a ResourceInterpreterCustomization offline.

Modelled on ``karmadactl interpret``: the same flags (``-f``, ``--operation``,
``--observed-file``, ``--desired-file``, ``--status-file``, ``--desired-replica``,
``--check``) and the same output, per result a ``---`` line, a ``# [i/n] NAME:`` line and
the value as YAML. The customization runs in the same sandbox and with the same budget as
in the control plane (docs/interpreter.md). Needs no cluster, writes nothing.

Exit status: 0 done (or every script loads), 1 bad input, a script that failed or does not
load.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import yaml

from federation.interpreter import customizations as customizations_
from federation.interpreter import declarative, engine, lua
from federation.interpreter.customizations import CustomizationError, Operation
from federation.untrusted import documents

OPERATIONS = [o.value for o in Operation]


def _documents(path: str) -> list[Any]:
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise click.ClickException(f"{path}: {exc.strerror or exc}") from None
    try:
        return [d for d in documents.yaml_documents(documents.decode(data)) if d is not None]
    except documents.TextError as exc:
        raise click.ClickException(f"{path}: {exc}") from None


def _one_object(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    found = _documents(path)
    if len(found) != 1 or not isinstance(found[0], dict):
        raise click.ClickException(f"{path}: expected exactly one object")
    return found[0]


def _status_items(paths: tuple[str, ...]) -> list[dict[str, Any]] | None:
    if not paths:
        return None
    items: list[dict[str, Any]] = []
    for path in paths:
        for document in _documents(path):
            listed = document if isinstance(document, list) else [document]
            if not all(isinstance(item, dict) for item in listed):
                raise click.ClickException(f"{path}: status items must be objects")
            items.extend(listed)
    return items


def load_customizations(paths: tuple[str, ...]) -> list[customizations_.Customization]:
    found = []
    for path in paths:
        for document in _documents(path):
            if not isinstance(document, dict):
                raise click.ClickException(f"{path}: a customization must be an object")
            try:
                found.append(customizations_.parse(document))
            except CustomizationError as exc:
                raise click.ClickException(f"{path}: {exc}") from None
    if not found:
        raise click.ClickException("no ResourceInterpreterCustomization in -f")
    return found


def check(found: list[customizations_.Customization]) -> bool:
    """karmadactl's --check: each customization's target and whether each script loads."""
    ok = True
    for customization in found:
        click.echo("-----------------------------------")
        click.echo(f"SOURCE: {customization.name}")
        click.echo(f"TARGET: {customization.target.api_version} {customization.target.kind}")
        click.echo("RULERS:")
        for operation in Operation:
            script = customization.script(operation)
            problem = None if script is None else lua.check(script)
            state = "UNSET" if script is None else f"ERROR: {problem}" if problem else "PASS"
            ok = ok and problem is None
            click.echo(f"    {operation.value}:\t{state}")
    return ok


def print_results(results: declarative.Results) -> None:
    for index, (name, value) in enumerate(results, start=1):
        click.echo("---")
        click.echo(f"# [{index}/{len(results)}] {name}:")
        text = yaml.safe_dump(value, sort_keys=True)
        click.echo(text.removesuffix("...\n").rstrip())  # a scalar prints as Go's yaml does


@click.command(name="interpret")
@click.option("-f", "--filename", "files", multiple=True, required=True,
              help="ResourceInterpreterCustomization file(s); - for stdin.")
@click.option("--operation", type=click.Choice(OPERATIONS, case_sensitive=False),
              help="The operation to run.")
@click.option("--observed-file", help="The object as a member observes it.")
@click.option("--desired-file", help="The object as the hub wants it.")
@click.option("--status-file", "status_files", multiple=True,
              help="AggregatedStatusItems for AggregateStatus (a list or documents).")
@click.option("--desired-replica", type=int, default=0, show_default=True,
              help="The replicas ReviseReplica is given.")
@click.option("--check", "check_only", is_flag=True, help="Only check that each script loads.")
def interpret(files: tuple[str, ...], operation: str | None, observed_file: str | None,
              desired_file: str | None, status_files: tuple[str, ...],
              desired_replica: int, check_only: bool) -> None:
    """Run one operation of a customization on given objects, or check its scripts."""
    found = load_customizations(files)
    if check_only:
        sys.exit(0 if check(found) else 1)
    if operation is None:
        raise click.ClickException("operation is not set for executing (--operation)")
    chosen = Operation.named(operation)
    args = declarative.Arguments(desired=_one_object(desired_file),
                                 observed=_one_object(observed_file),
                                 status_items=_status_items(status_files),
                                 replicas=desired_replica)
    try:
        print_results(engine.execute(customizations_.Registry(found), chosen, args))
    except lua.ScriptError as exc:
        click.echo(f"Execute {chosen.value} error: {exc}", err=True)
        sys.exit(1)
