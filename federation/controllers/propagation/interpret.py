"""Transformer: the template's replicas from a ResourceInterpreterCustomization.

When a customization scripts InterpretReplica for the template's kind, its answer is the
replica count the placement engine divides (:mod:`.customized` runs it); otherwise the
built-in interpreter reads the template (``spec.replicas``, a Job's parallelism...).
"""

from __future__ import annotations

from federation.controllers.kit.chain import Problem, Verdict
from federation.controllers.propagation import customized
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.interpreter import declarative
from federation.interpreter.customizations import Operation


async def interpret_replicas(ctx: TransformContext, build: Build) -> Verdict | None:
    """Transformer: the template's replicas from its customization's InterpretReplica."""
    args = declarative.Arguments(desired=customized.as_json(build.template))
    found = await customized.ask(ctx, Operation.INTERPRET_REPLICA, args, build.template)
    if found is not None:
        replicas = found["replica"]
        if not 0 <= replicas <= 2**31 - 1:
            raise Problem("Scheduled", "InterpreterFailed",
                          f"InterpretReplica gave {replicas} replicas")
        build.interpreted_replicas = replicas
    return None
