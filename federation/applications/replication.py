"""vela-core's ``replication`` policy: a deploy step naming it renders the components its
``selector`` names once per key of ``keys``, instead of once (KubeVela's
``pkg/policy/replication.go``, applied by the deploy step after the override policies).

Each copy is the component with ``context.replicaKey`` set to its key (and KubeVela's
``app.oam.dev/replicaKey`` label on what it renders); the definition decides the names,
as in KubeVela (its ``replica-webservice`` example names its Deployment
``context.name + "-" + context.replicaKey``). So a key changes an object's identity only
through what the definition writes with it, and the copies must still be different
objects: two renders of one object in a cluster are refused by :mod:`.policies`, naming
both (a built-in type, which names its objects after the component alone, cannot be
replicated into one cluster).

A key is a DNS label (RFC 1123: it goes into names and a label value), the keys are
distinct, and the copies are counted in the render budget before any is rendered.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from federation.applications.model import AppError, AppSpec, PolicySpec, RenderBudget, Step
from federation.applications.patches import Entry

TYPE = "replication"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclasses.dataclass(frozen=True)
class Replication:
    """One replication policy: its name, keys and the component names it replicates."""

    name: str
    keys: tuple[str, ...]
    selector: tuple[str, ...]


def replication_of(policy: PolicySpec) -> Replication:
    """The policy's ``keys`` and ``selector``, validated; anything else refused by name."""
    where = f"policy {policy.name} properties"
    props = policy.properties
    extra = sorted(set(props) - {"keys", "selector"})
    if extra:
        raise AppError(f"{where}.{extra[0]}: unknown field (replication has keys and "
                       "selector)")
    keys = _strings(props.get("keys"), f"{where}.keys")
    if not keys:
        raise AppError(f"{where}.keys: no key; the selected components would be deployed "
                       "nowhere by this step")
    seen: set[str] = set()
    for index, key in enumerate(keys):
        if not _DNS_LABEL.match(key):
            raise AppError(f"{where}.keys[{index}]: {key[:80]!r} is not a DNS label "
                           "(lower-case letters, digits and '-', at most 63 characters); "
                           "a key goes into object names and a label value")
        if key in seen:
            raise AppError(f"{where}.keys[{index}]: {key!r} is given twice")
        seen.add(key)
    # KubeVela selects nothing without a selector, and fails the step for it
    selector = _strings(props.get("selector"), f"{where}.selector")
    return Replication(policy.name, tuple(keys), tuple(selector))


def _strings(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AppError(f"{where}: a list of strings")
    return list(value)


def replicate(entries: Sequence[Entry], replications: Sequence[Replication],
              budget: RenderBudget, where: str) -> tuple[list[Entry], list[str]]:
    """The step's components after its replication policies, and a line per policy for
    ``fedctl app dry-run``. As KubeVela: each policy selects among the components as the
    overrides left them (a component selected by two policies is copied by both), the
    selected components are replaced by their copies, and a policy selecting none fails.
    The copies are counted against ``budget`` (one render each at least) before any is
    made, so a long key list is refused, not rendered."""
    if not replications:
        return list(entries), []
    selected: set[str] = set()
    copies: list[Entry] = []
    notes: list[str] = []
    for replication in replications:
        chosen = [e for e in entries if e.component.name in replication.selector]
        if not chosen:
            raise AppError(f"policy {replication.name} properties.selector: selects no "
                           "component of this deploy step (KubeVela: no component selected "
                           "to replicate)")
        if len(copies) + len(chosen) * len(replication.keys) > budget.left:
            raise AppError(f"{where}: policy {replication.name} replicates "
                           f"{len(chosen)} component(s) by {len(replication.keys)} keys: "
                           f"more renders than the {budget.left} left of the "
                           f"{budget.limit} objects this control plane renders per "
                           "Application")
        selected.update(e.component.name for e in chosen)
        for entry in chosen:
            copies.extend(
                Entry(entry.component.replicated(key),
                      f"{entry.where} (key {key!r} of policy {replication.name})")
                for key in replication.keys)
        notes.append(f"policy {replication.name}: replicates "
                     f"{', '.join(e.component.name for e in chosen)} by keys "
                     f"{', '.join(replication.keys)}")
    kept = [e for e in entries if e.component.name not in selected]
    return kept + copies, notes


def check_named(spec: AppSpec, deploy_steps: Sequence[Step]) -> None:
    """A replication policy of the Application that no deploy step names does nothing
    (KubeVela's default deploy step takes topologies and overrides only): refused, not
    accepted and ignored."""
    named = {name for step in deploy_steps if step.type == "deploy"
             and isinstance(step.properties.get("policies"), list)
             for name in step.properties["policies"] if isinstance(name, str)}
    for index, policy in enumerate(spec.policies):
        if policy.type == TYPE and policy.name not in named:
            raise AppError(f"spec.policies[{index}]: replication policy {policy.name} is "
                           "named by no deploy step's policies; it replicates only in a "
                           "deploy step that names it")
