"""Where an Application may place objects: its own namespace, plus what an admin granted.

Whoever may write an Application in hub namespace A is untrusted (docs/security.md), yet
KubeVela lets an Application name other namespaces: a ``topology`` policy's
``namespace`` and a ``k8s-objects`` manifest's own ``metadata.namespace`` (also when an
``override`` policy's ``components[].properties`` supplies the manifests). Left open,
an author in A could write into every other member namespace with the control plane's
identity. So an Application places objects only in the member namespace of its own
name, unless the hub Namespace object of A carries :data:`TARGETS_ANNOTATION` listing
more. A Namespace is cluster-scoped: a namespace-scoped author cannot grant themselves
anything. Everything else is refused with the field that asked for it and the way to
grant it (:class:`~.model.AppError`). The system-namespace and cluster-scoped refusals
(:mod:`.policies`) stay absolute whatever the grant says.

Pure: the controller reads the hub Namespace from its cache, ``fedctl app dry-run``
takes the grant from a flag or the file set; both build a :class:`Grant` here.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from federation.applications.model import AppError, AppSpec, PolicySpec

TARGETS_ANNOTATION = "apps.federation.io/target-namespaces"
"""On a hub Namespace (set by an admin): comma-separated member namespaces that the
Applications of that namespace may place objects in besides their own; ``*`` is any
namespace but the system ones."""
ANY = "*"
PROTECTED_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease",
                        "federation-system", "federation-agent")
"""Member namespaces no Application writes into, whatever a grant says: the clusters' own
system objects and the control plane's (joined clusters' credentials, its
ServiceAccount, the pull agent's certificate)."""
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclasses.dataclass(frozen=True)
class Grant:
    """The member namespaces the Applications of hub namespace ``home`` may write."""

    home: str
    extra: frozenset[str] = frozenset()
    """Granted by :data:`TARGETS_ANNOTATION` (may hold :data:`ANY`)."""

    def allows(self, namespace: str) -> bool:
        if namespace in PROTECTED_NAMESPACES:
            return False  # absolute: no grant opens a system namespace
        return namespace == self.home or namespace in self.extra or ANY in self.extra

    def describe(self) -> str:
        """What the grant is, for ``fedctl app dry-run`` and messages."""
        if not self.extra:
            return f"namespace {self.home} only"
        more = "any non-system namespace" if ANY in self.extra else \
            ", ".join(sorted(self.extra))
        return f"namespace {self.home} and {more}"

    def refuse(self, namespace: str, field: str) -> AppError:
        if namespace in PROTECTED_NAMESPACES:
            return AppError(f"{field}: namespace {namespace} is a system namespace no "
                            "Application writes into")
        return AppError(
            f"{field}: namespace {namespace!r} is not this Application's namespace "
            f"({self.home}) and is not granted to it; an administrator grants it by "
            f"annotating the hub Namespace: kubectl annotate namespace {self.home} "
            f"{TARGETS_ANNOTATION}={namespace}")


def parse_targets(value: str | None, where: str) -> frozenset[str]:
    """The annotation's value: names separated by commas (spaces allowed); a name that is
    not a namespace name is refused (``where`` names the annotation), never skipped."""
    if value is None:
        return frozenset()
    names = [part.strip() for part in value.split(",")]
    found: set[str] = set()
    for name in names:
        if not name:
            continue
        if name != ANY and (len(name) > 63 or not _NAME.match(name)):
            raise AppError(f"{where}: {name!r} is not a namespace name (a comma-separated "
                           f"list of namespaces, or {ANY!r})")
        found.add(name)
    return frozenset(found)


def grant_of(namespace: str, annotations: Mapping[str, Any] | None) -> Grant:
    """The grant of hub namespace ``namespace`` from its Namespace object's annotations."""
    if annotations is not None and not isinstance(annotations, Mapping):
        raise AppError(f"Namespace {namespace} metadata.annotations: must be a map")
    raw = (annotations or {}).get(TARGETS_ANNOTATION)
    where = f"Namespace {namespace} annotation {TARGETS_ANNOTATION}"
    if raw is not None and not isinstance(raw, str):
        raise AppError(f"{where}: must be a string")
    return Grant(namespace, parse_targets(raw, where))


def check_spec(spec: AppSpec, external: Mapping[str, PolicySpec], grant: Grant) -> None:
    """Refuse every namespace the Application's own fields name that ``grant`` does not
    allow, naming the field: topology ``namespace``s, ``k8s-objects`` manifests'
    ``metadata.namespace``, and the same manifests supplied by an override policy."""
    for index, component in enumerate(spec.components):
        if component.type == "k8s-objects":
            _check_objects(component.properties.get("objects"), grant,
                           f"spec.components[{index}].properties.objects")
    for index, policy in enumerate(spec.policies):
        _check_policy(policy, grant, f"spec.policies[{index}].properties")
    for name, policy in sorted(external.items()):
        _check_policy(policy, grant, f"Policy {grant.home}/{name} properties")


def check_objects(objects: Iterable[Mapping[str, Any]], grant: Grant, where: str) -> None:
    """The last check, on rendered manifests: whatever produced a namespace (a future
    trait, a path the source checks missed), an object outside the grant is refused."""
    for obj in objects:
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        if namespace and not grant.allows(namespace):
            raise grant.refuse(namespace, f"{where}: {obj.get('kind')} "
                               f"{(obj.get('metadata') or {}).get('name')} metadata.namespace")


def _check_policy(policy: PolicySpec, grant: Grant, where: str) -> None:
    props = policy.properties
    if policy.type == "topology":
        namespace = props.get("namespace")
        if isinstance(namespace, str) and namespace and not grant.allows(namespace):
            raise grant.refuse(namespace, f"{where}.namespace")
    if policy.type == "override":
        patches = props.get("components")
        for index, patch in enumerate(patches if isinstance(patches, list) else []):
            if isinstance(patch, dict) and isinstance(patch.get("properties"), dict):
                _check_objects(patch["properties"].get("objects"), grant,
                               f"{where}.components[{index}].properties.objects")


def _check_objects(objects: Any, grant: Grant, where: str) -> None:
    for index, obj in enumerate(objects if isinstance(objects, Sequence) and
                                not isinstance(objects, str) else []):
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        namespace = meta.get("namespace") if isinstance(meta, dict) else None
        if isinstance(namespace, str) and namespace and not grant.allows(namespace):
            raise grant.refuse(namespace, f"{where}[{index}].metadata.namespace")
