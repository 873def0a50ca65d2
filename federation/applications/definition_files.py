"""Definitions written as KubeVela's CUE definition files, as the objects KubeVela installs.

The addon catalog keeps its definitions as ``.cue`` files (``helm: {type: "component",
attributes: {...}, description: ...}`` and ``template: {...}``); ``vela addon enable``
and ``vela def apply`` turn each into a ComponentDefinition, TraitDefinition,
PolicyDefinition or WorkflowStepDefinition in ``vela-system`` (vela-core
``pkg/definition``, ``FromCUE``). :func:`from_cue_file` does the same, so an
administrator's ``.cue`` file means here what it means there: the metadata's ``type``
picks the kind, ``attributes`` is the spec, the template text is
``spec.schematic.cue.template``, ``description`` and ``alias`` are the
``definition.oam.dev/`` annotations, and ``annotations``/``labels`` keep a key naming
``oam.dev`` as written and put any other under ``custom.definition.oam.dev/``.

What the object then means is :func:`federation.applications.definitions.load`'s to say
(the same field-by-field check as a definition applied as YAML). A metadata key vela-core
would drop silently is refused here by name; so is ``type: "workload"`` (WorkloadDefinitions
are not served). Converting runs nothing and reads nothing: the metadata is evaluated by
:mod:`federation.cue` within its budget, the template is only cut out as text.
"""

from __future__ import annotations

from typing import Any

from federation.applications.definitions import GROUP_VERSION, SYSTEM_NAMESPACES, DefinitionError
from federation.cue import CueError
from federation.cue.definition_file import split_definition_file

JSON = dict[str, Any]

KIND_OF_TYPE = {"component": "ComponentDefinition", "trait": "TraitDefinition",
                "policy": "PolicyDefinition", "workflow-step": "WorkflowStepDefinition"}
"""vela-core's ``DefinitionTypeToKind`` less ``workload``."""
DESCRIPTION = "definition.oam.dev/description"
ALIAS = "definition.oam.dev/alias"
USER_PREFIX = "custom.definition.oam.dev/"
METADATA_KEYS = ("type", "alias", "description", "annotations", "labels", "attributes")
SPEC_FIELDS = {
    "ComponentDefinition": ("version", "workload", "childResourceKinds", "revisionLabel",
                            "podSpecPath", "status", "extension"),
    "TraitDefinition": ("definitionRef", "revisionEnabled", "workloadRefPath", "podDisruptive",
                        "appliesToWorkloads", "conflictsWith", "status", "extension",
                        "manageWorkload", "controlPlaneOnly", "stage", "version"),
    "PolicyDefinition": ("definitionRef", "manageHealthCheck", "version", "scope", "global",
                         "priority"),
    "WorkflowStepDefinition": ("definitionRef", "version"),
}
"""The spec fields of each kind in vela-core's API (``apis/core.oam.dev/v1beta1``) but
``schematic``: its conversion refuses any other (a strict unmarshal), and so do we."""
KUBEVELA_REFUSES = "vela-core's conversion refuses it too"


def from_cue_file(source: str, where: str, namespace: str = SYSTEM_NAMESPACES[0]) -> JSON:
    """The definition object of a CUE definition file (:class:`DefinitionError`, one line
    naming ``where`` and the field)."""
    try:
        parts = split_definition_file(source, name=where)
    except CueError as exc:
        raise DefinitionError(str(exc)) from None
    meta = parts.metadata
    here = f"{where}: {parts.name}"
    for key in meta:
        if key not in METADATA_KEYS:
            raise DefinitionError(f"{here}.{key}: not a definition file field "
                                  f"({', '.join(METADATA_KEYS)})")
    kind = KIND_OF_TYPE.get(str(meta.get("type")))
    if kind is None:
        raise DefinitionError(f"{here}.type: one of {', '.join(KIND_OF_TYPE)} (WorkloadDefinitions "
                              "are not served by this control plane)")
    annotations = _user_keys(meta.get("annotations"), f"{here}.annotations")
    for key, annotation in (("description", DESCRIPTION), ("alias", ALIAS)):
        if key in meta:
            annotations[annotation] = _string(meta[key], f"{here}.{key}")
    spec = meta.get("attributes", {})
    if not isinstance(spec, dict):
        raise DefinitionError(f"{here}.attributes: a struct (the definition's spec)")
    if "schematic" in spec:
        raise DefinitionError(f"{here}.attributes.schematic: not allowed (the template field "
                              "is the schematic)")
    for key in spec:
        if key not in SPEC_FIELDS[kind]:
            raise DefinitionError(f"{here}.attributes.{key}: not a {kind} field "
                                  f"({KUBEVELA_REFUSES})")
    metadata: JSON = {"name": parts.name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = annotations
    labels = _user_keys(meta.get("labels"), f"{here}.labels")
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": GROUP_VERSION, "kind": kind, "metadata": metadata,
            "spec": {**spec, "schematic": {"cue": {"template": parts.template}}}}


def _user_keys(value: Any, where: str) -> dict[str, str]:
    """vela-core's rule: a key naming ``oam.dev`` is kept, any other is the user's."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DefinitionError(f"{where}: a map of strings")
    return {(key if "oam.dev" in key else USER_PREFIX + key): _string(item, f"{where}.{key}")
            for key, item in value.items()}


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise DefinitionError(f"{where}: a string")
    return value
