"""Step 8, plan prune: tracked objects no longer rendered where they are, as deletes.

Only an object this Application placed is deleted (our marks, and its ``namespace/name``
in our annotation): the tracker lives in the author's namespace, and a forged entry must
not delete another team's objects. An entry whose object is gone already, or is someone
else's now, counts as deleted; one on a member that cannot be read stays tracked (pending)
and is tried again. :func:`plan_removals` serves the deleted Application's clean-up too.
An entry the garbage-collect policy's rules release (``never``, propagation ``orphan``)
leaves the tracker without a delete: its object stays in the member as it is. A shared
object (``shared-resource``) its owner lets go of goes to a sharer of the owner's namespace
instead (:func:`heir_of`, :func:`handover`); a sharer's own entry just leaves its tracker.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable

from federation.applications import resource_policies, tracker
from federation.contexts.cache import ReadOnly
from federation.contexts.client import ClientError, ClusterUnavailable
from federation.controllers.applications.build import JSON, Build, entries_of
from federation.controllers.applications.settings import APP_ANNOTATION
from federation.controllers.applications.view import ApplicationView
from federation.controllers.kit import plan
from federation.controllers.kit.chain import Verdict
from federation.hub import api, manifests

log = logging.getLogger("federation.applications")


async def plan_prune(view: ApplicationView, build: Build) -> Verdict | None:
    assert build.diff is not None
    removals = await plan_removals(view, build.diff.delete, build.owner)
    for vertex, entry in removals.deletes:
        build.add_member(vertex, entry)
    build.gone += removals.gone + list(build.diff.release)
    return None


class Removals:
    """The deletes to run, each with its entry, and the entries that are gone already."""

    def __init__(self) -> None:
        self.deletes: list[tuple[plan.Vertex, tracker.Entry]] = []
        self.gone: list[tracker.Entry] = []


async def plan_removals(view: ApplicationView, entries: Iterable[tracker.Entry], owner: str
                        ) -> Removals:
    found = Removals()
    for entry in entries:
        if entry.released_on_delete:
            found.gone.append(entry)  # the rules keep it: untracked, never deleted by us
            continue
        body = reference(entry)
        try:
            resource = await view.resource(entry.cluster, body)
            live = await view.get(resource, entry.name, entry.namespace or None, entry.cluster)
        except ClusterUnavailable:
            continue  # pending: tried again when the member is back
        except ClientError as exc:
            log.debug("%s: %s", entry, exc)
            continue
        placed_by = (live["metadata"].get("annotations") or {}).get(APP_ANNOTATION) \
            if live is not None else None
        if live is None or not manifests.is_ours(live) or placed_by != owner:
            found.gone.append(entry)  # never there, deleted already, or someone else's now
            continue  # (a sharer's entry: the owner's object, left as it is)
        try:
            heir = await heir_of(view, entry, owner) if resource_policies.shareable(live) \
                else None
        except ClientError as exc:
            log.debug("%s: %s", entry, exc)
            continue  # who shares it is not known: neither deleted nor handed over yet
        if heir is not None:
            found.deletes.append((handover(entry.cluster, live, *heir), entry))
            continue
        body["metadata"]["uid"] = live["metadata"].get("uid")
        found.deletes.append((plan.Vertex(entry.cluster, plan.Action.DELETE, body,
                                          reason="no longer rendered"), entry))
    return found


async def heir_of(view: ApplicationView, entry: tracker.Entry, owner: str
                  ) -> tuple[str, str] | None:
    """The Application that gets a shared object its owner lets go of (KubeVela gives it
    to the next sharer): the first, by name, of the owner's namespace whose tracker lists
    the object as shared and that still exists, as ``(namespace/name, uid)``. Only the
    owner's own namespace is looked at: a tracker elsewhere claiming the object (trackers
    are their tenants' to write) is never an heir."""
    namespace, _, name = owner.partition("/")
    for rt in sorted(await view.list(api.RESOURCE_TRACKERS, namespace),
                     key=lambda doc: str((doc.get("metadata") or {}).get("name"))):
        other = str((rt.get("metadata") or {}).get("name") or "")
        if other == name or not any(e.shared and e.key == entry.key for e in entries_of(rt)):
            continue
        app = await view.get(api.APPLICATIONS, other, namespace, view.hub)
        meta = (app or {}).get("metadata") or {}
        if meta.get("uid") and not meta.get("deletionTimestamp"):
            return f"{namespace}/{other}", str(meta["uid"])
    return None


def handover(cluster: str, live: ReadOnly, heir: str, uid: str) -> plan.Vertex:
    """The update that makes ``heir`` the owner of ``live`` (its content as it is, its
    resourceVersion kept: a concurrent change fails the write); the heir's next reconcile
    writes its own content there."""
    body: JSON = copy.deepcopy(dict(live))
    body["metadata"].pop("managedFields", None)
    annotations = body["metadata"].setdefault("annotations", {})
    annotations[APP_ANNOTATION] = heir
    annotations[manifests.TEMPLATE_UID_ANNOTATION] = uid
    return plan.Vertex(cluster, plan.Action.UPDATE, body, expect=plan.Identity.of(live),
                       reason=f"shared: handed over to Application {heir}")


def reference(entry: tracker.Entry) -> JSON:
    """What a delete of the entry's object needs (the UID precondition is added once the
    live object is seen)."""
    meta = {"name": entry.name, **({"namespace": entry.namespace} if entry.namespace else {})}
    return {"apiVersion": entry.api_version, "kind": entry.kind, "metadata": meta}
