"""Policy, workload, cluster and previous-decision files: parsing and validation.

The loader works on text the caller has read (it never opens files itself, so
the package stays free of I/O) and either returns fully validated values or
raises :class:`LoadError`. A load error names the file, the document within it
when the file holds several, the field path (``spec.placement.
spreadConstraints[1].maxGroups``) and what is wrong; nothing is half-loaded,
so nothing is applied.

Manifest files hold any number of YAML documents (``---``-separated; a
``kind: List`` is expanded). Documents of the ``policy.federation.io`` and
``policy.karmada.io`` groups must be PropagationPolicy,
ClusterPropagationPolicy, OverridePolicy or ClusterOverridePolicy; every other
document is a resource to place. Override policies are returned as documents
(the overrides module that validates and applies them lives above this pure
package); each resource's manifest is kept for rendering per-cluster copies.
Clusters come from a ``clusters:`` list; a previous decision is the JSON that
``fedctl plan -o json`` printed.

Untrusted input: text goes through :mod:`documents` (size, depth, alias and
document limits; the C YAML loader when available), counts are strict
Kubernetes integers (:mod:`counts`), and a :class:`LoadError` is always one
line: control characters from the input (a name holding a newline or a
terminal escape) are shown escaped, and of many validation problems the first
is reported with the number of others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic
from pydantic.alias_generators import to_camel

from federation.placement import clusters as clusters_
from federation.placement import counts
from federation.placement import policy as policy_
from federation.placement import resources as resources_
from federation.untrusted import documents
from federation.untrusted.text import one_line as one_line  # loader.one_line: plan, tests

Source = tuple[str, str]
"""(file name for messages, file text)."""

_INT_MAXES = {counts.INT32_MAX: "int32", counts.INT64_MAX: "int64"}
_POLICY_GROUPS = tuple(v.split("/")[0] for v in policy_.API_VERSIONS)
#: How a Resource attribute is spelled in a manifest, for error paths.
_RESOURCE_PATHS = {
    "api_version": "apiVersion",
    "kind": "kind",
    "name": "metadata.name",
    "namespace": "metadata.namespace",
    "labels": "metadata.labels",
    "replicas": "spec.replicas",
    "uid": "metadata.uid",
}


class LoadError(Exception):
    """Bad input: ``file[ (document N)]: field.path: what is wrong``."""

    def __init__(self, where: str, path: str, message: str) -> None:
        self.where, self.path, self.message = one_line(where), one_line(path), one_line(message)
        text = f"{self.where}: {self.path}: " if path else f"{self.where}: "
        super().__init__(text + self.message)


def decode(name: str, data: bytes, limits: documents.Limits = documents.LIMITS) -> Source:
    """A file's bytes as a :data:`Source` (size and encoding checked, see :mod:`documents`)."""
    try:
        return name, documents.decode(data, limits)
    except documents.TextError as error:
        raise LoadError(name, "", str(error)) from None


OVERRIDE_KINDS = ("OverridePolicy", "ClusterOverridePolicy")


@dataclass(frozen=True)
class OverrideDocument:
    """An override policy as read (validated by the caller): where it is, and its body."""

    where: str
    prefix: str
    document: Mapping[str, Any]


@dataclass(frozen=True)
class Manifests:
    policies: list[policy_.Policy]
    resources: list[resources_.Resource]
    overrides: list[OverrideDocument] = dataclasses.field(default_factory=list)
    documents: Mapping[resources_.ResourceKey, Mapping[str, Any]] = dataclasses.field(
        default_factory=dict)
    """Each resource's manifest, by its key."""


