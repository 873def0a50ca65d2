"""KubeVela's ``json-merge-patch`` and ``json-patch`` traits: RFC 7386 and RFC 6902 applied
to the component's workload (its first rendered object; the definitions apply to any
workload, ``appliesToWorkloads: ["*"]``).

The tenant writes the patch, so it is bounded: at most :data:`MAX_OPERATIONS` operations,
and the object may not grow past :data:`MAX_NODES` values (``copy`` doubles a subtree per
operation; unbounded, 50 copies of the root would ask for 2**50 values). What a patch makes
of the object is checked like any rendered object afterwards: a patched
``metadata.namespace`` or ``kind`` meets the namespace grant and the cluster-scoped refusal
(:mod:`.policies`, :mod:`.scope`). Errors name the operation (``...operations[2].path``).
"""

from __future__ import annotations

import copy
from typing import Any

from federation.applications.model import AppError

JSON = dict[str, Any]

MAX_OPERATIONS = 100
"""Operations per json-patch trait: KubeVela's examples use one to five."""
MAX_NODES = 20_000
"""Values in the patched object: a Deployment is a few hundred; this bounds what ``copy``
and ``add`` can build."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merged key by key, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _size(value: Any) -> int:
    count, pending = 0, [value]
    while pending:
        item = pending.pop()
        count += 1
        if count > MAX_NODES:
            break
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return count


def apply(document: JSON, operations: Any, where: str) -> JSON:
    """RFC 6902 ``operations`` applied in order to a copy of ``document``."""
    if not isinstance(operations, list):
        raise AppError(f"{where}: must be a list of operations")
    if len(operations) > MAX_OPERATIONS:
        raise AppError(f"{where}: {len(operations)} operations; at most {MAX_OPERATIONS}")
    result: Any = copy.deepcopy(document)
    for index, operation in enumerate(operations):
        here = f"{where}[{index}]"
        result = _operation(result, operation, here)
        if _size(result) > MAX_NODES:
            raise AppError(f"{here}: the patched object holds more than {MAX_NODES} values")
    if not isinstance(result, dict):
        raise AppError(f"{where}: the patch leaves no object")
    return result


def _operation(document: Any, operation: Any, where: str) -> Any:
    if not isinstance(operation, dict):
        raise AppError(f"{where}: must be a map with op and path")
    op = operation.get("op")
    allowed = {"add": {"value"}, "remove": set(), "replace": {"value"}, "move": {"from"},
               "copy": {"from"}, "test": {"value"}}
    if not isinstance(op, str) or op not in allowed:
        raise AppError(f"{where}.op: must be one of {', '.join(allowed)}")
    for key in operation:
        if key not in {"op", "path"} | allowed[op]:
            raise AppError(f"{where}.{key}: not part of a {op} operation")
    for key in allowed[op] | {"path"}:
        if key not in operation:
            raise AppError(f"{where}.{key}: required")
    path = _pointer(operation["path"], f"{where}.path")
    if op == "test":
        if _get(document, path, f"{where}.path") != operation["value"]:
            raise AppError(f"{where}: test failed: the value differs")
        return document
    if op in ("move", "copy"):
        source = _pointer(operation["from"], f"{where}.from")
        value = copy.deepcopy(_get(document, source, f"{where}.from"))
        if op == "move":
            if path[:len(source)] == source and len(path) > len(source):
                raise AppError(f"{where}.path: cannot move a value into itself")
            document = _remove(document, source, f"{where}.from")
        return _add(document, path, value, f"{where}.path")
    if op == "remove":
        return _remove(document, path, f"{where}.path")
    if op == "replace":
        document = _remove(document, path, f"{where}.path")
    return _add(document, path, copy.deepcopy(operation["value"]), f"{where}.path")


def _pointer(raw: Any, where: str) -> list[str]:
    if not isinstance(raw, str) or (raw and not raw.startswith("/")):
        raise AppError(f"{where}: a JSON pointer such as /spec/replicas")
    return [part.replace("~1", "/").replace("~0", "~") for part in raw.split("/")[1:]]


def _index(container: list[Any], token: str, where: str, end_ok: bool) -> int:
    if end_ok and token == "-":
        return len(container)
    if not token.isdigit() or (token != "0" and token.startswith("0")):
        raise AppError(f"{where}: {token!r} is not an index of a list")
    number = int(token)
    if number > len(container) or (number == len(container) and not end_ok):
        raise AppError(f"{where}: index {number} is past the end of the list")
    return number


def _parent(document: Any, path: list[str], where: str) -> Any:
    return _get(document, path[:-1], where)


def _get(document: Any, path: list[str], where: str) -> Any:
    current = document
    for token in path:
        if isinstance(current, dict):
            if token not in current:
                raise AppError(f"{where}: no member {token!r}")
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, where, end_ok=False)]
        else:
            raise AppError(f"{where}: {token!r} goes below a value that is not a map or list")
    return current


def _add(document: Any, path: list[str], value: Any, where: str) -> Any:
    if not path:
        return value
    parent = _parent(document, path, where)
    if isinstance(parent, dict):
        parent[path[-1]] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, path[-1], where, end_ok=True), value)
    else:
        raise AppError(f"{where}: the parent is not a map or list")
    return document


def _remove(document: Any, path: list[str], where: str) -> Any:
    if not path:
        raise AppError(f"{where}: cannot remove the whole object")
    parent = _parent(document, path, where)
    if isinstance(parent, dict):
        if path[-1] not in parent:
            raise AppError(f"{where}: no member {path[-1]!r}")
        del parent[path[-1]]
    elif isinstance(parent, list):
        del parent[_index(parent, path[-1], where, end_ok=False)]
    else:
        raise AppError(f"{where}: the parent is not a map or list")
    return document
