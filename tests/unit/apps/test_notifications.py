"""Notification steps: every property honoured or refused by path, URLs validated without
being quoted, and a POST that fails in any way never stalls the workflow."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import yarl

from federation.apps import compile as compile_
from federation.apps import model
from federation.controllers import applications
from federation.placement import clusters as clusters_
from tests.unit.apps.test_controller import MC, REQUEST, Clock, app, must, ready_everywhere, set_app
from tests.unit.controllers import fakes

FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2", "member3")]
WHERE = "spec.workflow.steps[0].properties"


def spec_with(props: dict[str, Any]) -> dict[str, Any]:
    return {"components": [{"name": "web", "type": "webservice", "properties": {"image": "x"}}],
            "policies": [{"name": "t", "type": "topology",
                          "properties": {"clusters": ["member1"]}}],
            "workflow": {"steps": [{"name": "tell", "type": "notification",
                                    "properties": props}]}}


def refusal(props: dict[str, Any]) -> str:
    with pytest.raises(model.AppError) as caught:
        model.parse_spec(spec_with(props))
    return str(caught.value)


HOSTILE = [
    ("http://a..b/hook?token=SECRET", "label 2 of the host name is empty"),
    ("http://" + "a" * 64 + ".example.com/?token=SECRET", "longer than 63 characters"),
    ("http://" + ".".join(["a" * 60] * 5) + "/SECRET", "longer than 253 characters"),
    ("http://.SECRET.example/", "label 1 of the host name is empty"),
    ("http://xn--zz.example/SECRET", "not a valid IDNA label"),
    ("http://-SECRET.example/", "not a valid DNS label"),
    ("http://SECRET%41.example/", "not a valid DNS label"),
    ("http://a\u200dSECRET.example/", "invisible characters"),
    ("http://SECRET .example/", "whitespace"),
    ("http://user:SECRET@host:99999/", "the port is not a number"),
    ("http://user:SECRET@[::1/", "brackets are not closed"),
    ("http://user:SECRET@/x", "has no host"),
    ("ftp://user:SECRET@example.com/x", "only http and https"),
    ("user:SECRET@example.com", "only http and https"),
    ("", "an http(s) URL"),
]


@pytest.mark.parametrize(("url", "why"), HOSTILE)
def test_a_bad_url_is_refused_by_path_and_never_quoted(url: str, why: str) -> None:
    message = refusal({"webhook": {"url": url}})
    assert message.startswith(f"{WHERE}.webhook.url: ") and why in message
    assert "SECRET" not in message
    message = refusal({"slack": {"url": {"value": url}}})
    assert message.startswith(f"{WHERE}.slack.url.value: ") and "SECRET" not in message


@pytest.mark.parametrize("url", [
    "https://hooks.slack.com/services/T0/B0/XYZ", "http://user:pw@Example.COM:8080/a?b=c",
    "http://[::1]:9000/hook", "http://10.0.0.1/", "https://bücher.example/x",
    "http://hook.default.svc.cluster.local./x"])
def test_a_url_we_accept_is_one_aiohttp_can_address(url: str) -> None:
    # what passes here is what the POST gets: yarl (aiohttp's URL) must take its host
    assert model.check_url(url, "w") == url
    assert yarl.URL(url).raw_host


@pytest.mark.parametrize(("props", "path", "words"), [
    ({"slack": {"url": {"secretRef": {"name": "s", "key": "url"}}}}, "slack.url.secretRef",
     "reads no Secret"),
    ({"webhook": {"url": {"secretRef": {"name": "s", "key": "url"}}}},
     "webhook.url.secretRef", "not supported"),
    ({"webhook": {"url": "http://h/", "bogus": 1}}, "webhook.bogus", "not supported"),
    ({"webhook": {"url": {"value": "http://h/", "extra": 1}}}, "webhook.url.extra",
     "not supported"),
    ({"webhook": {}}, "webhook.url", "required"),
    ({"webhook": "http://h/"}, "webhook", "a map"),
    ({"slack": {"url": {}}}, "slack.url.value", "required"),
    ({"slack": {"url": "http://h/", "message": {"text": "x", "blocks": []}}},
     "slack.message.blocks", "not supported"),
    ({"slack": {"url": "http://h/", "message": "x"}}, "slack.message", "a map with text"),
    ({"slack": {"url": "http://h/", "message": {"text": 3}}}, "slack.message.text",
     "a string"),
    ({"slack": {"url": "http://h/", "message": {"text": "a"}}, "message": "b"},
     "slack.message", "give the text once"),
    ({"message": {"text": "a", "content": "b"}}, "message", "one of text or content"),
    ({"message": {"txt": "a"}}, "message.txt", "not supported"),
    ({"message": 3}, "message", "a string"),
    ({"lark": {"url": {"value": "http://h/"}}}, "lark", "not supported for a notification"),
    ({"email": {"to": ["a@b"]}}, "email", "not supported for a notification"),
])
def test_every_notification_field_we_do_not_implement_is_refused_by_path(
        props: dict[str, Any], path: str, words: str) -> None:
    message = refusal(props)
    assert message.startswith(f"{WHERE}.{path}: "), message
    assert words in message


def test_the_fields_we_implement_are_honoured() -> None:
    props = {"webhook": {"url": "http://hook.example/a"},
             "slack": {"url": {"value": "https://hooks.slack.com/x"},
                       "message": {"text": "released"}}}
    found = model.notification(props, "p")
    assert found == model.Notification("released", ("http://hook.example/a",
                                                     "https://hooks.slack.com/x"))
    compiled = compile_.compile_app(spec_with(props), "shop", "shop", {}, FLEET)
    assert compiled.steps[0].message == "released"
    assert model.notification({"message": {"content": "c"}}, "p").message == "c"


class Session:
    """aiohttp.ClientSession's stand-in: its post raises what the test chose."""

    raised: BaseException = UnicodeError("encoding with 'idna' codec failed")
    posted: list[tuple[str, Any]] = []

    def __init__(self, **_: Any) -> None:
        pass

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *_: Any) -> None:
        return None

    def post(self, url: str, json: Any) -> Any:
        Session.posted.append((url, json))
        raise Session.raised


