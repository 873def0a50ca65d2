"""Issue 20, findings 1 and 17, through the rollout controller: a tenant's governed
ConfigMap can no longer freeze it.

Each hostile file of the finding becomes one ``InvalidFile`` condition with its reason
class (never an exception retried forever, never the file's text); a refused plan is not
planned again until an input changes; a content is analysed once however many clusters
hold it; and the analysis runs in worker processes: a backtracking pattern is killed at
its deadline while the event loop (and another tenant's rollout) carries on.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from federation.controllers.rollouts.sandbox import Analyses, Sandbox, Unavailable, inline
from federation.rollouts.formats import FileFormat
from tests.unit.controllers.rollouts.fakes import (
    NS,
    Caller,
    Fleet,
    change,
    reconcile,
    reconciler,
)
from tests.unit.rollouts.test_hostile import SECRET, alias_bomb, deep

BENIGN = {
    "ini": "[mysqld]\nmax_connections = 100\n",
    "yaml": "server:\n  port: 80\n",
    "json": '{"server": {"port": 80}}',
    "toml": "[server]\nport = 80\n",
}
HOSTILE: dict[str, tuple[str, str, str]] = {
    # name: (format, content, the reason class the condition names)
    "ini-quadratic-line": ("ini", "[mysqld]\nk" + " " * 45_000 + "v\n", "line too long"),
    "yaml-alias-bomb": ("yaml", alias_bomb(), "too many values"),
    "json-100k-deep": ("json", deep(FileFormat.JSON, 100_000), "nested too deep"),
    "yaml-5k-deep": ("yaml", deep(FileFormat.YAML, 5_000), "nested too deep"),
    "toml-100k-deep": ("toml", deep(FileFormat.TOML, 100_000), "nested too deep"),
    "yaml-secret-alias": ("yaml", f"server:\n  token: *{SECRET}\n", "syntax"),
    "too-large": ("yaml", "a: " + "x" * (2 * 2**20 + 1), "too large"),
}


def governed(fleet: Fleet, fmt: str, namespace: str = NS, pattern: str | None = None) -> None:
    """A constraint of ``fmt`` (every parameter dynamic), its ConfigMap copied to every
    member, a ready Deployment and the policy."""
    spec: dict[str, Any] = {"fileFormatConfig": {"format": fmt}, "dynamicParameters": ["*"]}
    if pattern is not None:
        spec["parametersSchema"] = {"*": {"type": "string", "pattern": pattern}}
    fleet.put({"apiVersion": "config.federation.io/v1alpha1", "kind": "ConfigConstraint",
               "metadata": {"name": f"c-{namespace}"}, "spec": spec})
    fleet.config_map(BENIGN[fmt], namespace=namespace)
    fleet.copy_everywhere(namespace=namespace)
    fleet.deployment(namespace=namespace)
    fleet.add_policy(namespace=namespace,
                     files=[{"key": "my.ini", "constraintRef": f"c-{namespace}"}])


def accepted(fleet: Fleet, namespace: str = NS) -> dict[str, Any]:
    status = fleet.hub[("ReconfigurePolicy", namespace, "db")]["status"]
    found: dict[str, Any] = next(c for c in status["conditions"] if c["type"] == "Accepted")
    return found


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(HOSTILE))
async def test_a_hostile_file_is_one_invalid_file_condition(case: str) -> None:
    fmt, content, reason = HOSTILE[case]
    fleet = Fleet()
    governed(fleet, fmt)
    analyses = Analyses(inline)
    rec = reconciler(fleet, Caller(), analyses=analyses)
    await reconcile(rec)
    before = copy.deepcopy(fleet.status()["clusters"])
    change(fleet, content)
    started = time.perf_counter()
    await reconcile(rec)  # no RecursionError, no hang: a condition
    assert time.perf_counter() - started < 10
    condition = accepted(fleet)
    assert condition["status"] == "False" and condition["reason"] == "InvalidFile", condition
    assert condition["message"].startswith(f"my.ini: the hub's cannot be used ({reason}): "), \
        condition["message"]
    assert SECRET not in str(fleet.status())
    assert fleet.status()["phase"] == "Refused" and fleet.status()["clusters"] == before
    # The first version once, the hostile one once for 3 clusters (an oversized one not at
    # all: refused before any worker sees it).
    assert analyses.asked == (1 if reason == "too large" else 2)


@pytest.mark.timeout(30)
async def test_a_refused_plan_is_not_planned_again_until_an_input_changes() -> None:
    fleet = Fleet()
    governed(fleet, "yaml")
    analyses = Analyses(inline)
    rec = reconciler(fleet, Caller(), analyses=analyses)
    await reconcile(rec)
    change(fleet, alias_bomb())
    await reconcile(rec)
    planned = analyses.asked
    asked: list[Any] = []
    original = analyses.run

    async def counting(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request["op"])
        return await original(request)

    analyses.run = counting
    for _ in range(5):  # events keep coming: nothing is parsed, planned or written again
        writes = len(fleet.writes)
        await reconcile(rec)
        assert len(fleet.writes) == writes
    assert analyses.asked == planned and asked == []
    # An input changed (a member's copy): planned again, and refused again.
    member = fleet.copies["member2"][("ConfigMap", NS, "db-config")]
    member["data"]["my.ini"] = "server:\n  port: 81\n"
    member["metadata"]["resourceVersion"] = "9999"
    await reconcile(rec)
    assert accepted(fleet)["reason"] == "InvalidFile"
    assert asked == ["diff"]  # only the new (copy, content) pair; the rest from the memo


@pytest_asyncio.fixture(loop_scope="function")  # the workers' pipes belong to its loop
async def sandbox() -> AsyncIterator[Sandbox]:
    box = Sandbox(workers=2, timeout=3.0)
    try:
        yield box
    finally:
        await box.close()


class LoopWatch:
    """The longest the event loop went without running a 10 ms ticker."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            self.worst = max(self.worst, now - last)
            last = now

    def __enter__(self) -> LoopWatch:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


