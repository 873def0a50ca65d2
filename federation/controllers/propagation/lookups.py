"""Reads several transformers share (the deny rule an object matches, the override
policies of a scope), so that no transformer imports another. Not a transformer itself:
everything here reads through the :class:`~.context.TransformContext` and returns values
or raises the kit's :class:`~federation.controllers.kit.chain.Problem`."""

from __future__ import annotations

import pydantic

from federation.contexts.cache import ReadOnly
from federation.controllers.kit.chain import Problem
from federation.controllers.propagation.context import TransformContext
from federation.hub import api, deny, overrides, parsed
from federation.placement import matching
from federation.placement import policy as policy_
from federation.placement import resources as resources_


async def denied_by(ctx: TransformContext, template: ReadOnly) -> deny.Rule | None:
    """The deny rule the template matches (Secrets also: a namespace holding a joined
    cluster's kubeconfig, wherever a MemberCluster points), or None."""
    rules = ctx.deny_list
    if deny.group_kind_of(template) == deny.SECRET:
        rules = rules.with_rules(deny.credential_rules(await ctx.list(api.MEMBER_CLUSTERS)))
    return rules.object_rule(template)


_parsed_override = parsed.Memo(
    lambda doc: overrides.parse({k: v for k, v in doc.items() if k != "status"}))
"""Override policies parsed once per version (:mod:`federation.hub.parsed`)."""


async def load_overrides(ctx: TransformContext, namespace: str | None
                         ) -> tuple[list[overrides.OverridePolicy], list[ReadOnly]]:
    """The override policies of the template's scope: parsed, and those that do not parse
    (each reported on the policy itself by policy-validation)."""
    found, invalid = [], []
    for kind in api.OVERRIDE_POLICY_RESOURCES:
        if kind.namespaced and namespace is None:
            continue
        for doc in await ctx.list(kind, namespace if kind.namespaced else None):
            try:
                found.append(_parsed_override(doc))
            except overrides.OverrideError:
                invalid.append(doc)
    return found, invalid


def stop_if_invalid_selects(invalid: list[ReadOnly], resource: resources_.Resource) -> None:
    """:class:`Problem` ``OverrideInvalid`` naming the first invalid override policy that
    may select ``resource``."""
    # In a stable order: the message (and so the status) names the same one every round.
    for doc in sorted(invalid, key=lambda d: (str(d.get("kind")),
                                              str(d["metadata"].get("namespace") or ""),
                                              str(d["metadata"].get("name")))):
        if may_select(doc, resource):
            meta = doc.get("metadata") or {}
            where = f"{meta['namespace']}/" if meta.get("namespace") else ""
            raise Problem("Applied", "OverrideInvalid",
                          f"{doc.get('kind')} {where}{meta.get('name')} is invalid (see its "
                          f"Valid condition) and may select {resource.kind} "
                          f"{resource.name}: nothing is written until it is fixed")


def may_select(doc: ReadOnly, resource: resources_.Resource) -> bool:
    """Whether an override policy that does not parse may select ``resource``: its
    selectors read alone, and any that cannot be read counts as selecting (applying the
    other overrides without it could ship what it was written to prevent, an image from
    the wrong registry, say)."""
    selectors = (doc.get("spec") or {}).get("resourceSelectors")
    if not isinstance(selectors, list) or not selectors:
        return True
    namespace = (doc.get("metadata") or {}).get("namespace")
    for raw in selectors:
        try:
            selector = policy_.ResourceSelector.model_validate(raw)
        except pydantic.ValidationError:
            return True
        if matching.selector_matches(selector, resource, namespace or None):
            return True
    return False
