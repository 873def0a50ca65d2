"""KubeVela's ``spec.workflow.ref``: the Application's workflow is a ``Workflow`` object's.

A ``Workflow`` (``core.oam.dev/v1alpha1``) holds ``steps`` and ``mode`` at its top level,
the schema of ``spec.workflow``'s. vela-core (pkg/workflow/step/generator.go,
``RefWorkflowStepGenerator``; pkg/appfile/parser.go, ``loadWorkflowToAppfile``) reads the
one named by ``ref`` in the Application's own namespace and takes its steps as the
Application's; the Application's ``workflow.mode``, when given, wins over the
Workflow's. The same here:

- ``ref`` and ``steps`` both given are refused (vela-core: "cannot set steps and ref in
  workflow at the same time"); ``steps: null`` counts as not given, as in Go;
  ``ref: ""`` is no reference, as in vela-core;
- ``ref`` is a plain object name, read in the Application's namespace only: a name with
  a ``/`` or any other character no object name has is refused, and a Workflow handed in
  from another namespace is refused by :func:`resolved` (a tenant cannot make the
  control plane read another namespace's Workflow);
- a missing Workflow is a refusal naming it (the Application waits: the controller
  watches Workflows and renders it again once it exists);
- the Workflow's fields are checked as the Application's would be; a refusal about one
  of its steps names it (``spec.workflow.ref (Workflow ns/name) steps[0].type: ...``,
  :func:`located`); a top-level field other than ``steps`` and ``mode`` is refused by
  name; a Workflow without steps is the default workflow, as in vela-core.

The compile stays pure: the caller reads the Workflow (the controller from the hub's cache
at each reconcile, ``fedctl app dry-run`` from its file: :func:`from_documents`) and
:func:`resolved` puts its steps in the spec. The revision keeps the Workflow as it was
(:func:`covered`; KubeVela's ``ApplicationRevision.spec.workflow``): a changed Workflow is
a new revision, and a rollback runs the old one's steps.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from federation.applications.model import AppError

JSON = dict[str, Any]
API_VERSION = "core.oam.dev/v1alpha1"
KIND = "Workflow"
FIELDS = ("steps", "mode")
"""A Workflow's own fields (besides apiVersion, kind and metadata)."""
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_WHERE = "spec.workflow.ref"


def name_of(spec: Mapping[str, Any]) -> str | None:
    """The Workflow ``spec.workflow.ref`` names, None without one; :class:`AppError` for a
    ref that is not an object name, or given with ``steps``."""
    workflow = spec.get("workflow") if isinstance(spec, Mapping) else None
    if not isinstance(workflow, Mapping) or workflow.get("ref") in (None, ""):
        return None
    ref = workflow["ref"]
    if not isinstance(ref, str) or len(ref) > 253 or not _NAME.fullmatch(ref):
        raise AppError(f"{_WHERE}: must be the name of a Workflow in the Application's "
                       "namespace (lowercase letters, digits, '-' and '.'; no namespace: "
                       "only the Application's own is read)")
    if workflow.get("steps") is not None:
        raise AppError("spec.workflow: ref and steps cannot both be given (the steps are "
                       f"the Workflow {ref!r}'s)")
    return ref


def _name_or_none(spec: Mapping[str, Any]) -> str | None:
    try:
        return name_of(spec)
    except AppError:
        return None


