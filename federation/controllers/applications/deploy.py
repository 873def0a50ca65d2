"""Step 7, plan deploy: what every reached (cluster, step) must hold, as member writes.

The ResourceTracker diff (:mod:`federation.applications.tracker`) of the tracked entries against
what must be held says what to write; each object becomes a create, update or nothing
(:func:`~federation.controllers.kit.copies.copy_vertex`, our marks and the Application's
annotation on it), after its Namespace when the member lacks it. An object of the same
identity someone else placed (not ours, another Application's, a propagated copy) is
never overwritten: a problem naming who placed it (``Applied=False``), unless it is another
Application's of this namespace that both ``shared-resource`` policies select: then it is
shared (:func:`share`), never written; or one no one placed that the Application's
``take-over`` policy selects: then it is adopted (:func:`may_take_over`), written over with
our marks like any update, the version read as its precondition. A member that cannot be
read is a problem too, and that object is not planned.

An update of an object a ``resource-update`` rule names ``recreateFields`` for, one of
which differs in the member, becomes a recreate (:attr:`~.plan.Action.RECREATE`): only ever
of an object already judged ours (the update's own check), deleting only the exact
version read (UID and resourceVersion preconditions), never while it is being deleted.
"""

from __future__ import annotations

import dataclasses

from federation.applications import resource_policies, tracker
from federation.contexts import client as kube
from federation.contexts.cache import ReadOnly
from federation.contexts.client import ClientError
from federation.controllers.applications import connection_secrets
from federation.controllers.applications.build import JSON, Build, marked
from federation.controllers.applications.view import ApplicationView
from federation.controllers.kit import plan
from federation.controllers.kit.chain import Verdict
from federation.controllers.kit.copies import copy_vertex
from federation.hub import manifests

TAKE_OVER_HINT = " (a take-over policy selecting it would adopt it)"
"""Said of a conflicting object a take-over policy would adopt, as propagation's conflict
names ``conflictResolution: Overwrite``."""


async def plan_deploy(view: ApplicationView, build: Build) -> Verdict | None:
    assert build.compiled is not None
    build.diff = tracker.diff(build.entries(), build.desired, build.compiled.gc.keep_legacy,
                              build.final, build.hold, build.compiled.gc.strategy)
    for entry, manifest in build.diff.write:
        await plan_write(view, build, entry, manifest)
    return None


async def plan_write(view: ApplicationView, build: Build, entry: tracker.Entry,
                     manifest: JSON) -> None:
    desired = marked(manifest, build.uid, build.owner)
    try:
        resource = await view.resource(entry.cluster, desired)
        live = await view.get(resource, entry.name, entry.namespace or None, entry.cluster)
        namespace = await namespace_vertex(view, entry)
    except ClientError as exc:
        build.problems.append(f"{entry}: {exc}")
        return
    filled, waiting = await connection_secrets.filled(view, build, entry, desired)
    if filled is None:  # a connection Secret's copy whose source cannot be copied now
        build.problems.append(f"{entry}: {waiting}")
        return
    desired = filled
    assert build.compiled is not None
    if build.compiled.read_only.match(manifest):
        if live is None:  # KubeVela's words
            build.problems.append(f"{entry}: is marked as read-only but does not exist")
        return  # read for health only: never written, never tracked (so never deleted)
    if live is not None and build.compiled.shared.match(manifest) and \
            not manifests.same_placer(desired, live):
        share(build, entry, desired, live)
        return
    adopt = live is not None and not manifests.same_placer(desired, live) and \
        build.compiled.take_over.match(manifest)
    if adopt and not may_take_over(view, build, entry, live):
        return
    kept = kept_paths(build, entry, manifest, live)
    if kept and live is None and stage_of(build, entry) == "onStateKeep":
        return  # KubeVela's apply-once: an object deleted in the member stays deleted
    if resource_policies.WHOLE in kept and live is not None and not adopt:
        build.add_member(plan.Vertex(entry.cluster, plan.Action.NOOP, desired,
                                     reason="left as it is (apply-once)"), entry)
        return
    if kept and live is not None:
        desired = resource_policies.keep_live(desired, live, kept)
    why = await connection_secrets.held(view, entry, desired)
    if why is not None:  # the terraform controller would overwrite, then delete, that Secret
        build.problems.append(f"{entry}: {why}")
        return
    vertex = copy_vertex(entry.cluster, desired, live, overwrite=adopt,
                         expect=plan.Identity.of(manifest))
    if vertex is None:
        conflict(view, build, entry, live)
        return
    if vertex.action is plan.Action.UPDATE and live is not None:
        vertex = recreate_instead(build, entry, vertex, desired, live, adopt)
        if vertex is None:
            return
    vertex = build.add_member(vertex, entry)
    if namespace is not None:
        build.plan.depend(vertex, build.add_member(namespace))


