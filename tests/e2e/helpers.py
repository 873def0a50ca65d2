"""Small helpers shared by e2e tests: waiting, reading and applying with kubectl, and the
application the reloader tests roll configuration out to."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any

from tests.conftest import TestFleet, kubectl_binary


def wait_for(condition: Callable[[], Any], timeout: float = 30, interval: float = 0.2,
             what: str = "condition") -> Any:
    """Poll until ``condition()`` is truthy and return it; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout}s")
        time.sleep(interval)


def get_json(fleet: TestFleet, context: str, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(fleet.kubectl(context, "get", *args, "-o", "json").stdout)
    return found


def get_or_none(fleet: TestFleet, context: str, *args: str) -> dict[str, Any] | None:
    result = fleet.kubectl(context, "get", *args, "-o", "json", check=False)
    if result.returncode != 0:
        if any(text in result.stderr for text in
               ("NotFound", "not found", "doesn't have a resource type")):
            return None
        raise AssertionError(f"kubectl get {' '.join(args)}: {result.stderr.strip()}")
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def apply(fleet: TestFleet, context: str, *manifests: dict[str, Any]) -> None:
    document = {"apiVersion": "v1", "kind": "List", "items": list(manifests)}
    result = subprocess.run(
        [kubectl_binary(), "--kubeconfig", str(fleet.kubeconfig), "--context", context,
         "apply", "-f", "-"], input=json.dumps(document), text=True, capture_output=True,
        timeout=60)
    if result.returncode != 0:
        raise AssertionError(f"kubectl apply failed: {result.stderr.strip()}")


def grant_secrets(fleet: TestFleet, namespace: str) -> None:
    """As the admin: the RoleBinding that lets the control plane read and propagate the
    hub Secrets of ``namespace`` (what `fedctl install --secret-namespaces` applies)."""
    from federation.rbac import roles

    apply(fleet, "hub", roles.secret_binding(namespace, roles.Settings()).body)


def free_port() -> int:
    """A loopback port nobody holds now (the process told to bind it does so a moment
    later; tests accept that race, as every port-0-then-rebind test does)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


RELOADER_FAIL_OVERRIDE = {"path": "/spec/template/metadata/annotations/"
                                  "reloader.federation.io~1simulate-fail",
                          "operator": "add", "value": "true"}
"""Makes one member's simulated reloader fail (on the pod template: an OverridePolicy may not
write a ``*.federation.io/`` key of the workload's own metadata, docs/security.md, but the pod
template's annotations are the application's)."""


def reloaded_app(ns: str, ini: str, fail_in: str | None = None) -> list[dict[str, Any]]:
    """In apply order: ConfigMap ``app-config`` (key ``my.ini``), with ``fail_in`` an
    OverridePolicy making that member's simulated reloader fail, Deployment ``app`` mounting
    the config with a simulated reloader, and a Duplicated PropagationPolicy for both."""
    policy_api = "policy.federation.io/v1alpha1"
    config = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "app-config", "namespace": ns}, "data": {"my.ini": ini}}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "app", "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "app"}},
                 "template": {
                     "metadata": {"labels": {"app": "app"}, "annotations": {
                         "reloader.federation.io/simulate": "true"}},
                     "spec": {"containers": [{"name": "app", "image": "registry.local/app:1"}],
                              "volumes": [{"name": "config",
                                           "configMap": {"name": "app-config"}}]}}}}
    propagation = {
        "apiVersion": policy_api, "kind": "PropagationPolicy",
        "metadata": {"name": "app", "namespace": ns},
        "spec": {"resourceSelectors": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "app-config"},
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "app"}],
            "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}}
    override = [] if fail_in is None else [{
        "apiVersion": policy_api, "kind": "OverridePolicy",
        "metadata": {"name": "fail-one", "namespace": ns},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": "app"}],
                 "overrideRules": [{"targetCluster": {"clusterNames": [fail_in]},
                                    "overriders": {"plaintext": [RELOADER_FAIL_OVERRIDE]}}]}}]
    return [config, *override, deployment, propagation]
