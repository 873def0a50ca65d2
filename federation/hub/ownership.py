"""Field ownership (``metadata.managedFields``): what server-side apply leaves to others.

Under ``applyStrategy.type: ServerSideApply`` a member copy is written by server-side
apply under our field manager, and a field of the copy that another field manager owns and
we do not (an HPA's replicas, a webhook's sidecar, an operator's spec field) is that
manager's: it is neither drift nor part of what we apply, so the API server keeps it as
its owner set it. This module reads the ownership the member's API server records, in its
``FieldsV1`` form: a tree whose keys are ``f:<field>``, ``k:<json key of a list item>``,
``v:<json value of a set item>``, ``i:<index>``, with ``.`` marking a list item or map
owned as a whole. Paths here are tuples of those keys, resolved against each document
separately (a list item by its key, so a copy and the live object may order a list
differently). Pure functions over plain data.

Metadata, apiVersion and kind are always ours to compare and apply (our ownership marks
live there, and a policy's ``ignoredFields`` may not name them either).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

JSON = dict[str, Any]
Path = tuple[str, ...]

APPLY_MANAGER = "federation"
"""The field manager of our server-side applies (the runtime's ``field_manager``)."""
OURS = frozenset({APPLY_MANAGER, "fedctl"})
"""Managers that are us: the apply manager, and the name the API server gives our creates
and full updates (the User-Agent's product, ``fedctl/<version>``)."""
_ALWAYS_OURS = ("f:metadata", "f:apiVersion", "f:kind")


def _union(into: JSON, tree: Mapping[str, Any]) -> None:
    for key, node in tree.items():
        child = into.setdefault(key, {})
        if isinstance(node, Mapping) and isinstance(child, dict):
            _union(child, node)


def trees(managed_fields: Sequence[Mapping[str, Any]], managers: frozenset[str] = OURS
          ) -> tuple[JSON, JSON]:
    """The fields ours own and the fields the other managers own, each as one tree."""
    mine: JSON = {}
    theirs: JSON = {}
    for entry in managed_fields:
        tree = entry.get("fieldsV1")
        if entry.get("fieldsType", "FieldsV1") != "FieldsV1" or not isinstance(tree, Mapping):
            continue
        _union(mine if entry.get("manager") in managers else theirs, tree)
    return mine, theirs


def foreign(managed_fields: Sequence[Mapping[str, Any]], managers: frozenset[str] = OURS
            ) -> list[Path]:
    """The fields and list items only other managers own (outside metadata): a leaf they
    own that ours do not, or a list item or map they own whole (``.``) that ours do not
    touch at all."""
    mine, theirs = trees(managed_fields, managers)
    found: list[Path] = []
    _walk({k: v for k, v in theirs.items() if k not in _ALWAYS_OURS}, mine, (), found)
    return found


def _walk(theirs: Mapping[str, Any], mine: Mapping[str, Any], path: Path,
          found: list[Path]) -> None:
    for key, node in theirs.items():
        if key == ".":
            continue
        here = (*path, key)
        other = mine.get(key)
        whole = not node or "." in node
        if whole and other is None:
            found.append(here)
        elif isinstance(node, Mapping):
            _walk(node, other if isinstance(other, Mapping) else {}, here, found)


def _index(items: list[Any], key: str) -> int | None:
    """The index in ``items`` that the FieldsV1 list key ``key`` names, or None."""
    kind, _, text = key.partition(":")
    try:
        value = json.loads(text) if kind in ("k", "v") else int(text)
    except ValueError:
        return None
    for index, item in enumerate(items):
        if kind == "i" and index == value:
            return index
        if kind == "v" and item == value:
            return index
        if kind == "k" and isinstance(item, Mapping) and isinstance(value, Mapping) and all(
                item.get(field) == wanted for field, wanted in value.items()):
            return index
    return None


def _step(node: Any, key: str) -> tuple[str | int, Any] | None:
    if key.startswith("f:") and isinstance(node, Mapping):
        name = key[2:]
        return (name, node[name]) if name in node else None
    if isinstance(node, list):
        index = _index(node, key)
        return None if index is None else (index, node[index])
    return None


def pointer(doc: Any, path: Path) -> str | None:
    """``path`` in ``doc`` as a JSON pointer (``/spec/template/spec/containers/1``), or
    None when ``doc`` does not have it."""
    parts: list[str] = []
    node = doc
    for key in path:
        step = _step(node, key)
        if step is None:
            return None
        parts.append(str(step[0]).replace("~", "~0").replace("/", "~1"))
        node = step[1]
    return "/" + "/".join(parts)


def without(doc: JSON, paths: Sequence[Path]) -> JSON:
    """A copy of ``doc`` without the fields and list items at ``paths`` (those it has)."""
    result = copy.deepcopy(doc)
    for path in paths:
        _remove(result, path)
    return result


def _remove(doc: Any, path: Path) -> None:
    node = doc
    for key in path[:-1]:
        step = _step(node, key)
        if step is None:
            return
        node = step[1]
    last = _step(node, path[-1]) if path else None
    if last is None:
        return
    if isinstance(node, list):
        del node[int(last[0])]
    else:
        del node[str(last[0])]


def updated_by_us(managed_fields: Sequence[Mapping[str, Any]],
                  managers: frozenset[str] = OURS) -> bool:
    """Whether some of our fields are owned through a create or full update (operation
    ``Update``) rather than an apply: server-side apply removes only fields its own apply
    entry owns, so those would outlive their removal from the template. An entry of status
    alone does not count (a status writer may share our User-Agent's name, as the local
    fleet's simulator does; status is never applied)."""
    return any(entry.get("manager") in managers and entry.get("operation") != "Apply"
               and set(entry.get("fieldsV1") or {}) - {"f:status"}
               for entry in managed_fields)


def adopted(managed_fields: Sequence[Mapping[str, Any]], api_version: str,
            managers: frozenset[str] = OURS) -> list[JSON]:
    """``managed_fields`` with every entry of ours merged into one apply entry of
    :data:`APPLY_MANAGER` (other managers' entries as they are): written once before our
    first apply to an object we created or replaced, so that apply owns (and removes,
    when the template drops them) every field we wrote."""
    mine, _ = trees(managed_fields, managers)
    # Status is not ours to apply (a status writer may share our User-Agent's name, as the
    # local fleet's simulator does): an apply entry owning it would claim to remove it.
    mine.pop("f:status", None)
    others = [dict(entry) for entry in managed_fields if entry.get("manager") not in managers]
    return [*others, {"manager": APPLY_MANAGER, "operation": "Apply",
                      "apiVersion": api_version, "fieldsType": "FieldsV1", "fieldsV1": mine}]
