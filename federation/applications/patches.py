"""An override policy's ``components`` patches, applied as KubeVela applies them.

KubeVela (``pkg/policy/envbinding/patch.go``, ``PatchComponents``) reads each entry of an
override's ``components`` in order:

- no ``name``: every component (of the entry's ``type``, when it gives one) is merged with
  the entry;
- a ``name``: a pattern where ``*`` stands for any characters, *searched* in each component
  name (KubeVela compiles it to a regular expression it does not anchor, so ``web`` also
  patches ``web-api``). A matched component of another ``type`` than the entry's is
  replaced by the entry (a component of that type, named by the entry); otherwise it is
  merged with the entry. An entry matching no component adds itself as a new component
  (the docs' ``advance-override`` case deploys both);
- merging: ``properties`` map by map (anything but a map is replaced); traits by type: an
  existing trait's properties merged, a new one appended, ``disable: true`` removes one.

``selector`` (component names) is applied after the patches, so it can select a component
a patch added. Names are letters, digits, ``-`` and ``*`` only: KubeVela would read
anything else as a regular expression, and a component name cannot hold it anyway. Each
component keeps the path it was written at, so a later refusal names the override entry
that added or replaced it. Pure; never raises anything but :class:`~.model.AppError`.
Types are not checked here (the renderer refuses a type it lacks, naming that path).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from federation.applications import model
from federation.applications.model import AppError, Component, PolicySpec, Trait


@dataclasses.dataclass(frozen=True)
class Entry:
    """A component as one deploy step renders it, and the path it was written at."""

    component: Component
    where: str


def entries_of(components: Sequence[Component]) -> list[Entry]:
    return [Entry(c, f"spec.components[{i}]") for i, c in enumerate(components)]


def merge(base: Any, patch: Any) -> Any:
    """Maps merged key by key (recursively); anything else replaced by the patch."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = merge(base.get(key), value) if key in base else copy.deepcopy(value)
        return out
    return copy.deepcopy(patch)


def override(entries: Sequence[Entry], policy: PolicySpec) -> list[Entry]:
    """The components after one override policy's ``components`` and ``selector``."""
    props = policy.properties
    where = f"policy {policy.name} properties"
    selector = props.get("selector")
    if selector is not None and (not isinstance(selector, list) or
                                 not all(isinstance(s, str) for s in selector)):
        raise AppError(f"{where}.selector: a list of component names")
    patches = props.get("components")
    if patches is not None and not isinstance(patches, list):
        raise AppError(f"{where}.components: a list of component patches")
    result = list(entries)
    for index, raw in enumerate(patches or []):
        result = _apply(result, raw, f"{where}.components[{index}]")
    if selector is not None:
        result = [e for e in result if e.component.name in selector]
    return result


_PATTERN = re.compile(r"^[a-z0-9*-]*$")
_ADDABLE = re.compile(r"[a-z]")
"""KubeVela adds an unmatched entry when its name holds a match of ``[a-z]([a-z-]{0,61}
[a-z])?``, searched, not anchored: when it holds a lowercase letter."""


@dataclasses.dataclass(frozen=True)
class _Patch:
    name: str
    type: str
    properties: dict[str, Any]
    traits: tuple[Mapping[str, Any], ...]


def _apply(entries: Sequence[Entry], raw: Any, where: str) -> list[Entry]:
    patch = _patch(raw, where)
    out: list[Entry] = []
    matched = False
    for entry in entries:
        component = entry.component
        if patch.name:
            hit = _search(patch.name, component.name)
        else:
            hit = patch.type in ("", component.type)
        matched = matched or hit
        if not hit:
            out.append(entry)
        elif patch.name and patch.type and patch.type != component.type:
            out.append(Entry(_new(patch, where), where))
        else:
            out.append(Entry(_merged(component, patch, where),
                             f"{entry.where.partition(' as patched by ')[0]} as patched by "
                             f"{where}"))
    if patch.name and not matched:
        if not _ADDABLE.search(patch.name):
            raise AppError(f"{where}.name: {patch.name!r} matches no component, and a new "
                           "component cannot have that name")
        out.append(Entry(_new(patch, where), where))
    return out


def _search(pattern: str, name: str) -> bool:
    """``pattern`` (``*`` for any characters) found in ``name``, anywhere: KubeVela's
    unanchored regular expression, matched segment by segment (no backtracking)."""
    position = 0
    for segment in pattern.split("*"):
        found = name.find(segment, position)
        if found < 0:
            return False
        position = found + len(segment)
    return True


def _patch(raw: Any, where: str) -> _Patch:
    if not isinstance(raw, dict):
        raise AppError(f"{where}: a map of name, type, properties and traits")
    for key in raw:
        if key not in ("name", "type", "properties", "traits"):
            raise AppError(f"{where}.{key}: not supported (name, properties, traits, type)")
    name, kind = raw.get("name") or "", raw.get("type") or ""
    if not isinstance(name, str) or not _PATTERN.match(name):
        raise AppError(f"{where}.name: a component name, or a pattern of one where * stands "
                       "for any characters")
    if not isinstance(kind, str):
        raise AppError(f"{where}.type: a component type")
    properties = raw.get("properties") or {}
    if not isinstance(properties, dict):
        raise AppError(f"{where}.properties: a map")
    traits = raw.get("traits") or []
    if not isinstance(traits, list):
        raise AppError(f"{where}.traits: a list of trait patches")
    for index, trait in enumerate(traits):
        _check_trait(trait, f"{where}.traits[{index}]")
    return _Patch(name, kind, properties, tuple(traits))


def _check_trait(raw: Any, where: str) -> None:
    if not isinstance(raw, dict):
        raise AppError(f"{where}: a map of type, properties and disable")
    for key in raw:
        if key not in ("type", "properties", "disable"):
            raise AppError(f"{where}.{key}: not supported (disable, properties, type)")
    if not isinstance(raw.get("type"), str) or not raw["type"]:
        raise AppError(f"{where}.type: required")
    if not isinstance(raw.get("properties") or {}, dict):
        raise AppError(f"{where}.properties: a map")
    if not isinstance(raw.get("disable", False), bool):
        raise AppError(f"{where}.disable: true or false")


def _new(patch: _Patch, where: str) -> Component:
    """The entry as a component of its own (KubeVela's ``ToApplicationComponent``)."""
    traits = [{"type": t["type"], "properties": t.get("properties") or {}}
              for t in patch.traits if not t.get("disable")]
    return model.component({"name": patch.name, "type": patch.type,
                            "properties": copy.deepcopy(patch.properties),
                            "traits": copy.deepcopy(traits)}, where)


def _merged(component: Component, patch: _Patch, where: str) -> Component:
    traits = list(component.traits)
    for raw in patch.traits:
        position = next((i for i, t in enumerate(traits) if t.type == raw["type"]), None)
        if raw.get("disable"):
            if position is not None:
                traits.pop(position)
            continue
        properties = raw.get("properties") or {}
        if position is None:
            traits.append(Trait(type=raw["type"], properties=copy.deepcopy(properties)))
        else:
            old = traits[position]
            traits[position] = Trait(type=old.type, properties=merge(old.properties,
                                                                     properties))
    return Component(name=component.name, type=component.type,
                     properties=merge(component.properties, patch.properties),
                     traits=tuple(traits))
