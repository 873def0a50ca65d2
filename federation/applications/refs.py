"""KubeVela's ``ref-objects`` component: objects of the hub deployed by reference
(vela-templates/definitions/internal/component/ref-objects.cue; KubeVela reads them in
pkg/component/ref_objects.go, ``SelectRefObjectsForDispatch``).

Each entry of ``objects[]`` names a kind (``resource``, with ``group`` or, without it, the
one group mapping that resource, as KubeVela's REST mapper finds it; or KubeVela's
legacy ``apiVersion`` and ``kind``) and either a ``name`` (default: the component's) or a
``labelSelector``. The compile stays pure: :func:`refs_of` says what to read, the caller
reads it (the controller from the hub's cache, ``fedctl app dry-run`` from its file) and
:func:`expand` turns each ``ref-objects`` component into a ``k8s-objects`` component of
what was read, server fields dropped (``ClearRefObjectForDispatch``), so what follows
(traits, overrides, placement, the namespace and scope checks, the deny list) is the same.

Whoever writes an Application reads the hub with the control plane's identity here, so
the reads are narrower than KubeVela's (whose default scope is the whole control plane):

- only the Application's own namespace (a ``namespace`` naming another is refused: a
  target-namespace grant is about member writes, not reading another team's objects);
- only the hub (``cluster`` other than ``local`` is refused) and no ``urls`` (a fetch of
  a tenant's URL from the control plane);
- no Secret (the control plane reads no Secret an Application names), no cluster-scoped
  kind (an Application places namespaced objects only), at most :data:`MAX_REFERENCED`
  objects per selector.

A change of a referenced object is deployed at the Application's next reconcile (it is
not watched for), as KubeVela's state-keep does on its period.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from federation.applications import shapes
from federation.applications.model import MAX_RENDERED, AppError
from federation.placement import resources as resources_

JSON = dict[str, Any]
TYPE = "ref-objects"
MAX_REFERENCED = MAX_RENDERED
_ENTRY = {"resource?": str, "group?": str, "apiVersion?": str, "kind?": str, "name?": str,
          "namespace?": str, "cluster?": str, "labelSelector?": shapes.STRINGS_MAP}
_RESOURCES = {
    ("", "configmaps"): ("v1", "ConfigMap"), ("", "services"): ("v1", "Service"),
    ("", "serviceaccounts"): ("v1", "ServiceAccount"),
    ("", "persistentvolumeclaims"): ("v1", "PersistentVolumeClaim"),
    ("apps", "deployments"): ("apps/v1", "Deployment"),
    ("apps", "statefulsets"): ("apps/v1", "StatefulSet"),
    ("apps", "daemonsets"): ("apps/v1", "DaemonSet"),
    ("batch", "jobs"): ("batch/v1", "Job"), ("batch", "cronjobs"): ("batch/v1", "CronJob"),
    ("networking.k8s.io", "ingresses"): ("networking.k8s.io/v1", "Ingress"),
    ("autoscaling", "horizontalpodautoscalers"): ("autoscaling/v2",
                                                   "HorizontalPodAutoscaler"),
    ("policy", "poddisruptionbudgets"): ("policy/v1", "PodDisruptionBudget"),
}
"""KubeVela maps ``resource`` through the control plane's discovery; the compile has
none, so the resources a workload is made of are named here, any other kind by its
``apiVersion`` and ``kind``."""


@dataclasses.dataclass(frozen=True)
class Ref:
    """One ``objects[]`` entry: what to read from the hub, in the Application's namespace."""

    api_version: str
    kind: str
    name: str | None
    labels: Mapping[str, str] | None
    where: str


def refs_of(spec: Mapping[str, Any], where: str = "spec") -> dict[int, list[Ref]]:
    """Per component index of type ``ref-objects``, its references (refused by path)."""
    found: dict[int, list[Ref]] = {}
    if not isinstance(spec, Mapping):
        return found  # the compile names what it must be
    components = spec.get("components")
    for index, component in enumerate(components if isinstance(components, list) else []):
        if isinstance(component, dict) and component.get("type") == TYPE:
            here = f"{where}.components[{index}].properties"
            found[index] = _refs(component.get("properties") or {},
                                 str(component.get("name")), here)
    return found


def _refs(props: Any, component: str, where: str) -> list[Ref]:
    if isinstance(props, dict) and "urls" in props:
        raise AppError(f"{where}.urls: not supported (the control plane fetches no URL for "
                       "an Application)")
    entries = shapes.check(props, {"objects?": [_ENTRY]}, where).get("objects") or []
    return [_ref(entry, component, f"{where}.objects[{index}]")
            for index, entry in enumerate(entries)]


def _ref(entry: Mapping[str, Any], component: str, where: str) -> Ref:
    if entry.get("namespace"):
        raise AppError(f"{where}.namespace: not supported (ref-objects reads the "
                       "Application's own namespace on the hub only)")
    if entry.get("cluster") not in (None, "", "local"):
        raise AppError(f"{where}.cluster: not supported (ref-objects reads the hub only)")
    api_version, kind = _kind(entry, where)
    if kind == "Secret":
        raise AppError(f"{where}: a Secret is not supported (the control plane reads no "
                       "Secret an Application names; put it in the member, or use a "
                       "k8s-objects component)")
    if kind in resources_.CLUSTER_SCOPED_KINDS:
        raise AppError(f"{where}: {kind} is cluster-scoped; an Application places "
                       "namespaced objects only")
    labels = entry.get("labelSelector")
    if labels is not None and entry.get("name"):
        raise AppError(f"{where}: name and labelSelector cannot be both set")
    return Ref(api_version, kind, None if labels is not None else
               (entry.get("name") or component), labels, where)


def _kind(entry: Mapping[str, Any], where: str) -> tuple[str, str]:
    if entry.get("resource"):
        plural = str(entry["resource"]).lower()
        plural = plural if plural.endswith("s") else f"{plural}s"
        group = entry.get("group")
        found = _RESOURCES.get((str(group), plural)) if group is not None else next(
            (kind for (_, name), kind in _RESOURCES.items() if name == plural), None)
        if found is None:
            raise AppError(f"{where}.resource: {entry['resource']!r} (group "
                           f"{entry.get('group') or 'core'!r}) is not one this control "
                           "plane maps; give apiVersion and kind")
        if "apiVersion" in entry or "kind" in entry:
            raise AppError(f"{where}: give resource or apiVersion and kind, not both")
        return found
    if not entry.get("apiVersion") or not entry.get("kind"):
        raise AppError(f"{where}.resource: required (or apiVersion and kind)")
    return str(entry["apiVersion"]), str(entry["kind"])


_SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp",
                  "deletionTimestamp", "managedFields", "ownerReferences", "namespace",
                  "selfLink", "finalizers")


def cleared(obj: Mapping[str, Any], ref: Ref) -> JSON:
    """A hub object ready to deploy (KubeVela's ``ClearRefObjectForDispatch``): server
    fields and status dropped, a Service's allocated cluster IP too."""
    body = copy.deepcopy(dict(obj))
    body.setdefault("apiVersion", ref.api_version)
    body.setdefault("kind", ref.kind)
    body.pop("status", None)
    meta = body.get("metadata")
    if isinstance(meta, dict):
        for key in _SERVER_FIELDS:
            meta.pop(key, None)
    spec = body.get("spec")
    if body["kind"] == "Service" and isinstance(spec, dict) \
            and spec.get("clusterIP") not in (None, "None"):
        spec.pop("clusterIP", None)
        spec.pop("clusterIPs", None)
    return body


def expand(spec: Mapping[str, Any], read: Mapping[int, Sequence[JSON]],
           where: str = "spec") -> JSON:
    """``spec`` with each ``ref-objects`` component a ``k8s-objects`` one of the objects
    read for it (``read``: per component index, cleared)."""
    out = copy.deepcopy(dict(spec))
    for index, objects in read.items():
        component = out["components"][index]
        if not objects:
            raise AppError(f"{where}.components[{index}].properties.objects: the references "
                           "select no object on the hub")
        if len(objects) > MAX_REFERENCED:
            raise AppError(f"{where}.components[{index}].properties.objects: "
                           f"{len(objects)} objects; at most {MAX_REFERENCED}")
        component["type"] = "k8s-objects"
        component["properties"] = {"objects": [copy.deepcopy(o) for o in objects]}
    return out


def labels_match(obj: Mapping[str, Any], ref: Ref) -> bool:
    """``obj`` (of ``ref``'s kind) carries every label of ``ref``'s selector."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in (ref.labels or {}).items())


def matches(obj: Mapping[str, Any], ref: Ref) -> bool:
    """``obj`` is what ``ref`` names: its kind, and its name or labels."""
    if obj.get("kind") != ref.kind or obj.get("apiVersion") != ref.api_version:
        return False
    if ref.labels is not None:
        return labels_match(obj, ref)
    return bool((obj.get("metadata") or {}).get("name") == ref.name)


def from_documents(spec: Mapping[str, Any], namespace: str, documents: Sequence[Any]
                   ) -> Mapping[str, Any]:
    """``spec`` with its references read from ``documents`` (``fedctl app dry-run``: the
    objects of its file in the Application's namespace stand for the hub's)."""
    wanted = refs_of(spec)
    if not wanted:
        return spec
    here = [d for d in documents if isinstance(d, dict)
            and str((d.get("metadata") or {}).get("namespace") or namespace) == namespace]
    read: dict[int, list[JSON]] = {}
    for index, references in wanted.items():
        read[index] = []
        for ref in references:
            found = [cleared(d, ref) for d in here if matches(d, ref)]
            if ref.name is not None and not found:
                raise AppError(f"{ref.where}: {ref.kind} {namespace}/{ref.name} is not in the "
                               "file (dry-run reads referenced objects from it)")
            read[index] += found
    return expand(spec, read)
