"""User definitions: KubeVela's ComponentDefinition and TraitDefinition, rendered from CUE.

KubeVela's types are definitions (``core.oam.dev/v1beta1``): a ``ComponentDefinition``
whose CUE template exports ``output`` (the workload) and ``outputs`` (auxiliary objects),
a ``TraitDefinition`` whose template exports a ``patch`` for the component's workload and
``outputs`` of its own. This module loads them (:func:`load`: every field honoured or
refused by name), gathers those an administrator wrote (:class:`Catalog`: only the
system namespaces count; a definition elsewhere is a tenant's and is never used) and
renders with them (:class:`Rendering`, the :class:`~.render.UserTypes` the renderer
calls). Precedence: a definition in a system namespace named like a built-in replaces
the built-in (in KubeVela the built-ins are definitions in ``vela-system`` too).

Evaluation is not done here: each CUE evaluation is a request (:func:`request`: the
template, ``parameter``, ``context``) handed to an :data:`Evaluate` callable, which the
CLI answers in process (:func:`inline`) and the controller from a memo filled by worker
processes (``federation.controllers.applications.definitions``). An evaluator may answer
``None`` (not evaluated yet): the render then goes on with a placeholder so every
evaluation this compile needs is asked in one pass; such a compile is never used.

A trait's ``patch`` is applied with KubeVela's strategies (:func:`patch_object`): maps
merge, equal scalars agree and different ones conflict (CUE unification), a list merges
element by element unless a ``// +patchKey=name`` comment makes it merge by that key,
``// +patchStrategy=retainKeys`` / ``replace`` replace, and ``jsonMergePatch`` /
``jsonPatch`` on ``patch`` itself apply RFC 7386 / RFC 6902.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from federation.applications import (
    custom_status,
    helmchart,
    jsonpatch,
    model,
    render,
    terraform,
)
from federation.applications.model import AppError, Component, Trait
from federation.untrusted.text import one_line

JSON = dict[str, Any]

GROUP_VERSION = "core.oam.dev/v1beta1"
KINDS = {"ComponentDefinition": "component", "TraitDefinition": "trait",
         "PolicyDefinition": "policy", "WorkflowStepDefinition": "step"}
"""Each definition kind and the Application field whose ``type`` names it."""
SYSTEM_NAMESPACES = ("vela-system", "federation-system")
"""Where definitions count (``fedctl run --definition-namespaces``): KubeVela's own, and
ours. Only an administrator may write there; a tenant's definition is never used."""
COMPONENT_FIELDS = ("output", "outputs", "errs")
TRAIT_FIELDS = ("patch", "outputs", "patchOutputs", "errs")
OUTPUT_KEY = render.OUTPUT_KEY
PENDING = "federation.io/pending-evaluation"

Evaluate = Callable[[JSON], JSON | None]
"""A request's answer: ``{"values": ..., "directives": [...]}`` or ``{"error": line}``;
None: not evaluated yet."""


class DefinitionError(ValueError):
    """A definition that cannot be honoured; the message names the field (one line)."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


# -- loading ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Definition:
    kind: str
    """``ComponentDefinition``, ``TraitDefinition``, ``PolicyDefinition`` or
    ``WorkflowStepDefinition``."""
    name: str
    namespace: str
    template: str
    """The CUE text (``spec.schematic.cue.template``)."""
    workload: str = ""
    """A component's workload, ``resource.group`` (``deployments.apps``) or its
    ``workload.type``; what traits' ``appliesToWorkloads`` match."""
    applies_to: tuple[str, ...] = ()
    conflicts_with: tuple[str, ...] = ()
    spec: JSON = dataclasses.field(default_factory=dict, compare=False)
    """The spec as written (what a revision snapshots)."""
    health_policy: str = ""
    """``spec.status.healthPolicy``: CUE setting ``isHealth`` (:mod:`.custom_status`)."""
    custom_status: str = ""
    """``spec.status.customStatus``: CUE setting ``message``."""
    module: terraform.Module | None = None
    """``spec.schematic.terraform`` (then ``template`` is empty): a Terraform component,
    rendered as a Configuration without CUE (:mod:`.terraform`)."""
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)
    """``metadata.annotations``: a Terraform component's Configuration carries them."""

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


