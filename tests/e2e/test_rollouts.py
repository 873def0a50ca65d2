"""Configuration rollouts on the local fleet, end to end: issue 13's "Done when".

Every test gets a namespace with an ini file of one dynamic, one static and one immutable
parameter (a ConfigMap), its ConfigConstraint, a Deployment mounting it that asks the
simulator for a reloader (``reloader.federation.io/simulate``), both propagated to the
three members, and a ReconfigurePolicy with ``maxUnavailableClusters: 1``. The control
plane is the real ``fedctl run``; the reloaders are real ``fedctl reloader`` processes
called over mutual TLS; what their action applied is read from each one's
``applied.jsonl``. Everything is observed from outside: the policy's status on the hub, the
member objects, the reloaders' files.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from federation.controllers.rollouts import rollout
from federation.hub import rollouts as hub_api
from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_json, get_or_none, reloaded_app, wait_for

MEMBERS = ("member1", "member2", "member3")
CONFIG_API = "config.federation.io/v1alpha1"
INI = ("[mysqld]\nmax_connections = 100\ninnodb_buffer_pool_size = 128M\n"
       "server_id = 1\n")
DYNAMIC = INI.replace("max_connections = 100", "max_connections = 200")
STATIC = INI.replace("128M", "256M")
IMMUTABLE = INI.replace("server_id = 1", "server_id = 2")
TIMEOUT = 120


class App:
    """One namespace's application: names, and reads of its state."""

    def __init__(self, fleet: TestFleet, ns: str) -> None:
        self.fleet = fleet
        self.ns = ns
        self.constraint = f"mysql-{ns}"

    def manifests(self, fail_in: str | None = None) -> list[dict[str, Any]]:
        ns = self.ns
        constraint = {
            "apiVersion": CONFIG_API, "kind": "ConfigConstraint",
            "metadata": {"name": self.constraint},
            "spec": {"fileFormatConfig": {"format": "ini"},
                     "dynamicParameters": ["mysqld.max_connections"],
                     "staticParameters": ["mysqld.innodb_buffer_pool_size"],
                     "immutableParameters": ["mysqld.server_id"]}}
        policy = {
            "apiVersion": CONFIG_API, "kind": "ReconfigurePolicy",
            "metadata": {"name": "app", "namespace": ns},
            "spec": {"configRef": {"kind": "ConfigMap", "name": "app-config"},
                     "files": [{"key": "my.ini", "constraintRef": self.constraint}],
                     "workloads": [{"kind": "Deployment", "name": "app"}],
                     "maxUnavailableClusters": 1, "progressDeadlineSeconds": 90}}
        return [constraint, *reloaded_app(ns, INI, fail_in), policy]

    # -- reads ---------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        doc = get_json(self.fleet, "hub", "reconfigurepolicies.config.federation.io", "app",
                       "-n", self.ns)
        found: dict[str, Any] = doc.get("status") or {}
        return found

    def hub_version(self) -> str:
        return hub_api.config_version(get_json(self.fleet, "hub", "configmap", "app-config",
                                               "-n", self.ns))

    def settled(self, version: str, phase: str) -> dict[str, Any] | None:
        status = self.status()
        if status.get("configVersion") == version and status.get("phase") == phase:
            return status
        return None

    def everywhere(self, version: str) -> bool:
        status = self.settled(version, "Complete")
        return status is not None and status.get("done") == list(MEMBERS)

    def copy(self, member: str) -> str:
        doc = get_json(self.fleet, member, "configmap", "app-config", "-n", self.ns)
        return str(doc["data"]["my.ini"])

    def deployment(self, member: str) -> dict[str, Any]:
        return get_json(self.fleet, member, "deployment", "app", "-n", self.ns)

    def reloader_dir(self, member: str) -> Path:
        return self.fleet.state_dir / "reloaders" / member / self.ns / "app"

    def applied(self, member: str) -> list[dict[str, Any]]:
        path = self.reloader_dir(member) / "applied.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def has_reloader(self, member: str) -> bool:
        listing = get_or_none(self.fleet, member, "endpointslices.discovery.k8s.io", "-n",
                              self.ns, "-l", "kubernetes.io/service-name=app-reloader")
        return bool(listing and listing.get("items"))

    def change(self, content: str) -> str:
        apply(self.fleet, "hub", {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "app-config", "namespace": self.ns},
                                  "data": {"my.ini": content}})
        return self.hub_version()


