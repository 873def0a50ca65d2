"""Transformer: ``activationPreference: Lazy``.

As Karmada: a change of a Lazy policy does not reach the templates it already
propagates until each template itself changes, so a policy edit rolls out template by
template. The binding records, for a template under a Lazy policy, the policy spec it
was propagated with and a digest of the template as propagated (``spec.activation``).
While the template is unchanged and the same policy still claims it, that recorded spec
is what this reconcile uses (scheduling, overrides, suspension: the whole policy); a
change of the template (any field but status; labels and annotations included)
activates the current spec. A first claim, another policy winning, or a policy that is
no longer Lazy apply at once.
"""

from __future__ import annotations

import copy
from typing import Any

from federation.controllers.kit.chain import Verdict
from federation.controllers.propagation.build import JSON, Build, policy_ref
from federation.controllers.propagation.context import TransformContext
from federation.hub import manifests
from federation.placement import loader
from federation.placement import policy as policy_


async def lazy_activation(ctx: TransformContext, build: Build) -> Verdict | None:
    policy = build.policy
    assert policy is not None
    if policy.spec.activation_preference != "Lazy":
        build.record["activation"] = None
        return None
    digest = manifests.digest(manifests.render(build.template, None, False))
    current: JSON = copy.deepcopy(dict(build.policy_doc.get("spec") or {}))
    own = build.own_record
    recorded = own.behaviour.activation if own is not None else None
    if recorded is not None and recorded.get("policy") == policy_ref(policy) and \
            recorded.get("template") == digest and recorded.get("spec") != current:
        earlier = _parse(policy, recorded.get("spec"))
        if earlier is not None and earlier.spec.activation_preference == "Lazy":
            build.policy = earlier
            build.record["activation"] = recorded
            build.notes.append(f"activationPreference Lazy: the change of {policy_ref(policy)} "
                               "waits for a change of the template")
            return None
    build.record["activation"] = {"policy": policy_ref(policy), "template": digest,
                                  "spec": current}
    return None


def _parse(policy: policy_.Policy, spec: Any) -> policy_.Policy | None:
    """The recorded spec as a policy of the same identity; None if it no longer loads."""
    if not isinstance(spec, dict):
        return None
    body = {"apiVersion": policy.api_version, "kind": policy.kind,
            "metadata": {"name": policy.metadata.name, "namespace": policy.metadata.namespace},
            "spec": spec}
    try:
        return loader.parse_policy(body, f"recorded spec of {policy_ref(policy)}")
    except loader.LoadError:
        return None
