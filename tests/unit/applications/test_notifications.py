"""Notification steps: every property honoured or refused by path, URLs validated without
being quoted, the caps on steps, messages and URLs, and the controller handing each step
execution to the sender once, after its status is written, never waiting for a POST."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from typing import Any

import pytest
import yarl

from federation.applications import compile as compile_
from federation.applications import model
from federation.contexts import client as kube
from federation.contexts import egress
from federation.controllers import applications
from federation.controllers.applications import notifications
from federation.placement import clusters as clusters_
from tests.unit.applications.test_controller import (
    MC,
    REQUEST,
    Clock,
    Writer,
    app,
    must,
    ready_everywhere,
    set_app,
)
from tests.unit.controllers import fakes
from tests.unit.controllers.applications import fakes as app_fakes

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
    ("http://host:99999/SECRET", "the port is not a number"),
    ("http://[::1/SECRET", "brackets are not closed"),
    ("http:///SECRET", "has no host"),
    ("http://user:SECRET@host:99999/", "user name or password"),
    ("http://user:SECRET@[::1/", "user name or password"),
    ("http://user:SECRET@/x", "user name or password"),
    ("http://user:SECRET@127.0.0.1:9/", "user name or password"),
    ("http://SECRET@hooks.example/", "user name or password"),
    ("http://hooks.example\\@SECRET.internal/", "user name or password"),
    ("http://2130706433/SECRET", "its last label is a number"),
    ("http://127.1/SECRET", "its last label is a number"),
    ("http://0x7f000001/SECRET", "its last label is a number"),
    ("http://017700000001:80/SECRET", "its last label is a number"),
    ("http://a.b/" + "SECRET" * 400, "longer than 2048 characters"),
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
    "https://hooks.slack.com/services/T0/B0/XYZ", "http://Example.COM:8080/a?b=c",
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


class Outbox:
    """The sender's stand-in: every message submitted, and what it answers."""

    def __init__(self, full_after: int | None = None) -> None:
        self.messages: list[notifications.Message] = []
        self.full_after = full_after

    def submit(self, message: notifications.Message) -> notifications.Admission:
        if self.full_after is not None and len(self.messages) >= self.full_after:
            return notifications.Admission(False, warn=True)
        self.messages.append(message)
        return notifications.Admission(True)

    @property
    def sent(self) -> list[tuple[str, str, str]]:
        return [(m.step, m.url, m.text) for m in self.messages]


def notifying_app(url: str, steps: int = 1, slack: str | None = None) -> dict[str, Any]:
    body = app()
    props: dict[str, Any] = {"message": "hi", "webhook": {"url": url}}
    if slack is not None:
        props["slack"] = {"url": {"value": slack}}
    body["spec"]["workflow"]["steps"] = [
        {"name": "canary", "type": "deploy", "properties": {"policies": ["canary"]}},
        *({"name": f"tell{n}" if n else "tell", "type": "notification", "properties": props}
          for n in range(steps))]
    return body


def world(outbox: notifications.Outbox | None = None
          ) -> tuple[MC, applications.Reconciler, app_fakes.Recorder, Clock, Outbox]:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    clock = Clock()
    recorder = app_fakes.Recorder()
    fake = Outbox()
    reconciler = app_fakes.reconciler(mc, recorder, clock=clock, outbox=outbox or fake)
    return mc, reconciler, recorder, clock, fake


async def run_through(mc: MC, reconciler: applications.Reconciler, clock: Clock,
                      times: int = 4) -> dict[str, Any]:
    for _ in range(times):
        ready_everywhere(mc)
        await reconciler.reconcile(REQUEST)
        clock.now += 10
    status: dict[str, Any] = must(mc, "hub", "Application", "shop")["status"]
    return status


async def test_a_step_is_submitted_once_with_its_event() -> None:
    """Both URLs of the step go to the sender once; more reconciles submit nothing more."""
    mc, reconciler, recorder, clock, outbox = world()
    set_app(mc, notifying_app("http://hook.example/?token=SECRET",
                              slack="https://hooks.slack.example/T0"))
    status = await run_through(mc, reconciler, clock, times=6)
    assert status["status"] == "running"
    assert [(s["name"], s["phase"]) for s in status["workflow"]["steps"]] == \
        [("canary", "succeeded"), ("tell", "succeeded")]
    assert [e for e in recorder.events if e[1] == "Notification"] == \
        [("Normal", "Notification", "hi")]
    assert outbox.sent == [("tell", "http://hook.example/?token=SECRET", "hi"),
                           ("tell", "https://hooks.slack.example/T0", "hi")]
    assert {m.namespace for m in outbox.messages} == {"shop"}


