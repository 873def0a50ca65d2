"""Applications as an attacker with rights in one hub namespace would use them (issue 20,
findings 2 and 3), on the local fleet with a real `fedctl run`:

- notification URLs aimed at the control plane's network (loopback, the metadata address,
  its own health port) are refused by the outbound policy: a listener on 127.0.0.1
  receives no connection, and the tenant reads only "refused", never an address;
- ten notification steps to a blackholed URL in namespace A (allowed by
  ``--notification-allow 127.0.0.0/8`` so the POSTs are really attempted, and hang) do not
  delay an Application of namespace B: it deploys to every member promptly, and /healthz
  answers within a second throughout.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import (
    TcpListener,
    application_status,
    apply,
    apply_notification_app,
    events_of,
    get_or_none,
    healthz_seconds,
    wait_for,
)

REFUSED = "destination refused by the control plane's outbound policy"
UNREACHABLE = "destination unreachable"


def plane(fleet: TestFleet, log: Path, *extra: str) -> Iterator[ControlPlane]:
    started = ControlPlane(fleet, log, "--cleanup-wait", "8", *extra)
    started.start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def default_plane(fleet: TestFleet, tmp_path: Path) -> Iterator[ControlPlane]:
    """`fedctl run` with the default outbound policy: public addresses only (one test at a
    time: two control planes without leader election would both act on the hub)."""
    yield from plane(fleet, tmp_path / "fedctl-run.log")


@pytest.fixture
def allowing_plane(fleet: TestFleet, tmp_path: Path) -> Iterator[ControlPlane]:
    """`fedctl run --notification-allow 127.0.0.0/8`: the blackhole on loopback is dialled."""
    yield from plane(fleet, tmp_path / "fedctl-run.log", "--notification-allow", "127.0.0.0/8")


def namespace(fleet: TestFleet, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    return name


def cleanup(fleet: TestFleet, *namespaces: str) -> None:
    for ns in namespaces:
        fleet.kubectl("hub", "delete", "applications.core.oam.dev", "--all", "-n", ns,
                      "--wait=false", check=False)


def status_if(fleet: TestFleet, ns: str, name: str, phase: str) -> dict[str, Any] | None:
    """The Application's status once its ``status.status`` is ``phase``, else None."""
    status = application_status(fleet, ns, name)
    return status if status.get("status") == phase else None


def steps_to(ns: str, name: str, urls: list[str]) -> dict[str, Any]:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"components": [{"name": "web", "type": "worker",
                                     "properties": {"image": "registry.local/web:1"}}],
                     "policies": [{"name": "here", "type": "topology",
                                   "properties": {"clusters": ["member1"]}}],
                     "workflow": {"steps": [
                         {"name": f"tell-{n}", "type": "notification",
                          "properties": {"message": "tenant text", "webhook": {"url": url}}}
                         for n, url in enumerate(urls)]}}}


def test_notification_urls_into_the_control_planes_network_are_refused(
        fleet: TestFleet, default_plane: ControlPlane) -> None:
    """Finding 2 live: each URL's POST is refused at connect time; nothing reaches the
    loopback listener; the Events say "refused" and name no address or port."""
    ns = namespace(fleet, "ssrf")
    try:
        with TcpListener(answer=True) as listener:
            urls = [f"http://127.0.0.1:{listener.port}/", "http://169.254.169.254/latest/"
                    "meta-data/", f"http://[::1]:{listener.port}/",
                    f"http://localhost:{listener.port}/", f"http://0.0.0.0:{listener.port}/",
                    f"http://127.0.0.1:{default_plane.health_port}/healthz"]
            apply(fleet, "hub", steps_to(ns, "ssrf", urls))
            wait_for(lambda: application_status(fleet, ns, "ssrf").get("status") == "running",
                     timeout=60, what="the workflow finished (it does not wait for POSTs)")
            failed = wait_for(lambda: len(events_of(fleet, ns, "NotificationFailed")) >=
                              len(urls) and events_of(fleet, ns, "NotificationFailed"),
                              timeout=30, what="every POST reported")
            assert listener.connections == 0
        messages = sorted(e["message"] for e in failed)
        assert messages == sorted(f"step tell-{n}: not delivered: {REFUSED}"
                                  for n in range(len(urls)))
        assert all(e["type"] == "Warning" for e in failed)
    finally:
        cleanup(fleet, ns)


def test_credentials_and_numeric_hosts_are_refused_by_path(
        fleet: TestFleet, default_plane: ControlPlane) -> None:
    """``http://user:pw@127.0.0.1:9/`` and ``http://2130706433/``: the Application is
    refused (renderFailed) naming the field, without quoting the URL; nothing is sent."""
    ns = namespace(fleet, "ssrf")
    try:
        for name, url, why in (("creds", "http://user:SECRET@127.0.0.1:9/", "user name or "
                                "password"),
                               ("number", "http://2130706433/SECRET", "last label is a number")):
            apply(fleet, "hub", steps_to(ns, name, [url]))
            status = wait_for(functools.partial(status_if, fleet, ns, name, "renderFailed"),
                              timeout=60, what=f"{name} refused")
            message = status["conditions"][0]["message"]
            assert message.startswith("spec.workflow.steps[0].properties.webhook.url: ")
            assert why in message and "SECRET" not in str(status)
            assert get_or_none(fleet, "member1", "deployment", "web", "-n", ns) is None
    finally:
        cleanup(fleet, ns)


def test_a_blackholed_tenant_does_not_delay_another_namespace(
        fleet: TestFleet, allowing_plane: ControlPlane) -> None:
    """Finding 3 live: four Applications of namespace A with ten notification steps each
    to a webhook that accepts and never answers (the audit saw another namespace's
    Application delayed to 56 s); namespace B's Application still deploys to every member
    and succeeds within 10 s, and /healthz answers within 1 s throughout."""
    tenant, other = namespace(fleet, "hole"), namespace(fleet, "calm")
    try:
        with TcpListener(answer=False) as hole:
            for n in range(4):
                apply_notification_app(fleet, tenant, f"noisy-{n}", hole.url(), steps=10)
            wait_for(lambda: hole.connections >= 2, timeout=60,
                     what="the POSTs to the blackhole are attempted (and hang)")
            started = time.monotonic()
            apply_notification_app(fleet, other, "calm", "http://unused.invalid/", steps=0,
                                   deploy_to=("member1", "member2", "member3"))
            slowest_health = 0.0

            def delivered() -> bool:
                nonlocal slowest_health
                slowest_health = max(slowest_health, healthz_seconds(allowing_plane.health_port))
                return application_status(fleet, other, "calm").get("status") == "running"

            wait_for(delivered, timeout=60, what="namespace B's Application succeeded")
            took = time.monotonic() - started
            assert took < 10, f"namespace B's Application took {took:.1f}s"
            assert slowest_health < 1
            for member in ("member1", "member2", "member3"):
                assert get_or_none(fleet, member, "deployment", "web", "-n", other)
            # the tenant's own workflows did not wait for their POSTs either
            for n in range(4):
                wait_for(functools.partial(status_if, fleet, tenant, f"noisy-{n}", "running"),
                         timeout=30, what=f"noisy-{n} finished")
            failed = wait_for(lambda: events_of(fleet, tenant, "NotificationFailed"),
                              timeout=30, what="a timed-out POST reported")
            assert {e["message"].split(": not delivered: ")[1] for e in failed} <= \
                {UNREACHABLE}
    finally:
        cleanup(fleet, tenant, other)
