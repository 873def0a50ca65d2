"""KubeVela's definition revisions: ``type: <name>@v<version>`` renders with a definition
as it was.

Each distinct spec of a definition is kept as a ``DefinitionRevision``
(``core.oam.dev/v1beta1``) in the definition's namespace, holding a copy of the whole
definition: ``<name>-v<N>``, N counting up from the highest revision there (vela-core's
``GenerateDefinitionRevision``), or ``<name>-v<version>`` when the definition carries
``spec.version`` (a semantic version; that revision is written once and never replaced, as
in KubeVela). The applications' definition controller writes them (:func:`planned`, leader
only) and keeps at most :data:`HISTORY_LIMIT` per definition, the oldest deleted first.

An Application's ``mydef@v2`` names the revision ``mydef-v2`` (vela-core's
``ConvertDefinitionRevName``); ``mydef@v1.2.0`` names ``mydef-v1.2.0``. Only revisions in
the system namespaces count, the first namespace listed winning a name, as for definitions
(:func:`with_revisions`): a tenant's DefinitionRevision is never used. The built-in types
are definitions in KubeVela (its chart installs them, so each has a revision 1):
``webservice@v1`` is this control plane's built-in ``webservice``; a definition named like a
built-in numbers its own revisions from 2, so that ``@v1`` keeps meaning the built-in
(:func:`first_number`). :func:`resolve` turns every versioned type of a spec into what the
compile knows (a revision's key in the catalog, or a built-in's name) and refuses the rest
in one line naming the type and the version.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn

from federation.applications import definitions, model
from federation.applications.model import AppError

JSON = dict[str, Any]

KIND = "DefinitionRevision"
HISTORY_LIMIT = 20
"""Revisions kept per definition (vela-core's ``--definition-revision-limit`` defaults to
20 too): past it the oldest is deleted; an Application pinned to it is then refused."""
NAME_LABELS = {"component": "componentdefinition.oam.dev/name",
               "trait": "trait.oam.dev/name",
               "policy": "policydefinition.oam.dev/name",
               "step": "workflowstepdefinition.oam.dev/name"}
"""vela-core's labels naming a revision's definition (``kubectl get definitionrevision
-l componentdefinition.oam.dev/name=webservice``)."""
DEFINITION_TYPES = {"component": "Component", "trait": "Trait", "policy": "Policy",
                    "step": "WorkflowStep"}
"""``spec.definitionType`` of each field's revisions."""
SNAPSHOT_FIELDS = {"component": "componentDefinition", "trait": "traitDefinition",
                   "policy": "policyDefinition", "step": "workflowStepDefinition"}
"""Where a revision keeps its copy of the definition."""
BUILT_INS: Mapping[str, tuple[str, ...]] = {
    "component": model.COMPONENT_TYPES, "trait": model.TRAIT_TYPES,
    "policy": model.POLICY_TYPES, "step": model.STEP_TYPES}
AUTO_UPDATE = "app.oam.dev/autoUpdate"

_NUMBER = definitions.SEMVER_NUMBER
TYPE_VERSION = re.compile(
    rf"^v(?:[1-9][0-9]*|{_NUMBER}\.{_NUMBER}\.{_NUMBER}{definitions.SEMVER_PRERELEASE}?)$")
"""What follows ``@``: ``v<N>`` (the Nth revision) or ``v<major>.<minor>.<patch>[-<pre>]``
(the revision of a definition's ``spec.version``), lower case as object names are."""


# -- the definition's side: which revision its spec is ----------------------------------------


def first_number(field: str, name: str) -> int:
    """The number of a definition's first revision: 2 for a definition named like a
    built-in (revision 1 is the built-in), else 1."""
    return 2 if name in BUILT_INS.get(field, ()) else 1