def conflict(view: ApplicationView, build: Build, entry: tracker.Entry,
             live: ReadOnly | None) -> None:
    """The problem of an object of this identity someone else placed, never overwritten;
    one a take-over policy would adopt says so."""
    assert live is not None
    adoptable = resource_policies.not_taken_over(live, build.owner,
                                                 entry.cluster == view.hub) is None
    build.problems.append(f"{entry}: exists and {manifests.placer(live)}"
                          f"{TAKE_OVER_HINT if adoptable else ''}")


def may_take_over(view: ApplicationView, build: Build, entry: tracker.Entry,
                  live: ReadOnly | None) -> bool:
    """Whether this Application's ``take-over`` policy adopts ``live``, an object of the
    identity it renders that it did not place; when not, a problem says why (naming the
    kind of placer only) and nothing is written."""
    assert live is not None
    why = resource_policies.not_taken_over(live, build.owner, entry.cluster == view.hub)
    if why is not None:
        build.problems.append(f"{entry}: exists and is not taken over: {why}")
    return why is None


def recreate_instead(build: Build, entry: tracker.Entry, update: plan.Vertex, desired: JSON,
                     live: ReadOnly, adopt: bool = False) -> plan.Vertex | None:
    """The update, or the recreate a ``resource-update`` rule asks for (None: a problem
    says why neither is planned). ``adopt``: the update takes over an object no one
    placed (``take-over``), which a recreate may replace as the update would."""
    assert build.compiled is not None
    decision = build.compiled.resource_update.recreate(desired, live)
    if decision.missing:
        build.problems.append(f"{entry}: {decision.missing}")
        return None
    if not decision.changed:
        return update
    if not adopt and not manifests.same_placer(desired, live):  # copy_vertex planned none
        build.problems.append(f"{entry}: exists and {manifests.placer(live)}")
        return None
    why = f"{', '.join(decision.changed)} changed (resource-update recreateFields)"
    if (live.get("metadata") or {}).get("deletionTimestamp"):
        build.problems.append(f"{entry}: being deleted; created again once it is gone "
                              f"({why})")
        return None
    return plan.Vertex(entry.cluster, plan.Action.RECREATE, desired, reason=why,
                       expect=update.expect, gone=plan.reference(live, exact=True))


def share(build: Build, entry: tracker.Entry, desired: JSON, live: ReadOnly) -> None:
    """KubeVela's sharer: another Application of this namespace owns the object; this one
    writes nothing and records it as shared (read for health; on the owner's removal the
    object may come to it). Anything else is someone else's object, refused as ever."""
    why = resource_policies.not_shared(live, build.namespace)
    if why is not None:
        build.problems.append(f"{entry}: exists and {manifests.placer(live)}; not shared: "
                              f"{why}")
        return
    build.add_member(plan.Vertex(entry.cluster, plan.Action.NOOP, desired,
                                 reason=f"shared ({manifests.placer(live)})"),
                     dataclasses.replace(entry, shared=True))


def stage_of(build: Build, entry: tracker.Entry) -> resource_policies.Stage:
    """KubeVela's stages: writing a revision for the first time (``onUpdate``), or keeping
    one already written (``onStateKeep``: the tracker has the object at this revision)."""
    tracked = {e.key: e.revision for e in build.entries()}
    return "onStateKeep" if tracked.get(entry.key) == entry.revision else "onUpdate"


def kept_paths(build: Build, entry: tracker.Entry, manifest: JSON, live: ReadOnly | None
               ) -> tuple[str, ...]:
    """The live values kept in the write: apply-once's paths, and the member's content
    for an object a take-over rule selects that the Application gives by its metadata only
    (KubeVela's own example: its three-way merge keeps the member's spec)."""
    assert build.compiled is not None
    kept = apply_once(build, entry, manifest)
    if live is not None and resource_policies.bare(manifest) and \
            build.compiled.take_over.match(manifest):
        kept = (*kept, *resource_policies.member_fields(live))
    return kept


def apply_once(build: Build, entry: tracker.Entry, manifest: JSON) -> tuple[str, ...]:
    assert build.compiled is not None
    policy = build.compiled.apply_once
    return policy.kept(manifest, stage_of(build, entry)) if policy.enabled else ()


async def namespace_vertex(view: ApplicationView, entry: tracker.Entry) -> plan.Vertex | None:
    """The member Namespace's create when the member has none (shared by every object of
    it: the executor counts a create another reconcile made first as done)."""
    if not entry.namespace:
        return None
    if await view.get(kube.NAMESPACES, entry.namespace, None, entry.cluster) is not None:
        return None
    return plan.Vertex(entry.cluster, plan.Action.CREATE,
                       {"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": entry.namespace}},
                       reason="namespace missing")