_ALLOWED = {
    "ComponentDefinition": {"schematic", "workload", "status", "version"},
    "TraitDefinition": {"schematic", "appliesToWorkloads", "conflictsWith", "podDisruptive",
                        "workloadRefPath", "status", "version"},
    "PolicyDefinition": {"schematic", "version"},
    "WorkflowStepDefinition": {"schematic", "version"},
}
"""Spec fields honoured; any other is refused by name (``status.details``,
``revisionLabel``, ``childResourceKinds``...). ``podDisruptive`` only says
whether a change restarts pods (KubeVela reads it for nothing else); ``workloadRefPath``
is accepted empty only; ``version`` names the definition's revision
(:mod:`.definition_revisions`)."""
NAMED_REVISION = "definitionrevision.oam.dev/name"
"""vela-core's annotation naming a definition's revision otherwise: refused by name
(``spec.version`` does it)."""
SEMVER_NUMBER = r"(?:0|[1-9][0-9]*)"
SEMVER_PRERELEASE = r"(?:-[0-9a-z-]+(?:\.[0-9a-z-]+)*)"
SPEC_VERSION = re.compile(rf"^v?({SEMVER_NUMBER})(?:\.({SEMVER_NUMBER}))?"
                          rf"(?:\.({SEMVER_NUMBER}))?({SEMVER_PRERELEASE})?$")
"""A definition's ``spec.version``, as vela-core's semver reads it (``1.2`` is 1.2.0); lower
case, since it becomes part of an object name."""


def spec_version(spec: Mapping[str, Any], where: str) -> str | None:
    """``spec.version`` in its canonical form (``1.2`` -> ``1.2.0``), None when absent
    (:class:`DefinitionError` when it is no semantic version)."""
    value = spec.get("version")
    if value is None or value == "":
        return None
    found = SPEC_VERSION.match(value) if isinstance(value, str) else None
    if found is None:
        raise DefinitionError(f"{where}: spec.version: a semantic version such as 1.2.0 "
                              f"(lower case), not {value!r}")
    major, minor, patch, pre = found.groups()
    return f"{major}.{minor or 0}.{patch or 0}{pre or ''}"


def load(doc: Mapping[str, Any]) -> Definition:
    """A definition document as a :class:`Definition` (:class:`DefinitionError`)."""
    kind = str(doc.get("kind"))
    meta = _meta(doc)
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    where = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
    if kind not in KINDS:
        raise DefinitionError(f"{where}: not a definition kind ({', '.join(KINDS)})")
    if doc.get("apiVersion") != GROUP_VERSION:
        raise DefinitionError(f"{where}: apiVersion: only {GROUP_VERSION}")
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise DefinitionError(f"{where}: spec: a map")
    for key in spec:
        if key not in _ALLOWED[kind]:
            raise DefinitionError(f"{where}: spec.{_field_name(spec, key)}: not supported by "
                                  "this control plane")
    spec_version(spec, where)
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping) and NAMED_REVISION in annotations:
        raise DefinitionError(f"{where}: metadata.annotations.{NAMED_REVISION}: not supported "
                              "by this control plane (spec.version names a revision)")
    if spec.get("workloadRefPath") not in (None, ""):
        raise DefinitionError(f"{where}: spec.workloadRefPath: not supported")
    if not isinstance(spec.get("podDisruptive", False), bool):
        raise DefinitionError(f"{where}: spec.podDisruptive: true or false")
    health, custom = _status(spec, where)
    module = _terraform(kind, spec, where)
    if module is not None and (health or custom):
        raise DefinitionError(f"{where}: spec.status: not with a Terraform schematic "
                              "(vela-core judges its Configuration by its apply state)")
    return Definition(kind, name, namespace, "" if module else _template(spec, where),
                      _workload(spec, where), _names(spec, "appliesToWorkloads", where),
                      _names(spec, "conflictsWith", where), dict(spec), health, custom,
                      module, _annotations(meta, where) if module else {})