def spec_hash(spec: Mapping[str, Any]) -> str:
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def number_of(revision: Mapping[str, Any]) -> int:
    value = (revision.get("spec") or {}).get("revision")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def planned(definition: Mapping[str, Any], existing: Sequence[Mapping[str, Any]],
            limit: int = HISTORY_LIMIT) -> tuple[JSON | None, list[Mapping[str, Any]]]:
    """What the controller writes for ``definition`` (one of the system namespaces',
    loaded): the revision to create (None when its spec is recorded already) and the
    revisions to delete past ``limit``. ``existing``: the revisions labelled with its
    name in its namespace."""
    field = definitions.KINDS[str(definition.get("kind"))]
    meta = definition.get("metadata") or {}
    name = str(meta.get("name"))
    spec = definition.get("spec") or {}
    ordered = sorted(existing, key=number_of)
    last = number_of(ordered[-1]) if ordered else first_number(field, name) - 1
    version = definitions.spec_version(
        spec, f"{definition.get('kind')} {meta.get('namespace')}/{name}")
    if version is not None:
        wanted = f"{name}-v{version}"
        new = None if any(_name(r) == wanted for r in ordered) else wanted
    else:
        recorded = _snapshot(ordered[-1], field) if ordered else None
        same = recorded is not None and spec_hash(recorded.get("spec") or {}) == spec_hash(spec)
        new = None if same else f"{name}-v{last + 1}"
    body = None if new is None else revision_body(definition, field, new, last + 1)
    kept = len(ordered) + (body is not None)
    return body, list(ordered[:max(0, kept - limit)])


def latest(definition: Mapping[str, Any], revisions: Sequence[Mapping[str, Any]]
           ) -> JSON | None:
    """vela-core's ``status.latestRevision`` of a definition (name, number, hash): the
    revision of its ``spec.version``, else its highest-numbered one."""
    spec = definition.get("spec") or {}
    version = spec.get("version") if isinstance(spec, Mapping) else None
    name = str((definition.get("metadata") or {}).get("name"))
    found = sorted(revisions, key=number_of)
    if version:
        canonical = definitions.spec_version(spec, name)
        found = [r for r in found if _name(r) == f"{name}-v{canonical}"]
    if not found:
        return None
    return {"name": _name(found[-1]), "revision": number_of(found[-1]),
            "revisionHash": str((found[-1].get("spec") or {}).get("revisionHash") or "")}


def revision_body(definition: Mapping[str, Any], field: str, name: str, number: int) -> JSON:
    meta = definition.get("metadata") or {}
    spec = copy.deepcopy(definition.get("spec") or {})
    snapshot_meta = {k: copy.deepcopy(meta[k]) for k in ("name", "namespace", "labels",
                                                          "annotations") if meta.get(k)}
    labels = {**(meta.get("labels") or {}), NAME_LABELS[field]: str(meta.get("name"))}
    body_meta: JSON = {"name": name, "namespace": meta.get("namespace"), "labels": labels}
    if meta.get("uid"):  # deleted with its definition, where a garbage collector runs
        body_meta["ownerReferences"] = [{"apiVersion": definition.get("apiVersion"),
                                         "kind": definition.get("kind"),
                                         "name": meta.get("name"), "uid": meta["uid"]}]
    return {"apiVersion": definitions.GROUP_VERSION, "kind": KIND, "metadata": body_meta,
            "spec": {"revision": number, "revisionHash": spec_hash(spec),
                     "definitionType": DEFINITION_TYPES[field],
                     SNAPSHOT_FIELDS[field]: {"apiVersion": definition.get("apiVersion"),
                                              "kind": definition.get("kind"),
                                              "metadata": snapshot_meta, "spec": spec}}}


def _name(doc: Mapping[str, Any]) -> str:
    return str((doc.get("metadata") or {}).get("name") or "")


def _snapshot(revision: Mapping[str, Any], field: str) -> Mapping[str, Any] | None:
    found = (revision.get("spec") or {}).get(SNAPSHOT_FIELDS[field])
    return found if isinstance(found, Mapping) else None


# -- the Application's side: which definition ``name@vX`` is ----------------------------------


