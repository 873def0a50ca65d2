"""Which policy places a resource when several match.

A policy matches a resource when one of its ``resourceSelectors`` does:
apiVersion and kind must be equal; ``name``, when set, must be equal (and then
``labelSelector`` is ignored, as in Karmada); otherwise ``labelSelector``, when
set, must match the resource's labels. A PropagationPolicy only matches
resources in its own namespace; a ClusterPropagationPolicy matches any
resource, restricted by a selector's ``namespace`` when one is set.

When several policies match, the winner is decided by, in order:

1. explicit priority: the higher ``spec.priority`` wins;
2. scope: a namespaced PropagationPolicy wins over a ClusterPropagationPolicy;
3. name: the ``NAMESPACE/NAME`` (or ``NAME``) that sorts first wins;
4. API group: ours (``policy.federation.io``) wins over Karmada's
   (``policy.karmada.io``) for a policy of the same kind and name in both.

Both groups compete by these same rules: a Karmada PropagationPolicy of
priority 10 beats one of ours of priority 5. The order is total (two policies
cannot share group, kind, namespace and name; the loader rejects duplicates),
so the same inputs always pick the same policy.
The losers are reported in the explanation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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


def precedence(policy: policy_.Policy) -> tuple[int, int, str, bool]:
    """Sort key: the first policy in this order wins."""
    return (-policy.spec.priority, 0 if policy.namespaced else 1, policy.ref,
            policy.api_version != policy_.GROUP_VERSION)


def candidates(
    resource: resources_.Resource, policies: Iterable[policy_.Policy]
) -> list[policy_.Policy]:
    """The policies matching ``resource``, winner first."""
    return sorted((p for p in policies if matches(p, resource)), key=precedence)


def describe(chosen: policy_.Policy, others: Sequence[policy_.Policy]) -> str:
    """The explanation line naming the chosen policy and the ones it won over."""
    line = f"policy {chosen.ref} ({_kind(chosen)}, priority {chosen.spec.priority})"
    if not others:
        return line
    losers = ", ".join(f"{p.ref} ({_why_lost(chosen, p)})" for p in others)
    return f"{line} wins over {losers}"


def _why_lost(winner: policy_.Policy, loser: policy_.Policy) -> str:
    if winner.spec.priority != loser.spec.priority:
        return f"lower priority {loser.spec.priority}"
    if winner.namespaced != loser.namespaced:
        return "cluster-scoped"
    if winner.ref == loser.ref:
        return f"same name in {loser.api_version.split('/')[0]}"
    return "name sorts later"


def _kind(policy: policy_.Policy) -> str:
    """The kind, with Karmada's group when the policy is in it (ours go unqualified)."""
    if policy.api_version == policy_.GROUP_VERSION:
        return policy.kind
    return f"{policy.kind}.{policy.api_version.split('/')[0]}"
