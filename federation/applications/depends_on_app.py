"""The Application a ``depends-on-app`` step creates when the one it waits for is missing.

vela-core's ``depends-on-app.cue``: when the named Application does not exist, the step
reads the ConfigMap of the same name and namespace, applies the Application YAML in its
``data.application`` and waits for it to be running. Here the control plane creates it
with its own identity, so what it creates is held to what the tenant could have applied
themselves, and no more:

- the ConfigMap is the one of the waiting Application's own namespace (the caller reads
  no other; the step's ``namespace`` is refused unless it is that one);
- its text goes through the one capped loader (:mod:`federation.untrusted.documents`):
  one document, small, shallow, no alias bombs, and errors that quote none of it;
- it must be an ``Application`` of ``core.oam.dev/v1beta1`` named as the step says, in
  that namespace (another namespace, another kind, another name: refused by name);
- of ``metadata`` only ``name``, ``namespace``, ``labels`` and ``annotations`` are taken,
  and nothing but ``spec`` beside it (no ``status``, owner references, finalizers);
- it is marked as created by the step (:data:`CREATED_BY`, :data:`CREATED_BY_STEP`),
  marks the YAML may not set itself.

A refusal is an :class:`~federation.applications.model.AppError`, one line naming the
field and never quoting the ConfigMap's values (they are the tenant's configuration).
Pure: the controller reads the ConfigMap and plans the create.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.applications.model import AppError
from federation.untrusted import documents

JSON = dict[str, Any]

KEY = "application"
"""The ConfigMap key holding the Application's YAML (vela-core's)."""
API_VERSION = "core.oam.dev/v1beta1"
CREATED_BY = "apps.federation.io/created-by"
"""``namespace/name`` of the Application whose depends-on-app step created this one."""
CREATED_BY_STEP = "apps.federation.io/created-by-step"
"""The name of that step."""
LIMITS = documents.Limits(max_bytes=2**20, max_depth=50, max_nodes=20_000,
                          max_documents=1)
"""A ConfigMap holds at most 1 MiB; one Application is a few hundred values and nests
about 15 levels, so 20,000 values and 50 levels leave room and keep parsing cheap."""
_METADATA = frozenset({"name", "namespace", "labels", "annotations"})


def application(config_map: Mapping[str, Any], name: str, namespace: str, owner: str,
                step: str) -> JSON:
    """The Application ``namespace/name`` to create, from ``config_map``'s
    ``data.application``, marked as made by step ``step`` of Application ``owner``."""
    where = f"ConfigMap {namespace}/{name} data.{KEY}"
    data = config_map.get("data")
    text = data.get(KEY) if isinstance(data, Mapping) else None
    if not isinstance(text, str):
        raise AppError(f"{where}: missing (it holds the Application's YAML)")
    try:
        raw = text.encode("utf-8", "surrogatepass")  # a lone surrogate: refused as bad UTF-8
        found = documents.yaml_documents(documents.decode(raw, LIMITS), LIMITS, quote=False)
    except documents.TextError as exc:
        raise AppError(f"{where}: {exc}") from None
    if len(found) != 1 or not isinstance(found[0], dict):
        raise AppError(f"{where}: not one YAML document of an Application")
    doc: JSON = found[0]
    _check_kind(doc, where)
    return {"apiVersion": API_VERSION, "kind": "Application",
            "metadata": _metadata(doc.get("metadata"), name, namespace, owner, step, where),
            "spec": _spec(doc, where)}


def _check_kind(doc: Mapping[str, Any], where: str) -> None:
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != "Application":
        raise AppError(f"{where}: apiVersion and kind must be {API_VERSION} Application "
                       "(only an Application is created from it)")
    extra = sorted(str(k) for k in doc if k not in ("apiVersion", "kind", "metadata", "spec"))
    if extra:
        raise AppError(f"{where}.{extra[0]}: not supported (an Application's apiVersion, "
                       "kind, metadata and spec only)")


def _spec(doc: Mapping[str, Any], where: str) -> JSON:
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise AppError(f"{where}.spec: required, a map")
    return spec


def _metadata(meta: Any, name: str, namespace: str, owner: str, step: str, where: str
              ) -> JSON:
    if not isinstance(meta, dict):
        raise AppError(f"{where}.metadata: required, a map")
    extra = sorted(str(k) for k in meta if k not in _METADATA)
    if extra:
        raise AppError(f"{where}.metadata.{extra[0]}: not supported (name, namespace, labels "
                       "and annotations only)")
    if meta.get("name") != name:
        raise AppError(f"{where}.metadata.name: must be {name}, the Application the step "
                       "waits for")
    if meta.get("namespace") not in (None, "", namespace):
        raise AppError(f"{where}.metadata.namespace: another namespace than {namespace}: an "
                       "Application is created in the waiting Application's namespace only")
    labels = _strings(meta.get("labels"), f"{where}.metadata.labels")
    annotations = _strings(meta.get("annotations"), f"{where}.metadata.annotations")
    for mark in (CREATED_BY, CREATED_BY_STEP):
        if mark in annotations:
            raise AppError(f"{where}.metadata.annotations.{mark}: set by the control plane "
                           "only")
    annotations |= {CREATED_BY: owner, CREATED_BY_STEP: step}
    return {"name": name, "namespace": namespace, "annotations": annotations,
            **({"labels": labels} if labels else {})}


def _strings(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise AppError(f"{where}: a map of strings")
    return dict(value)
