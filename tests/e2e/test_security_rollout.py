"""Issue 20 on the local fleet, configuration rollouts: findings 1 and 10, and with
notifications (finding 3) the combined load of the issue's done-when.

The control plane of this module runs WITHOUT ``--reloader-allow``: the simulated
reloaders listen on 127.0.0.1 and must be refused by the outbound policy, never dialled.
It does allow notifications to 127.0.0.0/8 (``--notification-allow``), so that the
blackholed webhook below is really dialled and really holds its POSTs for their timeout.

- finding 10: an online step to a loopback reloader fails ``ReloaderFailed: ... refused by
  the control plane's outbound policy`` and the reloader's action never runs;
- finding 1 with finding 3: while a tenant applies the hostile ConfigMaps of
  :mod:`tests.e2e.hostile_rollouts` and Applications of ten notification steps each to a
  blackholed URL, another namespace's Deployment reaches every member within 2 s and
  ``/healthz`` answers within 1 s throughout; each hostile policy ends with one
  ``InvalidFile`` condition naming its reason class (the 900 KiB file is accepted).
"""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import pytest

from federation.contexts import egress
from tests.conftest import TestFleet
from tests.e2e import hostile_rollouts
from tests.e2e.conftest import ControlPlane, running_plane
from tests.e2e.helpers import TcpListener, apply, apply_notification_app, get_or_none, wait_for
from tests.e2e.test_rollouts import DYNAMIC, INI, MEMBERS, TIMEOUT, start


@pytest.fixture(scope="module")
def strict_plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[ControlPlane]:
    """``fedctl run`` with the default outbound policy: public reloader addresses only."""
    yield from running_plane(fleet_session, tmp_path_factory, "--cleanup-wait", "8",
                             "--notification-allow", "127.0.0.0/8")


@pytest.fixture
def namespaces(fleet: TestFleet, strict_plane: ControlPlane) -> Iterator[list[str]]:
    made: list[str] = []

    def make() -> str:
        name = f"rsec-{uuid.uuid4().hex[:6]}"
        fleet.kubectl("hub", "create", "namespace", name)
        made.append(name)
        return name

    yield [make(), make()]
    if strict_plane.process is not None and strict_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{strict_plane.log_tail()}")
    for name in made:
        hostile_rollouts.delete_hostile_rollouts(fleet, name)
        fleet.kubectl("hub", "delete", f"configconstraints.config.federation.io/mysql-{name}",
                      "--wait=false", check=False)
        for kinds in ("applications.core.oam.dev",
                      "reconfigurepolicies.config.federation.io", "deployments,configmaps",
                      "propagationpolicies.policy.federation.io"):
            fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false",
                          check=False)


def test_a_loopback_reloader_is_refused_and_never_called(
        fleet: TestFleet, namespaces: list[str], strict_plane: ControlPlane) -> None:
    app = start(fleet, namespaces[0])
    version = app.change(DYNAMIC)
    status = wait_for(partial(app.settled, version, "Failed"), timeout=TIMEOUT,
                      what="the online step refused")
    member1 = next(c for c in status["clusters"] if c["name"] == "member1")
    assert member1["state"] == "Failed", status
    assert member1["message"].startswith("ReloaderFailed: Deployment app reloader 127.0.0.1:")
    assert member1["message"].endswith(f"(my.ini): {egress.REFUSED}"), member1["message"]
    for member in MEMBERS:
        assert app.applied(member) == []  # no action ran anywhere
    assert app.copy("member3") == INI


class Health:
    """Polls ``/healthz`` every 0.2 s in a thread, recording each answer's latency."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/healthz"
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="healthz poller", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=1.0) as answer:
                    answer.read()
                self.latencies.append(time.monotonic() - started)
            except OSError as exc:
                self.failures.append(f"{time.strftime('%H:%M:%S')}: {exc}")
            self._stop.wait(0.2)

    def __enter__(self) -> Health:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def probe(ns: str, index: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"probe-{index}", "namespace": ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "probe"}},
                     "template": {"metadata": {"labels": {"app": "probe"}},
                                  "spec": {"containers": [{"name": "c",
                                                           "image": "registry.local/p:1"}]}}}}


def reach_seconds(fleet: TestFleet, ns: str, index: int, pool: ThreadPoolExecutor) -> float:
    """Seconds from the hub's answer creating ``probe-<index>`` to its copy in every member
    (kubectl's own start-up is not the control plane's time; the polling rounds are)."""
    apply(fleet, "hub", probe(ns, index))
    started = time.monotonic()
    missing = set(MEMBERS)
    while missing:
        assert time.monotonic() - started < 60, f"probe-{index} never reached {missing}"
        found = pool.map(lambda m: (m, get_or_none(fleet, m, "deployment", f"probe-{index}",
                                                   "-n", ns)), sorted(missing))
        missing -= {member for member, doc in found if doc is not None}
        if missing:
            time.sleep(0.05)
    return time.monotonic() - started


BLACKHOLED_APPS = 4
"""Applications of ten notification steps each to the blackhole (the audit used four)."""


def test_a_tenants_hostile_config_maps_and_blackholed_notifications_freeze_nothing(
        fleet: TestFleet, namespaces: list[str], strict_plane: ControlPlane) -> None:
    """Issue 20's done-when: hostile config files and 4 x 10 notification steps to a URL
    that accepts and never answers, in one tenant namespace; another namespace's
    Deployments reach every member within 2 s, and /healthz answers within 1 s."""
    tenant, other = namespaces
    apply(fleet, "hub", {"apiVersion": "policy.federation.io/v1alpha1",
                         "kind": "PropagationPolicy",
                         "metadata": {"name": "probes", "namespace": other},
                         "spec": {"resourceSelectors": [{"apiVersion": "apps/v1",
                                                         "kind": "Deployment"}],
                                  "placement": {"replicaScheduling": {
                                      "replicaSchedulingType": "Duplicated"}}}})
    reach: list[float] = []
    with Health(strict_plane.health_port) as health, ThreadPoolExecutor(3) as pool, \
            TcpListener(answer=False) as blackhole:
        reach_seconds(fleet, other, 0, pool)  # the policy is followed: a warm start
        for n in range(BLACKHOLED_APPS):
            apply_notification_app(fleet, tenant, f"loud-{n}", blackhole.url(), steps=10)
        cases = hostile_rollouts.apply_hostile_rollouts(fleet, tenant)
        judged: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + TIMEOUT
        index = 0
        while len(judged) < len(cases):
            left = {c.name for c in cases} - set(judged)
            assert time.monotonic() < deadline, f"not judged in time: {sorted(left)}"
            index += 1
            reach.append(reach_seconds(fleet, other, index, pool))
            for case in cases:
                found = hostile_rollouts.verdict(fleet, tenant, case)
                if found is not None:
                    judged[case.name] = found
        reach.append(reach_seconds(fleet, other, index + 1, pool))
        assert blackhole.connections > 0, "no notification POST was attempted: no load"
    for case in cases:
        accepted = judged[case.name]
        if not case.reason:
            assert accepted["status"] == "True", (case.name, accepted)
            continue
        assert accepted["reason"] == "InvalidFile", (case.name, accepted)
        assert f"({case.reason})" in accepted["message"], (case.name, accepted)
    assert max(reach) <= 2.0, reach
    assert not health.failures, health.failures
    assert health.latencies and max(health.latencies) <= 1.0, max(health.latencies)
