"""Loading a policy: its spec, its rivals, its constraints and its config object (pure).

Each function takes what the reconciler read and returns either what the rollout needs or
a :class:`Refusal` (a reason for the ``Accepted=False`` condition and a one-line message
naming the field, the constraint or the rival policy). Nothing here reads or writes.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Mapping, Sequence

import pydantic

from federation.contexts.cache import ReadOnly
from federation.hub import rollouts as hub_api
from federation.rollouts import kubeblocks
from federation.rollouts.constraint import ConfigConstraintSpec


@dataclasses.dataclass(frozen=True)
class Refusal:
    reason: str
    """``InvalidSpec``, ``Conflict``, ``ConstraintNotFound``, ``InvalidConstraint``,
    ``ConfigNotFound``, ``InvalidFile``, ``ImmutableParameterChanged``, ``InvalidValue``,
    ``StaticChangeNeedsRestart``."""
    message: str


def unknown_clusters(spec: hub_api.ReconfigurePolicySpec,
                     members: Sequence[str]) -> Refusal | None:
    """A ``clusterOrder`` name no member cluster has is a typo, refused by name (a member
    the config is not placed on is fine: placements change)."""
    known = set(members)
    for index, name in enumerate(spec.cluster_order):
        if name not in known:
            return Refusal("InvalidSpec", f"spec.clusterOrder[{index}]: no member cluster "
                                          f"{name!r} (members: {', '.join(sorted(known))})")
    return None


def validation_message(exc: pydantic.ValidationError, prefix: str) -> str:
    """Every error as ``field.path: message`` (never the input value: it may be a secret)."""
    parts = []
    for error in exc.errors():
        path = ".".join(str(p) for p in error["loc"])
        parts.append(f"{prefix}.{path}: {error['msg']}" if path else f"{prefix}: {error['msg']}")
    return "; ".join(parts)


def spec(policy: ReadOnly) -> hub_api.ReconfigurePolicySpec | Refusal:
    try:
        return hub_api.parsed_spec(policy)
    except pydantic.ValidationError as exc:
        return Refusal("InvalidSpec", validation_message(exc, "spec"))


def conflict(policy: ReadOnly, parsed: hub_api.ReconfigurePolicySpec,
             policies: Sequence[ReadOnly]) -> Refusal | None:
    """An older policy of the namespace governing the config or a workload of this one."""
    ours = str(policy["metadata"]["name"])
    governed = [(parsed.config_ref.kind.value, parsed.config_ref.name)]
    governed += [(w.kind.value, w.name) for w in parsed.workloads]
    for kind, name in governed:
        winner = hub_api.governing(policies, kind, name)
        rival = str(((winner or {}).get("metadata") or {}).get("name") or "")
        if winner is not None and rival != ours:
            return Refusal("Conflict", f"{kind} {name} is governed by ReconfigurePolicy "
                                       f"{rival} (older); this policy rolls nothing")
    return None


def constraint_key(entry: hub_api.ConfigFile) -> tuple[str, str]:
    """How a file's constraint is looked up: (kind, name)."""
    return (entry.constraint_kind.value, entry.constraint_ref)


def constraints(parsed: hub_api.ReconfigurePolicySpec,
                docs: Mapping[tuple[str, str], ReadOnly | None]
                ) -> dict[str, ConfigConstraintSpec] | Refusal:
    """File key -> its constraint, from the constraints read by (kind, name)."""
    found: dict[str, ConfigConstraintSpec] = {}
    for index, entry in enumerate(parsed.files):
        doc = docs.get(constraint_key(entry))
        field = f"spec.files[{index}].constraintRef"
        kind = entry.constraint_kind.value
        if doc is None:
            return Refusal("ConstraintNotFound",
                           f"{field}: {kind} {entry.constraint_ref!r} not found")
        try:
            found[entry.key] = hub_api.parsed_constraint(doc)
        except (pydantic.ValidationError, kubeblocks.Refused) as exc:
            message = validation_message(exc, "spec") \
                if isinstance(exc, pydantic.ValidationError) else str(exc)
            return Refusal("InvalidConstraint", f"{field}: {kind} "
                                                f"{entry.constraint_ref!r} is invalid: {message}")
    return found


def contents(obj: ReadOnly) -> dict[str, str | bytes]:
    """Every data key of a ConfigMap/Secret: text, or bytes for what is not UTF-8
    (binaryData, a Secret value that is not text). Secret values are base64 on the wire."""
    found: dict[str, str | bytes] = {}
    secret = obj.get("kind") == "Secret"
    for key, value in (obj.get("data") or {}).items():
        if not secret:
            found[str(key)] = str(value)
            continue
        try:
            raw = base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            found[str(key)] = str(value).encode()
            continue
        try:
            found[str(key)] = raw.decode()
        except UnicodeDecodeError:
            found[str(key)] = raw
    for key, value in (obj.get("binaryData") or {}).items():
        found[str(key)] = f"binary:{value}".encode()
    return found


def config_files(parsed: hub_api.ReconfigurePolicySpec,
                 hub_object: ReadOnly | None) -> dict[str, str | bytes] | Refusal:
    """The hub config's content by key, every file key of the spec present and text."""
    ref = parsed.config_ref
    if hub_object is None:
        return Refusal("ConfigNotFound", f"spec.configRef: {ref.kind.value} {ref.name!r} not "
                                         "found in the policy's namespace")
    found = contents(hub_object)
    for index, entry in enumerate(parsed.files):
        value = found.get(entry.key)
        if value is None:
            return Refusal("InvalidSpec", f"spec.files[{index}].key: {entry.key!r} is not a "
                                          f"key of {ref.kind.value} {ref.name}")
        if isinstance(value, bytes):
            return Refusal("InvalidFile", f"spec.files[{index}].key: {entry.key!r} of "
                                          f"{ref.kind.value} {ref.name} is not UTF-8 text")
    return found