def type_of(revision: Mapping[str, Any]) -> tuple[str, str] | None:
    """(field, ``<definition>@v<version>``) a DefinitionRevision stands for, or None when
    it is not one: its ``definitionType`` names the field, its copy of the definition is of
    that kind and its own name is ``<definition>-v<version>``."""
    spec = revision.get("spec") or {}
    field = next((f for f, t in DEFINITION_TYPES.items()
                  if t == (spec.get("definitionType") if isinstance(spec, Mapping) else None)),
                 None)
    if field is None:
        return None
    snapshot = _snapshot(revision, field)
    if snapshot is None or definitions.KINDS.get(str(snapshot.get("kind"))) != field:
        return None
    definition = str((snapshot.get("metadata") or {}).get("name") or "")
    version = _name(revision).removeprefix(f"{definition}-")
    if not definition or version == _name(revision) or not TYPE_VERSION.match(version):
        return None
    return field, f"{definition}@{version}"


def with_revisions(catalog: definitions.Catalog, revisions: Sequence[Mapping[str, Any]]
                   ) -> definitions.Catalog:
    """``catalog`` and the revisions of its system namespaces, each a definition keyed by
    its versioned type (``("component", "mydef@v2")``); a revision elsewhere is noted as
    not used, one that cannot be honoured as refused (the reason said to an Application
    naming it)."""
    found = dict(catalog.definitions)
    refused = dict(catalog.refused)
    ignored = {k: list(v) for k, v in catalog.ignored.items()}
    namespaces = catalog.namespaces
    ordered = sorted(revisions, key=lambda r: _rank(r, namespaces))
    for revision in ordered:
        key = type_of(revision)
        namespace = str((revision.get("metadata") or {}).get("namespace") or "")
        if key is None or key in found or key in refused:
            continue
        if namespace not in namespaces:
            ignored.setdefault(key, []).append(f"{namespace} (DefinitionRevision "
                                               f"{_name(revision)})")
            continue
        try:
            found[key] = _load(revision, key, namespace)
        except definitions.DefinitionError as exc:
            refused[key] = str(exc)
    return dataclasses.replace(catalog, definitions=found, refused=refused,
                               ignored={k: tuple(v) for k, v in ignored.items()})


def _rank(doc: Mapping[str, Any], namespaces: Sequence[str]) -> int:
    namespace = str((doc.get("metadata") or {}).get("namespace") or "")
    return list(namespaces).index(namespace) if namespace in namespaces else len(namespaces)


def _load(revision: Mapping[str, Any], key: tuple[str, str], namespace: str
          ) -> definitions.Definition:
    """The revision's copy of the definition, named by its versioned type, in the
    revision's own namespace (not the one its copy says)."""
    snapshot = _snapshot(revision, key[0]) or {}
    meta = dict(snapshot.get("metadata") or {})
    meta.update(name=key[1], namespace=namespace)
    try:
        return definitions.load({**snapshot, "metadata": meta})
    except definitions.DefinitionError as exc:
        raise definitions.DefinitionError(
            f"DefinitionRevision {namespace}/{_name(revision)}: {exc}") from None


def resolve(catalog: definitions.Catalog, spec: Mapping[str, Any],
            annotations: Mapping[str, str] | None = None) -> Mapping[str, Any]:
    """``spec`` with every versioned type made one the compile knows: a revision in the
    catalog stays as written, a built-in's ``@v1`` becomes its name. Raises
    :class:`~.model.AppError` for a malformed version or a revision that does not exist
    (a refused or a tenant's revision is left for the compile, which says why)."""
    found = list(_versioned(spec)) if isinstance(spec, Mapping) else []
    if not found:  # nothing versioned, or no map: the compile refuses that by field
        return spec
    auto = annotations.get(AUTO_UPDATE) if isinstance(annotations, Mapping) else None
    if str(auto).lower() == "true":
        raise AppError(f"metadata.annotations.{AUTO_UPDATE}: not supported by this control "
                       "plane: a versioned type names one exact revision")
    out = copy.deepcopy(dict(spec))
    for field, path, where in found:
        holder = _at(out, path)
        name = str(holder["type"])
        replaced = _resolved(catalog, field, name, f"{where}.type")
        if replaced != name:
            holder["type"] = replaced
    return out