def covered(doc: Mapping[str, Any] | None) -> JSON | None:
    """What a revision keeps of a Workflow: every field but ``metadata`` (of which its
    name and namespace), so that a field :func:`resolved` refuses stays refused."""
    if doc is None:
        return None
    meta = doc.get("metadata") or {}
    kept = {k: v for k, v in doc.items() if k != "metadata"}
    return kept | {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")}}


def resolved(spec: Mapping[str, Any], found: Mapping[str, Any] | None, namespace: str
             ) -> Mapping[str, Any]:
    """``spec`` with the steps (and, unless the spec has its own, the mode) of ``found``,
    the Workflow its ``ref`` names read in ``namespace``; ``spec`` unchanged without a
    ref. :class:`AppError` when the Workflow is missing, of another namespace or name,
    or malformed (naming its field)."""
    name = name_of(spec)
    if name is None:
        return spec
    if found is None:
        raise AppError(f"{_WHERE}: Workflow {namespace}/{name} not found on the hub (the "
                       "Application is rendered once it exists in its namespace)")
    meta = found.get("metadata") or {}
    if not isinstance(meta, Mapping) or meta.get("name") != name or \
            (meta.get("namespace") or namespace) != namespace:
        raise AppError(f"{_WHERE}: Workflow {namespace}/{name} not found (only the "
                       "Application's own namespace is read)")
    steps, mode = _fields(found, f"{_WHERE} (Workflow {namespace}/{name})")
    workflow = spec["workflow"]
    own_mode = workflow.get("mode")
    merged: JSON = {k: v for k, v in workflow.items() if k not in ("ref", "steps")}
    if steps is not None:
        merged["steps"] = steps
    if own_mode is None and mode is not None:
        merged["mode"] = mode
    return {**spec, "workflow": merged}


def _fields(found: Mapping[str, Any], where: str) -> tuple[Any, Any]:
    """The Workflow's ``steps`` and ``mode``, their shapes checked (the steps themselves:
    by the compile, as the Application's)."""
    for key in found:
        if key not in (*FIELDS, "apiVersion", "kind", "metadata"):
            raise AppError(f"{where} {key}: not supported by this control plane "
                           f"(a Workflow has {' and '.join(FIELDS)})")
    if found.get("apiVersion", API_VERSION) != API_VERSION or \
            found.get("kind", KIND) != KIND:
        raise AppError(f"{where}: apiVersion and kind: only {API_VERSION} {KIND}")
    steps, mode = found.get("steps"), found.get("mode")
    if steps is not None and not isinstance(steps, list):
        raise AppError(f"{where} steps: a list of steps")
    if mode is not None and not isinstance(mode, Mapping):
        raise AppError(f"{where} mode: a map of steps and subSteps")
    return steps, mode


def located(exc: AppError, spec: Mapping[str, Any], namespace: str) -> AppError:
    """``exc`` with the steps (and mode) of a referenced Workflow named as its: a refusal
    about ``spec.workflow.steps[0]`` is about the Workflow's ``steps[0]``. ``spec`` is the
    Application's spec as written."""
    name = _name_or_none(spec)
    if name is None:
        return exc
    workflow = f"{_WHERE} (Workflow {namespace}/{name})"
    message = str(exc).replace("spec.workflow.steps", f"{workflow} steps")
    if spec["workflow"].get("mode") is None:  # the mode is the Workflow's too
        message = message.replace("spec.workflow.mode", f"{workflow} mode")
    return AppError(message)


def from_documents(spec: Mapping[str, Any], namespace: str, documents: Sequence[Any]
                   ) -> Mapping[str, Any]:
    """``spec`` with the Workflow its ``ref`` names taken from ``documents`` (``fedctl app
    dry-run``: the file's Workflows in the Application's namespace stand for the hub's;
    one without a namespace is in it)."""
    name = name_of(spec)
    if name is None:
        return spec
    found = [d for d in documents if isinstance(d, dict) and d.get("kind") == KIND
             and isinstance(d.get("metadata"), dict) and d["metadata"].get("name") == name
             and (d["metadata"].get("namespace") or namespace) == namespace]
    if not found:
        raise AppError(f"{_WHERE}: Workflow {namespace}/{name} is not in the file "
                       "(dry-run reads referenced objects from it)")
    if len(found) > 1:
        raise AppError(f"{_WHERE}: the file holds Workflow {namespace}/{name} twice")
    return resolved(spec, {**found[0], "metadata": {"name": name, "namespace": namespace}},
                    namespace)
