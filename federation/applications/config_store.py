"""vela-core's config-store workflow steps, ``create-config``, ``read-config``,
``list-config`` and ``delete-config`` (vela-templates/definitions/internal/workflowstep/
*-config.cue over the ``config`` provider, pkg/config/factory.go): the pure half.

KubeVela keeps a config as a Secret named after it, labelled
``config.oam.dev/catalog: velacore-config`` and ``config.oam.dev/type: <template>`` (""
without one), its properties as JSON under the data key ``input-properties``; read-config
gives those properties back (``config``), list-config the configs of one template (name,
alias, description, ``config``), delete-config deletes the Secret if it carries the
catalog label. Its default namespace is the Application's, and a config whose template is
``sensitive`` (annotation ``config.oam.dev/sensitive: "true"``) is never read.

Here, narrowed (docs/security.md, *Applications: the config store*):

- the store is the Application's own hub namespace: ``namespace`` naming another is
  refused by name;
- a *store Secret* is one carrying the catalog label; nothing else is written, read,
  listed or deleted. create-config naming a Secret that is not one is refused (KubeVela
  applies over any Secret whose type label matches, an unlabelled one included); read and
  delete of one answer as for a missing config, so that nothing says it exists;
- ``template`` (a CUE script an admin stored in vela-system that renders the Secret, other
  objects and writes to Nacos) is refused by name in create-config; list-config's
  ``template`` is the label value it lists by (nothing is evaluated);
- a config is JSON data of at most :data:`MAX_BYTES` bytes and :data:`MAX_KEYS` keys at
  its top; names are Kubernetes object names. No message quotes a value of ``config``.

:func:`decide` says, from the step and the cached Secret(s), what the controller does;
the controller (``federation.controllers.applications.config_store``) reads and writes.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from federation.applications import shapes, steps
from federation.applications.model import AppError, Step
from federation.hub import manifests

JSON = dict[str, Any]
STEP_TYPES = ("create-config", "read-config", "list-config", "delete-config")
CATALOG_LABEL = "config.oam.dev/catalog"
CATALOG = "velacore-config"
"""The store's marker: KubeVela's catalog label and value, which its own tools (``vela
config``) set too, so configs made either way are one store."""
TYPE_LABEL = "config.oam.dev/type"
SENSITIVE = "config.oam.dev/sensitive"
ALIAS = "config.oam.dev/alias"
DESCRIPTION = "config.oam.dev/description"
PROPERTIES_KEY = "input-properties"
WRITTEN_BY = manifests.APPLICATION_ANNOTATION
"""Our annotation on a config we write: the Application (``namespace/name``) that last
wrote it (who wrote what; the store's marker is the catalog label)."""
MAX_BYTES = 32768
"""A config's properties as JSON: a config store holds settings (an endpoint, a user name,
a few flags), and the value read is kept in the Application's status as any output (at
most 4096 characters each): 32 KiB leaves room and stays far below a Secret's 1 MiB."""
MAX_KEYS = 64
"""Keys at the top of a config (KubeVela's templates have a handful)."""
MAX_LISTED = 100
"""Configs one list-config step gives back (the rest are counted in its message)."""
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

Kind = Literal["create", "read", "list", "delete"]
Outcome = Literal["done", "write", "failed", "waiting"]


@dataclasses.dataclass(frozen=True)
class StoreStep:
    """What one config-store step asks for (checked)."""

    kind: Kind
    name: str = ""
    """The config (create, read, delete); "" for list."""
    template: str = ""
    """list: the template whose configs it lists."""
    config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """create: the properties."""


_SHAPES: dict[str, dict[str, Any]] = {
    "create-config": {"name": str, "namespace?": str, "config": shapes.OPEN_MAP},
    "read-config": {"name": str, "namespace?": str},
    "delete-config": {"name": str, "namespace?": str},
    "list-config": {"template": str, "namespace?": str},
}


_KINDS: dict[str, Kind] = {"create-config": "create", "read-config": "read",
                           "list-config": "list", "delete-config": "delete"}


def check(step: Step, namespace: str, where: str) -> StoreStep:
    """The step's properties checked (:class:`AppError` naming the field, never a value)."""
    props = dict(step.properties)
    if step.type == "create-config" and "template" in props:
        raise AppError(f"{where}.template: not supported (a KubeVela config template is a "
                       "CUE script an admin stored in vela-system that renders the Secret and "
                       "other objects and may write to Nacos; here a config is its "
                       "properties, written as they are: leave template out)")
    found = shapes.check(props, _SHAPES[step.type], where)
    steps.own_namespace(found, namespace, where)
    kind = _KINDS[step.type]
    if kind == "list":
        return StoreStep(kind, template=_template(found["template"], f"{where}.template"))
    name = steps.object_name(found["name"], f"{where}.name")
    if kind != "create":
        return StoreStep(kind, name)
    return StoreStep(kind, name, config=_properties(found["config"], f"{where}.config"))


def _template(value: str, where: str) -> str:
    if "/" in value:
        raise AppError(f"{where}: a template's name (a config records its template's name "
                       "only, so the namespace part would list nothing different: leave "
                       "it out)")
    if not value or len(value) > 63 or not _LABEL_VALUE.match(value):
        raise AppError(f"{where}: a template name (a label value: at most 63 letters, "
                       "digits, '-', '_' and '.')")
    return value


def _properties(value: Any, where: str) -> JSON:
    if not isinstance(value, dict):
        raise AppError(f"{where}: must be a map")
    if len(value) > MAX_KEYS:
        raise AppError(f"{where}: {len(value)} keys; a config holds at most {MAX_KEYS}")
    try:
        size = len(_encode(value))
    except (TypeError, ValueError):
        raise AppError(f"{where}: not JSON data") from None
    if size > MAX_BYTES:
        raise AppError(f"{where}: {size} bytes as JSON; a config holds at most {MAX_BYTES}")
    return dict(value)


def _encode(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


# -- the store's Secrets ---------------------------------------------------------------------


def is_store(secret: Mapping[str, Any] | None) -> bool:
    """Whether a Secret is a config of the store (carries the catalog label)."""
    labels = ((secret or {}).get("metadata") or {}).get("labels") or {}
    return secret is not None and labels.get(CATALOG_LABEL) == CATALOG


def _sensitive(secret: Mapping[str, Any]) -> bool:
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    return annotations.get(SENSITIVE) == "true"


def properties_of(secret: Mapping[str, Any]) -> JSON | None:
    """A store Secret's properties (None when it holds none we can read: sensitive,
    missing, not a JSON map, or larger than the store takes)."""
    return None if _sensitive(secret) else _decoded(secret)


def _decoded(secret: Mapping[str, Any]) -> JSON | None:
    raw = (secret.get("data") or {}).get(PROPERTIES_KEY)
    if not isinstance(raw, str) or len(raw) > MAX_BYTES * 2:
        return None
    try:
        found = json.loads(base64.b64decode(raw, validate=True))
    except (binascii.Error, ValueError):
        return None
    return found if isinstance(found, dict) else None


def secret(chosen: StoreStep, namespace: str, owner: str,
           live: Mapping[str, Any] | None = None) -> JSON:
    """The Secret create-config writes: KubeVela's layout, our labels and annotation;
    over ``live`` (a store Secret of that name), its resourceVersion so that a change
    since it was read fails the write instead of being lost."""
    meta: JSON = {"name": chosen.name, "namespace": namespace,
                  "labels": {CATALOG_LABEL: CATALOG, TYPE_LABEL: ""},
                  "annotations": {ALIAS: "", DESCRIPTION: "", WRITTEN_BY: owner}}
    body: JSON = {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque",
                  "data": {PROPERTIES_KEY: base64.b64encode(_encode(chosen.config)).decode()}}
    if live is not None:  # its other labels and annotations kept, ours set
        live_meta = live.get("metadata") or {}
        meta["labels"] = {**(live_meta.get("labels") or {}), **meta["labels"]}
        meta["annotations"] = {**(live_meta.get("annotations") or {}),
                               WRITTEN_BY: meta["annotations"][WRITTEN_BY]}
        meta["resourceVersion"] = live_meta.get("resourceVersion")
        meta["uid"] = live_meta.get("uid")
        body["type"] = live.get("type") or "Opaque"
    return body


# -- what a step does, given the store -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Decision:
    """What the controller does for a running step, and what the step says."""

    outcome: Outcome
    message: str
    returns: JSON | None = None
    """read/list: KubeVela's ``$returns``."""
    write: JSON | None = None
    """create: the Secret to create (no resourceVersion) or update; delete: the one to
    delete (the cached version: UID and resourceVersion preconditions)."""


def missing(name: str) -> str:
    """read/delete of a config that is not in the store: one message whether a Secret of
    that name exists or not."""
    return f"no config {name} in the store of this namespace"


def decide(chosen: StoreStep, namespace: str, owner: str,
           live: Mapping[str, Any] | None, listing: Sequence[Mapping[str, Any]] = ()
           ) -> Decision:
    """The step's decision over the cached Secret named by it (``live``; list: the
    namespace's Secrets in ``listing``)."""
    if chosen.kind == "list":
        return _list(chosen, listing)
    if chosen.kind == "read":
        found = properties_of(live) if live is not None and is_store(live) else None
        if found is None:
            why = f"config {chosen.name}: its template is sensitive: never read" \
                if live is not None and is_store(live) and _sensitive(live) \
                else missing(chosen.name)
            return Decision("failed", why)
        return Decision("done", f"config {chosen.name} read", {"config": found})
    if chosen.kind == "delete":
        if live is None or not is_store(live):
            return Decision("done", f"{missing(chosen.name)}: nothing deleted")
        return Decision("write", f"deleting config {chosen.name}", write=dict(live))
    return _create(chosen, namespace, owner, live)


def _create(chosen: StoreStep, namespace: str, owner: str,
            live: Mapping[str, Any] | None) -> Decision:
    if live is None:
        return Decision("write", f"writing config {chosen.name}",
                        write=secret(chosen, namespace, owner))
    if not is_store(live):
        return Decision("failed", f"Secret {chosen.name} of this namespace is not a config of "
                        "the store (it lacks the label "
                        f"{CATALOG_LABEL}={CATALOG}): it is not overwritten")
    labels = (live.get("metadata") or {}).get("labels") or {}
    if labels.get(TYPE_LABEL, ""):
        return Decision("failed", f"config {chosen.name} was made from template "
                        f"{str(labels[TYPE_LABEL])[:63]!r}: its template cannot be changed "
                        "(KubeVela's rule)")
    if _decoded(live) != dict(chosen.config):
        return Decision("write", f"writing config {chosen.name}",
                        write=secret(chosen, namespace, owner, live))
    return Decision("done", f"config {chosen.name} written")


def _list(chosen: StoreStep, listing: Sequence[Mapping[str, Any]]) -> Decision:
    kept = sorted((s for s in listing if is_store(s) and (
        ((s.get("metadata") or {}).get("labels") or {}).get(TYPE_LABEL) == chosen.template)),
        key=lambda s: str((s.get("metadata") or {}).get("name")))
    configs = [_listed(s) for s in kept[:MAX_LISTED]]
    more = f" (the first {MAX_LISTED} of {len(kept)})" if len(kept) > MAX_LISTED else ""
    return Decision("done", f"{len(configs)} config(s) of template {chosen.template}{more}",
                    {"configs": configs})


def _listed(found: Mapping[str, Any]) -> JSON:
    """KubeVela's entry: a sensitive config's ``config`` is null."""
    meta = found.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return {"name": meta.get("name"), "alias": annotations.get(ALIAS, ""),
            "description": annotations.get(DESCRIPTION, ""), "config": properties_of(found)}


def output(chosen: StoreStep, decision: Decision) -> JSON:
    """``output`` in the step's ``valueFrom``: KubeVela's ``$params`` and ``$returns``, and
    the returned fields at the top as its older ``op.#ReadConfig`` gave them."""
    params: JSON = {"name": chosen.name} if chosen.kind != "list" \
        else {"template": chosen.template}
    returns = decision.returns or {}
    return {"$params": params, "$returns": returns, **returns}


def describe(chosen: StoreStep) -> str:
    """What the step does, for ``fedctl app dry-run`` (no value of the config)."""
    where = "in the config store of the Application's namespace on the hub"
    if chosen.kind == "create":
        return f": writes config {chosen.name} ({len(chosen.config)} key(s)) {where}"
    if chosen.kind == "read":
        return f": reads config {chosen.name} {where}"
    if chosen.kind == "delete":
        return f": deletes config {chosen.name} {where}"
    return f": lists the configs of template {chosen.template} {where}"
