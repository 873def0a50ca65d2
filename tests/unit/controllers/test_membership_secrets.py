"""Membership and Secrets: a MemberCluster may point only at a kubeconfig of the credentials
namespace, and a hostile kubeconfig Secret is a refusal, never a crash (findings 4, 13)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from federation.contexts import client as kube
from federation.controllers import health, membership
from federation.runtime.reconcile import Request
from tests.unit.contexts.test_hostile_kubeconfig import CASES, TOKEN
from tests.unit.controllers.test_membership import FakeHub, FakeManager, FakeRecorder, hub_only

REQUEST = Request("hub", "MemberCluster.cluster.federation.io", "", "edge")


class RecordingHub(FakeHub):
    """The hub, recording which Secrets were read."""

    def __init__(self, member: dict[str, Any], secret: dict[str, Any]) -> None:
        super().__init__(member, secret)
        self.secret_reads: list[tuple[str | None, str]] = []

    def read(self, resource: kube.Resource, name: str, namespace: str | None
             ) -> dict[str, Any]:
        if resource.kind == "Secret":
            self.secret_reads.append((namespace, name))
        return super().read(resource, name, namespace)


def valid_kubeconfig_secret(namespace: str, name: str) -> dict[str, Any]:
    """Team B's own, working kubeconfig Secret (with a token of theirs)."""
    document = {"apiVersion": "v1", "kind": "Config", "current-context": "edge",
                "clusters": [{"name": "edge", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "edge", "user": {"token": TOKEN}}],
                "contexts": [{"name": "edge", "context": {"cluster": "edge", "user": "edge"}}]}
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "3"},
            "stringData": {"kubeconfig": yaml.safe_dump(document)}}


def member(ref: Any) -> dict[str, Any]:
    return {"metadata": {"name": "edge", "uid": "u1"}, "spec": {"kubeconfigSecretRef": ref}}


async def refused(hub: RecordingHub) -> tuple[str, Any, FakeManager]:
    """Reconcile the MemberCluster once: the JoinFailed reason, the result, the manager."""
    cluster_set = hub_only()
    mgr, recorder = FakeManager(cluster_set, hub), FakeRecorder()
    reconciler = membership.Reconciler(mgr, recorder)
    result = await reconciler.reconcile(REQUEST)
    assert mgr.engaged == []
    assert cluster_set.clusters["edge"].state == "misconfigured"
    [(kind, reason, message)] = recorder.events
    assert (kind, reason) == ("Warning", "JoinFailed")
    assert "\n" not in message and TOKEN not in message
    checker = health.HealthController(cluster_set, hub, recorder)
    await checker.reconcile(REQUEST)
    ready = next(c for c in hub.status_patches[-1]["status"]["conditions"]
                 if c["type"] == "Ready")
    assert ready["status"] == "Unknown" and message in ready["message"]
    await cluster_set.close()
    return message, result, mgr


async def test_a_secret_of_another_namespace_is_refused_by_rule_before_it_is_read() -> None:
    """The attack of finding 4: a MemberCluster naming team B's kubeconfig Secret in team
    B's namespace joined with B's credentials (RBAC let the hub identity read every
    Secret). Now the controller refuses it by its own rule, names the rule, and never even
    reads the Secret."""
    hub = RecordingHub(member({"name": "kubeconfig", "namespace": "team-b",
                               "key": "kubeconfig"}),
                       valid_kubeconfig_secret("team-b", "kubeconfig"))
    message, result, _ = await refused(hub)
    assert membership.RULE in message and "'team-b'" in message
    assert hub.secret_reads == []
    assert result is not None and result.requeue_after == membership.RETRY


@pytest.mark.parametrize("name", ["federation-work-ca", "federation-reloader-ca"])
async def test_a_ca_secret_is_never_read_as_a_kubeconfig(name: str) -> None:
    hub = RecordingHub(member({"name": name, "namespace": "federation-system",
                               "key": "tls.key"}), {})
    message, _, _ = await refused(hub)
    assert f"{name} holds a CA key" in message and hub.secret_reads == []


@pytest.mark.parametrize(("ref", "reason"), [
    ("federation-system/edge-kubeconfig", "is not a mapping"),
    ({"name": "edge-kubeconfig"}, "it names namespace none"),
    ({"name": "edge-kubeconfig", "namespace": ["federation-system"]}, "namespace none"),
    ({"name": "../secrets/x", "namespace": "federation-system"}, "name is not a Secret name"),
    ({"name": "edge-kubeconfig", "namespace": "federation-system", "key": "a/b"},
     "key is not a Secret key"),
])
async def test_a_malformed_reference_is_refused_naming_it(ref: Any, reason: str) -> None:
    """A reference of the wrong shape used to raise (``ref["name"]`` of a string) or be
    sent as is: now one reason, and nothing read."""
    hub = RecordingHub(member(ref), {})
    message, _, _ = await refused(hub)
    assert reason in message and hub.secret_reads == []


@pytest.mark.parametrize("case", [c for c in CASES if c[0] not in (
    "file-50mb", "dev-zero", "directory")], ids=lambda c: c[0])
async def test_a_hostile_kubeconfig_secret_is_a_join_failure(tmp_path: Any,
                                                            case: Any) -> None:
    """The hostile corpus in the joined cluster's Secret (nested 100k deep raised an
    uncaught RecursionError in this reconcile): JoinFailed naming the Secret and the
    reason, retried later; nothing of the content quoted."""
    content = case[1](tmp_path / "unused")
    secret = {"metadata": {"name": "edge-kubeconfig", "namespace": "federation-system",
                           "resourceVersion": "9"},
              "data": {"kubeconfig": base64.b64encode(content).decode()}}
    hub = RecordingHub(member({"name": "edge-kubeconfig", "namespace": "federation-system",
                               "key": "kubeconfig"}), secret)
    message, result, _ = await refused(hub)
    assert "Secret federation-system/edge-kubeconfig" in message and case[2] in message
    assert result is not None and result.requeue_after == membership.RETRY


async def test_a_kubeconfig_of_the_credentials_namespace_still_joins() -> None:
    hub = RecordingHub(member({"name": "edge-kubeconfig", "namespace": "federation-system",
                               "key": "kubeconfig"}),
                       valid_kubeconfig_secret("federation-system", "edge-kubeconfig"))
    cluster_set = hub_only()
    mgr, recorder = FakeManager(cluster_set, hub), FakeRecorder()
    reconciler = membership.Reconciler(mgr, recorder)
    assert await reconciler.reconcile(REQUEST) is None
    assert mgr.engaged == ["edge"] and hub.secret_reads == [("federation-system",
                                                             "edge-kubeconfig")]
    await cluster_set.close()
