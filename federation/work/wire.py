"""Conversions between the protocol's messages and the client's types (both sides use them).

Objects travel as JSON bytes inside the protobuf messages: they are arbitrary Kubernetes
objects, and JSON is what both API servers speak, so nothing is lost or re-typed on the way.
An object's identity on the wire is its :class:`Key` (resource, namespace, name).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from federation.contexts.client import JSON, Resource
from federation.work.proto import work_pb2 as pb

MAX_GENERATION = 2**62
"""The highest generation an agent may report applied: the hub's next write of that object
is one more, and generations travel as int64 (2**63 - 1), so every write stays encodable.
A real agent counts one per write and never comes near it."""


class Key(NamedTuple):
    """One object of one pull member: its resource, namespace ("" when cluster-scoped), name."""

    resource: Resource
    namespace: str
    name: str

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        group = f".{self.resource.group}" if self.resource.group else ""
        return f"{self.resource.plural}{group} {where}{self.name}"


def resource_to_pb(resource: Resource) -> pb.ResourceRef:
    return pb.ResourceRef(group=resource.group, version=resource.version,
                          plural=resource.plural, kind=resource.kind,
                          namespaced=resource.namespaced)


def resource_from_pb(ref: pb.ResourceRef) -> Resource:
    if not ref.version or not ref.plural or not ref.kind:
        raise ValueError(f"resource {ref.group}/{ref.version}/{ref.plural}: version, plural "
                         "and kind are required")
    return Resource(ref.group, ref.version, ref.plural, ref.kind, namespaced=ref.namespaced)


def key_to_pb(key: Key) -> pb.ObjectKey:
    return pb.ObjectKey(resource=resource_to_pb(key.resource), namespace=key.namespace,
                        name=key.name)


def key_from_pb(key: pb.ObjectKey) -> Key:
    if not key.name:
        raise ValueError("object key: name is required")
    return Key(resource_from_pb(key.resource), key.namespace, key.name)


def key_of(resource: Resource, obj: JSON) -> Key:
    meta = obj.get("metadata") or {}
    return Key(resource, str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def encode(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def decode(raw: bytes) -> JSON:
    """A JSON object from the wire; anything else is a protocol error (ValueError)."""
    if not raw:
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value
