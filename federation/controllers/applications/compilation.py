"""Step 2, compile: render components and traits, place each deploy step, apply overrides.

The fleet is the ClusterSet's members, each described by its MemberCluster; the member
namespaces the Application may write are its own plus what an administrator granted on
the hub Namespace (:mod:`federation.applications.scope`). An Application that cannot be honoured
raises a :class:`~federation.controllers.kit.chain.Problem` naming the field, so nothing
is written to any member.
"""

from __future__ import annotations

from federation.applications import compile as compile_
from federation.applications import model, scope
from federation.contexts import client as kube
from federation.controllers.applications import references
from federation.controllers.applications.build import Build
from federation.controllers.applications.view import ApplicationView
from federation.controllers.kit.chain import Problem, Verdict
from federation.controllers.kit.view import placement_clusters
from federation.hub import api

RENDERED = "Rendered"
INVALID = "InvalidApplication"


def invalid(exc: model.AppError) -> Problem:
    """An Application that cannot be honoured: the Rendered=False condition's problem."""
    return Problem(RENDERED, INVALID, str(exc))


async def compile_app(view: ApplicationView, build: Build) -> Verdict | None:
    build.fleet = placement_clusters(await view.list(api.MEMBER_CLUSTERS), view.members())
    build.grant = await grant_of(view, build.namespace)
    try:
        spec = await references.expanded(view, build.spec, build.namespace)
        build.compiled = compile_.compile_app(spec, build.name, build.namespace,
                                              build.external, build.fleet,
                                              view.settings.local_cluster, build.grant)
    except model.AppError as exc:
        raise invalid(exc) from None
    return None


async def grant_of(view: ApplicationView, namespace: str) -> scope.Grant:
    """The member namespaces this hub namespace's Applications may write: their own,
    plus what an admin listed on the hub Namespace (cluster-scoped, so no author in
    ``namespace`` can set it). Read from the cache; a Namespace not seen grants nothing."""
    found = await view.get(kube.NAMESPACES, namespace, None, view.hub)
    meta = (found.get("metadata") or {}) if found is not None else {}
    return scope.grant_of(namespace, meta.get("annotations"))
