"""Transformer: per-cluster manifests (replicas, overrides, ownership marks).

An override policy that would change a protected field (see
:func:`federation.hub.overrides.refusals`) stops the template
(``Applied=False``, ``OverrideRefused``); so does one that does not parse and may select
it (``OverrideInvalid``: its copies stay as they were, never rewritten without it); copy
vertices also carry the template's identity, which the executor checks before writing.
What the override engine notes (each rule applied, and each a ``policy.karmada.io``
policy skips as Karmada does) goes into the binding's explanation, once per distinct note
with the clusters it holds for.
"""

from __future__ import annotations

import dataclasses

import pydantic

from federation.contexts.cache import ReadOnly
from federation.controllers.kit.chain import Problem, Verdict
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.controllers.propagation.load_policy import template_resource
from federation.hub import api, manifests, overrides, parsed
from federation.placement import matching
from federation.placement import policy as policy_
from federation.placement import resources as resources_


async def render(ctx: TransformContext, build: Build) -> Verdict | None:
    assert build.policy is not None and build.decision is not None
    resource = template_resource(build)
    valid, invalid = await load_overrides(ctx, build.namespace)
    stop_if_invalid_selects(invalid, resource)
    chosen = overrides.applicable(valid, resource)
    for policy in chosen:
        found = overrides.refusals(policy)
        if found:
            raise Problem("Applied", "OverrideRefused",
                          f"{policy.kind} {policy.ref} is refused: {found[0]}")
    divided = policy_.mode(build.policy.spec.placement) is not policy_.Mode.DUPLICATED
    by_name = {c.name: c for c in build.clusters}
    noted: dict[str, list[str]] = {}  # note -> the clusters it holds for, first-seen order
    for cluster, replicas in build.decision.clusters.items():
        manifest = manifests.render(build.template, replicas, divided)
        try:
            applied = overrides.apply_all(manifest, by_name[cluster], chosen)
        except overrides.OverrideRefused as exc:
            raise Problem("Applied", "OverrideRefused", f"{cluster}: {exc}") from None
        except overrides.OverrideError as exc:
            raise Problem("Applied", "OverrideFailed", f"{cluster}: {exc}") from None
        build.desired[cluster] = manifests.mark(applied.manifest, build.uid)
        for note in applied.notes:
            noted.setdefault(note, []).append(cluster)
    _explain(build, noted)
    return None


def _explain(build: Build, noted: dict[str, list[str]]) -> None:
    """One explanation line per distinct override note, naming the clusters it holds for:
    what each rule did, and what a ``policy.karmada.io`` rule skipped as Karmada does (a
    container name that matches nothing), which would otherwise pass unseen."""
    assert build.decision is not None
    lines = [f"override in {', '.join(sorted(set(clusters)))}: {note}"
             for note, clusters in noted.items()]
    if lines:
        build.decision = dataclasses.replace(
            build.decision, explanation=(*build.decision.explanation, *lines))


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
