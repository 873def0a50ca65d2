"""A stop (SIGTERM) does not wait for a pull member's agent that has left: its writers are
told at once (docs/runtime.md, "Shutdown"). Without it a write waits up to
``write_timeout`` (30 s) for the agent, and the manager's drain waits for that write."""

import asyncio
import signal
from typing import Any, cast

import pytest

from federation.commands import run as run_command
from federation.contexts.client import DEPLOYMENTS, ClusterUnavailable
from federation.work.pull import WorkClient
from federation.work.server import WorkServer
from tests.unit.work.test_pull_state import answer, deployment, drain, hello, works


async def test_a_write_waiting_for_an_agent_that_left_fails_at_once_on_stop() -> None:
    server = WorkServer()
    state = server.register("member3")
    state.connect(hello())
    write = asyncio.create_task(WorkClient(state).create(DEPLOYMENTS, deployment("moved")))
    await asyncio.sleep(0)
    assert works(drain(state)) == [("moved", 1)]  # sent; then the agent goes
    state.disconnect("stream closed")
    await asyncio.sleep(0)
    assert not write.done()  # it would wait for the agent's return, up to write_timeout
    server.stopping()
    with pytest.raises(ClusterUnavailable, match="the control plane is stopping"):
        await asyncio.wait_for(write, 0.1)  # at once: no timer runs in between
    assert not state.waiters
    await server.stop()


async def test_a_connected_agents_answer_is_still_awaited_on_stop() -> None:
    """Its answer comes: the write reports what the member said, not a failure."""
    server = WorkServer()
    state = server.register("member3")
    state.connect(hello())
    write = asyncio.create_task(WorkClient(state).create(DEPLOYMENTS, deployment("web")))
    await asyncio.sleep(0)
    drain(state)
    server.stopping()
    await asyncio.sleep(0)
    assert not write.done()
    answer(state, "web", 1)
    assert (await write)["metadata"]["resourceVersion"] == "7"
    await server.stop()


def test_the_stop_signal_stops_the_manager_and_tells_the_work_server() -> None:
    """`fedctl run`'s SIGTERM/SIGINT handler: the manager stops, and the work server fails
    the writes no agent will answer."""
    calls: list[str] = []

    class Stoppable:
        def stop(self) -> None:
            calls.append("manager stops")

        def stopping(self) -> None:
            calls.append("work server told")

    run_command._stopping(cast(Any, Stoppable()), cast(Any, Stoppable()), signal.SIGTERM)
    assert calls == ["manager stops", "work server told"]
