"""Override policies: per-cluster changes to the manifests sent to members.

Schema: Karmada's ``OverridePolicy`` (namespaced) and ``ClusterOverridePolicy``
field names, under ``policy.federation.io/v1alpha1``::

    spec:
      resourceSelectors: [...]           # as in PropagationPolicy
      overrideRules:
        - targetCluster: {...}           # a ClusterAffinity; absent = every cluster
          overriders:
            imageOverrider:  [{component: Registry|Repository|Tag, operator, value,
                               predicate: {path}}]
            commandOverrider: [{containerName, operator: add|remove, value: [...]}]
            argsOverrider:    [{containerName, operator: add|remove, value: [...]}]
            labelsOverrider:  [{operator: add|remove|replace, value: {k: v}}]
            annotationsOverrider: [{operator: add|remove|replace, value: {k: v}}]
            plaintext:        [{path: /json/pointer, operator: add|remove|replace, value}]

Order, when several apply to one object in one cluster (each step sees the
result of the previous one): ClusterOverridePolicies before OverridePolicies
(the namespace owner gets the last word), each group by name; within a policy
its rules in order; within a rule image, command, args, labels, annotations,
then plaintext JSON patches. An override that cannot be applied (a path that
does not exist, a container that is not there) is an error naming the policy,
rule and field; the object is then not propagated to that cluster at all, so a
bad override never leaves a half-changed copy in a member.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import jsonpatch
import jsonpointer
import pydantic
from pydantic import Field

from federation.placement import clusters as clusters_
from federation.placement import loader, matching, selection
from federation.placement import policy as policy_
from federation.placement import resources as resources_

KINDS = ("OverridePolicy", "ClusterOverridePolicy")
JSON = dict[str, Any]


class OverrideError(Exception):
    """An override cannot be applied; the message names policy, rule and field."""


class ImageOverrider(policy_._Model):
    component: Literal["Registry", "Repository", "Tag"]
    operator: Literal["add", "remove", "replace"]
    value: str = ""
    predicate: dict[str, str] | None = None


class CommandArgsOverrider(policy_._Model):
    container_name: str = Field(min_length=1)
    operator: Literal["add", "remove"]
    value: list[str] = Field(default_factory=list)


class MapOverrider(policy_._Model):
    operator: Literal["add", "remove", "replace"]
    value: dict[str, str] = Field(default_factory=dict)


class PlaintextOverrider(policy_._Model):
    path: str = Field(pattern=r"^/")
    operator: Literal["add", "remove", "replace"]
    value: Any = None


class Overriders(policy_._Model):
    image_overrider: list[ImageOverrider] = Field(default_factory=list)
    command_overrider: list[CommandArgsOverrider] = Field(default_factory=list)
    args_overrider: list[CommandArgsOverrider] = Field(default_factory=list)
    labels_overrider: list[MapOverrider] = Field(default_factory=list)
    annotations_overrider: list[MapOverrider] = Field(default_factory=list)
    plaintext: list[PlaintextOverrider] = Field(default_factory=list)


class OverrideRule(policy_._Model):
    target_cluster: policy_.ClusterAffinity | None = None
    overriders: Overriders = Field(default_factory=Overriders)


class OverrideSpec(policy_._Model):
    resource_selectors: list[policy_.ResourceSelector] = Field(default_factory=list)
    override_rules: list[OverrideRule] = Field(default_factory=list)


class OverridePolicy(policy_._Model):
    api_version: Literal["policy.federation.io/v1alpha1", "policy.karmada.io/v1alpha1"]
    kind: Literal["OverridePolicy", "ClusterOverridePolicy"]
    metadata: policy_.ObjectMeta
    spec: OverrideSpec

    @property
    def namespace(self) -> str | None:
        if self.kind == "ClusterOverridePolicy":
            return None
        return self.metadata.namespace or "default"

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.metadata.name}" if self.namespace else self.metadata.name


def parse(document: Mapping[str, Any]) -> OverridePolicy:
    """Validate an override policy; errors name the field path."""
    try:
        return OverridePolicy.model_validate(document)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        raise OverrideError(f"{loader.error_path(first['loc'])}: {first['msg']}") from None


def applicable(policies: Iterable[OverridePolicy], resource: resources_.Resource
               ) -> list[OverridePolicy]:
    """The policies selecting ``resource``, in application order."""
    chosen = [p for p in policies
              if any(matching.selector_matches(s, resource, p.namespace)
                     for s in p.spec.resource_selectors)]
    return sorted(chosen, key=lambda p: (p.namespace is not None, p.metadata.name))


@dataclasses.dataclass(frozen=True)
class Applied:
    manifest: JSON
    notes: tuple[str, ...]
    """One line per override applied: ``policy ns/name rule 0: image tag -> v2``."""


def apply_all(manifest: JSON, cluster: clusters_.Cluster,
              policies: Sequence[OverridePolicy]) -> Applied:
    """Apply every rule of ``policies`` that targets ``cluster``, in the documented order."""
    result = copy.deepcopy(manifest)
    notes: list[str] = []
    for policy in policies:
        for index, rule in enumerate(policy.spec.override_rules):
            target = rule.target_cluster
            if target is not None and selection.affinity_mismatch(cluster, target) is not None:
                continue
            where = f"{policy.kind} {policy.ref} overrideRules[{index}]"
            try:
                result = _apply_rule(result, rule.overriders, notes, where)
            except OverrideError as exc:
                raise OverrideError(f"{where}: {exc}") from None
    return Applied(result, tuple(notes))


def _apply_rule(manifest: JSON, overriders: Overriders, notes: list[str], where: str) -> JSON:
    for image in overriders.image_overrider:
        _override_images(manifest, image)
        notes.append(f"{where}: image {image.component.lower()} {image.operator} {image.value}")
    for name, entries in (("command", overriders.command_overrider),
                          ("args", overriders.args_overrider)):
        for entry in entries:
            _override_list(manifest, name, entry)
            notes.append(f"{where}: {name} of {entry.container_name} {entry.operator}")
    meta = manifest.setdefault("metadata", {})
    for name, map_entries in (("labels", overriders.labels_overrider),
                              ("annotations", overriders.annotations_overrider)):
        for map_entry in map_entries:
            meta[name] = _override_map(meta.get(name) or {}, map_entry)
            notes.append(f"{where}: {name} {map_entry.operator} {sorted(map_entry.value)}")
    for index, patch in enumerate(overriders.plaintext):
        manifest = _json_patch(manifest, index, patch)
        notes.append(f"{where}: {patch.operator} {patch.path}")
    return manifest


def _json_patch(manifest: JSON, index: int, patch: PlaintextOverrider) -> JSON:
    operation: JSON = {"op": patch.operator, "path": patch.path}
    if patch.operator != "remove":
        operation["value"] = patch.value
    try:
        patched: JSON = jsonpatch.apply_patch(manifest, [operation])
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException):
        # The library's message quotes the document, which may hold secrets: say less.
        raise OverrideError(f"plaintext[{index}]: cannot {patch.operator} {patch.path}: "
                            "the path does not exist in the manifest") from None
    return patched


# -- images --------------------------------------------------------------------------------

_POD_SPEC_PATHS = {
    "Pod": ("spec",),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
_DEFAULT_POD_SPEC = ("spec", "template", "spec")


def pod_spec(manifest: JSON) -> JSON | None:
    path = _POD_SPEC_PATHS.get(str(manifest.get("kind")), _DEFAULT_POD_SPEC)
    node: Any = manifest
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def _containers(manifest: JSON) -> list[JSON]:
    spec = pod_spec(manifest) or {}
    return [c for key in ("initContainers", "containers") for c in spec.get(key) or []]


@dataclasses.dataclass
class ImageRef:
    """``[registry/]repository[:tag][@digest]``, split the way container runtimes do."""

    registry: str
    repository: str
    tag: str
    digest: str

    @classmethod
    def parse(cls, text: str) -> ImageRef:
        rest, _, digest = text.partition("@")
        registry = ""
        first, slash, remainder = rest.partition("/")
        if slash and ("." in first or ":" in first or first == "localhost"):
            registry, rest = first, remainder
        repository, tag = rest, ""
        if ":" in rest.rsplit("/", 1)[-1]:
            repository, _, tag = rest.rpartition(":")
        return cls(registry, repository, tag, digest)

    def __str__(self) -> str:
        text = f"{self.registry}/{self.repository}" if self.registry else self.repository
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def override_image(image: str, overrider: ImageOverrider) -> str:
    """Karmada's semantics: add appends to the component, remove clears it, replace sets it."""
    ref = ImageRef.parse(image)
    field = overrider.component.lower()
    current = getattr(ref, field)
    if overrider.operator == "add":
        new = overrider.value if field == "tag" else current + overrider.value
    elif overrider.operator == "remove":
        new = ""
    else:
        new = overrider.value
    setattr(ref, field, new)
    if field == "tag" and new:
        ref.digest = ""
    return str(ref)