def _terraform(kind: str, spec: Mapping[str, Any], where: str) -> terraform.Module | None:
    """``spec.schematic.terraform`` of a ComponentDefinition (alone in the schematic)."""
    schematic = spec.get("schematic")
    if not isinstance(schematic, dict) or "terraform" not in schematic:
        return None
    if kind != "ComponentDefinition" or len(schematic) != 1:
        raise DefinitionError(f"{where}: spec.schematic.terraform: only alone, in a "
                              "ComponentDefinition")
    module = schematic["terraform"]
    if not isinstance(module, dict):
        raise DefinitionError(f"{where}: spec.schematic.terraform: a map")
    try:
        return terraform.module_of(module, where)
    except terraform.ModuleError as exc:
        raise DefinitionError(str(exc)) from None


def _annotations(meta: Mapping[str, Any], where: str) -> dict[str, str]:
    found = meta.get("annotations") or {}
    if not isinstance(found, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in found.items()):
        raise DefinitionError(f"{where}: metadata.annotations: a map of strings")
    return dict(found)


def _status(spec: Mapping[str, Any], where: str) -> tuple[str, str]:
    """``spec.status``: ``healthPolicy`` and ``customStatus``, CUE texts (evaluated once the
    objects run, :mod:`.custom_status`); ``details`` is refused by name."""
    status = spec.get("status")
    if status is None:
        return "", ""
    if not isinstance(status, dict):
        raise DefinitionError(f"{where}: spec.status: a map")
    for key in status:
        if key not in ("healthPolicy", "customStatus"):
            raise DefinitionError(f"{where}: spec.status.{key}: not supported by this "
                                  "control plane (healthPolicy and customStatus are)")
    texts = []
    for key in ("healthPolicy", "customStatus"):
        text = status.get(key)
        if text is not None and not isinstance(text, str):
            raise DefinitionError(f"{where}: spec.status.{key}: a CUE text")
        texts.append(text.strip() if isinstance(text, str) else "")
    return texts[0], texts[1]


def _field_name(spec: Mapping[str, Any], key: str) -> str:
    """``status.healthPolicy`` rather than ``status``: what exactly is not honoured."""
    value = spec.get(key)
    if isinstance(value, dict) and value:
        return f"{key}.{sorted(value)[0]}"
    return key


def _template(spec: Mapping[str, Any], where: str) -> str:
    schematic = spec.get("schematic")
    if not isinstance(schematic, dict) or not schematic:
        raise DefinitionError(f"{where}: spec.schematic.cue.template: required")
    for key in schematic:
        if key != "cue":
            raise DefinitionError(f"{where}: spec.schematic.{key}: not supported (only CUE "
                                  "templates, spec.schematic.cue, and terraform)")
    cue = schematic["cue"]
    if not isinstance(cue, dict) or set(cue) - {"template"}:
        raise DefinitionError(f"{where}: spec.schematic.cue: only template")
    template = cue.get("template")
    if not isinstance(template, str) or not template.strip():
        raise DefinitionError(f"{where}: spec.schematic.cue.template: a CUE text")
    return template


def _workload(spec: Mapping[str, Any], where: str) -> str:
    workload = spec.get("workload")
    if workload is None:
        return ""
    if not isinstance(workload, dict) or set(workload) - {"definition", "type"}:
        raise DefinitionError(f"{where}: spec.workload: definition and/or type")
    definition = workload.get("definition")
    if isinstance(definition, dict):
        if set(definition) - {"apiVersion", "kind"} or \
                not all(isinstance(definition.get(k), str) for k in ("apiVersion", "kind")):
            raise DefinitionError(f"{where}: spec.workload.definition: apiVersion and kind")
        group = definition["apiVersion"].rpartition("/")[0]
        plural = definition["kind"].lower() + "s"
        return f"{plural}.{group}" if group else plural
    if definition is not None:
        raise DefinitionError(f"{where}: spec.workload.definition: apiVersion and kind")
    kind = workload.get("type")
    if kind is not None and not isinstance(kind, str):
        raise DefinitionError(f"{where}: spec.workload.type: a string")
    return str(kind or "")