def _resolved(catalog: definitions.Catalog, field: str, name: str, where: str) -> str:
    base, _, version = name.partition("@")
    if not base or not TYPE_VERSION.match(version):
        raise AppError(f"{where}: {name!r}: the version is v<N> (a definition's Nth "
                       "revision) or v<major>.<minor>.<patch> (its spec.version), as in "
                       f"{base or 'mydef'}@v1 or {base or 'mydef'}@v1.2.0")
    key = (field, name)
    if key in catalog.definitions or key in catalog.refused or key in catalog.ignored:
        return name
    if version == "v1" and base in BUILT_INS.get(field, ()) and \
            catalog.get(field, base) is None:
        return base
    known = sorted((n.partition("@")[2] for f, n in catalog.definitions
                    if f == field and n.startswith(f"{base}@")), key=_version_order)
    if base in BUILT_INS.get(field, ()) and catalog.get(field, base) is None:
        known.insert(0, "v1 (the built-in)")
    has = f"its revisions here: {', '.join(known)}" if known else "it has no revision here"
    return _missing(catalog, field, base, version, has, where)


def _missing(catalog: definitions.Catalog, field: str, base: str, version: str, has: str,
             where: str) -> NoReturn:
    kind = next(k for k, f in definitions.KINDS.items() if f == field)
    replacing = catalog.get(field, base)
    note = f"; v1 was the built-in {base}, which {replacing.ref} replaces" \
        if replacing is not None and version == "v1" and base in BUILT_INS.get(field, ()) \
        else ""
    raise AppError(f"{where}: '{base}@{version}': no revision {version} of {kind} {base} "
                   f"(no DefinitionRevision {base}-{version} in "
                   f"{', '.join(catalog.namespaces)}; {has}{note})")


def _version_order(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in re.split(r"[.-]", version[1:]))


def _versioned(spec: Mapping[str, Any]) -> Iterator[tuple[str, tuple[Any, ...], str]]:
    """(field, path, where) of every type holder whose type has ``@``: components and
    their traits (and those an override policy brings), policies, steps and sub-steps."""
    for field, path, where in _holders(spec):
        holder = _at(spec, path)
        if isinstance(holder.get("type"), str) and "@" in holder["type"]:
            yield field, path, where


def _holders(spec: Mapping[str, Any]) -> Iterator[tuple[str, tuple[Any, ...], str]]:
    yield from _components(spec.get("components"), ("components",), "spec.components")
    for i, policy in _items(spec.get("policies")):
        yield "policy", ("policies", i), f"spec.policies[{i}]"
        props = policy.get("properties")
        if isinstance(props, Mapping):
            yield from _components(props.get("components"),
                                   ("policies", i, "properties", "components"),
                                   f"spec.policies[{i}].properties.components")
    workflow = spec.get("workflow")
    steps = workflow.get("steps") if isinstance(workflow, Mapping) else None
    for i, step in _items(steps):
        yield "step", ("workflow", "steps", i), f"spec.workflow.steps[{i}]"
        for j, _ in _items(step.get("subSteps")):
            yield ("step", ("workflow", "steps", i, "subSteps", j),
                   f"spec.workflow.steps[{i}].subSteps[{j}]")


def _components(value: Any, path: tuple[Any, ...], where: str
                ) -> Iterator[tuple[str, tuple[Any, ...], str]]:
    for i, component in _items(value):
        yield "component", (*path, i), f"{where}[{i}]"
        for j, _ in _items(component.get("traits")):
            yield "trait", (*path, i, "traits", j), f"{where}[{i}].traits[{j}]"


def _items(value: Any) -> list[tuple[int, Mapping[str, Any]]]:
    return [(i, v) for i, v in enumerate(value) if isinstance(v, Mapping)] \
        if isinstance(value, list) else []


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc
