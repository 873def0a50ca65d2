"""KubeVela's ``ref-objects`` components read from the hub's cache, for the compile.

What may be read is decided by :mod:`federation.applications.refs` (the Application's own
namespace, no Secret, no cluster-scoped kind, the hub only); this module only reads it,
through the view's cache, and hands the compile a spec whose ``ref-objects`` components
are ``k8s-objects`` of what was found. A read that fails is a refusal naming the
reference (the Application shows ``renderFailed``), never a partial render.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.applications import model, refs
from federation.contexts.client import ClientError
from federation.controllers.applications.build import JSON
from federation.controllers.applications.view import ApplicationView


async def expanded(view: ApplicationView, spec: Mapping[str, Any], namespace: str
                   ) -> Mapping[str, Any]:
    """``spec`` with its ``ref-objects`` components read (unchanged without any)."""
    wanted = refs.refs_of(spec)
    if not wanted:
        return spec
    read: dict[int, list[JSON]] = {}
    for index, references in wanted.items():
        read[index] = [obj for ref in references
                       for obj in await read_ref(view, ref, namespace)]
    return refs.expand(spec, read)


async def read_ref(view: ApplicationView, ref: refs.Ref, namespace: str) -> list[JSON]:
    what = f"{ref.kind} {namespace}/{ref.name}" if ref.name else f"{ref.kind} objects"
    try:
        resource = await view.resource(view.hub, {"apiVersion": ref.api_version,
                                                  "kind": ref.kind})
        if not resource.namespaced:
            raise model.AppError(f"{ref.where}: {ref.kind} is cluster-scoped; an Application "
                                 "places namespaced objects only")
        if ref.name is not None:
            found = await view.get(resource, ref.name, namespace, view.hub)
            if found is None:
                raise model.AppError(f"{ref.where}: {what} not found on the hub")
            return [refs.cleared(found, ref)]
        listed = await view.list(resource, namespace)
    except ClientError as exc:
        raise model.AppError(f"{ref.where}: cannot read {what} on the hub: {exc}") from None
    return [refs.cleared(o, ref) for o in listed if refs.labels_match(o, ref)]