@pytest.mark.parametrize("error", [UnicodeError("idna"), ValueError("SECRET in text"),
                                   TimeoutError(), RuntimeError("SECRET"), OSError("x")])
async def test_a_post_failing_in_any_way_is_a_warning_not_a_raise(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        error: BaseException) -> None:
    import aiohttp
    monkeypatch.setattr(aiohttp, "ClientSession", Session)
    monkeypatch.setattr(Session, "raised", error)
    with caplog.at_level(logging.WARNING, "federation.applications"):
        await applications._post("http://hook.example/?token=SECRET", "hi", "tell")
    assert f"webhook failed: {type(error).__name__}" in caplog.text
    assert "SECRET" not in caplog.text and "hook.example" not in caplog.text


async def test_the_audits_url_with_real_aiohttp_does_not_raise(
        caplog: pytest.LogCaptureFixture) -> None:
    # the URL the audit used, past validation (an Application stored before it): the IDNA
    # error comes before any name lookup, so this makes no network call
    with caplog.at_level(logging.WARNING, "federation.applications"):
        await applications._post("http://a..b/hook?token=SECRET", "hi", "tell")
    assert "webhook failed" in caplog.text and "SECRET" not in caplog.text


def notifying_app(url: str) -> dict[str, Any]:
    body = app()
    body["spec"]["workflow"]["steps"] = [
        {"name": "canary", "type": "deploy", "properties": {"policies": ["canary"]}},
        {"name": "tell", "type": "notification",
         "properties": {"message": "hi", "webhook": {"url": url}}}]
    return body


def world() -> tuple[MC, applications.Reconciler, fakes.FakeRecorder, Clock]:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    clock = Clock()
    recorder = fakes.FakeRecorder()
    reconciler = applications.Reconciler(mc, mc.clusters, recorder,  # type: ignore[arg-type]
                                         applications.ApplicationSettings(), clock=clock)
    return mc, reconciler, recorder, clock


async def test_a_failing_post_finishes_the_step_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import aiohttp
    monkeypatch.setattr(aiohttp, "ClientSession", Session)
    monkeypatch.setattr(Session, "raised", UnicodeError("label empty or too long"))
    monkeypatch.setattr(Session, "posted", [])
    mc, reconciler, recorder, clock = world()
    set_app(mc, notifying_app("http://hook.example/?token=SECRET"))
    for _ in range(4):
        ready_everywhere(mc)
        await reconciler.reconcile(REQUEST)
        clock.now += 10
    status = must(mc, "hub", "Application", "shop")["status"]
    assert status["status"] == "running"
    assert [(s["name"], s["phase"]) for s in status["workflow"]["steps"]] == \
        [("canary", "succeeded"), ("tell", "succeeded")]
    assert [e for e in recorder.events if e[1] == "Notification"] == \
        [("Normal", "Notification", "hi")]
    assert Session.posted == [("http://hook.example/?token=SECRET", {"text": "hi"})]


async def test_a_bad_url_is_refused_before_anything_is_written() -> None:
    mc, reconciler, recorder, _ = world()
    set_app(mc, notifying_app("http://a..b/hook?token=SECRET"))
    assert await reconciler.reconcile(REQUEST) is None
    status = must(mc, "hub", "Application", "shop")["status"]
    assert status["status"] == "renderFailed"
    message = status["conditions"][0]["message"]
    assert message.startswith("spec.workflow.steps[1].properties.webhook.url: label 2")
    assert all("SECRET" not in e[2] for e in recorder.events)
    assert "SECRET" not in str(status)
    assert mc.find("member1", "Deployment", "web", "shop") is None