def _override_images(manifest: JSON, overrider: ImageOverrider) -> None:
    if overrider.predicate and overrider.predicate.get("path"):
        path = overrider.predicate["path"]
        try:
            image = jsonpointer.resolve_pointer(manifest, path)
        except jsonpointer.JsonPointerException:
            raise OverrideError(f"imageOverrider predicate path {path} does not exist") from None
        if not isinstance(image, str):
            raise OverrideError(f"imageOverrider predicate path {path} is not an image string")
        jsonpointer.set_pointer(manifest, path, override_image(image, overrider))
        return
    containers = _containers(manifest)
    if not containers:
        raise OverrideError(f"imageOverrider: {manifest.get('kind')} has no containers")
    for container in containers:
        if container.get("image"):
            container["image"] = override_image(container["image"], overrider)


def _override_list(manifest: JSON, field: str, entry: CommandArgsOverrider) -> None:
    for container in _containers(manifest):
        if container.get("name") == entry.container_name:
            values = list(container.get(field) or [])
            if entry.operator == "add":
                values += entry.value
            else:
                values = [v for v in values if v not in entry.value]
            container[field] = values
            return
    raise OverrideError(f"{field}Overrider: no container named {entry.container_name!r}")


def _override_map(current: Mapping[str, str], entry: MapOverrider) -> dict[str, str]:
    result = dict(current)
    if entry.operator == "add":
        result.update(entry.value)
    elif entry.operator == "remove":
        for key in entry.value:
            result.pop(key, None)
    else:
        result.update({k: v for k, v in entry.value.items() if k in result})
    return result
