"""Step 4, rollback: while the status records a rollback, its revision is what deploys.

The revision is compiled again from its snapshot (its Workflow and external Policies as
they were) under today's namespace grant (a revision made under a grant since withdrawn
is refused), fully deployed to every cluster it targets, and every cluster is final: nothing of
another revision stays. The workflow is not evaluated meanwhile (see :mod:`.evaluation`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.applications import compile as compile_
from federation.applications import definitions as user_types
from federation.applications import model, workflow, workflow_ref
from federation.contexts.cache import ReadOnly
from federation.controllers.applications import definitions, references
from federation.controllers.applications.build import Build, revision_number
from federation.controllers.applications.compilation import compile_args, invalid
from federation.controllers.applications.view import ApplicationView
from federation.controllers.kit.chain import Verdict


async def roll_back(view: ApplicationView, build: Build) -> Verdict | None:
    rollback = build.status.get("rollback")
    if not rollback:
        return None
    number = int(rollback["revision"])
    try:
        old = await compile_old(view, build, number)
    except model.AppError as exc:
        raise invalid(exc) from None
    for step, target in old.targets.items():
        for cluster, objects in target.clusters.items():
            build.desired[(cluster, step)] = [(o, number) for o in objects]
            build.targets[(step, cluster)] = list(objects)
    build.final = {e.cluster for e in build.entries()} | {c for c, _ in build.desired}
    return None


async def compile_old(view: ApplicationView, build: Build, number: int
                      ) -> compile_.Compiled:
    """Revision ``number`` compiled again: its spec, its Workflow, its external Policies
    and the definitions it used, as they were when it was made (its ref-objects read from
    today's hub, as KubeVela re-reads them)."""
    doc = next((r for r in build.revisions if revision_number(r) == number), None)
    if doc is None:
        raise model.AppError(f"rollback: revision {number} is not kept any more")
    written = doc["spec"]["application"]["spec"]
    try:
        return await _compile_revision(view, build, doc, written)
    except model.AppError as exc:
        raise workflow_ref.located(exc, written, build.namespace) from None


async def _compile_revision(view: ApplicationView, build: Build, doc: ReadOnly,
                            written: Mapping[str, Any]) -> compile_.Compiled:
    number = revision_number(doc)
    try:
        values = workflow.decode_values((doc.get("status") or {}).get("outputValues"))
    except (TypeError, ValueError):
        values = {}
    spec = await references.expanded(view, workflow_ref.resolved(
        written, doc["spec"].get("workflow"), build.namespace), build.namespace)
    args = {**compile_args(view, build, spec,
                           doc["spec"].get("externalPolicies") or build.external),
            "values": values}
    catalog = user_types.from_snapshot(doc["spec"].get("definitions") or {})
    old = await definitions.compile_with(view.evaluated, view.evaluate, args, catalog,
                                         definitions.app_info(build.app, spec, number))
    missing = next((s.name for s in old.steps if s.unrendered), None)
    if missing is not None:
        # rendering it without its inputs would drop its objects everywhere: refuse
        raise model.AppError(f"rollback: step {missing} of revision {number} takes inputs "
                             "that revision's workflow never produced; roll back to a "
                             "revision whose workflow succeeded")
    return old