def _names(spec: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = spec.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DefinitionError(f"{where}: spec.{key}: a list of names")
    return tuple(value)


# -- the catalog ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Catalog:
    """The definitions that count, by (field, type name), and why others do not."""

    definitions: Mapping[tuple[str, str], Definition] = dataclasses.field(default_factory=dict)
    refused: Mapping[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    """A system namespace's definition that cannot be honoured: the reason, said to any
    Application naming its type."""
    ignored: Mapping[tuple[str, str], tuple[str, ...]] = dataclasses.field(
        default_factory=dict)
    """Definitions outside the system namespaces: the namespaces they are in."""
    namespaces: tuple[str, ...] = SYSTEM_NAMESPACES

    def get(self, field: str, name: str) -> Definition | None:
        return self.definitions.get((field, name))

    def types(self) -> model.Types:
        """The types an Application may name, and what to say of the others."""
        notes = {key: reason for key, reason in self.refused.items()}
        for key, where in self.ignored.items():
            notes.setdefault(key, f"the {_kind_of(key[0])} {key[1]!r} in namespace "
                             f"{', '.join(where)} is not used: definitions count only in "
                             f"{', '.join(self.namespaces)}")
        for (field, name), definition in self.definitions.items():
            if field in ("policy", "step"):
                notes[(field, name)] = f"{definition.ref}: this control plane evaluates only "\
                    "ComponentDefinitions and TraitDefinitions"
        return model.Types(
            components=frozenset(model.COMPONENT_TYPES) | self._names("component"),
            traits=frozenset(model.TRAIT_TYPES) | self._names("trait"), notes=notes)

    def _names(self, field: str) -> frozenset[str]:
        return frozenset(n for f, n in self.definitions if f == field)

    def used(self, spec: Mapping[str, Any]) -> dict[str, JSON]:
        """What a revision snapshots: ``Kind/name`` -> the spec of each definition whose
        type the Application's components, traits or override policies name."""
        found: dict[str, JSON] = {}
        for field, name in types_named(spec):
            definition = self.get(field, name)
            if definition is not None:
                found[f"{definition.kind}/{name}"] = {
                    "namespace": definition.namespace, "spec": definition.spec}
                if definition.annotations:  # a Terraform component's Configuration's
                    found[f"{definition.kind}/{name}"]["annotations"] = \
                        dict(definition.annotations)
        return dict(sorted(found.items()))


def _kind_of(field: str) -> str:
    return next(k for k, f in KINDS.items() if f == field)


def catalog(docs: Iterable[Mapping[str, Any]],
            namespaces: Sequence[str] = SYSTEM_NAMESPACES) -> tuple[Catalog, list[JSON]]:
    """The catalog of ``docs`` (definition documents of any namespace), and the reports:
    each definition not used, with the reason (for a condition on it)."""
    definitions: dict[tuple[str, str], Definition] = {}
    refused: dict[tuple[str, str], str] = {}
    ignored: dict[tuple[str, str], list[str]] = {}
    reports: list[JSON] = []
    # vela-system before federation-system: the first namespace listed wins a name
    ordered = sorted(docs, key=lambda d: _rank(d, namespaces))
    for doc in ordered:
        meta = _meta(doc)
        key = (KINDS.get(str(doc.get("kind")), ""), str(meta.get("name") or ""))
        namespace = str(meta.get("namespace") or "")
        if namespace not in namespaces:
            ignored.setdefault(key, []).append(namespace)
            reports.append({"doc": doc, "reason": "NotInSystemNamespace", "message":
                            f"not used: definitions count only in {', '.join(namespaces)}"})
            continue
        if key in definitions or key in refused:
            reports.append({"doc": doc, "reason": "Shadowed", "message": "not used: a "
                            "definition of that name in an earlier system namespace wins"})
            continue
        try:
            definitions[key] = load(doc)
        except DefinitionError as exc:
            refused[key] = str(exc)
            reports.append({"doc": doc, "reason": "Refused", "message": str(exc)})
    return Catalog(definitions, refused, {k: tuple(v) for k, v in ignored.items()},
                   tuple(namespaces)), reports


def _meta(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = doc.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _rank(doc: Mapping[str, Any], namespaces: Sequence[str]) -> tuple[int, str]:
    namespace = str(_meta(doc).get("namespace") or "")
    return (list(namespaces).index(namespace) if namespace in namespaces else len(namespaces),
            namespace)


def from_snapshot(snapshot: Mapping[str, Any]) -> Catalog:
    """The catalog a revision recorded (``Kind/name`` -> namespace and spec): rollback
    renders with the definitions as they were."""
    docs: list[JSON] = []
    for key, entry in snapshot.items():
        if isinstance(entry, dict):
            kind, _, name = key.partition("/")
            meta = {"name": name, "namespace": str(entry.get("namespace"))}
            if entry.get("annotations"):
                meta["annotations"] = entry["annotations"]
            docs.append({"apiVersion": GROUP_VERSION, "kind": kind, "metadata": meta,
                         "spec": entry.get("spec")})
    namespaces = tuple(sorted({str(d["metadata"]["namespace"]) for d in docs}))
    return catalog(docs, namespaces)[0]


def types_named(spec: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(field, type) of every type the spec names: components (its own and those an
    override policy brings), traits, policies, steps."""
    found: set[tuple[str, str]] = set()
    components = list(_maps(spec.get("components")))
    for policy in _maps(spec.get("policies")):
        found.add(("policy", str(policy.get("type"))))
        props = policy.get("properties")
        if isinstance(props, dict):
            components += list(_maps(props.get("components")))
    for component in components:
        found.add(("component", str(component.get("type"))))
        found.update(("trait", str(t.get("type"))) for t in _maps(component.get("traits")))
    workflow = spec.get("workflow")
    if isinstance(workflow, dict):
        found.update(("step", str(s.get("type"))) for s in _maps(workflow.get("steps")))
    return found


def _maps(value: Any) -> Iterable[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


# -- evaluation requests ----------------------------------------------------------------------


def request(definition: Definition, parameter: Mapping[str, Any], context: Mapping[str, Any],
            fields: Sequence[str]) -> JSON:
    """One CUE evaluation: a JSON value, so it can cross a pipe and be hashed. Values YAML
    reads as other types (a date) are strings, as the API server (JSON) would give them."""
    data = json.loads(json.dumps({"parameter": parameter, "context": context}, default=str))
    return {"template": definition.template, "name": definition.ref, **data,
            "fields": list(fields)}


def request_key(req: Mapping[str, Any]) -> str:
    """SHA-256 of a request: equal requests (template, parameters, context) have equal
    answers."""
    text = json.dumps(req, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Answers:
    """An :data:`Evaluate` over known answers (``lookup``: request key -> answer): a miss
    is recorded in :attr:`pending` and answered None (the caller evaluates the pending
    requests and compiles again)."""

    def __init__(self, lookup: Callable[[str], JSON | None]) -> None:
        self.lookup = lookup
        self.pending: dict[str, JSON] = {}

    def __call__(self, req: JSON) -> JSON | None:
        key = request_key(req)
        found = self.lookup(key)
        if found is None:
            self.pending[key] = req
        return found


# -- rendering --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AppInfo:
    """What ``context`` says of the Application (KubeVela's names)."""

    name: str
    revision: int = 1
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    components: tuple[JSON, ...] = ()


@dataclasses.dataclass(frozen=True)
class Rendering:
    """The renderer's :class:`~.render.UserTypes`: the catalog's components and traits,
    each evaluated through ``evaluate``."""

    catalog: Catalog
    app: AppInfo
    evaluate: Evaluate

    def types(self) -> model.Types:
        return self.catalog.types()

    def has_component(self, name: str) -> bool:
        return self._defined("component", name) is not None or name == helmchart.TYPE

    def _defined(self, kind: str, name: str) -> Definition | None:
        """The catalog's definition, but vela-core's own ``helmchart`` (its template imports
        the ``vela/helm`` provider, which is Helm: rendered by the built-in instead)."""
        found = self.catalog.get(kind, name)
        if found is not None and kind == "component" and helmchart.is_vela_core(found.template):
            return None
        return found

    def has_trait(self, name: str) -> bool:
        return self.catalog.get("trait", name) is not None

    def context(self, component: Component, namespace: str) -> JSON:
        """KubeVela's ``context`` for one component (pkg/cue/process): the names a
        template reads. ``cluster`` is empty: a render here serves every cluster of a
        topology; ``replicaKey`` is a replication policy's key for this copy ("" for none);
        ``revision`` the component's hash (:meth:`~.model.Component.revision`)."""
        app = self.app
        return {"name": component.name, "namespace": namespace, "appName": app.name,
                "appRevision": f"{app.name}-v{app.revision}",
                "appRevisionNum": app.revision, "appLabels": dict(app.labels),
                "appAnnotations": dict(app.annotations), "componentType": component.type,
                "components": list(app.components), "workflowName": app.name,
                "publishVersion": app.annotations.get("app.oam.dev/publishVersion", ""),
                "cluster": "", "replicaKey": component.replica_key,
                "revision": component.revision()}

    def component(self, component: Component, namespace: str, where: str) -> list[JSON]:
        definition = self._defined("component", component.type)
        if definition is None:  # helmchart: rendered by Helm, through the same evaluate
            found = helmchart.render(component, namespace, where, self.evaluate, self.app.name)
            return [_placeholder(component.name)] if found is None else found
        if definition.module is not None:
            if component.traits:
                raise AppError(f"{where}.traits: not supported on a Terraform component "
                               f"({definition.ref}: its Configuration has no workload to "
                               "patch)")
            return [terraform.render(definition.module, definition.annotations,
                                     component.name, component.properties, namespace, where)]
        answer = self.evaluate(request(definition, component.properties,
                                       self.context(component, namespace), COMPONENT_FIELDS))
        if answer is None:
            return [_placeholder(component.name)]
        values = _values(answer, definition, f"{where}.type")
        output = values.get("output")
        if not isinstance(output, dict):
            raise AppError(f"{where}.type: {definition.ref}: its template exports no output "
                           "object")
        objects = [_named(output, component.name, f"{where} (output)")]
        for key, obj in _outputs(values, definition, where):
            named = _named(obj, "", f"{where} (outputs.{key})")
            objects.append({**custom_status.label_output(named, custom_status.AUXILIARY, key),
                            OUTPUT_KEY: key})
        return objects

    def trait(self, objects: list[JSON], trait: Trait, component: Component, namespace: str,
              where: str) -> list[JSON]:
        definition = self.catalog.get("trait", trait.type)
        assert definition is not None
        here = where.removesuffix(".properties")
        _check_applies(definition, objects, component, self.catalog, here)
        _check_conflicts(definition, component, here)
        if pending_in(objects):
            return objects  # the component or an earlier trait is not evaluated yet
        context = self.context(component, namespace)
        context["output"] = _clean(objects[0])
        context["outputs"] = {_key(o): _clean(o) for o in objects[1:]}
        answer = self.evaluate(request(definition, trait.properties, context, TRAIT_FIELDS))
        if answer is None:  # later traits wait for this one's patch (no wasted evaluation)
            return [*objects, _placeholder(f"{component.name}-pending")]
        values = _values(answer, definition, f"{here}.type")
        if values.get("patchOutputs"):
            raise AppError(f"{here}.type: {definition.ref}: patchOutputs is not supported")
        out = list(objects)
        if "patch" in values:
            out[0] = patch_object(objects[0], values["patch"], _directives(answer),
                                  f"{here} ({definition.ref})")
            render.check_shape(out[0], f"{here} (the patched object)")
        taken = {_key(o) for o in out[1:]}
        for key, obj in _outputs(values, definition, here):
            if key in taken:
                raise AppError(f"{here}: {definition.ref}: outputs.{key}: the component has "
                               "an output of that name already")
            named = _named(obj, "", f"{here} (outputs.{key})")
            out.append({**custom_status.label_output(named, trait.type, key), OUTPUT_KEY: key})
        return out

    def status_checks(self, component: Component, namespace: str, objects: Sequence[JSON]
                      ) -> custom_status.Checks | None:
        """The statuses to judge the rendered component by, once it runs: its own
        definition's and its traits' that have ``healthPolicy`` or ``customStatus``."""
        base = {k: v for k, v in self.context(component, namespace).items()
                if k in ("name", "namespace", "appName", "appRevision")}
        found: list[custom_status.Check] = []
        own = self._defined("component", component.type)
        if own is not None and (own.health_policy or own.custom_status):
            found.append(custom_status.Check("component", component.type, own.ref,
                                             own.health_policy, own.custom_status,
                                             dict(component.properties), base))
        for trait in component.traits:
            definition = self.catalog.get("trait", trait.type)
            if definition is not None and (definition.health_policy or
                                           definition.custom_status):
                found.append(custom_status.Check(
                    "trait", trait.type, definition.ref, definition.health_policy,
                    definition.custom_status, dict(trait.properties), base))
        if not found or not objects or pending_in(objects):
            return None
        return custom_status.Checks(component.name, custom_status.identity(objects[0]),
                                    tuple(found))


def _placeholder(name: str) -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "annotations": {PENDING: "true"}}}


def pending_in(objects: Iterable[Mapping[str, Any]]) -> bool:
    return any(PENDING in ((o.get("metadata") or {}).get("annotations") or {})
               for o in objects)


def _key(obj: Mapping[str, Any]) -> str:
    return str(obj.get(OUTPUT_KEY) or (obj.get("metadata") or {}).get("name") or "")


def _clean(obj: Mapping[str, Any]) -> JSON:
    return {k: v for k, v in obj.items() if k not in (OUTPUT_KEY, render.MADE_BY_KEY)}


def _values(answer: Mapping[str, Any], definition: Definition, where: str) -> JSON:
    if "error" in answer:
        # the evaluator names the template (its ref) itself: said once
        error = str(answer["error"]).removeprefix(f"{definition.ref}: ")
        raise AppError(f"{where}: {definition.ref}: {error}")
    values = answer.get("values")
    if not isinstance(values, dict):
        raise AppError(f"{where}: {definition.ref}: no values")
    errs = values.get("errs")
    if errs:
        first = errs[0] if isinstance(errs, list) else errs
        raise AppError(f"{where}: {definition.ref}: errs: {first}")
    return values


def _outputs(values: Mapping[str, Any], definition: Definition, where: str
             ) -> list[tuple[str, JSON]]:
    outputs = values.get("outputs") or {}
    if not isinstance(outputs, dict) or not all(isinstance(v, dict) for v in outputs.values()):
        raise AppError(f"{where}.type: {definition.ref}: outputs must be a map of objects")
    return sorted(outputs.items())


def _named(obj: Any, default: str, where: str) -> JSON:
    """A rendered object: a map with apiVersion, kind and a name (the component's for the
    workload, as KubeVela names it); status and server fields dropped."""
    if not isinstance(obj, dict):
        raise AppError(f"{where}: must be an object (a map)")
    for key in ("apiVersion", "kind"):
        if not isinstance(obj.get(key), str) or not obj[key]:
            raise AppError(f"{where}.{key}: required")
    body = dict(obj)
    meta = body.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {} if meta is None else meta
    if isinstance(meta, dict) and not meta.get("name") and default:
        meta["name"] = default
    body["metadata"] = meta
    render.check_shape(body, where)
    body.pop("status", None)
    return body


def _directives(answer: Mapping[str, Any]) -> dict[tuple[str, ...], dict[str, str]]:
    """``patch``'s comments: path under ``patch`` -> {patchKey|patchStrategy: value}."""
    found: dict[tuple[str, ...], dict[str, str]] = {}
    for entry in answer.get("directives") or []:
        path, name, value = entry
        # list indexes are dropped: a directive inside a list item applies to each item
        parts = tuple(str(p) for p in path
                      if not isinstance(p, int) and not str(p).strip("[]").isdigit())
        if parts[:1] == ("patch",):
            found.setdefault(parts[1:], {})[str(name)] = str(value)
    return found


def _check_applies(definition: Definition, objects: Sequence[Mapping[str, Any]],
                   component: Component, catalog: Catalog, where: str) -> None:
    """KubeVela's ``appliesToWorkloads``: ``*``, the component's type, or its workload as
    ``resource.group``, ``Kind.group`` or its kind (KubeVela itself checks nothing at
    apply time; its CLI lists traits by these names)."""
    wanted = definition.applies_to
    if not wanted or "*" in wanted:
        return
    workload = objects[0] if objects else {}
    kind = str(workload.get("kind") or "")
    group = str(workload.get("apiVersion") or "").rpartition("/")[0]
    plural = kind.lower() + "s"
    names = {component.type, kind, f"{plural}.{group}" if group else plural}
    if group:  # the fluxcd addon's helm-labels writes the kind: HelmRelease.helm.toolkit...
        names.add(f"{kind}.{group}")
    owner = catalog.get("component", component.type)
    if owner is not None and owner.workload:
        names.add(owner.workload)
    if not names & set(wanted) and not pending_in(objects):
        raise AppError(f"{where}.type: {definition.ref} applies to {', '.join(wanted)}, "
                       f"not to a {component.type} component ({kind})")


def _check_conflicts(definition: Definition, component: Component, where: str) -> None:
    others = {t.type for t in component.traits}
    clash = sorted(others & set(definition.conflicts_with))
    if clash:
        raise AppError(f"{where}.type: {definition.ref} conflicts with trait {clash[0]!r}")


# -- patch strategies -------------------------------------------------------------------------

Directives = Mapping[tuple[str, ...], Mapping[str, str]]


def patch_object(base: JSON, patch: Any, directives: Directives, where: str) -> JSON:
    """``patch`` applied to ``base`` with KubeVela's strategies (see the module)."""
    strategy = (directives.get(()) or {}).get("patchStrategy")
    if strategy == "jsonMergePatch":
        result = jsonpatch.merge_patch(base, patch)
        return result if isinstance(result, dict) else base
    if strategy == "jsonPatch":
        operations = patch.get("operations") if isinstance(patch, dict) else None
        return jsonpatch.apply(base, operations, f"{where} patch.operations")
    if strategy not in (None, "retainKeys", "replace"):
        raise AppError(f"{where}: patch: patchStrategy {strategy!r} is not one of "
                       "retainKeys, replace, jsonMergePatch, jsonPatch")
    merged = _unify(base, patch, (), directives, where)
    if not isinstance(merged, dict):
        raise AppError(f"{where}: patch: must be a map")
    return merged


def _unify(base: Any, patch: Any, path: tuple[str, ...], directives: Directives,
           where: str, key: str = "") -> Any:
    """CUE unification of ``patch`` into ``base`` with KubeVela's comments: a ``patchKey``
    holds for every list below the field it is written on (as KubeVela's walker passes
    tags down: ``// +patchKey=name`` above ``spec: template: spec: containers:``), a
    ``patchStrategy`` for its own field only."""
    tags = directives.get(path) or {}
    key = tags.get("patchKey") or key
    strategy = tags.get("patchStrategy")
    if strategy == "replace" or base is None:
        return patch
    retain = strategy == "retainKeys" and bool(path)
    if isinstance(base, dict) and isinstance(patch, dict):
        out = {} if retain else dict(base)
        for name, value in patch.items():
            out[name] = _unify(None if retain else base.get(name), value,
                               (*path, str(name)), directives, where, key)
        return out
    if isinstance(base, list) and isinstance(patch, list):
        if key:
            return _merge_by_key(base, patch, key, path, directives, where, retain)
        if retain:
            return patch
        if len(patch) < len(base):
            raise AppError(f"{where}: patch: {_dotted(path)}: a list of {len(patch)} items "
                           f"cannot unify with the workload's {len(base)} (add "
                           "// +patchKey=<field> to merge by key)")
        merged = [_unify(b, p, path, directives, where, key)
                  for b, p in zip(base, patch[:len(base)], strict=True)]
        return merged + patch[len(base):]
    if base == patch and type(base) is type(patch):
        return patch
    if retain:
        return patch
    raise AppError(f"{where}: patch: {_dotted(path)}: conflicts with the workload's value "
                   "(CUE unification: use // +patchStrategy=retainKeys or replace to "
                   "override)")


def _merge_by_key(base: list[Any], patch: list[Any], keys: str, path: tuple[str, ...],
                  directives: Directives, where: str, retain: bool) -> list[Any]:
    """KubeVela's ``+patchKey``: an item whose key equals a base item's merges into it (or,
    with retainKeys, replaces it); the others are appended, in the patch's order."""
    key = next((k for k in keys.split(",")
                if any(_lookup(p, k) is not None for p in patch)), keys.split(",")[0])
    out = list(base)
    for item in patch:
        value = _lookup(item, key)
        index = next((i for i, b in enumerate(out)
                      if value is not None and _lookup(b, key) == value), None)
        if index is None:
            out.append(item)
        else:
            out[index] = item if retain else _unify(out[index], item, path, directives,
                                                     where, keys)
    return out


def _lookup(item: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(item, dict):
            return None
        item = item.get(part)
    return item


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path) or "(the whole object)"
