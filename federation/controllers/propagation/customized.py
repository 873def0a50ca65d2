"""The hub's ResourceInterpreterCustomizations in propagation: replicas, revision, retain.

Not a transformer but reads several share (as :mod:`.lookups`): :mod:`.interpret` asks
InterpretReplica before the schedule; application failover and the eviction tasks ask
InterpretHealth (:func:`healthy`); render asks ReviseReplica for each cluster's copy
and plan_copies asks Retain before comparing a copy with the member's object. Each asks only when a
customization scripts that operation for the template's kind; otherwise the built-in
interpreter (:mod:`federation.interpreter.native`, through :mod:`federation.hub.manifests`)
decides. A script that fails, runs out of budget or whose customization does not parse
stops the reconcile with ``InterpreterFailed``, naming the customization and the operation,
and nothing is written: a copy written without a member's retained fields would fight its
owner, a copy with a guessed replica count would misplace the workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from federation.contexts.client import ApiError
from federation.controllers.kit.chain import Problem
from federation.controllers.kit.interpreting import InterpretError
from federation.controllers.propagation.context import TransformContext
from federation.hub import api
from federation.interpreter import declarative, native
from federation.interpreter.customizations import Operation

JSON = dict[str, Any]

async def _customizations(ctx: TransformContext) -> list[Mapping[str, Any]]:
    try:
        return list(await ctx.list(api.INTERPRETER_CUSTOMIZATIONS))
    except ApiError as exc:
        if exc.status == 404:
            return []  # the hub does not serve the kind (not installed yet): none exist
        raise


async def ask(ctx: TransformContext, operation: Operation, args: declarative.Arguments,
               subject: Mapping[str, Any]) -> dict[str, Any] | None:
    """:func:`interpret`, a failure stopping the reconcile (the write path's rule)."""
    try:
        return await interpret(ctx, operation, args, subject)
    except InterpretError as exc:
        raise Problem("Applied", "InterpreterFailed", str(exc)) from None


async def interpret(ctx: TransformContext, operation: Operation, args: declarative.Arguments,
                    subject: Mapping[str, Any]) -> dict[str, Any] | None:
    """``operation`` of the customization for ``subject``'s kind, None when none scripts it
    (the built-in decides); :class:`InterpretError` naming the customization and the
    operation when it fails."""
    return await ctx.interpreting.run(await _customizations(ctx), operation, args, subject)


async def chosen(ctx: TransformContext, operation: Operation,
                 subject: Mapping[str, Any]) -> str | None:
    """The customization whose script answers ``operation`` for ``subject``'s kind, None
    when the built-in does (nothing is run)."""
    registry, _ = ctx.interpreting.registry(await _customizations(ctx))
    found = registry.choose(subject, operation)
    return found.customization if found is not None else None


def as_json(obj: Mapping[str, Any]) -> JSON:
    return cast(JSON, obj)


async def revise(ctx: TransformContext, manifest: JSON, replicas: int) -> JSON:
    """``manifest`` with ``replicas`` set by its customization's ReviseReplica, if any."""
    found = await ask(ctx, Operation.REVISE_REPLICA,
                       declarative.Arguments(desired=manifest, replicas=replicas), manifest)
    return manifest if found is None else cast(JSON, found["revised"])


async def retain(ctx: TransformContext, desired: JSON, live: Mapping[str, Any]) -> JSON:
    """``desired`` with the fields its customization's Retain takes from ``live``, if any;
    the digest annotation of what we meant to write is kept as it was."""
    found = await ask(ctx, Operation.RETAIN,
                       declarative.Arguments(desired=desired, observed=as_json(live)), desired)
    if found is None:
        return desired
    retained = cast(JSON, found["retained"])
    retained["metadata"] = desired.get("metadata", {})
    return retained


async def healthy(ctx: TransformContext, copy: Mapping[str, Any]) -> bool | None:
    """InterpretHealth of a member copy: its customization's, else the built-in one; None
    for a kind no interpreter knows (Karmada does not fail such a workload over)."""
    args = declarative.Arguments(observed=as_json(copy))
    found = await ask(ctx, Operation.INTERPRET_HEALTH, args, copy)
    if found is not None:
        return bool(found["healthy"])
    check = native.HEALTH.get(str(copy.get("kind")))
    return None if check is None else check(copy)
