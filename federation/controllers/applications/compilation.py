"""Step 2, compile: render components and traits, place each deploy step, apply overrides.

The fleet is the ClusterSet's members, each described by its MemberCluster; the member
namespaces the Application may write are its own plus what an administrator granted on
the hub Namespace (:mod:`federation.applications.scope`). An Application that cannot be honoured
raises a :class:`~federation.controllers.kit.chain.Problem` naming the field, so nothing
is written to any member.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.applications import helmchart, model, scope, workflow, workflow_ref
from federation.contexts import client as kube
from federation.controllers.applications import definitions, references
from federation.controllers.applications.build import Build
from federation.controllers.applications.view import ApplicationView
from federation.controllers.kit.chain import Problem, Verdict
from federation.controllers.kit.view import placement_clusters
from federation.hub import api

RENDERED = "Rendered"
INVALID = "InvalidApplication"


class RetryLater(Problem):
    """An Application that cannot be rendered now for a reason that may pass (a chart that
    could not be fetched): refused as any, and reconciled again after ``retry_after``."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(RENDERED, INVALID, message)
        self.retry_after = retry_after


def invalid(exc: model.AppError) -> Problem:
    """An Application that cannot be honoured: the Rendered=False condition's problem."""
    if isinstance(exc, helmchart.Retry):
        return RetryLater(str(exc), exc.retry_after)
    return Problem(RENDERED, INVALID, str(exc))


async def compile_app(view: ApplicationView, build: Build) -> Verdict | None:
    build.fleet = placement_clusters(await view.list(api.MEMBER_CLUSTERS), view.members())
    build.grant = await grant_of(view, build.namespace)
    try:
        spec = await references.expanded(view, build.steps_spec, build.namespace)
        build.compiled = await definitions.compile_with(
            view.evaluated, view.evaluate, compile_args(view, build, spec, build.external),
            build.catalog, definitions.app_info(build.app, build.spec, build.number))
    except model.AppError as exc:
        raise invalid(workflow_ref.located(exc, build.spec, build.namespace)) from None
    return None


def compile_args(view: ApplicationView, build: Build, spec: Mapping[str, Any],
                 external: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of :func:`federation.applications.compile.compile_app` but ``user``."""
    return {"spec_doc": spec, "app": build.name, "namespace": build.namespace,
            "external": external, "fleet": build.fleet,
            "local_cluster": view.settings.local_cluster, "grant": build.grant,
            "values": output_values(build), "export_allow": view.settings.export_allow}


def output_values(build: Build) -> dict[str, Any]:
    """The outputs of this revision's steps that ended, as the stored state has them (a
    step with inputs renders with them; the state machine runs it only when the state it
    evaluates holds the same values)."""
    state = workflow.from_status(build.status.get("workflow"))
    if state is None or state.revision != build.number:
        return {}
    return dict(state.values)


async def grant_of(view: ApplicationView, namespace: str) -> scope.Grant:
    """The member namespaces this hub namespace's Applications may write: their own,
    plus what an admin listed on the hub Namespace (cluster-scoped, so no author in
    ``namespace`` can set it). Read from the cache; a Namespace not seen grants nothing."""
    found = await view.get(kube.NAMESPACES, namespace, None, view.hub)
    meta = (found.get("metadata") or {}) if found is not None else {}
    return scope.grant_of(namespace, meta.get("annotations"))
