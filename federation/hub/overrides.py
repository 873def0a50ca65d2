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
            fieldOverrider:   [{fieldPath: /json/pointer to a string,
                                json|yaml: [{subPath, operator, value}]}]

Karmada's group (``policy.karmada.io/v1alpha1``) is read the same, including the
deprecated spec-level ``targetCluster``/``overriders`` pair, which, as in Karmada,
acts as one rule when ``overrideRules`` is empty. ``fieldOverrider`` edits a
document held in a string field (a ConfigMap's ``data`` entry): the string is
parsed as JSON or YAML (within :mod:`federation.untrusted.documents`' limits),
patched with the JSON-patch operations at their ``subPath`` and written back
(compact JSON, or YAML with sorted keys, as Karmada's encoders do).

Order, when several apply to one object in one cluster (each step sees the
result of the previous one): ClusterOverridePolicies before OverridePolicies
(the namespace owner gets the last word), each by name (ours before Karmada's
on the same name); within a policy its rules in order; within a rule image,
command, args, labels, annotations, fieldOverrider, then plaintext JSON
patches (Karmada's order). An override that cannot be applied (a path that
does not exist, a container that is not there) is an error naming the policy,
rule and field; the object is then not propagated to that cluster at all, so a
bad override never leaves a half-changed copy in a member.

What no override may change (:func:`refusals`): the object's identity
(``apiVersion``, ``kind``, ``metadata.name``, ``namespace``, ``generateName``),
what the API server or the member owns (``uid``, ``resourceVersion``,
``ownerReferences``, ``finalizers`` and the other bookkeeping fields) and our
own ``federation.io/`` labels and annotations. Otherwise a namespace owner on
the hub could turn a ConfigMap into a cluster-admin ClusterRoleBinding on every
member, or write into another namespace. Plaintext paths are decoded as JSON
pointers (``~0``, ``~1``) and refused when they lead to, or contain, a
protected field (``/metadata`` or ```` replace it whole); label and annotation
overriders may not name our keys; an image overrider's ``predicate.path`` must
point at a container's ``image``. A policy with such a rule is ``Valid=False``
and every template it selects is not propagated (``OverrideRefused``) rather
than propagated without it. :func:`apply_all` checks the result again (the
protected fields must be what they were before the rule), and the plan executor
checks the rendered object's identity once more before any write.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import jsonpatch
import jsonpointer
import pydantic
import yaml
from pydantic import Field
from typing_extensions import TypeAliasType

from federation.hub import manifests
from federation.placement import clusters as clusters_
from federation.placement import loader, matching, selection
from federation.placement import policy as policy_
from federation.placement import resources as resources_
from federation.untrusted import documents

KINDS = ("OverridePolicy", "ClusterOverridePolicy")
JSON = dict[str, Any]


class OverrideError(Exception):
    """An override cannot be applied; the message names policy, rule and field."""


class OverrideRefused(OverrideError):
    """An override would change a protected field (identity, ownership, our marks)."""


class ImagePredicate(policy_._Model):
    path: str = Field(pattern=r"^/")
    """JSON pointer to the one image string to change (a container's ``image``)."""


class ImageOverrider(policy_._Model):
    component: Literal["Registry", "Repository", "Tag"]
    operator: Literal["add", "remove", "replace"]
    value: str = ""
    predicate: ImagePredicate | None = None


class CommandArgsOverrider(policy_._Model):
    container_name: str = Field(min_length=1)
    operator: Literal["add", "remove"]
    value: list[str] = Field(default_factory=list)


class MapOverrider(policy_._Model):
    operator: Literal["add", "remove", "replace"]
    value: dict[str, str] = Field(default_factory=dict)


JSONValue = TypeAliasType(
    "JSONValue", "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None")
"""Any JSON value (Karmada's ``apiextensionsv1.JSON``), typed all the way down."""


class PlaintextOverrider(policy_._Model):
    path: str = Field(pattern=r"^/")
    operator: Literal["add", "remove", "replace"]
    value: JSONValue = None


class PatchOperation(policy_._Model):
    """One JSON-patch operation inside a string field (``fieldOverrider``)."""

    sub_path: str = Field(pattern=r"^(/.*)?$")
    operator: Literal["add", "remove", "replace"]
    value: JSONValue = None


class FieldOverrider(policy_._Model):
    """Karmada's FieldOverrider: patch the JSON or YAML document held in a string field."""

    field_path: str = Field(pattern=r"^/")
    json_ops: list[PatchOperation] = Field(default_factory=list, alias="json")
    yaml_ops: list[PatchOperation] = Field(default_factory=list, alias="yaml")


class Overriders(policy_._Model):
    image_overrider: list[ImageOverrider] = Field(default_factory=list)
    command_overrider: list[CommandArgsOverrider] = Field(default_factory=list)
    args_overrider: list[CommandArgsOverrider] = Field(default_factory=list)
    labels_overrider: list[MapOverrider] = Field(default_factory=list)
    annotations_overrider: list[MapOverrider] = Field(default_factory=list)
    field_overrider: list[FieldOverrider] = Field(default_factory=list)
    plaintext: list[PlaintextOverrider] = Field(default_factory=list)


class OverrideRule(policy_._Model):
    target_cluster: policy_.ClusterAffinity | None = None
    overriders: Overriders = Field(default_factory=Overriders)


class OverrideSpec(policy_._Model):
    resource_selectors: list[policy_.ResourceSelector] = Field(default_factory=list)
    override_rules: list[OverrideRule] = Field(default_factory=list)
    target_cluster: policy_.ClusterAffinity | None = None
    """Deprecated in Karmada: with ``overriders``, one rule when overrideRules is empty."""
    overriders: Overriders | None = None
    """Deprecated in Karmada (see ``target_cluster``)."""

    @property
    def rules(self) -> list[OverrideRule]:
        """The rules applied: overrideRules, else the deprecated spec-level pair (Karmada)."""
        if self.override_rules or self.overriders is None:
            return list(self.override_rules)
        return [OverrideRule(target_cluster=self.target_cluster, overriders=self.overriders)]


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


def validate(document: Mapping[str, Any]) -> OverridePolicy:
    """:func:`parse`, then refuse rules that change a protected field (first one named)."""
    policy = parse(document)
    found = refusals(policy)
    if found:
        raise OverrideRefused("; ".join(found))
    return policy


def applicable(policies: Iterable[OverridePolicy], resource: resources_.Resource
               ) -> list[OverridePolicy]:
    """The policies selecting ``resource``, in application order."""
    chosen = [p for p in policies
              if any(matching.selector_matches(s, resource, p.namespace)
                     for s in p.spec.resource_selectors)]
    return sorted(chosen, key=lambda p: (p.namespace is not None, p.metadata.name,
                                         p.api_version != policy_.GROUP_VERSION))


@dataclasses.dataclass(frozen=True)
class Applied:
    manifest: JSON
    notes: tuple[str, ...]
    """One line per override applied: ``policy ns/name rule 0: image tag -> v2``."""


def apply_all(manifest: JSON, cluster: clusters_.Cluster,
              policies: Sequence[OverridePolicy]) -> Applied:
    """Apply every rule of ``policies`` that targets ``cluster``, in the documented order.
    ``manifest`` is not changed (it may share values with a cached template): the first
    rule that applies works on a deep copy, and with none ``manifest`` itself is returned."""
    result = manifest
    notes: list[str] = []
    for policy in policies:
        for index, rule in enumerate(policy.spec.rules):
            target = rule.target_cluster
            if target is not None and selection.affinity_mismatch(cluster, target) is not None:
                continue
            if result is manifest:
                result = copy.deepcopy(manifest)
            where = f"{policy.kind} {policy.ref} overrideRules[{index}]"
            before = protected_values(result)
            try:
                result = _apply_rule(result, rule.overriders, notes, where,
                                     policy.api_version == policy_.KARMADA_GROUP_VERSION)
            except OverrideRefused as exc:
                raise OverrideRefused(f"{where}: {exc}") from None
            except OverrideError as exc:
                raise OverrideError(f"{where}: {exc}") from None
            changed = protected_change(before, protected_values(result))
            if changed is not None:
                raise OverrideRefused(f"{where}: changes {changed}, which may not be "
                                      "overridden")
    return Applied(result, tuple(notes))


def _apply_rule(manifest: JSON, overriders: Overriders, notes: list[str], where: str,
                karmada: bool = False) -> JSON:
    """``karmada``: a ``policy.karmada.io`` policy, whose image, command and args
    overriders act exactly as Karmada's (see :data:`KARMADA_POD_SPECS`)."""
    for image in overriders.image_overrider:
        done = _override_images(manifest, image, karmada)
        notes.append(f"{where}: image {image.component.lower()} {image.operator} {image.value}"
                     + ("" if done else " (no container it applies to, as in Karmada)"))
    for name, entries in (("command", overriders.command_overrider),
                          ("args", overriders.args_overrider)):
        for entry in entries:
            done = _override_list(manifest, name, entry, karmada)
            notes.append(f"{where}: {name} of {entry.container_name} {entry.operator}"
                         + ("" if done else " (no such container, skipped as in Karmada)"))
    meta = manifest.setdefault("metadata", {})
    for name, map_entries in (("labels", overriders.labels_overrider),
                              ("annotations", overriders.annotations_overrider)):
        for map_entry in map_entries:
            meta[name] = _override_map(meta.get(name) or {}, map_entry)
            notes.append(f"{where}: {name} {map_entry.operator} {sorted(map_entry.value)}")
    for index, field in enumerate(overriders.field_overrider):
        _override_field(manifest, index, field)
        notes.append(f"{where}: fieldOverrider {field.field_path}")
    for index, patch in enumerate(overriders.plaintext):
        manifest = _json_patch(manifest, index, patch)
        notes.append(f"{where}: {patch.operator} {patch.path}")
    return manifest


def _override_field(manifest: JSON, index: int, field: FieldOverrider) -> None:
    """Karmada's fieldOverrider: YAML operations win when both are given (validation
    refuses that anyway), the string is re-encoded in its own format."""
    where = f"fieldOverrider[{index}]"
    try:
        text = jsonpointer.resolve_pointer(manifest, field.field_path)
    except jsonpointer.JsonPointerException:
        raise OverrideError(f"{where}: {field.field_path} does not exist") from None
    if not isinstance(text, str):
        raise OverrideError(f"{where}: {field.field_path} is not a string")
    as_yaml = bool(field.yaml_ops)
    try:
        if as_yaml:
            found = documents.yaml_documents(text)
            data = found[0] if found else None
        else:
            data = documents.json_document(text)
    except documents.TextError as exc:
        kind = "YAML" if as_yaml else "JSON"
        raise OverrideError(f"{where}: {field.field_path} is not {kind}: {exc}") from None
    operations: list[JSON] = []
    for op in field.yaml_ops if as_yaml else field.json_ops:
        operation: JSON = {"op": op.operator, "path": op.sub_path}
        if op.operator != "remove":
            operation["value"] = op.value
        operations.append(operation)
    try:
        patched = jsonpatch.apply_patch(data, operations)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException):
        raise OverrideError(f"{where}: a subPath does not exist in {field.field_path}") from None
    encoded = yaml.safe_dump(patched, sort_keys=True, default_flow_style=False) if as_yaml \
        else json.dumps(patched, separators=(",", ":"))
    jsonpointer.set_pointer(manifest, field.field_path, encoded)


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

KARMADA_POD_SPECS = {
    "Pod": ("spec",),
    **{kind: _DEFAULT_POD_SPEC
       for kind in ("ReplicaSet", "Deployment", "DaemonSet", "StatefulSet", "Job")},
}
"""Where Karmada's image, command and args overriders look (pkg/util/overridemanager):
these six kinds, their ``containers`` only. A ``policy.karmada.io`` policy gets exactly
that: a CronJob or initContainers are left alone and a container name that matches
nothing is skipped, silently in Karmada and with a note in the binding's explanation
here. Our own group goes further, and says so: CronJobs and initContainers are
overridden too, and a rule that matches no container is an error naming it (a typo in a
container name is not a no-op)."""


def pod_spec(manifest: JSON) -> JSON | None:
    path = _POD_SPEC_PATHS.get(str(manifest.get("kind")), _DEFAULT_POD_SPEC)
    node: Any = manifest
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def _containers(manifest: JSON, karmada: bool = False) -> list[JSON]:
    if karmada:
        path = KARMADA_POD_SPECS.get(str(manifest.get("kind")))
        node: Any = manifest if path is not None else None
        for part in path or ():
            node = node.get(part) if isinstance(node, dict) else None
        containers = node.get("containers") if isinstance(node, dict) else None
        return [c for c in containers or [] if isinstance(c, dict)]
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


def _override_images(manifest: JSON, overrider: ImageOverrider, karmada: bool = False) -> bool:
    """Override the image(s); False when a Karmada policy's rule found none to change."""
    if overrider.predicate is not None:
        path = overrider.predicate.path
        if not is_image_path(pointer_parts(path) or []):
            raise OverrideRefused(f"imageOverrider predicate path {path} is not a "
                                  "container image field")
        try:
            image = jsonpointer.resolve_pointer(manifest, path)
        except jsonpointer.JsonPointerException:
            raise OverrideError(f"imageOverrider predicate path {path} does not exist") from None
        if not isinstance(image, str):
            raise OverrideError(f"imageOverrider predicate path {path} is not an image string")
        jsonpointer.set_pointer(manifest, path, override_image(image, overrider))
        return True
    containers = _containers(manifest, karmada)
    if not containers:
        if karmada:
            return False
        raise OverrideError(f"imageOverrider: {manifest.get('kind')} has no containers")
    for container in containers:
        if container.get("image"):
            container["image"] = override_image(container["image"], overrider)
    return True


def _override_list(manifest: JSON, field: str, entry: CommandArgsOverrider,
                   karmada: bool = False) -> bool:
    """Change one container's command or args; False when a Karmada policy's rule names no
    container of the object (Karmada skips it)."""
    for container in _containers(manifest, karmada):
        if container.get("name") == entry.container_name:
            values = list(container.get(field) or [])
            if entry.operator == "add":
                values += entry.value
            else:
                values = [v for v in values if v not in entry.value]
            container[field] = values
            return True
    if karmada:
        return False
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


# -- what no override may change ------------------------------------------------------------

PROTECTED_FIELDS: tuple[tuple[str, ...], ...] = (
    ("apiVersion",), ("kind",),
    ("metadata", "name"), ("metadata", "generateName"), ("metadata", "namespace"),
    ("metadata", "uid"), ("metadata", "ownerReferences"), ("metadata", "finalizers"),
    ("metadata", "resourceVersion"), ("metadata", "generation"),
    ("metadata", "creationTimestamp"), ("metadata", "deletionTimestamp"),
    ("metadata", "deletionGracePeriodSeconds"), ("metadata", "managedFields"),
    ("metadata", "selfLink"),
)
"""Identity (where the write goes), ownership (who deletes the copy: ownerReferences and
finalizers could make a copy outlive its template) and server bookkeeping."""
MARK_MAPS: tuple[tuple[str, ...], ...] = (("metadata", "labels"), ("metadata", "annotations"))
"""Maps whose ``federation.io/`` keys are ours (ownership marks, decisions)."""
_IMAGE_PATHS = (("spec",), ("spec", "template", "spec"),
                ("spec", "jobTemplate", "spec", "template", "spec"))
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
_MISSING = object()


def is_our_key(key: str) -> bool:
    """A label or annotation key in our domain (``federation.io/x``, ``a.federation.io/x``)."""
    prefix, slash, _ = key.partition("/")
    prefix = prefix.casefold()
    return bool(slash) and (prefix == manifests.DOMAIN or
                            prefix.endswith("." + manifests.DOMAIN))


def pointer_parts(path: str) -> list[str] | None:
    """The decoded tokens of a JSON pointer (``~1`` is ``/``, ``~0`` is ``~``); None if
    it is not a valid pointer."""
    try:
        return list(jsonpointer.JsonPointer(path).parts)
    except jsonpointer.JsonPointerException:
        return None


def is_image_path(parts: Sequence[str]) -> bool:
    """``/spec[/template/spec|/jobTemplate/spec/template/spec]/<list>/<n>/image``."""
    head, tail = tuple(parts[:-3]), parts[-3:]
    return (head in _IMAGE_PATHS and len(tail) == 3 and tail[0] in _CONTAINER_LISTS
            and tail[1].isdigit() and tail[2] == "image")


def refusals(policy: OverridePolicy) -> list[str]:
    """Every rule of ``policy`` that would change a protected field, located and explained:
    ``overrideRules[0].overriders.plaintext[1]: path /kind may not be overridden``."""
    found: list[str] = []
    for index, rule in enumerate(policy.spec.rules):
        where = f"overrideRules[{index}].overriders"
        found += _rule_refusals(rule.overriders, where)
    return found


def _rule_refusals(overriders: Overriders, where: str) -> list[str]:
    found = []
    for index, image in enumerate(overriders.image_overrider):
        if image.predicate is not None and not is_image_path(
                pointer_parts(image.predicate.path) or []):
            found.append(f"{where}.imageOverrider[{index}].predicate.path: "
                         f"{image.predicate.path} is not a container image field")
    for name, entries in (("labelsOverrider", overriders.labels_overrider),
                          ("annotationsOverrider", overriders.annotations_overrider)):
        for index, entry in enumerate(entries):
            ours = sorted(key for key in entry.value if is_our_key(key))
            if ours:
                found.append(f"{where}.{name}[{index}]: key {ours[0]} may not be "
                             f"overridden ({manifests.DOMAIN}/ keys are the control plane's)")
    for index, patch in enumerate(overriders.plaintext):
        problem = plaintext_refusal(patch)
        if problem is not None:
            found.append(f"{where}.plaintext[{index}]: {problem}")
    for index, field in enumerate(overriders.field_overrider):
        found += [f"{where}.fieldOverrider[{index}]: {problem}"
                  for problem in field_problems(field)]
    return found


def field_problems(field: FieldOverrider) -> list[str]:
    """Karmada's rules (exactly one of json and yaml, valid pointers) and ours: the string
    it rewrites may not be a protected field."""
    found = []
    if bool(field.json_ops) == bool(field.yaml_ops):
        found.append("exactly one of json and yaml must be set")
    for name, ops in (("json", field.json_ops), ("yaml", field.yaml_ops)):
        for index, op in enumerate(ops):
            if pointer_parts(op.sub_path) is None:
                found.append(f"{name}[{index}].subPath: {op.sub_path} is not a JSON pointer")
            if op.operator != "remove" and op.value is None:
                found.append(f"{name}[{index}].value: required for {op.operator}")
    protected = plaintext_refusal(PlaintextOverrider(path=field.field_path,
                                                     operator="replace", value=""))
    if protected is not None:
        found.append(f"fieldPath: {protected}")
    return found


def plaintext_refusal(patch: PlaintextOverrider) -> str | None:
    """Why a JSON patch may not be applied to a member copy, or None."""
    parts = pointer_parts(patch.path)
    if parts is None:
        return f"path {patch.path} is not a valid JSON pointer"
    shown = patch.path or "(root)"
    folded = tuple(part.casefold() for part in parts)
    for field in PROTECTED_FIELDS:
        protected = tuple(part.casefold() for part in field)
        if folded[:len(protected)] == protected or protected[:len(folded)] == folded:
            return f"path {shown} may not be overridden"
    for field in MARK_MAPS:
        protected = tuple(part.casefold() for part in field)
        if folded[:len(protected)] != protected:
            continue
        if len(parts) > len(field) and is_our_key(parts[len(field)]):
            return f"path {shown} may not be overridden ({manifests.DOMAIN}/ keys are the " \
                   "control plane's)"
        if len(parts) == len(field):
            return _whole_map_refusal(patch, shown)
    return None


def _whole_map_refusal(patch: PlaintextOverrider, shown: str) -> str | None:
    """``/metadata/labels`` as a whole: a map of plain keys may replace it; removing it (or
    a value that is not such a map) could drop or forge our marks."""
    if patch.operator == "remove":
        return f"path {shown} may not be removed as a whole (remove single keys instead)"
    if not isinstance(patch.value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in patch.value.items()):
        return f"path {shown}: value must be a map of strings"
    ours = sorted(key for key in patch.value if is_our_key(key))
    if ours:
        return f"path {shown}: key {ours[0]} may not be overridden"
    return None


def protected_values(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The protected fields a manifest has (and its ``federation.io/`` keys), by path."""
    found: dict[str, Any] = {}
    for field in PROTECTED_FIELDS:
        node: Any = manifest
        for part in field:
            node = node.get(part, _MISSING) if isinstance(node, dict) else _MISSING
        if node is not _MISSING:
            found["/" + "/".join(field)] = node
    for field in MARK_MAPS:
        node = (manifest.get("metadata") or {}).get(field[-1])
        values = node if isinstance(node, dict) else {}
        for key, value in values.items():
            if is_our_key(str(key)):
                found["/" + "/".join(field) + "/" + str(key)] = value
    return copy.deepcopy(found)  # a snapshot: later rules may change lists in place


def protected_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> str | None:
    """The first protected path whose value differs between two :func:`protected_values`."""
    for path in sorted(set(before) | set(after)):
        if before.get(path, _MISSING) != after.get(path, _MISSING):
            return path
    return None
