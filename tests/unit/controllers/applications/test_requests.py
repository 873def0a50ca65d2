"""User requests: restart, rollback and resume, each nonce acted on once; the workflow
state kept, or started afresh for a new revision."""

from __future__ import annotations

from federation.controllers.applications import requests
from federation.controllers.applications.settings import RESTART, RESUME, ROLLBACK
from tests.unit.controllers.applications.fakes import (
    FakeView,
    app,
    build_of,
    canary_started,
    kept,
    revision_doc,
    run_through,
    running,
)


async def test_a_new_revision_starts_the_workflow_afresh_and_ends_a_rollback() -> None:
    view = FakeView([("hub", revision_doc(1))], now=2000.0)
    build = build_of(app("web:2", status={"workflow": running(1), "rollback": {
        "revision": 1, "from": 1, "time": "x"}}))
    await run_through(view, build, requests.take_requests)
    assert build.state is not None
    assert (build.state.revision, build.state.start) == (2, 2000.0)
    assert "rollback" not in build.status


async def test_the_stored_state_is_kept_for_the_same_revision() -> None:
    view = FakeView()
    doc = app(status={"workflow": canary_started(1, start=500.0)})
    await kept(view, doc)
    build = build_of(doc)
    await run_through(view, build, requests.take_requests)
    assert build.state is not None and build.state.start == 500.0
    assert build.state.steps[0].started == ("member1",)


async def test_a_restart_nonce_restarts_once() -> None:
    view = FakeView(now=3000.0)
    doc = app(status={"workflow": canary_started(1, start=500.0)},
              annotations={RESTART: "n1"})
    await kept(view, doc)
    build = build_of(doc)
    await run_through(view, build, requests.take_requests)
    assert build.state is not None and build.state.start == 3000.0
    assert build.state.steps[0].started == ()
    assert build.handled == {RESTART: "n1"}
    handled = build_of(app(status={"workflow": canary_started(1, start=500.0),
                                   "handledRequests": {RESTART: "n1"}},
                           annotations={RESTART: "n1"}))
    await run_through(view, handled, requests.take_requests)
    assert handled.state is not None and handled.state.start == 500.0  # not again


async def test_a_rollback_request_names_a_revision_or_the_last_good_one() -> None:
    view = FakeView([("hub", revision_doc(1, succeeded=True)),
                     ("hub", revision_doc(2, succeeded=True)),
                     ("hub", revision_doc(3, succeeded=False))])
    named = build_of(app("web:4", annotations={ROLLBACK: "1@n1"}))
    await run_through(view, named, requests.take_requests)
    assert named.status["rollback"]["revision"] == 1
    assert named.status["rollback"]["from"] == 4
    assert named.handled == {ROLLBACK: "1@n1"}
    last_good = build_of(app("web:4", annotations={ROLLBACK: "@n2"}))
    await run_through(view, last_good, requests.take_requests)
    assert last_good.status["rollback"]["revision"] == 2
    handled = build_of(app("web:4", status={"handledRequests": {ROLLBACK: "@n2"}},
                           annotations={ROLLBACK: "@n2"}))
    await run_through(view, handled, requests.take_requests)
    assert "rollback" not in handled.status


async def test_no_revision_to_go_back_to_is_a_warning_after_the_status() -> None:
    """Nothing succeeded before: no rollback, and the Warning waits in the build (posted
    once the status recording the handled request is written), never emitted here."""
    view = FakeView([("hub", revision_doc(1, succeeded=False))])
    build = build_of(app("web:2", annotations={ROLLBACK: "0@n1"}))
    await run_through(view, build, requests.take_requests)
    assert "rollback" not in build.status
    assert build.events == [("Warning", "RollbackFailed", "no earlier revision succeeded")]
    assert build.handled == {ROLLBACK: "0@n1"}


async def test_a_resume_is_observed_once() -> None:
    view = FakeView()
    build = build_of(app(annotations={RESUME: "n1"}))
    await run_through(view, build, requests.take_requests)
    assert build.resume and build.handled == {RESUME: "n1"}
    again = build_of(app(status={"handledRequests": {RESUME: "n1"}}, annotations={RESUME: "n1"}))
    await run_through(view, again, requests.take_requests)
    assert not again.resume


def test_rollback_request_values() -> None:
    assert requests.rollback_request(None, None) is None
    assert requests.rollback_request("3@a", "3@a") is None
    assert requests.rollback_request("3@a", None) == 3
    assert requests.rollback_request("x@a", None) == 0
