"""``applyStrategy.type: ServerSideApply``: a copy of ours written by server-side apply.

Not a transformer: :mod:`.copies` asks it for the vertex of a copy that exists and is ours
(a missing copy is still created by POST, which fails when someone made the object first;
an apply would merge into theirs and take it over). Fields another field manager owns and
we do not (:mod:`federation.hub.ownership`, read from the member's API server only when a
write or a drift is in question: caches keep no ``managedFields``) are neither drift nor
applied, so their owner keeps them; a difference in any other field is drift, and the
apply (forcing: what we send is ours) puts it back. The apply carries the live
resourceVersion, so a concurrent change is a 409 and a retry, as a PUT's is. The first
apply to an object we created or replaced whole first moves the fields we own through
those writes into our apply entry (:data:`~federation.controllers.kit.plan.ADOPT`): apply
removes only fields its own entry owns, and a field the template drops must go.

A member that records no field managers (a pull member: its agent's mirror carries none)
gets the ClientSideApply write, and the decision's explanation says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from federation.contexts.cache import ReadOnly
from federation.controllers.kit import plan
from federation.controllers.propagation.build import JSON, Build
from federation.controllers.propagation.context import TransformContext
from federation.hub import manifests, ownership
from federation.interpreter import native

CONTENT_CHANGED = "content changed"


async def vertex(ctx: TransformContext, build: Build, cluster: str, desired: JSON,
                 live: ReadOnly, ignored: tuple[str, ...],
                 expect: plan.Identity) -> plan.Vertex:
    """Apply, or nothing, for ``desired`` over ``live`` (ours) in ``cluster``."""
    why = manifests.needs_write(desired, live, ignored)
    if why is None:
        return plan.Vertex(cluster, plan.Action.NOOP, desired, reason="up to date")
    fields = await ctx.managed_fields(build.resource, cluster, build.name, build.namespace)
    if fields is None:
        _explain(build, f"applyStrategy ServerSideApply: {cluster} records no field "
                        "managers (a pull member): its copy is written whole "
                        "(ClientSideApply)")
        return plan.Vertex(cluster, plan.Action.UPDATE, manifests.retain(desired, live),
                           reason=why, expect=expect)
    theirs = ownership.foreign(fields)
    if why != CONTENT_CHANGED:
        found = manifests.needs_write(ownership.without(desired, theirs),
                                      ownership.without(dict(live), theirs), ignored)
        if found is None:
            owned = [p for path in theirs if (p := ownership.pointer(live, path))]
            return plan.Vertex(cluster, plan.Action.NOOP, desired,
                               reason="differs only where other field managers own: "
                                      + ", ".join(owned))
        why = found
    return plan.Vertex(cluster, plan.Action.APPLY, body(desired, live, fields, theirs),
                       reason=why, expect=expect)


def body(desired: JSON, live: ReadOnly, fields: Sequence[ReadOnly],
         theirs: list[ownership.Path]) -> JSON:
    """What we apply: ``desired`` with the member's retained fields, without the fields
    other managers own, conditional on ``live``'s version; with the ownership to adopt
    first when some of our fields were written by a create or a full update."""
    applied = ownership.without(native.retain(desired, live), theirs)
    meta = applied.setdefault("metadata", {})
    meta["resourceVersion"] = (live.get("metadata") or {}).get("resourceVersion")
    if ownership.updated_by_us(fields):
        applied[plan.ADOPT] = ownership.adopted(fields, str(live.get("apiVersion")))
    return applied


def _explain(build: Build, line: str) -> None:
    if build.decision is not None and line not in build.decision.explanation:
        build.decision = dataclasses.replace(
            build.decision, explanation=(*build.decision.explanation, line))
