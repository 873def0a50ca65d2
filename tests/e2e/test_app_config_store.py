"""vela-core's config-store steps on the local fleet: ``create-config`` writes a config
(a Secret of the Application's own hub namespace, KubeVela's labels and layout),
``read-config`` reads it back into an output, an ``apply-component`` step takes that
output (through ``inputs``) into its ConfigMap in member2, and ``delete-config`` deletes
the config. The namespace's Secrets are granted to the control plane (the RoleBinding
`fedctl install --secret-namespaces` writes): the store lives only where they are.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane, app_namespace, running_plane
from tests.e2e.helpers import apply, get_or_none, grant_secrets, wait_for

NEIGHBOUR = "not-for-the-store"
"""A value of a Secret of the namespace that is not a config: never read, never changed."""


@pytest.fixture(scope="module")
def store_plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[ControlPlane]:
    yield from running_plane(fleet_session, tmp_path_factory)


@pytest.fixture
def ns(fleet: TestFleet, store_plane: ControlPlane) -> Iterator[str]:
    for name in app_namespace(fleet, store_plane, "store"):
        grant_secrets(fleet, name)
        yield name


def application(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "store", "namespace": ns},
        "spec": {
            "components": [{"name": "settings", "type": "config",
                            "properties": {"data": {"fixed": "1"}}}],
            "workflow": {"steps": [
                {"name": "write", "type": "create-config", "properties": {
                    "name": "app-db", "config": {"host": "db.example", "port": 5432}}},
                {"name": "read", "type": "read-config", "properties": {"name": "app-db"},
                 "outputs": [{"name": "db", "valueFrom": "output.$returns.config"}]},
                {"name": "use", "type": "apply-component",
                 "properties": {"component": "settings", "cluster": "member2"},
                 "inputs": [{"from": "db.host", "parameterKey": "properties.data.host"}]},
                {"name": "forget", "type": "delete-config", "properties": {"name": "app-db"}},
                {"name": "neighbour", "type": "read-config",
                 "properties": {"name": "neighbour"}}]}}}


def workflow_of(fleet: TestFleet, ns: str) -> dict[str, Any]:
    found = get_or_none(fleet, "hub", "applications.core.oam.dev", "store", "-n", ns) or {}
    flow: dict[str, Any] = (found.get("status") or {}).get("workflow") or {}
    return flow


def test_a_config_is_written_read_used_in_a_member_and_deleted(
        fleet: TestFleet, ns: str) -> None:
    apply(fleet, "hub", {"apiVersion": "v1", "kind": "Secret",
                         "metadata": {"name": "neighbour", "namespace": ns},
                         "stringData": {"password": NEIGHBOUR}})
    apply(fleet, "hub", application(ns))
    written: list[dict[str, Any]] = []

    def ended() -> bool:
        secret = get_or_none(fleet, "hub", "secret", "app-db", "-n", ns)
        if secret is not None:
            written.append(secret)
        return workflow_of(fleet, ns).get("phase") in ("succeeded", "failed")

    try:
        wait_for(ended, timeout=120, interval=0.2, what="the workflow ended")
    except AssertionError:
        flow = workflow_of(fleet, ns)
        flow.pop("_state", None)
        raise AssertionError(json.dumps(flow, indent=1)[:3000]) from None
    steps = {s["name"]: s for s in workflow_of(fleet, ns)["steps"]}
    phases = {name: (s["phase"], s["reason"]) for name, s in steps.items()}
    assert phases == {"write": ("succeeded", "Written"), "read": ("succeeded", "Read"),
                      "use": ("succeeded", "Healthy"), "forget": ("succeeded", "Deleted"),
                      "neighbour": ("failed", "Execute")}, phases
    # the neighbour is answered as a missing config, and nothing of it is anywhere
    assert steps["neighbour"]["message"] == "no config neighbour in the store of this namespace"
    status = get_or_none(fleet, "hub", "applications.core.oam.dev", "store", "-n", ns)
    assert status is not None and NEIGHBOUR not in json.dumps(status)
    neighbour = get_or_none(fleet, "hub", "secret", "neighbour", "-n", ns)
    assert neighbour is not None
    assert base64.b64decode(neighbour["data"]["password"]).decode() == NEIGHBOUR
    # the config as KubeVela keeps one, while it was there
    assert written, "the config's Secret was never seen"
    labels = written[0]["metadata"]["labels"]
    assert labels == {"config.oam.dev/catalog": "velacore-config", "config.oam.dev/type": ""}
    assert json.loads(base64.b64decode(written[0]["data"]["input-properties"])) == {
        "host": "db.example", "port": 5432}
    # read into the member's object, then deleted from the store
    settings = get_or_none(fleet, "member2", "configmap", "settings", "-n", ns)
    assert settings is not None and settings["data"] == {"fixed": "1", "host": "db.example"}
    assert get_or_none(fleet, "hub", "secret", "app-db", "-n", ns) is None
    events = json.loads(fleet.kubectl("hub", "get", "events", "-n", ns, "-o", "json").stdout)
    reasons = {e.get("reason") for e in events["items"]}
    assert {"ConfigWritten", "ConfigDeleted"} <= reasons
