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

from federation.applications import helmchart, model, refs
from federation.contexts.client import ClientError
from federation.controllers.applications.build import JSON
from federation.controllers.applications.view import ApplicationView


async def expanded(view: ApplicationView, spec: Mapping[str, Any], namespace: str
                   ) -> Mapping[str, Any]:
    """``spec`` with its ``ref-objects`` components and its ``helmchart`` components'
    ``valuesFrom`` read (unchanged without any)."""
    spec = await with_chart_values(view, spec, namespace)
    wanted = refs.refs_of(spec)
    if not wanted:
        return spec
    read: dict[int, list[JSON]] = {}
    for index, references in wanted.items():
        read[index] = [obj for ref in references
                       for obj in await read_ref(view, ref, namespace)]
    return refs.expand(spec, read)


async def with_chart_values(view: ApplicationView, spec: Mapping[str, Any], namespace: str
                            ) -> Mapping[str, Any]:
    """``spec`` with each ``helmchart``'s ``valuesFrom`` read from the ConfigMaps of the
    Application's namespace on the hub (the cache; a change is rendered at the next
    reconcile: they are not watched) and merged into its ``values``."""
    wanted = helmchart.values_refs(spec, namespace)
    if not wanted:
        return spec
    read = {index: [await read_values(view, ref, namespace) for ref in found]
            for index, found in wanted.items()}
    return helmchart.with_values(spec, read, wanted, namespace)


async def read_values(view: ApplicationView, ref: helmchart.ValuesRef, namespace: str
                      ) -> str | None:
    """The text of ``ref``'s key, None when the ConfigMap or the key is missing."""
    try:
        resource = await view.resource(view.hub, {"apiVersion": "v1", "kind": "ConfigMap"})
        found = await view.get(resource, ref.name, namespace, view.hub)
    except ClientError as exc:
        raise model.AppError(f"{ref.where}: cannot read ConfigMap {namespace}/{ref.name} on "
                             f"the hub: {exc}") from None
    if found is None:
        return None
    data = found.get("data") or {}
    if ref.key not in data and ref.key in (found.get("binaryData") or {}):
        raise model.AppError(f"{ref.where}: ConfigMap {namespace}/{ref.name} key "
                             f"{ref.key!r} is in binaryData; valuesFrom reads data")
    value = data.get(ref.key)
    return str(value) if value is not None else None


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
