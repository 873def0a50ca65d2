"""The vertices for one member copy: create, update, or nothing, and whose object it is;
or its release (our marks removed) when its template goes and preserves its copies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.contexts.cache import ReadOnly
from federation.controllers.kit import plan
from federation.hub import manifests, preservation

JSON = dict[str, Any]


def copy_vertex(cluster: str, desired: JSON, live: ReadOnly | None, overwrite: bool,
                expect: plan.Identity | None = None,
                ignored: tuple[str, ...] = ()) -> plan.Vertex | None:
    """Create, update or nothing for one copy; None for a foreign object we may not touch.
    ``expect`` (the template's identity) is what the executor checks before writing;
    ``ignored`` JSON pointers are not drift (the policy's ``ignoredFields``)."""
    if live is None:
        return plan.Vertex(cluster, plan.Action.CREATE, desired, reason="missing", expect=expect)
    mine = manifests.same_placer(desired, live)
    if not mine and not overwrite:
        return None
    why = manifests.needs_write(desired, live, ignored) if mine else "taking over"
    if why is None:
        return plan.Vertex(cluster, plan.Action.NOOP, desired, reason="up to date")
    return plan.Vertex(cluster, plan.Action.UPDATE, manifests.retain(desired, live), reason=why,
                       expect=expect)


def release_vertex(cluster: str, live: Mapping[str, Any], what: str = "copy") -> plan.Vertex:
    """The update that releases ``live`` (our ownership marks removed, its resourceVersion
    kept: a concurrent change fails the write), for a template gone that preserves it."""
    return plan.Vertex(cluster, plan.Action.UPDATE, preservation.released(live),
                       reason=f"template gone; {what} preserved (preserveResourcesOnDeletion)",
                       expect=plan.Identity.of(live))