def start(fleet: TestFleet, ns: str, fail_in: str | None = None,
          reloaders: bool = True, app_type: type[App] = App) -> App:
    """Apply the application and wait for its first version everywhere (and, when the
    test calls them, for every member's reloader)."""
    app = app_type(fleet, ns)
    apply(fleet, "hub", *app.manifests(fail_in))
    first = app.hub_version()
    wait_for(partial(app.everywhere, first), timeout=TIMEOUT,
             what="the first version complete in every member")
    for member in MEMBERS:
        if reloaders:
            wait_for(partial(app.has_reloader, member), timeout=TIMEOUT,
                     what=f"a reloader in {member}")
        wait_for(partial(rollout_ready, app, member), timeout=TIMEOUT,
                 what=f"the Deployment ready in {member}")
    return app


def rollout_ready(app: App, member: str) -> bool:
    live = get_or_none(app.fleet, member, "deployment", "app", "-n", app.ns)
    return live is not None and rollout_wait(live) is None


def rollout_wait(live: dict[str, Any]) -> str | None:
    status = live.get("status") or {}
    if status.get("observedGeneration", 0) < live["metadata"].get("generation", 0):
        return "generation"
    replicas = live["spec"].get("replicas", 1)
    return None if status.get("readyReplicas", 0) >= replicas else "ready"


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane) -> Iterator[str]:
    name = f"rc-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    fleet.kubectl("hub", "delete", f"configconstraints.config.federation.io/mysql-{name}",
                  "--wait=false", check=False)
    for kinds in ("reconfigurepolicies.config.federation.io",
                  "deployments,configmaps",
                  "propagationpolicies.policy.federation.io,overridepolicies.policy.federation.io"):
        fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false", check=False)


def test_a_dynamic_change_reaches_every_reloader_without_a_restart(
        fleet: TestFleet, ns: str, control_plane: ControlPlane) -> None:
    app = start(fleet, ns)
    generations = {m: app.deployment(m)["metadata"]["generation"] for m in MEMBERS}
    version = app.change(DYNAMIC)
    status = wait_for(partial(app.settled, version, "Complete"), timeout=TIMEOUT,
                      what="the online rollout complete")
    assert status["action"] == "online", status
    assert status["changedParameters"] == ["my.ini:mysqld.max_connections"]
    assert status["done"] == list(MEMBERS) and status["pending"] == []
    for entry in status["clusters"]:
        assert entry["state"] == "Done" and entry["releasedVersion"] == version
        assert entry["workloads"] == [{"kind": "Deployment", "name": "app",
                                       "configVersion": version}]
    for member in MEMBERS:
        assert app.applied(member)[-1]["params"] == {"mysqld.max_connections": "200"}
        assert app.deployment(member)["metadata"]["generation"] == generations[member]
        annotations = app.deployment(member)["spec"]["template"]["metadata"].get(
            "annotations") or {}
        assert hub_api.CONFIG_VERSION_ANNOTATION not in annotations
        assert app.copy(member) == DYNAMIC
    assert_calls_inside_intervals_once(app, status)
    assert_names_no_value(status, "200")