async def test_nothing_is_submitted_before_the_status_says_the_step_ran(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The status write fails: no message, no Event; the retried reconcile sends once."""
    mc, reconciler, recorder, clock, outbox = world()
    set_app(mc, notifying_app("http://hook.example/"))
    ready_everywhere(mc)
    await reconciler.reconcile(REQUEST)  # the canary is deployed
    ready_everywhere(mc)
    clock.now += 10

    async def refuse(self: Writer, *args: Any, **kw: Any) -> Any:
        raise kube.ApiError("hub", 500, "InternalError", "etcd timeout")

    with monkeypatch.context() as patched:
        patched.setattr(Writer, "patch_status", refuse)
        with pytest.raises(kube.ApiError):
            await reconciler.reconcile(REQUEST)
    assert outbox.sent == [] and not [e for e in recorder.events if e[1] == "Notification"]
    await run_through(mc, reconciler, clock, times=3)
    assert outbox.sent == [("tell", "http://hook.example/", "hi")]


async def test_a_reconcile_on_a_stale_cache_does_not_send_again() -> None:
    """The cache still shows the status from before our write (the step not taken yet):
    the step is taken again in that reconcile, and recognised as already submitted."""
    mc, reconciler, _, clock, outbox = world()
    set_app(mc, notifying_app("http://hook.example/"))
    ready_everywhere(mc)
    await reconciler.reconcile(REQUEST)
    before = copy.deepcopy(must(mc, "hub", "Application", "shop"))
    await run_through(mc, reconciler, clock, times=1)
    assert len(outbox.sent) == 1
    mc.put("hub", before)  # what a cache behind our own status write hands out
    await run_through(mc, reconciler, clock, times=3)
    assert len(outbox.sent) == 1


async def test_a_restart_is_a_new_execution_and_sends_again() -> None:
    mc, reconciler, _, clock, outbox = world()
    set_app(mc, notifying_app("http://hook.example/"))
    await run_through(mc, reconciler, clock)
    set_app(mc, notifying_app("http://hook.example/") | {
        "metadata": {"name": "shop", "namespace": "shop",
                     "annotations": {applications.RESTART: "n1"}}})
    await run_through(mc, reconciler, clock)
    assert len(outbox.sent) == 2


async def test_a_full_backlog_is_one_warning() -> None:
    """The sender drops what does not fit: one NotificationDropped Warning, naming no URL."""
    mc, reconciler, recorder, clock, _ = world(Outbox(full_after=3))
    set_app(mc, notifying_app("http://hook.example/?token=SECRET", steps=10))
    status = await run_through(mc, reconciler, clock)
    assert all(s["phase"] == "succeeded" for s in status["workflow"]["steps"])
    dropped = [e for e in recorder.events if e[1] == "NotificationDropped"]
    assert dropped and all(e[0] == "Warning" for e in dropped)
    assert "SECRET" not in str(recorder.events)


async def test_ten_steps_to_a_blackhole_do_not_hold_the_reconcile() -> None:
    """Finding 3: ten notification steps (twenty POSTs) to endpoints that never answer.
    With the real sender the reconcile only submits: it returns while every POST is still
    hanging (inside the reconcile, as before, it took 20 x 5 s)."""
    hanging = asyncio.Event()
    started: list[str] = []

    class Blackhole:
        async def post(self, url: str, body: Any) -> int:
            started.append(url)
            await hanging.wait()
            return 200

        async def close(self) -> None:
            return None

    sender = notifications.Sender(egress.EgressPolicy(), _no_report,
                                  transport=Blackhole())
    running = asyncio.create_task(sender.run())
    try:
        mc, reconciler, _, clock, _ = world(sender)
        set_app(mc, notifying_app("http://blackhole.example/", steps=10,
                                  slack="https://blackhole.example/slack"))
        status = await asyncio.wait_for(run_through(mc, reconciler, clock), 10)
        assert all(s["phase"] == "succeeded" for s in status["workflow"]["steps"])
        assert sender.waiting + len(started) == 20
        assert len(started) <= sender.settings.namespace_in_flight
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


async def _no_report(message: notifications.Message, why: str) -> None:
    return None


async def test_a_failure_report_is_a_warning_worded_for_the_tenant() -> None:
    recorder = app_fakes.Recorder()
    message = notifications.Message(
        {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
         "metadata": {"name": "shop", "namespace": "shop", "uid": "u"}},
        "tell", "http://10.0.0.7:6443/?token=SECRET", "hi")
    await applications.notification_failed(recorder, message, egress.REFUSED)
    assert recorder.events == [("Warning", "NotificationFailed",
                                f"step tell: not delivered: {egress.REFUSED}")]


async def test_a_bad_url_is_refused_before_anything_is_written() -> None:
    mc, reconciler, recorder, _, outbox = world()
    set_app(mc, notifying_app("http://a..b/hook?token=SECRET"))
    assert await reconciler.reconcile(REQUEST) is None
    status = must(mc, "hub", "Application", "shop")["status"]
    assert status["status"] == "renderFailed"
    message = status["conditions"][0]["message"]
    assert message.startswith("spec.workflow.steps[1].properties.webhook.url: label 2")
    assert all("SECRET" not in e[2] for e in recorder.events)
    assert "SECRET" not in str(status)
    assert mc.find("member1", "Deployment", "web", "shop") is None
    assert outbox.sent == []


async def test_credentials_in_a_url_are_refused_before_anything_is_sent() -> None:
    """Finding 2's ``http://user:pw@127.0.0.1:9/``: refused by path, never quoted."""
    mc, reconciler, recorder, _, outbox = world()
    set_app(mc, notifying_app("http://user:SECRET@127.0.0.1:9/"))
    await reconciler.reconcile(REQUEST)
    status = must(mc, "hub", "Application", "shop")["status"]
    assert status["conditions"][0]["message"].startswith(
        "spec.workflow.steps[1].properties.webhook.url: holds a user name or password")
    assert "SECRET" not in str(status) + str(recorder.events)
    assert outbox.sent == []


# -- caps ------------------------------------------------------------------------------------


def component(n: int) -> dict[str, Any]:
    return {"name": f"c{n}", "type": "worker", "properties": {"image": "x"}}


@pytest.mark.parametrize(("shape", "path", "words"), [
    ({"workflow": {"steps": [{"name": f"s{n}", "type": "notification",
                              "properties": {"webhook": {"url": "http://h.example/"}}}
                             for n in range(501)]}},
     "spec.workflow.steps", "501 steps; this control plane takes at most 50"),
    ({"workflow": {"steps": [{"name": f"s{n}", "type": "suspend"} for n in range(51)]}},
     "spec.workflow.steps", "at most 50"),
    ({"components": [component(n) for n in range(101)]}, "spec.components", "at most 100"),
    ({"policies": [{"name": f"p{n}", "type": "health"} for n in range(101)]},
     "spec.policies", "at most 100"),
    ({"workflow": {"steps": [{"name": "s", "type": "notification",
                              "properties": {"message": "x" * 4001}}]}},
     "spec.workflow.steps[0].properties.message", "4001 characters; at most 4000"),
    ({"workflow": {"steps": [{"name": "s", "type": "notification", "properties": {
        "slack": {"url": "http://h.example/", "message": {"text": "x" * 4001}}}}]}},
     "spec.workflow.steps[0].properties.slack.message.text", "at most 4000"),
])
def test_caps_are_refused_by_path(shape: dict[str, Any], path: str, words: str) -> None:
    """Finding 3's 501 steps (1,000 POSTs) and the other caps: refused at parse."""
    spec = {"components": [component(0)]} | shape
    with pytest.raises(model.AppError) as caught:
        model.parse_spec(spec)
    assert str(caught.value).startswith(f"{path}: ") and words in str(caught.value)


def test_at_the_caps_is_accepted() -> None:
    spec = {"components": [component(n) for n in range(100)],
            "policies": [{"name": f"p{n}", "type": "health"} for n in range(100)],
            "workflow": {"steps": [{"name": f"s{n}", "type": "notification", "properties": {
                "message": "x" * 4000, "webhook": {"url": "http://h.example/" + "a" * 2000}}}
                for n in range(50)]}}
    assert len(model.parse_spec(spec).workflow.steps) == 50  # type: ignore[union-attr]


def test_the_deploy_steps_render_within_a_budget() -> None:
    """Ten deploy steps of sixty components: 600 renders, refused at the step that
    crosses 500, before it is placed (each render costs the loop a millisecond or so)."""
    spec = {"components": [component(n) for n in range(60)],
            "policies": [{"name": "t", "type": "topology",
                          "properties": {"clusters": ["member1"]}}],
            "workflow": {"steps": [{"name": f"d{n}", "type": "deploy",
                                    "properties": {"policies": ["t"]}} for n in range(10)]}}
    with pytest.raises(model.AppError) as caught:
        compile_.compile_app(spec, "shop", "shop", {}, FLEET)
    assert str(caught.value).startswith("spec.workflow.steps[8]: the deploy steps render "
                                        "more than 500 objects")
    spec["workflow"]["steps"] = spec["workflow"]["steps"][:8]  # type: ignore[index]
    assert len(compile_.compile_app(spec, "shop", "shop", {}, FLEET).steps) == 8


def test_a_k8s_objects_component_is_capped() -> None:
    objects = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"o{n}"}}
               for n in range(501)]
    spec = {"components": [{"name": "c", "type": "k8s-objects",
                            "properties": {"objects": objects}}],
            "policies": [{"name": "t", "type": "topology",
                          "properties": {"clusters": ["member1"]}}]}
    with pytest.raises(model.AppError) as caught:
        compile_.compile_app(spec, "shop", "shop", {}, FLEET)
    assert str(caught.value).startswith("spec.components[0].properties.objects: 501 manifests")