@pytest.mark.timeout(120)
async def test_a_backtracking_pattern_is_killed_at_its_deadline_off_the_loop(
        sandbox: Sandbox) -> None:
    """``([a-z0-9]+)*`` against 29 characters and a '!' backtracks for minutes: the worker
    is killed at 3 s, the policy refused, and meanwhile another namespace's rollout, in the
    pool's other worker, completes and the loop never stalls."""
    fleet = Fleet()
    governed(fleet, "ini", pattern="([a-z0-9]+)*")
    governed(fleet, "ini", namespace="other")
    rec = reconciler(fleet, Caller(), analyses=Analyses(sandbox.ask))
    await reconcile(rec)
    await reconcile(rec, namespace="other")
    change(fleet, "[mysqld]\nmax_connections = " + "a" * 29 + "!\n")
    change(fleet, "[mysqld]\nmax_connections = 200\n", namespace="other")
    with LoopWatch() as watch:
        started = time.perf_counter()
        hostile = asyncio.ensure_future(reconcile(rec))
        await asyncio.sleep(0.05)
        await reconcile(rec, namespace="other")
        other_done = time.perf_counter() - started
        await hostile
        hostile_done = time.perf_counter() - started
    assert fleet.status(namespace="other")["phase"] == "Rolling"  # planned and released
    assert other_done < hostile_done and 3.0 <= hostile_done < 15
    assert sandbox.killed == 1
    condition = accepted(fleet)
    assert condition["reason"] == "InvalidFile" and "(timed out)" in condition["message"]
    assert watch.worst < 0.5, watch.worst
    # The killed worker is replaced at the next request.
    change(fleet, "[mysqld]\nmax_connections = abc\n")
    await reconcile(rec)
    assert fleet.status()["phase"] == "Rolling"


@pytest.mark.timeout(180)
async def test_a_900_kib_yaml_file_is_parsed_once_and_never_on_the_loop() -> None:
    """A legitimate file, 900 KiB in every member, one value changed: six parses on the
    loop per event before, now two in a worker for all three clusters."""
    sandbox = Sandbox(workers=1, timeout=120.0)  # the default's room, on a loaded machine
    try:
        await _roll_a_900_kib_file(sandbox)
    finally:
        await sandbox.close()


async def _roll_a_900_kib_file(sandbox: Sandbox) -> None:
    big = "".join(f"section{i}:\n  value: {'v' * 30}{i}\n" for i in range(16_000))
    fleet = Fleet()
    governed(fleet, "yaml")
    change(fleet, big)
    fleet.copy_everywhere()
    analyses = Analyses(sandbox.ask)
    rec = reconciler(fleet, Caller(), analyses=analyses)
    await reconcile(rec)
    asked = analyses.asked
    change(fleet, big.replace("value: vvvvvvvvvvvvvvvvvvvvvvvvvvvvvv7\n",
                              "value: changed\n"))
    with LoopWatch() as watch:
        await reconcile(rec)
        await reconcile(rec)
    assert fleet.status()["action"] == "online"  # every parameter is dynamic here
    assert fleet.status()["changedParameters"] == ["my.ini:section7.value"]
    assert analyses.asked == asked + 1  # the new version once, for 3 clusters and 2 events
    assert watch.worst < 0.5, watch.worst


@pytest.mark.timeout(30)
async def test_too_many_changed_parameters_are_refused() -> None:
    """Every changed name reaches the status: a change of more than 1,000 parameters is
    refused rather than written into a status too large for the API server."""
    fleet = Fleet()
    governed(fleet, "yaml")
    rec = reconciler(fleet, Caller())
    await reconcile(rec)
    change(fleet, "".join(f"p{i}: {i}\n" for i in range(1001)))
    await reconcile(rec)
    condition = accepted(fleet)
    assert condition["reason"] == "InvalidFile"
    assert "(too many changes)" in condition["message"] and "1002 parameters" in \
        condition["message"]


@pytest.mark.timeout(60)
async def test_the_workers_stop_with_the_manager() -> None:
    box = Sandbox(workers=1, timeout=5.0)
    keeper = asyncio.ensure_future(box.keep())
    answer = await box.ask({"op": "online", "constraint": {
        "fileFormatConfig": {"format": "env"}, "dynamicParameters": ["*"]},
        "content": "A=1\n", "names": ["A"]})
    assert answer == {"params": {"A": "1"}}
    slot = box._slots().get_nowait()
    assert slot.worker is not None and slot.worker.alive
    process = slot.worker.process
    box._slots().put_nowait(slot)
    keeper.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await keeper
    assert process.returncode is not None  # killed, not left behind


async def test_no_worker_is_a_retry_not_a_refusal() -> None:
    """A stopping manager (or a worker that will not start) is not the file's fault: the
    reconcile fails and is retried; nothing is refused or remembered."""
    fleet = Fleet()
    governed(fleet, "yaml")
    box = Sandbox(workers=1)
    await box.close()
    analyses = Analyses(box.ask)
    rec = reconciler(fleet, Caller(), analyses=analyses)
    with pytest.raises(Unavailable):
        await reconcile(rec)  # copies exist: their diff is asked for
    assert "status" not in fleet.hub[("ReconfigurePolicy", NS, "db")]  # nothing written
    assert not analyses._memo
