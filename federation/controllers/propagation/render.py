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

from federation.controllers.kit.chain import Problem, Verdict
from federation.controllers.propagation import customized
from federation.controllers.propagation.build import Build, template_resource
from federation.controllers.propagation.context import TransformContext
from federation.controllers.propagation.lookups import load_overrides, stop_if_invalid_selects
from federation.hub import manifests, overrides
from federation.placement import policy as policy_


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
        if divided and replicas is not None:
            manifest = await customized.revise(ctx, manifest, replicas)
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
