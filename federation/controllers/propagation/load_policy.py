"""Transformer: the winning PropagationPolicy or ClusterPropagationPolicy.

Karmada's rules (:mod:`federation.placement.matching`): an unclaimed template goes to
the best matching policy; the policy the binding names (the claim) keeps it while it
still matches, unless a matching policy with ``preemption: Always`` preempts it.

The policy that claimed the template turning invalid (a typo in an edit) is a problem,
not an absence: the template stops with ``Scheduled=False``, reason ``PolicyInvalid``,
and its copies stay as they are (an edit gone wrong must not empty the fleet).

An object on the deny list (:mod:`federation.hub.deny`) is treated as if no
policy selected it (the reconciler reports it once on the policy); no policy at all
stops the chain: the reconciler then removes whatever this template had placed, or,
when a ``policy.karmada.io`` policy had claimed it, leaves it unclaimed (:mod:`.unclaimed`).
"""

from __future__ import annotations

from federation.contexts.cache import ReadOnly
from federation.controllers.kit.chain import STOP, Problem, Verdict
from federation.controllers.propagation.build import Build, policy_ref, template_resource
from federation.controllers.propagation.context import TransformContext
from federation.controllers.propagation.lookups import denied_by
from federation.hub import api, propagation_policies
from federation.placement import matching
from federation.placement import policy as policy_


async def load_policy(ctx: TransformContext, build: Build) -> Verdict | None:
    resource = template_resource(build)
    found: list[tuple[policy_.Policy, ReadOnly]] = []
    claim = claimed_by(build)
    for kind in api.PROPAGATION_POLICY_RESOURCES:  # both groups compete by the same rules
        if kind.namespaced and build.namespace is None:
            continue
        for doc in await ctx.list(kind, build.namespace if kind.namespaced else None):
            policy = propagation_policies.parse_policy(doc)
            if policy is None and claim is not None and doc_ref(doc) == claim:
                raise Problem("Scheduled", "PolicyInvalid",
                              f"{claim}, which placed this template, is invalid (see its "
                              "Valid condition); its copies stay as they are until it is "
                              "fixed")
            if policy is not None and matching.matches(policy, resource):
                found.append((policy, doc))
    if not found:
        return STOP
    found.sort(key=lambda pair: matching.precedence(pair[0], resource))
    winner, said = matching.claimant([p for p, _ in found], claim, policy_ref)
    chosen = next(pair for pair in found if pair[0] is winner)
    rule = await denied_by(ctx, build.template)
    if rule is not None:
        build.denied = (chosen[1], rule)
        return STOP
    build.policy, build.policy_doc = chosen
    build.notes.append(matching.describe(winner, [p for p, _ in found if p is not winner]))
    if said:
        build.notes.append(said)
    return None


def claimed_by(build: Build) -> str | None:
    """``KIND REF`` of the policy this template's binding names (the claim), or None."""
    own = build.own_record
    return own.policy if own is not None and own.policy else None


def doc_ref(doc: ReadOnly) -> str:
    """``KIND REF`` of a policy object as :func:`~.build.policy_ref` writes it, parsed or
    not."""
    meta = doc.get("metadata") or {}
    namespace = meta.get("namespace")
    ref = f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))
    return f"{doc.get('kind')} {ref}"


api_ref = policy_ref
"""The name the record knows :func:`~.build.policy_ref` by."""