def test_a_static_change_restarts_one_cluster_at_a_time(
        fleet: TestFleet, ns: str, control_plane: ControlPlane) -> None:
    app = start(fleet, ns, reloaders=False)
    generations = {m: app.deployment(m)["metadata"]["generation"] for m in MEMBERS}
    version = app.change(STATIC)
    status = wait_for(partial(app.settled, version, "Complete"), timeout=TIMEOUT,
                      what="the restart rollout complete")
    assert status["action"] == "restart", status
    spans = []
    for entry in status["clusters"]:
        assert entry["restartVersion"] == version and entry["state"] == "Done"
        started = rollout.parse_stamp(entry["startedAt"])
        finished = rollout.parse_stamp(entry["finishedAt"])
        assert started is not None and finished is not None and started < finished
        # Each step waited for its restarted replicas: the simulator counts none as updated
        # for its ready delay (one second) after the pod template changed.
        assert (finished - started).total_seconds() >= 0.9, entry
        spans.append((started, finished, entry["name"]))
    spans.sort()
    assert [name for _, _, name in spans] == list(MEMBERS)
    for before, after in itertools.pairwise(spans):
        assert before[1] <= after[0], f"{before[2]} and {after[2]} restarted at once: {spans}"
    for member in MEMBERS:
        live = app.deployment(member)
        assert live["spec"]["template"]["metadata"]["annotations"][
            hub_api.CONFIG_VERSION_ANNOTATION] == version
        assert live["metadata"]["generation"] > generations[member]
        assert app.copy(member) == STATIC
        assert app.applied(member) == []  # a restart calls no reloader


def test_an_immutable_change_is_refused_and_nothing_is_rolled(
        fleet: TestFleet, ns: str, control_plane: ControlPlane) -> None:
    app = start(fleet, ns, reloaders=False)
    generations = {m: app.deployment(m)["metadata"]["generation"] for m in MEMBERS}
    version = app.change(IMMUTABLE)
    status = wait_for(partial(app.settled, version, "Refused"), timeout=TIMEOUT,
                      what="the change refused")
    accepted = next(c for c in status["conditions"] if c["type"] == "Accepted")
    assert accepted["status"] == "False" and accepted["reason"] == "ImmutableParameterChanged"
    assert "'my.ini:mysqld.server_id'" in accepted["message"]
    assert all(entry.get("releasedVersion") != version for entry in status["clusters"])
    # Give propagation every chance to roll it anyway: the copies stay as they were.
    for _ in range(3):
        for member in MEMBERS:
            assert app.copy(member) == INI
            assert app.deployment(member)["metadata"]["generation"] == generations[member]
            assert app.applied(member) == []
        time.sleep(1)


def assert_calls_inside_intervals_once(app: App, status: dict[str, Any]) -> None:
    """Issue 20, findings 18 and 19: every reloader call of a cluster (the time its action
    recorded) lies inside that cluster's [startedAt, finishedAt], and each member's reloader
    was called once for the version (the first version called nobody: it was unchanged)."""
    for entry in status["clusters"]:
        started = rollout.parse_stamp(entry["startedAt"])
        finished = rollout.parse_stamp(entry["finishedAt"])
        calls = app.applied(entry["name"])
        assert len(calls) == 1, (entry["name"], calls)
        at = rollout.parse_stamp(calls[0]["time"])
        assert started is not None and finished is not None and at is not None
        assert started <= at <= finished, (entry, calls)


def assert_names_no_value(status: dict[str, Any], value: str) -> None:
    """The status names keys, never the config's values. A digest or a timestamp may hold
    the same digits, so look for the value as it would leak: alone, or in ini form."""
    text = json.dumps(status)
    assert f'"{value}"' not in text and f"= {value}" not in text and f"={value}" not in text, \
        text


def test_a_failing_reloader_stops_the_rollout_listing_done_and_pending(
        fleet: TestFleet, ns: str, control_plane: ControlPlane) -> None:
    app = start(fleet, ns, fail_in="member2")
    version = app.change(DYNAMIC)
    status = wait_for(partial(app.settled, version, "Failed"), timeout=TIMEOUT,
                      what="the rollout failed")
    assert status["done"] == ["member1"], status
    assert status["pending"] == ["member2", "member3"], status
    states = {c["name"]: c["state"] for c in status["clusters"]}
    assert states == {"member1": "Done", "member2": "Failed", "member3": "Pending"}
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True"
    assert failed["message"].startswith("cluster member2: ReloaderFailed: Deployment app")
    assert "done: member1; pending: member2, member3" in failed["message"]
    assert app.applied("member1")[-1]["params"] == {"mysqld.max_connections": "200"}
    assert app.applied("member3") == []
    assert app.copy("member3") == INI  # never released: propagation holds the old copy
    assert_names_no_value(status, "200")
