"""Events: each (object, reason, message) once; one that cannot be written is logged and
dropped, never a reconcile's failure; a Warning about something pending is due once."""

from __future__ import annotations

from typing import Any

import pytest

from federation.contexts.client import ApiError
from federation.controllers.kit import events
from tests.unit.controllers.fakes import FakeMC, FakeWriter, cluster_set, config_map

JSON = dict[str, Any]


def template() -> JSON:
    found = config_map("a")
    found["metadata"].update(uid="u-1", resourceVersion="3")
    return found


class UnreadableEvents:
    """The fleet's writers, but a list of events is refused (no RBAC to read them)."""

    def __init__(self, mc: FakeMC) -> None:
        self.mc = mc

    def cluster(self, name: str) -> FakeWriter:
        writer = self.mc.cluster(name)

        async def refused(*_: Any, **__: Any) -> JSON:
            raise ApiError(name, 403, "Forbidden", "events is forbidden")
        writer.list = refused  # type: ignore[method-assign]
        return writer


def recorder(mc: FakeMC, memory: int = 10) -> events.Recorder:
    return events.Recorder(mc, "hub", memory)


def posted(mc: FakeMC) -> list[JSON]:
    return [o for k, o in sorted(mc.objects.items()) if k[1] == "events"]


def test_an_event_names_its_object_and_says_who_posted_it() -> None:
    body = events.event_body(template(), "Warning", "ApplyFailed", "x" * 2000)
    assert body["involvedObject"] == {"apiVersion": "v1", "kind": "ConfigMap", "name": "a",
                                      "namespace": "shop", "uid": "u-1",
                                      "resourceVersion": "3"}
    assert body["metadata"]["namespace"] == "shop" and body["metadata"]["name"].startswith("a.")
    assert (body["type"], body["reason"], len(body["message"])) == ("Warning", "ApplyFailed",
                                                                    1024)
    assert body["source"] == {"component": events.COMPONENT}
    cluster_scoped = events.event_body({"kind": "Namespace", "metadata": {"name": "n"}},
                                       "Normal", "Scheduled", "placed")
    assert cluster_scoped["metadata"]["namespace"] == "default"


async def test_each_message_is_posted_once_until_it_changes() -> None:
    """Forgetting an object (it was deleted) drops the memory only: the hub's newest event
    still says what was said, so the same message is not posted again, a new one is."""
    mc = FakeMC(cluster_set("member1"))
    r = recorder(mc)
    await r.emit(template(), "Normal", "Scheduled", "placed on member1")
    await r.emit(template(), "Normal", "Scheduled", "placed on member1")
    assert len(posted(mc)) == 1
    await r.emit(template(), "Normal", "Scheduled", "placed on member2")
    assert len(posted(mc)) == 2
    r.forget(template())
    assert r._last == {}
    await r.emit(template(), "Normal", "Scheduled", "placed on member2")
    assert len(posted(mc)) == 2
    await r.emit(template(), "Normal", "Scheduled", "placed on member1")
    assert len(posted(mc)) == 3


async def test_a_restart_does_not_repeat_what_the_last_recorder_said() -> None:
    """A new recorder (a restarted control plane) reads the newest event per (object,
    reason) from the hub before posting: the same message is not posted again, a message
    that differs from the newest is, and an event another component posted is not ours."""
    mc = FakeMC(cluster_set("member1"))
    before = recorder(mc)
    await before.emit(template(), "Normal", "Scheduled", "placed on member1")
    posted(mc)[0]["lastTimestamp"] = "2026-01-01T00:00:00Z"
    await before.emit(template(), "Normal", "Scheduled", "placed on member2")
    await before.emit(template(), "Warning", "ApplyFailed", "x" * 2000)
    assert len(posted(mc)) == 3

    after = recorder(mc)
    await after.emit(template(), "Normal", "Scheduled", "placed on member2")
    await after.emit(template(), "Warning", "ApplyFailed", "x" * 2000)
    assert len(posted(mc)) == 3
    await after.emit(template(), "Normal", "Scheduled", "placed on member1")
    assert len(posted(mc)) == 4

    for found in posted(mc):
        found["source"] = {"component": "someone-else"}
    await recorder(mc).emit(template(), "Warning", "ApplyFailed", "x" * 2000)
    assert len(posted(mc)) == 5


async def test_an_unreadable_hub_history_still_posts_the_event() -> None:
    mc = FakeMC(cluster_set("member1"))
    r = events.Recorder(UnreadableEvents(mc), "hub")
    await r.emit(template(), "Normal", "Scheduled", "placed")
    assert len(posted(mc)) == 1


async def test_a_full_memory_starts_again_instead_of_growing() -> None:
    mc = FakeMC(cluster_set("member1"))
    r = recorder(mc, memory=2)
    for n in range(3):
        obj = template()
        obj["metadata"]["uid"] = f"u-{n}"
        await r.emit(obj, "Normal", "Scheduled", "placed")
    assert len(r._last) == 1 and len(posted(mc)) == 3


async def test_an_event_that_cannot_be_written_is_logged_and_retried_next_time(
        caplog: pytest.LogCaptureFixture) -> None:
    mc = FakeMC(cluster_set("member1"))
    r = recorder(mc)
    mc.set_down("hub", True)
    await r.emit(template(), "Warning", "ApplyFailed", "member1: 403")
    assert "not recorded" in caplog.text and posted(mc) == []
    mc.set_down("hub", False)
    await r.emit(template(), "Warning", "ApplyFailed", "member1: 403")
    assert len(posted(mc)) == 1


def test_a_pending_warning_is_due_once_after_the_wait() -> None:
    assert not events.overdue_once(None, 100.0, 30.0, 5.0)
    assert not events.overdue_once(0.0, 29.0, 30.0, 5.0)
    assert events.overdue_once(0.0, 30.0, 30.0, 5.0)
    assert events.overdue_once(0.0, 44.0, 30.0, 5.0)
    assert not events.overdue_once(0.0, 45.0, 30.0, 5.0)  # long after: a restart says nothing
