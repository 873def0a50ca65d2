"""Revisions: a content hash of what an Application asks for, and which revisions to keep.

A revision is an immutable snapshot: the components, the policies (inline and the
external Policies its deploy steps name, as they were), the user definitions its types
name (as they were) and the workflow (its own, or the Workflow its ``workflow.ref``
names, as it was). Its hash is over that content only (not metadata,
not status, not the Application's generation), so re-applying the same Application, or
touching a label, makes no new revision, and a change to an external Policy, to its
Workflow or to a definition it uses does. Revisions are numbered ``<app>-v<N>`` like KubeVela's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

JSON = dict[str, Any]


def content(spec: Mapping[str, Any], external: Mapping[str, Mapping[str, Any]],
            definitions: Mapping[str, Mapping[str, Any]] | None = None,
            workflow: Mapping[str, Any] | None = None) -> JSON:
    """What a revision snapshots: the spec, the external policies it uses, by name, the
    definitions whose types it names (``Kind/name`` -> namespace and spec; only when
    there are some, so an Application of built-ins keeps its hash) and the Workflow its
    ``workflow.ref`` names (only with one)."""
    found: JSON = {"spec": dict(spec), "externalPolicies": {k: dict(v) for k, v in
                                                            sorted(external.items())}}
    if definitions:
        found["definitions"] = {k: dict(v) for k, v in sorted(definitions.items())}
    if workflow is not None:
        found["workflow"] = dict(workflow)
    return found


def content_hash(snapshot: Mapping[str, Any]) -> str:
    encoded = json.dumps(snapshot, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def revision_name(app: str, number: int) -> str:
    return f"{app}-v{number}"


def next_revision(existing: Sequence[tuple[int, str]], digest: str) -> tuple[int, bool]:
    """(number, is_new) for content ``digest`` given the existing (number, hash) pairs: the
    latest revision when its hash is the same, else a new number after the highest.
    An older revision with the same content is not reused: going back to old content is
    a new release (KubeVela does the same), rollback is the command that reuses one."""
    if existing:
        latest = max(existing)
        if latest[1] == digest:
            return latest[0], False
        return latest[0] + 1, True
    return 1, True


def to_prune(numbers: Sequence[int], limit: int, keep: Sequence[int] = ()) -> list[int]:
    """Revisions beyond the history ``limit`` (oldest first), never one in ``keep`` (the
    current one, and any a cluster still runs)."""
    ordered = sorted(set(numbers), reverse=True)
    kept = set(ordered[:limit]) | set(keep)
    return sorted(n for n in ordered if n not in kept)
