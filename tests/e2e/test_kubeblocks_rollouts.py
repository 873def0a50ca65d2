"""Issue 24's e2e: a MySQL-style ini file governed by an unchanged KubeBlocks
ConfigConstraint (apps.kubeblocks.io/v1beta1), on the local fleet.

The constraint is written as KubeBlocks' addons write it: parameters of
``iniConfig.sectionName: mysqld`` named bare, only a static and an immutable list (so by
KubeBlocks' rule an unlisted parameter such as ``max_connections`` is dynamic), a
``reloadAction`` (a unix signal trigger: the member's reloader runs its own action) and a
CUE schema (kept, not evaluated). The application, the Deployment and its simulated
reloaders are those of tests/e2e/test_rollouts.py.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from federation.controllers.rollouts import rollout
from federation.hub import rollouts as hub_api
from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import reloaded_app, wait_for
from tests.e2e.test_rollouts import DYNAMIC, INI, MEMBERS, STATIC, TIMEOUT, App, start

KB_KIND = "ConfigConstraint.apps.kubeblocks.io"


class KubeBlocksApp(App):
    def manifests(self, fail_in: str | None = None) -> list[dict[str, Any]]:
        ns = self.ns
        constraint = {
            "apiVersion": "apps.kubeblocks.io/v1beta1", "kind": "ConfigConstraint",
            "metadata": {"name": self.constraint},
            "spec": {"fileFormatConfig": {"format": "ini",
                                          "iniConfig": {"sectionName": "mysqld"}},
                     "staticParameters": ["innodb_buffer_pool_size", "server_id"],
                     "immutableParameters": ["server_id"],
                     "dynamicParameters": None,
                     "parametersSchema": {"topLevelKey": "MysqlParameter",
                                          "cue": "#MysqlParameter: {max_connections: int}"},
                     "reloadAction": {"unixSignalTrigger": {"signal": "SIGHUP",
                                                            "processName": "mysqld"}}}}
        policy = {
            "apiVersion": "config.federation.io/v1alpha1", "kind": "ReconfigurePolicy",
            "metadata": {"name": "app", "namespace": ns},
            "spec": {"configRef": {"kind": "ConfigMap", "name": "app-config"},
                     "files": [{"key": "my.ini", "constraintRef": self.constraint,
                                "constraintKind": KB_KIND}],
                     "workloads": [{"kind": "Deployment", "name": "app"}],
                     "maxUnavailableClusters": 1, "progressDeadlineSeconds": 90}}
        return [constraint, *reloaded_app(ns, INI, fail_in), policy]


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane) -> Iterator[str]:
    name = f"kb-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    fleet.kubectl("hub", "delete", f"configconstraints.apps.kubeblocks.io/mysql-{name}",
                  "--wait=false", check=False)
    for kinds in ("reconfigurepolicies.config.federation.io", "deployments,configmaps",
                  "propagationpolicies.policy.federation.io"):
        fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false", check=False)


def test_a_bare_named_dynamic_parameter_reaches_every_reloader_online(
        fleet: TestFleet, ns: str, control_plane: ControlPlane) -> None:
    app = start(fleet, ns, app_type=KubeBlocksApp)
    generations = {m: app.deployment(m)["metadata"]["generation"] for m in MEMBERS}
    version = app.change(DYNAMIC)
    status = wait_for(partial(app.settled, version, "Complete"), timeout=TIMEOUT,
                      what="the online rollout complete")
    assert status["action"] == "online", status
    assert status["changedParameters"] == ["my.ini:max_connections"]
    for member in MEMBERS:
        assert app.applied(member)[-1]["params"] == {"max_connections": "200"}
        assert app.deployment(member)["metadata"]["generation"] == generations[member]


def test_a_static_parameter_rolls_one_cluster_at_a_time(
        fleet: TestFleet, ns: str, control_plane: ControlPlane) -> None:
    app = start(fleet, ns, reloaders=False, app_type=KubeBlocksApp)
    version = app.change(STATIC)
    status = wait_for(partial(app.settled, version, "Complete"), timeout=TIMEOUT,
                      what="the restart rollout complete")
    assert status["action"] == "restart", status
    assert status["changedParameters"] == ["my.ini:innodb_buffer_pool_size"]
    spans = []
    for entry in status["clusters"]:
        assert entry["restartVersion"] == version and entry["state"] == "Done"
        started = rollout.parse_stamp(entry["startedAt"])
        finished = rollout.parse_stamp(entry["finishedAt"])
        assert started is not None and finished is not None
        spans.append((started, finished, entry["name"]))
    spans.sort()
    for before, after in itertools.pairwise(spans):
        assert before[1] <= after[0], f"{before[2]} and {after[2]} restarted at once: {spans}"
    for member in MEMBERS:
        live = app.deployment(member)
        assert live["spec"]["template"]["metadata"]["annotations"][
            hub_api.CONFIG_VERSION_ANNOTATION] == version
        assert app.applied(member) == []
