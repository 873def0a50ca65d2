"""Unclaimed templates: what becomes of the copies when no policy selects a template.

The rule depends on the group of the policy that last claimed the template, recorded in
the binding (``spec.whenUnclaimed``) because the policy itself may be gone by then:

- ``policy.federation.io`` (ours, nothing recorded): the copies are removed, then the
  binding. Our policy is the statement of where a template runs; without one it runs
  nowhere.
- ``policy.karmada.io`` (``whenUnclaimed: Keep``): the copies stay. Karmada removes only
  the claim when a policy is deleted or stops selecting a template, and leaves its
  ResourceBinding and Works, so a Karmada user who deletes a policy to replace it does
  not take the workload down. The binding stays *unclaimed*: no ``spec.policy``,
  ``Scheduled=False`` with reason ``Unclaimed``, the last decision kept. Nothing updates
  the copies while it is so (the template may change; its copies do not follow). A
  policy that selects the template claims it again and places it as any new claim; the
  template's deletion still deletes its copies (or releases them under
  ``preserveResourcesOnDeletion``).

Either way pending clean-up (clusters the template had already left while claimed) is
finished: that removal was decided before the claim went.
"""

from __future__ import annotations

import dataclasses

from federation.contexts.cache import ReadOnly
from federation.controllers.kit.chain import Verdict
from federation.controllers.propagation.build import JSON, Build
from federation.controllers.propagation.context import TransformContext
from federation.hub import bindings, status
from federation.placement import policy as policy_

FIELD = "whenUnclaimed"
KEEP = "Keep"
REASON = "Unclaimed"


async def record_rule(ctx: TransformContext, build: Build) -> Verdict | None:
    """Record the claiming policy's rule in the binding."""
    assert build.policy is not None
    karmada = build.policy.api_version == policy_.KARMADA_GROUP_VERSION
    build.record[FIELD] = KEEP if karmada else None
    return None


def keeps(record: bindings.BindingRecord | None) -> bool:
    """Whether the binding's copies stay when no policy selects its template."""
    return record is not None and record.behaviour.when_unclaimed == KEEP


def message(record: bindings.BindingRecord) -> str:
    placed = ", ".join(record.decision()) or "no cluster"
    return (f"no policy selects the template any more; its copies stay as they are "
            f"({placed}: policy.karmada.io keeps them, as Karmada does) until a policy "
            f"claims it again or it is deleted")


FORGOTTEN = ("policy", "activation")
"""What goes with the claim: the claiming policy, and the spec a Lazy policy was applied
with (a policy that claims the template next is a new claim, applied at once)."""


def unclaimed_binding(binding: ReadOnly, record: bindings.BindingRecord, template: ReadOnly,
                      pending: list[str], conditions: list[JSON]) -> JSON:
    """``binding`` without its claim (:data:`FORGOTTEN`), ``pending`` as the clean-up still
    due, ``conditions`` replacing the Scheduled and CleanupPending ones, and the template's
    orphan annotation as it is now (deleting the template honours it)."""
    unclaimed = dataclasses.replace(
        record, policy=None, behaviour=dataclasses.replace(record.behaviour, activation=None),
        pending_cleanup=tuple(pending), orphan=bindings.orphaned(template),
        conditions=tuple(status.merge_conditions(record.conditions, conditions,
                                                 drop=("CleanupPending",))))
    return bindings.replaced(binding, unclaimed)
