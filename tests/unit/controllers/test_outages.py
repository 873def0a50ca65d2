"""Outages: one ERROR per cluster transition, DEBUG per retry; shared dependencies made by
someone else are success; every failure names its cause."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from federation.contexts.client import ApiError, ClusterUnavailable
from federation.contexts.clusters import Cluster
from federation.contexts.health import ProbeLoop
from federation.controllers import propagation, setup
from federation.runtime import controller, manager
from tests.unit.contexts import probes
from tests.unit.controllers.fakes import (
    MEMBERS,
    FakeMC,
    FakeWriter,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)


class FlakyProbeClient:
    """/readyz answers while ``up`` is true, else the connection is refused."""

    name = "member2"

    def __init__(self) -> None:
        self.up = True

    async def request_raw(self, path: str, timeout: float | None = None) -> bytes:
        if not self.up:
            raise ClusterUnavailable(self.name, "GET /readyz: connection refused")
        return b"ok"


async def test_an_outage_logs_one_error_and_retries_at_debug(
        caplog: pytest.LogCaptureFixture) -> None:
    """member2 goes for 20 probes while 20 templates retry 5 times each: one ERROR line (the
    transition), one INFO when it is back, and the 100 failed reconciles at DEBUG."""
    caplog.set_level(logging.DEBUG)
    mc = FakeMC(cluster_set(*MEMBERS))
    member2 = mc.clusters.get("member2")
    probe = FlakyProbeClient()
    prober = ProbeLoop(probe, member2.health, member2.on_transition)
    await prober.once()
    assert member2.available
    names = [f"t{i}" for i in range(20)]
    for name in names:
        mc.put("hub", duplicated_policy(name, MEMBERS))
        mc.put("hub", config_map(name))
    ctl = controller.Controller("propagation", reconciler(mc).reconcile)
    probe.up = False
    mc.down.add("member2")
    for attempt in range(20):
        await prober.once()
        if attempt % 4 == 0:
            for name in names:
                await ctl._process(request_for(mc.find("hub", "ConfigMap", name, "shop")
                                               or {}))
    probe.up = True
    mc.down.discard("member2")
    await prober.once()
    await prober.once()  # success_threshold: two answers in a row
    ctl.shutdown()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "cluster member2 is unavailable: GET /readyz: connection refused"]
    assert any(r.getMessage().startswith("cluster member2 is available again after")
               for r in caplog.records if r.levelno == logging.INFO)
    retries = [r for r in caplog.records if r.name == "federation.controller"]
    assert len(retries) == 100 and {r.levelno for r in retries} == {logging.DEBUG}
    assert all("member2" in r.getMessage() for r in retries)


async def test_a_real_refusal_is_still_an_error(caplog: pytest.LogCaptureFixture,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A member that answers 403 is not an outage: the failure is an ERROR naming the cause."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("web", MEMBERS))
    template = mc.put("hub", config_map("web"))
    real_create = FakeWriter.create

    async def forbidden(self: FakeWriter, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if self.name == "member3" and obj["kind"] == "ConfigMap":
            raise ApiError("member3", 403, "Forbidden", "configmaps is forbidden: no RBAC")
        return await real_create(self, obj, **kw)

    monkeypatch.setattr(FakeWriter, "create", forbidden)
    ctl = controller.Controller("propagation", reconciler(mc).reconcile)
    await ctl._process(request_for(template))
    ctl.shutdown()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "403 Forbidden: configmaps is forbidden: no RBAC" in errors[0]


async def test_a_namespace_another_template_just_made_is_success() -> None:
    """Two templates in one namespace: the second finds the Namespace absent in its cache,
    its create answers 409 AlreadyExists, and that counts as done: its copy is written."""
    mc = FakeMC(cluster_set("member1"))
    for name in ("a", "b"):
        mc.put("hub", duplicated_policy(name, ["member1"]))
    r = reconciler(mc)
    first = mc.put("hub", config_map("a"))
    assert await r.reconcile(request_for(first)) is None
    mc.unseen.add(("member1", "Namespace", "shop"))
    second = mc.put("hub", config_map("b"))
    assert await r.reconcile(request_for(second)) is None
    assert mc.find("member1", "ConfigMap", "b", "shop") is not None
    assert ("create", "member1", "Namespace/shop") in mc.writes


async def test_a_copy_made_by_someone_else_meanwhile_is_a_failure_with_its_cause() -> None:
    """409 AlreadyExists is success only for shared dependencies: on the copy itself it is a
    failure (someone else's object), reported with the server's answer."""
    mc = FakeMC(cluster_set("member1"))
    mc.put("hub", duplicated_policy("c", ["member1"]))
    mc.put("member1", config_map("c"))
    mc.unseen.add(("member1", "ConfigMap", "c"))
    template = mc.put("hub", config_map("c"))
    with pytest.raises(propagation.CopiesFailed, match="409 AlreadyExists: c already exists"):
        await reconciler(mc).reconcile(request_for(template))


async def test_skipped_copies_carry_the_cause_of_the_failed_namespace(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The namespace create is refused: the copy's error names that create and its cause."""
    mc = FakeMC(cluster_set("member1"))
    mc.put("hub", duplicated_policy("d", ["member1"]))
    template = mc.put("hub", config_map("d"))
    real_create = FakeWriter.create

    async def refuse_namespace(self: FakeWriter, obj: dict[str, Any],
                               **kw: Any) -> dict[str, Any]:
        if obj["kind"] == "Namespace":
            raise ApiError("member1", 403, "Forbidden", "namespaces is forbidden")
        return await real_create(self, obj, **kw)

    monkeypatch.setattr(FakeWriter, "create", refuse_namespace)
    with pytest.raises(propagation.CopiesFailed) as failure:
        await reconciler(mc).reconcile(request_for(template))
    assert "not attempted: create Namespace shop in member1 failed: member1: 403 Forbidden: " \
           "namespaces is forbidden" in str(failure.value)


async def test_cluster_transitions_are_logged_once_each(
        caplog: pytest.LogCaptureFixture) -> None:
    """Repeated probe results of the same state log nothing more."""
    caplog.set_level(logging.INFO)
    member = Cluster("m1")
    for value in (True, True, False, False, False, False, True, True, True):
        await probes.probe(member, probes.result(value, None if value else "refused"))
    lines = [(r.levelname, r.getMessage().split(" after ")[0]) for r in caplog.records]
    assert lines == [("INFO", "cluster m1 is available"),
                     ("ERROR", "cluster m1 is unavailable: refused"),
                     ("INFO", "cluster m1 is available again")]


class RecordingManager:
    """What `setup` registers, without running anything."""

    def __init__(self) -> None:
        self.clusters = cluster_set(*MEMBERS)
        self.client = FakeMC(self.clusters)
        self.controllers: dict[str, controller.Controller] = {}
        self.is_leader = True

    def add(self, ctl: controller.Controller) -> controller.Controller:
        self.controllers[ctl.name] = ctl
        return ctl

    def cache(self, *_: Any) -> None:
        return None

    def add_runnable(self, *_: Any) -> None:
        return None


def registered(settings: setup.Settings) -> dict[str, controller.Controller]:
    """What ``setup`` registers with a manager over in-memory clusters (nothing runs)."""
    mgr = manager.Manager(cluster_set(*MEMBERS))
    setup.setup(mgr, settings)
    return {ctl.name: ctl for ctl in mgr.controllers}


def test_cleanup_runs_as_many_workers_as_propagation() -> None:
    """After an outage the clean-up has as many bindings to finish as propagation has
    templates: one worker (1.7 bindings/s) is not enough; both follow the same setting."""
    settings = setup.Settings(propagation=propagation.PropagationSettings(workers=7,
                                                                          retry_pending=2.5))
    controllers = registered(settings)
    assert controllers["cleanup"].workers == controllers["propagation"].workers == 7
    leftovers = controllers["cleanup"].reconcile_func.__self__  # type: ignore[attr-defined]
    assert leftovers.retry == 2.5