def error_path(loc: Iterable[int | str]) -> str:
    """A pydantic error location as ``a.b[0].c``."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def from_validation(where: str, error: pydantic.ValidationError, prefix: str = "") -> LoadError:
    """One line for a pydantic error: the first problem, its path, how many others."""
    problems = error.errors()
    first = problems[0]
    path = error_path([*([prefix] if prefix else []), *first["loc"]])
    message = _message(first)
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more problems)"
    return LoadError(where, path, message)


def _message(problem: Mapping[str, Any]) -> str:
    if problem["type"] == "extra_forbidden":
        return "unknown field"
    if problem["type"] == "missing":
        return "required field is missing"
    if problem["type"] in ("model_type", "dict_type"):
        return "expected a mapping"
    if problem["type"] == "int_type" and isinstance(problem.get("input"), bool):
        return "expected an integer, not a boolean"
    if problem["type"] == "less_than_equal" and problem.get("ctx", {}).get("le") in _INT_MAXES:
        limit = problem["ctx"]["le"]
        return f"must be at most {limit} ({_INT_MAXES[limit]}, as in Kubernetes)"
    text = str(problem["msg"])
    return text[:1].lower() + text[1:]


def _yaml_documents(source: Source, limits: documents.Limits) -> list[Any]:
    name, text = source
    try:
        return documents.yaml_documents(text, limits)
    except documents.TextError as error:
        raise LoadError(name, "", str(error)) from None


def _expand(name: str, docs: list[Any]) -> list[tuple[str, str, Any]]:
    """(where, path prefix, object) for every object, expanding ``kind: List``."""
    several = len(docs) > 1
    found: list[tuple[str, str, Any]] = []
    for number, doc in enumerate(docs, start=1):
        where = f"{name} (document {number})" if several else name
        if (
            isinstance(doc, dict)
            and doc.get("kind") == "List"
            and isinstance(doc.get("items"), list)
        ):
            found += [(where, f"items[{i}]", item) for i, item in enumerate(doc["items"])]
        else:
            found.append((where, "", doc))
    return found


def parse_manifests(
    sources: Sequence[Source], limits: documents.Limits = documents.LIMITS
) -> Manifests:
    """Every policy and resource in ``sources``; raises :class:`LoadError` on the first problem."""
    policies: dict[tuple[str, str, str | None, str], tuple[str, policy_.Policy]] = {}
    resources: dict[resources_.ResourceKey, tuple[str, resources_.Resource]] = {}
    overrides: list[OverrideDocument] = []
    manifests: dict[resources_.ResourceKey, Mapping[str, Any]] = {}
    for source in sources:
        for where, prefix, doc in _expand(source[0], _yaml_documents(source, limits)):
            if not isinstance(doc, dict):
                raise LoadError(where, prefix, "expected a mapping (a Kubernetes object)")
            if _is_policy(doc) and doc.get("kind") in OVERRIDE_KINDS:
                overrides.append(OverrideDocument(where, prefix, doc))
            elif _is_policy(doc):
                _add_policy(policies, where, prefix, parse_policy(doc, where, prefix))
            else:
                resource = parse_resource(doc, where, prefix)
                _add_resource(resources, where, prefix, resource)
                manifests[resource.key] = doc
    return Manifests([p for _, p in policies.values()], [r for _, r in resources.values()],
                     overrides, manifests)


def _is_policy(doc: Mapping[str, Any]) -> bool:
    api_version = doc.get("apiVersion")
    return isinstance(api_version, str) and api_version.split("/")[0] in _POLICY_GROUPS


def _add_policy(
    seen: dict[tuple[str, str, str | None, str], tuple[str, policy_.Policy]],
    where: str,
    prefix: str,
    policy: policy_.Policy,
) -> None:
    key = (policy.api_version, policy.kind, policy.namespace, policy.metadata.name)
    if key in seen:
        path = error_path([p for p in (prefix, "metadata", "name") if p])
        raise LoadError(
            where, path, f"duplicate {policy.kind} {policy.ref} (first in {seen[key][0]})"
        )
    seen[key] = (where, policy)


def _add_resource(
    seen: dict[resources_.ResourceKey, tuple[str, resources_.Resource]],
    where: str,
    prefix: str,
    resource: resources_.Resource,
) -> None:
    if resource.key in seen:
        path = error_path([p for p in (prefix, "metadata", "name") if p])
        raise LoadError(where, path, f"duplicate {resource.ref} (first in {seen[resource.key][0]})")
    seen[resource.key] = (where, resource)


def parse_policy(doc: Mapping[str, Any], where: str, prefix: str = "") -> policy_.Policy:
    """A validated policy (pydantic checks, then :func:`policy.problems`)."""
    if doc.get("apiVersion") not in policy_.API_VERSIONS:
        message = f"unsupported apiVersion; expected one of {', '.join(policy_.API_VERSIONS)}"
        raise LoadError(where, error_path([p for p in (prefix, "apiVersion") if p]), message)
    if doc.get("kind") not in policy_.KINDS:
        message = (
            f"kind {doc.get('kind')!r} is not supported; expected {' or '.join(policy_.KINDS)}"
        )
        raise LoadError(where, error_path([p for p in (prefix, "kind") if p]), message)
    try:
        policy = policy_.Policy.model_validate(doc)
    except pydantic.ValidationError as error:
        raise from_validation(where, error, prefix) from None
    found = policy_.problems(policy)
    if found:
        path, message = found[0]
        more = f" (and {len(found) - 1} more problems)" if len(found) > 1 else ""
        raise LoadError(where, f"{prefix}.{path}" if prefix else path, message + more)
    return policy


def parse_resource(doc: Mapping[str, Any], where: str, prefix: str = "") -> resources_.Resource:
    """A resource to place from a Kubernetes manifest."""
    try:
        return resources_.from_manifest(doc)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        field = _RESOURCE_PATHS.get(str(first["loc"][0]), str(first["loc"][0]))
        path = f"{prefix}.{field}" if prefix else field
        raise LoadError(where, path, _message(first)) from None


# -- clusters -------------------------------------------------------------------------------


class _ClusterFile(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    clusters: list[clusters_.Cluster]


def parse_clusters(
    source: Source, limits: documents.Limits = documents.LIMITS
) -> list[clusters_.Cluster]:
    """The ``clusters:`` list of a clusters file, validated, names unique."""
    name = source[0]
    docs = _yaml_documents(source, limits)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise LoadError(name, "", "expected one YAML mapping with a 'clusters' list")
    try:
        found = _ClusterFile.model_validate(docs[0]).clusters
    except pydantic.ValidationError as error:
        raise from_validation(name, error) from None
    seen: set[str] = set()
    for i, cluster in enumerate(found):
        if cluster.name in seen:
            raise LoadError(name, f"clusters[{i}].name", f"duplicate cluster name {cluster.name!r}")
        seen.add(cluster.name)
    return found


# -- previous decisions ---------------------------------------------------------------------


class _Shape(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore"
    )


class _PreviousResource(_Shape):
    api_version: str
    kind: str
    namespace: str | None = None
    name: str


class _PreviousCluster(_Shape):
    name: str
    replicas: counts.Replicas


class _PreviousPlacement(_Shape):
    resource: _PreviousResource
    clusters: list[_PreviousCluster] = pydantic.Field(default_factory=list)


class _PreviousFile(_Shape):
    placements: list[_PreviousPlacement]


def parse_previous(
    source: Source, limits: documents.Limits = documents.LIMITS
) -> dict[resources_.ResourceKey, dict[str, int]]:
    """Resource key -> cluster -> replicas, from a previous ``fedctl plan -o json``."""
    name, text = source
    try:
        data = documents.json_document(text, limits)
    except documents.TextError as error:
        raise LoadError(name, "", str(error)) from None
    try:
        parsed = _PreviousFile.model_validate(data)
    except pydantic.ValidationError as error:
        raise from_validation(name, error) from None
    return {
        (p.resource.api_version, p.resource.kind, p.resource.namespace, p.resource.name): {
            c.name: c.replicas for c in p.clusters
        }
        for p in parsed.placements
    }
