"""Member copies of hub templates: rendering, ownership and change detection.

A member copy is the hub template minus what belongs to the hub (identity,
status, server bookkeeping, our hub-side annotations), with its replicas set
for that cluster, overrides applied, and our ownership marks added:

- label ``federation.io/managed-by: federation``: the copy is ours. An object
  without it is someone else's, and we never overwrite it unless the policy
  says ``conflictResolution: Overwrite``.
- annotation ``federation.io/template-uid``: which hub object it copies.
- annotation ``federation.io/applied-hash``: a digest of what we last wrote.

Writes are full replacements (PUT) carrying the member's resourceVersion, so a
concurrent change is a 409 and a retry, never a lost update, and drift (a
field someone edited in the member) is reverted exactly. Fields the member's
API server allocated and will not let us change (a Service's clusterIP, a
Job's selector, replicas an HPA scales) are carried over from the live object first
and are not drift; see :func:`retain` and the interpreter (docs/interpreter.md).

A copy needs a write when its applied-hash differs from the digest of the
desired manifest (the template or decision changed, including removed fields)
or when the live object no longer contains the desired fields (drift).
Server-side defaults added to the live object are not drift.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from federation.interpreter import native

JSON = dict[str, Any]

DOMAIN = "federation.io"
MANAGED_BY_LABEL = f"{DOMAIN}/managed-by"
MANAGER = "federation"
TEMPLATE_UID_ANNOTATION = f"{DOMAIN}/template-uid"
APPLIED_HASH_ANNOTATION = f"{DOMAIN}/applied-hash"

_DROPPED_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp",
                     "managedFields", "selfLink", "deletionTimestamp",
                     "deletionGracePeriodSeconds", "ownerReferences", "finalizers")
_ALLOCATING_KINDS = frozenset(("Service", "Job", "PersistentVolumeClaim", "ServiceAccount"))
"""Kinds whose API server fills fields in that :func:`_drop_allocated` removes."""
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",
                        "deployment.kubernetes.io/revision")
_REPLICA_FIELD = {"Job": "parallelism"}


def is_ours(obj: Mapping[str, Any]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return bool(labels.get(MANAGED_BY_LABEL) == MANAGER)


APPLICATION_ANNOTATION = f"{DOMAIN}/application"
"""On member objects an Application placed: its ``namespace/name``."""


def application_of(obj: Mapping[str, Any]) -> str | None:
    """``namespace/name`` of the Application that placed ``obj``, or None (a propagated
    template's copy, or an object that is not ours)."""
    found = (obj.get("metadata", {}).get("annotations") or {}).get(APPLICATION_ANNOTATION)
    return str(found) if found else None


def is_propagated(obj: Mapping[str, Any]) -> bool:
    """Ours and placed by propagation (no Application's mark): what propagation and its
    clean-up may delete or release, and nothing else."""
    return is_ours(obj) and application_of(obj) is None


def same_placer(desired: Mapping[str, Any], live: Mapping[str, Any]) -> bool:
    """Whether ``live`` is ours and was placed by whoever writes ``desired``: the same
    Application, or propagation (no Application). Two of our writers never fight over
    one object: each leaves the other's alone, as it leaves a foreign object."""
    return is_ours(live) and application_of(live) == application_of(desired)


def placer(live: Mapping[str, Any]) -> str:
    """Who placed ``live``, for messages."""
    if not is_ours(live):
        return "is not managed by federation"
    application = application_of(live)
    return f"was placed by Application {application}" if application else \
        "is a propagated template's copy"


def replica_field(template: Mapping[str, Any]) -> str | None:
    """The spec field that carries replicas for this kind, when it has one."""
    kind = str(template.get("kind"))
    if kind in _REPLICA_FIELD:
        return _REPLICA_FIELD[kind]
    spec = template.get("spec")
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        return "replicas"
    if isinstance(spec, dict) and isinstance(spec.get("replicas"), int):
        return "replicas"
    return None


def render(template: Mapping[str, Any], replicas: int | None, divided: bool) -> JSON:
    """The copy of ``template`` for one cluster, before overrides and ownership marks.

    Copy-on-write: the top level, ``metadata`` and whatever render changes are new; the
    rest (a pod template, a ConfigMap's data) is shared with ``template``, which may be a
    cached object. The result is to be read, marked (:func:`mark` replaces metadata maps
    only) and sent; whoever changes more copies first (overrides do). Deep copies of
    whole templates were a third of the control plane's CPU in a burst."""
    manifest = {key: value for key, value in template.items() if key != "status"}
    meta = {key: value for key, value in (template.get("metadata") or {}).items()
            if key not in _DROPPED_METADATA}
    manifest["metadata"] = meta
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if not k.startswith(f"{DOMAIN}/") and k not in _DROPPED_ANNOTATIONS}
    labels = {k: v for k, v in (meta.get("labels") or {}).items()
              if not k.startswith(f"{DOMAIN}/")}
    _set_or_drop(meta, "annotations", annotations)
    _set_or_drop(meta, "labels", labels)
    _drop_allocated(manifest)
    field = replica_field(manifest)
    if divided and field and replicas is not None:
        manifest["spec"] = {**(manifest.get("spec") or {}), field: replicas}
    return manifest


def mark(manifest: JSON, template_uid: str) -> JSON:
    """Add ownership marks and the digest of the content being written."""
    meta = manifest.setdefault("metadata", {})
    meta.setdefault("labels", {})[MANAGED_BY_LABEL] = MANAGER
    annotations = meta.setdefault("annotations", {})
    annotations[TEMPLATE_UID_ANNOTATION] = template_uid
    annotations.pop(APPLIED_HASH_ANNOTATION, None)
    annotations[APPLIED_HASH_ANNOTATION] = digest(manifest)
    return manifest


def digest(manifest: Mapping[str, Any]) -> str:
    """The content hash of ``manifest`` without its own hash annotation (stable across
    versions: a change here would rewrite every copy once)."""
    content: Mapping[str, Any] = manifest
    meta = manifest.get("metadata") or {}
    annotations = meta.get("annotations")
    if annotations and APPLIED_HASH_ANNOTATION in annotations:
        content = {**manifest, "metadata": {**meta, "annotations": {
            k: v for k, v in annotations.items() if k != APPLIED_HASH_ANNOTATION}}}
    encoded = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def needs_write(desired: Mapping[str, Any], live: Mapping[str, Any],
                ignored: tuple[str, ...] = ()) -> str | None:
    """Why ``live`` must be rewritten to match ``desired``; None when it already does.

    Fields the member owns (the interpreter's Retain: :func:`retained_paths`) and the JSON
    pointers in ``ignored`` (``*`` matches one list index or key) are not drift: they are
    kept from ``live`` when we write, so reverting them would only fight their owner."""
    wanted = desired.get("metadata", {}).get("annotations", {}).get(APPLIED_HASH_ANNOTATION)
    have = (live.get("metadata", {}).get("annotations") or {}).get(APPLIED_HASH_ANNOTATION)
    if wanted != have:
        return "content changed"
    skip = (*native.retained_paths(desired), *ignored)
    difference = first_difference(desired, live, ignored=_patterns(skip))
    if difference is not None:
        return f"drift at {difference}"
    return None


def retained_paths(desired: Mapping[str, Any]) -> tuple[str, ...]:
    """JSON pointers of the fields of ``desired``'s kind its members own."""
    return native.retained_paths(desired)


Patterns = tuple[tuple[str, ...], ...]


def _patterns(pointers: tuple[str, ...]) -> Patterns:
    return tuple(tuple(p.split("/")[1:]) for p in pointers if p.startswith("/"))


def _ignored(path: str, patterns: Patterns) -> bool:
    parts = path.split("/")[1:]
    return any(len(parts) == len(pattern) and all(
        want in ("*", have) for want, have in zip(pattern, parts, strict=True))
        for pattern in patterns)


def first_difference(desired: Any, live: Any, path: str = "",
                     ignored: Patterns = ()) -> str | None:
    """The first path where ``live`` lacks or differs from a field of ``desired``, outside
    the ``ignored`` patterns (JSON pointers split at ``/``, ``*`` matching any part)."""
    if ignored and path and _ignored(path, ignored):
        return None
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return path or "/"
        for key, value in desired.items():
            found = first_difference(value, live.get(key), f"{path}/{key}", ignored)
            if found is not None:
                return found
        return None
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return path or "/"
        for index, (want, have) in enumerate(zip(desired, live, strict=True)):
            found = first_difference(want, have, f"{path}/{index}", ignored)
            if found is not None:
                return found
        return None
    return None if desired == live else (path or "/")


def differences(desired: Any, live: Any, ignored: tuple[str, ...] = (),
                limit: int = 20) -> list[str]:
    """Every path (up to ``limit``) where ``live`` lacks or differs from a field of
    ``desired``, outside ``ignored`` and the fields its members own: what report-only mode
    records."""
    patterns = _patterns((*native.retained_paths(desired), *ignored))
    found: list[str] = []
    _collect(desired, live, "", patterns, found, limit)
    return found


def _collect(desired: Any, live: Any, path: str, patterns: Patterns, found: list[str],
             limit: int) -> None:
    if len(found) >= limit or (patterns and path and _ignored(path, patterns)):
        return
    if isinstance(desired, dict) and isinstance(live, dict):
        for key, value in desired.items():
            _collect(value, live.get(key), f"{path}/{key}", patterns, found, limit)
    elif isinstance(desired, list) and isinstance(live, list) and len(desired) == len(live):
        for index, (want, have) in enumerate(zip(desired, live, strict=True)):
            _collect(want, have, f"{path}/{index}", patterns, found, limit)
    elif desired != live:
        found.append(path or "/")


def without_marks(manifest: Mapping[str, Any]) -> JSON:
    """``manifest`` without our ownership marks: what another's object is compared with."""
    meta = dict(manifest.get("metadata") or {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != MANAGED_BY_LABEL}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k not in (TEMPLATE_UID_ANNOTATION, APPLIED_HASH_ANNOTATION)}
    _set_or_drop(meta, "labels", labels)
    _set_or_drop(meta, "annotations", annotations)
    return {**manifest, "metadata": meta}


def retain(desired: JSON, live: Mapping[str, Any]) -> JSON:
    """``desired`` ready for a PUT over ``live``: version, finalizers and owner references
    kept, and the fields the member owns (an allocated clusterIP, a PVC's volume, replicas
    an HPA scales under ``resourcetemplate.karmada.io/retain-replicas``...) taken from
    ``live`` by the interpreter's Retain (:func:`federation.interpreter.native.retain`)."""
    result = copy.deepcopy(native.retain(desired, live))
    live_meta = live.get("metadata", {})
    meta = result.setdefault("metadata", {})
    meta["resourceVersion"] = live_meta.get("resourceVersion")
    for key in ("finalizers", "ownerReferences"):
        if live_meta.get(key):
            meta[key] = live_meta[key]
    return result


def _drop_allocated(manifest: JSON) -> None:
    """Remove fields the hub's API server allocated; each member allocates its own. The
    ``spec`` and ``secrets`` of a kind it edits are copied first: the rest of a rendered
    manifest is shared with the (cached) template."""
    if manifest.get("kind") not in _ALLOCATING_KINDS:
        return
    for key in ("spec", "secrets"):
        if key in manifest:
            manifest[key] = copy.deepcopy(manifest[key])
    kind, spec = manifest.get("kind"), manifest.get("spec")
    if not isinstance(spec, dict):
        if kind == "ServiceAccount":
            manifest.pop("secrets", None)
        return
    if kind == "Service":
        if spec.get("clusterIP") != "None":
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        spec.pop("healthCheckNodePort", None)
        for port in spec.get("ports") or []:
            port.pop("nodePort", None)
    elif kind == "Job":
        spec.pop("selector", None)
        labels = spec.get("template", {}).get("metadata", {}).get("labels") or {}
        for key in ("controller-uid", "job-name"):
            labels.pop(key, None)
    elif kind == "PersistentVolumeClaim":
        spec.pop("volumeName", None)


def _set_or_drop(meta: JSON, key: str, values: Mapping[str, str]) -> None:
    if values:
        meta[key] = dict(values)
    else:
        meta.pop(key, None)
