"""Notification steps: the Event, one message per URL, each step execution once."""

from __future__ import annotations

from federation.applications import compile as compile_
from federation.applications import model, policies, workflow
from federation.controllers.applications import notifications
from federation.controllers.applications.notify import Notifier, reference
from tests.unit.controllers.applications.fakes import Recorder, app


class FullOutbox:
    def __init__(self) -> None:
        self.messages: list[notifications.Message] = []

    def submit(self, message: notifications.Message) -> notifications.Admission:
        self.messages.append(message)
        return notifications.Admission(False, warn=True)


def compiled(urls: tuple[str, ...]) -> compile_.Compiled:
    spec = model.parse_spec(app()["spec"])
    return compile_.Compiled(spec, (), {}, policies.health_of([]), policies.gc_of([]),
                             {"tell": model.Notification("hi", urls)})


STATE = workflow.State(3, (), "running", 100.0)


async def test_each_step_execution_is_submitted_once_with_its_event() -> None:
    recorder, outbox = Recorder(), FullOutbox()
    notifier = Notifier(recorder, outbox, remembered=10)
    found = compiled(("http://a.example/", "http://b.example/"))
    for _ in range(2):
        await notifier.notify(app(), found, STATE, workflow.Notify("tell", "hi"))
    assert [m.url for m in outbox.messages] == ["http://a.example/", "http://b.example/"]
    assert outbox.messages[0].app == reference(app())
    assert recorder.events[0] == ("Normal", "Notification", "hi")
    assert [e[1] for e in recorder.events[1:]] == ["NotificationDropped"] * 2
    await notifier.notify(app(), found, workflow.State(3, (), "running", 200.0),
                          workflow.Notify("tell", ""))
    assert recorder.events[-3] == ("Normal", "Notification", "Application shop: step tell")


def test_the_memory_is_bounded_oldest_first() -> None:
    notifier = Notifier(Recorder(), FullOutbox(), remembered=2)
    for n in range(3):
        assert notifier.first_time(("uid", 1, 0.0, f"s{n}"))
    assert notifier.first_time(("uid", 1, 0.0, "s0"))  # forgotten: the oldest
    assert not notifier.first_time(("uid", 1, 0.0, "s2"))


async def test_a_step_without_urls_is_an_event_only() -> None:
    recorder, outbox = Recorder(), FullOutbox()
    await Notifier(recorder, outbox, 10).notify(app(), compiled(()), STATE,
                                                workflow.Notify("other", "x"))
    assert outbox.messages == [] and recorder.events == [("Normal", "Notification", "x")]
