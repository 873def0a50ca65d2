"""Part of step 5, observe health: the definitions' ``healthPolicy`` and ``customStatus``.

For each component of a (deploy step, cluster) whose definitions have a status
(:mod:`federation.applications.custom_status`), the workload and the definitions'
auxiliary objects are read from the member's cache (what KubeVela reads after its
apply: the live objects, a Secret without its data) and each status is evaluated in the
CUE workers through the view's memo, as a render is: off the event loop, under the
evaluator's budget, a deadline and a memory cap. An evaluation that fails or runs out of
its budget is an answer like any other: the component is unhealthy and its message says
why (never a traceback; the CUE error names a path, never a value).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from federation.applications import custom_status, definitions
from federation.applications.custom_status import Check, Checks, Status
from federation.controllers.applications.build import JSON, Build
from federation.controllers.applications.evaluation import read_back
from federation.controllers.applications.view import ApplicationView

Identity = tuple[str, str, str, str]


async def judge(view: ApplicationView, build: Build, step: str, cluster: str,
                objects: Sequence[JSON]) -> dict[Identity, Status]:
    """The status of each component placed here whose definitions have one, by its
    workload's identity (recorded in ``build.component_status`` for the status)."""
    target = build.compiled.targets.get(step) if build.compiled is not None else None
    placed = {custom_status.identity(o): o for o in objects}
    found: dict[Identity, Status] = {}
    for checks in target.checks if target is not None else ():
        workload = placed.get(checks.workload)
        if workload is None:
            continue
        live = await read_back(view, cluster, workload)
        if live is None:
            continue  # not created yet: the object's own health says so
        status = await _evaluate(view, checks, cluster, live,
                                 await _outputs(view, cluster, objects, checks))
        found[checks.workload] = status
        build.component_status[(step, cluster, checks.component)] = status
    return found


async def _outputs(view: ApplicationView, cluster: str, objects: Sequence[JSON],
                   checks: Checks) -> dict[str, dict[str, JSON]]:
    """Per definition (by its ``trait.oam.dev/type``), its live auxiliary objects by
    output name; one not created yet is absent (a policy reading it says so)."""
    found: dict[str, dict[str, JSON]] = {}
    for check in checks.checks:
        owner = custom_status.owner_of(check)
        mine: dict[str, JSON] = {}
        for name, obj in custom_status.outputs_of(objects, checks.component, owner).items():
            live = await read_back(view, cluster, dict(obj))
            if live is not None:
                mine[name] = live
        found[owner] = mine
    return found


async def _evaluate(view: ApplicationView, checks: Checks, cluster: str, live: JSON,
                    outputs: Mapping[str, Mapping[str, JSON]]) -> Status:
    contexts = [custom_status.context_for(c, cluster, live,
                                          outputs.get(custom_status.owner_of(c)) or {})
                for c in checks.checks]
    health = await _ask(view, {i: custom_status.health_request(c, contexts[i])
                               for i, c in enumerate(checks.checks) if c.health})
    verdicts = [custom_status.health_of(health[i], c) if i in health else (True, "")
                for i, c in enumerate(checks.checks)]
    messages = await _ask(view, {i: custom_status.message_request(c, contexts[i],
                                                                   verdicts[i][0])
                                 for i, c in enumerate(checks.checks) if c.custom})
    results: list[tuple[Check, bool, str]] = []
    for i, check in enumerate(checks.checks):
        healthy, reason = verdicts[i]
        message = custom_status.message_of(messages[i], check) if i in messages else ""
        results.append((check, healthy, reason or message))
    return custom_status.fold(checks, results)


async def _ask(view: ApplicationView, requests: Mapping[int, JSON]) -> dict[int, JSON]:
    """The answers to ``requests`` (evaluated in the workers when the memo lacks them)."""
    keys = {i: definitions.request_key(r) for i, r in requests.items()}
    await view.evaluate({keys[i]: r for i, r in requests.items()})
    found: dict[int, JSON] = {}
    for i, key in keys.items():
        answer = view.evaluated(key)
        found[i] = answer if answer is not None else {"error": "not evaluated"}
    return found
