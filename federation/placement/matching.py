"""Which policy places a resource when several match.

A policy matches a resource when one of its ``resourceSelectors`` does:
apiVersion and kind must be equal; ``name``, when set, must be equal (and then
``labelSelector`` is ignored, as in Karmada); otherwise ``labelSelector``, when
set, must match the resource's labels. A PropagationPolicy only matches
resources in its own namespace; a ClusterPropagationPolicy matches any
resource, restricted by a selector's ``namespace`` when one is set.

When several policies match a template nobody claimed yet, the winner is
decided as Karmada's detector decides it, in order:

1. scope: any matching PropagationPolicy wins over every ClusterPropagationPolicy
   (Karmada looks for a namespaced policy first, whatever the priorities);
2. explicit priority: the higher ``spec.priority`` wins;
3. precision: a selector naming the object beats a labelSelector, which beats
   a bare apiVersion/kind;
4. name: the ``NAMESPACE/NAME`` (or ``NAME``) that sorts first wins;
5. API group: ours (``policy.federation.io``) wins over Karmada's
   (``policy.karmada.io``) for a policy of the same kind and name in both.

Both groups compete by these same rules: a Karmada PropagationPolicy of
priority 10 beats one of ours of priority 5. The order is total (two policies
cannot share group, kind, namespace and name; the loader rejects duplicates),
so the same inputs always pick the same policy.
The losers are reported in the explanation.

Once a policy has claimed a template (the control plane's binding names it),
it keeps it while it still matches, even against a later policy of higher
priority, unless that policy says ``preemption: Always`` (:func:`claimant`):
a PropagationPolicy then preempts a ClusterPropagationPolicy whatever the
priorities, and any policy preempts one of its own scope of lower priority; a
ClusterPropagationPolicy never preempts a PropagationPolicy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from federation.placement import policy as policy_
from federation.placement import resources as resources_
from federation.placement import selection


def selector_matches(
    selector: policy_.ResourceSelector, resource: resources_.Resource, namespace: str | None
) -> bool:
    """Whether one resource selector of a policy in ``namespace`` (None: cluster) matches."""
    if selector.api_version != resource.api_version or selector.kind != resource.kind:
        return False
    wanted_namespace = namespace if namespace is not None else selector.namespace
    if wanted_namespace is not None and wanted_namespace != resource.namespace:
        return False
    if selector.name:
        return selector.name == resource.name
    if selector.label_selector is not None:
        return selection.labels_match(selector.label_selector, resource.labels)
    return True


def matches(policy: policy_.Policy, resource: resources_.Resource) -> bool:
    """Whether any of ``policy``'s resource selectors matches ``resource``."""
    return any(
        selector_matches(s, resource, policy.namespace) for s in policy.spec.resource_selectors
    )


def precision(policy: policy_.Policy, resource: resources_.Resource | None) -> int:
    """Karmada's implicit priority of the best matching selector: 0 by name, 1 by
    labelSelector, 2 by apiVersion and kind only (lower is more precise)."""
    best = 2
    for selector in policy.spec.resource_selectors:
        if resource is not None and not selector_matches(selector, resource, policy.namespace):
            continue
        best = min(best, 0 if selector.name else 1 if selector.label_selector else 2)
    return best


def precedence(policy: policy_.Policy, resource: resources_.Resource | None = None
               ) -> tuple[int, int, int, str, bool]:
    """Sort key: the first policy in this order wins (see the module docstring)."""
    return (0 if policy.namespaced else 1, -policy.spec.priority,
            precision(policy, resource), policy.ref, policy.api_version != policy_.GROUP_VERSION)


def preempts(challenger: policy_.Policy, claimed: policy_.Policy) -> bool:
    """Whether ``challenger`` takes a template over from ``claimed`` (Karmada's rules)."""
    if challenger.spec.preemption != "Always" or (challenger.ref == claimed.ref and \
            challenger.kind == claimed.kind):
        return False
    if challenger.namespaced:
        return not claimed.namespaced or challenger.spec.priority > claimed.spec.priority
    return not claimed.namespaced and challenger.spec.priority > claimed.spec.priority


def claimant(found: Sequence[policy_.Policy], claimed: str | None,
             name: Callable[[policy_.Policy], str] = lambda p: f"{p.kind} {p.ref}",
             ) -> tuple[policy_.Policy, str | None]:
    """The policy that places a template: ``found`` (matching, winner first) and the name
    of the policy that claimed it before (None: unclaimed), as ``name`` spells a policy
    (``KIND REF``: what the binding records). Returns the winner and, when a claim
    decided it, a line for the explanation."""
    holder = next((p for p in found if name(p) == claimed), None)
    if holder is None or holder is found[0]:
        return found[0], None
    challengers = [p for p in found if preempts(p, holder)]
    if challengers:
        return challengers[0], (f"preempted {holder.kind} {holder.ref} "
                                "(preemption: Always)")
    return holder, f"claimed earlier by {holder.kind} {holder.ref}"


def candidates(
    resource: resources_.Resource, policies: Iterable[policy_.Policy]
) -> list[policy_.Policy]:
    """The policies matching ``resource``, winner first."""
    return sorted((p for p in policies if matches(p, resource)),
                  key=lambda p: precedence(p, resource))


def describe(chosen: policy_.Policy, others: Sequence[policy_.Policy]) -> str:
    """The explanation line naming the chosen policy and the ones it won over."""
    line = f"policy {chosen.ref} ({_kind(chosen)}, priority {chosen.spec.priority})"
    if not others:
        return line
    losers = ", ".join(f"{p.ref} ({_why_lost(chosen, p)})" for p in others)
    return f"{line} wins over {losers}"


def _why_lost(winner: policy_.Policy, loser: policy_.Policy) -> str:
    if winner.namespaced != loser.namespaced:
        return "cluster-scoped" if winner.namespaced else "claimed earlier"
    if winner.spec.priority > loser.spec.priority:
        return f"lower priority {loser.spec.priority}"
    if winner.spec.priority < loser.spec.priority:
        return "preempted" if winner.spec.preemption == "Always" else "claimed earlier"
    if precision(winner, None) != precision(loser, None):
        return "less precise selector"
    if winner.ref == loser.ref:
        return f"same name in {loser.api_version.split('/')[0]}"
    return "name sorts later"


def _kind(policy: policy_.Policy) -> str:
    """The kind, with Karmada's group when the policy is in it (ours go unqualified)."""
    if policy.api_version == policy_.GROUP_VERSION:
        return policy.kind
    return f"{policy.kind}.{policy.api_version.split('/')[0]}"
