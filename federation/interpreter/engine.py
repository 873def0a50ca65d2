"""The operations through the customizations in force: the one door for callers.

``fedctl interpret``, the corpus bench and the controllers ask :func:`execute` the same
question the same way, so what ``fedctl interpret`` shows is what the control plane does.
A failure names the customization whose script failed.
"""

from __future__ import annotations

from federation.interpreter import customizations, declarative, lua
from federation.interpreter.customizations import Operation


def execute(registry: customizations.Registry, operation: Operation,
            args: declarative.Arguments,
            budget: lua.Budget = declarative.DEFAULT_BUDGET) -> declarative.Results:
    """The operation through the customization whose target the object is (desired for
    Retain, else the one object given), as the control plane would choose it."""
    obj = args.desired if operation is Operation.RETAIN else args.one() \
        if args.desired is not None or args.observed is not None else None
    if obj is None:
        raise lua.ScriptError("desired-file, observed-file options are not set")
    scripts = registry.choose_all(obj, operation)
    if not scripts:
        raise lua.ScriptError("rule is not enabled")
    if operation is not Operation.INTERPRET_DEPENDENCY:
        scripts = scripts[:1]
    results: list[declarative.Results] = []
    for chosen in scripts:
        try:
            results.append(declarative.run(operation, chosen.script, args, budget))
        except lua.ScriptError as exc:
            raise lua.ScriptError(f"customization {chosen.customization}, "
                                  f"{operation.value}: {exc}") from exc
    if len(results) == 1:
        return results[0]
    return [("dependencies", declarative.unique_dependencies(
        [ref for result in results for ref in result[0][1]]))]
