"""Step 6, evaluate workflow: the pure state machine (:mod:`federation.applications.workflow`)
advanced with the health observed and the clock, and what each reached cluster holds.

For every deploy step, the clusters it has started hold this revision's objects for that
step; once the workflow succeeded (or failed, with the garbage-collect policy's
``continueOnFailure``) every tracked cluster is final (those the release no longer targets
are cleaned too). A failed step that asks for ``rollbackOnFailure``
records a rollback to the last revision that succeeded, deployed from the next reconcile
on. A step waiting asks to be looked at again. While a rollback is recorded the workflow
is not evaluated: :mod:`.rollback` says what deploys.
"""

from __future__ import annotations

from federation.applications import workflow
from federation.controllers.applications.build import Build, last_good
from federation.controllers.applications.settings import stamp
from federation.controllers.applications.view import ApplicationView
from federation.controllers.kit.chain import Verdict, requeue


async def evaluate_workflow(view: ApplicationView, build: Build) -> Verdict | None:
    if build.status.get("rollback"):
        return None
    compiled, state = build.compiled, build.state
    assert compiled is not None and state is not None
    now = view.now()
    obs = workflow.Observations(build.health, build.resume, compiled.health.window,
                                compiled.health.probe_interval)
    state, build.actions = workflow.evaluate(state, compiled.steps, obs, now)
    build.state = state
    for step, clusters in workflow.assignments(state).items():
        for cluster in clusters:
            objects = compiled.targets[step].clusters.get(cluster, ())
            build.desired[(cluster, step)] = [(o, build.number) for o in objects]
    done = state.phase == "succeeded" or (state.phase == "failed"
                                          and compiled.gc.continue_on_failure)
    build.final = {e.cluster for e in build.entries()} if done else set()
    if any(isinstance(a, workflow.Rollback) for a in build.actions):
        good = last_good(build.revisions, build.number)
        if good is not None:
            build.status["rollback"] = {"revision": good, "from": build.number,
                                        "time": stamp(now)}
    waits = [a.seconds for a in build.actions if isinstance(a, workflow.Wait)]
    return requeue(min(waits)) if waits else None
