"""Small helpers shared by e2e tests: waiting, reading and applying with kubectl, the
application the reloader tests roll configuration out to, and Applications with
notification steps with a blackholed (or recording) webhook listener."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
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


@contextlib.contextmanager
def watched(fleet: TestFleet, context: str, *args: str
            ) -> Iterator[list[tuple[float, dict[str, Any]]]]:
    """Every version of what ``kubectl get -w <args>`` shows while the block runs, each with
    the monotonic time it arrived (a watch: a version that lives a moment is still seen,
    and its time is when the server sent it, not when a poll happened to look)."""
    process = subprocess.Popen(
        [kubectl_binary(), "--kubeconfig", str(fleet.kubeconfig), "--context", context,
         "get", *args, "-w", "-o", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen: list[tuple[float, dict[str, Any]]] = []

    def read() -> None:
        assert process.stdout is not None
        lines: list[str] = []
        for line in process.stdout:
            lines.append(line)
            if line.rstrip("\n") == "}":  # kubectl indents all but an object's own braces
                seen.append((time.monotonic(), json.loads("".join(lines))))
                lines = []

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield seen
    finally:
        process.terminate()
        process.wait(timeout=30)
        reader.join(timeout=30)


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


# -- Application notifications (docs/applications.md; the security tests' load) ------------


class TcpListener:
    """A TCP listener on 127.0.0.1 counting the connections made to it.

    ``answer=False`` is a blackholed webhook: every connection is accepted and held open,
    nothing is read or answered, so a POST to it waits for its full timeout (with
    ``fedctl run --notification-allow 127.0.0.0/8`` the control plane really attempts it).
    ``answer=True`` replies ``204`` to whatever arrives (a webhook that works). Use it as a
    context manager; :attr:`connections` says whether anything got through."""

    def __init__(self, answer: bool = False) -> None:
        self.answer = answer
        self.connections = 0
        self._held: list[socket.socket] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(256)
        self._sock.settimeout(0.2)
        self.port = int(self._sock.getsockname()[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="tcp listener", daemon=True)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> TcpListener:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for held in self._held:
            held.close()
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:  # the 0.2 s accept timeout: look at the stop flag again
                continue
            self.connections += 1
            if self.answer:
                with conn:
                    conn.settimeout(2)
                    with contextlib.suppress(OSError):
                        conn.recv(65536)
                        conn.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
            else:
                self._held.append(conn)


def notification_app(ns: str, name: str, url: str, steps: int = 10,
                     deploy_to: tuple[str, ...] = ()) -> dict[str, Any]:
    """An Application of ``steps`` notification steps to ``url`` (each a webhook POST),
    after a deploy step of one ``worker`` component to ``deploy_to`` when given."""
    workflow: list[dict[str, Any]] = []
    if deploy_to:
        workflow.append({"name": "deploy", "type": "deploy",
                         "properties": {"policies": ["here"]}})
    workflow += [{"name": f"tell-{n}", "type": "notification",
                  "properties": {"message": f"{name} step {n}", "webhook": {"url": url}}}
                 for n in range(steps)]
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"components": [{"name": "web", "type": "worker",
                                     "properties": {"image": "registry.local/web:1"}}],
                     "policies": [{"name": "here", "type": "topology",
                                   "properties": {"clusters": list(deploy_to or
                                                                   ("member1",))}}],
                     "workflow": {"steps": workflow}}}


def apply_notification_app(fleet: TestFleet, ns: str, name: str, url: str, steps: int = 10,
                           deploy_to: tuple[str, ...] = ()) -> dict[str, Any]:
    """Apply :func:`notification_app` to the hub namespace ``ns`` (which must exist)."""
    body = notification_app(ns, name, url, steps, deploy_to)
    apply(fleet, "hub", body)
    return body


def application_status(fleet: TestFleet, ns: str, name: str) -> dict[str, Any]:
    found = get_or_none(fleet, "hub", "applications.core.oam.dev", name, "-n", ns) or {}
    status: dict[str, Any] = found.get("status") or {}
    return status


def events_of(fleet: TestFleet, ns: str, reason: str) -> list[dict[str, Any]]:
    """The hub Events of namespace ``ns`` with ``reason``."""
    items: list[dict[str, Any]] = get_json(fleet, "hub", "events", "-n", ns).get("items", [])
    return [e for e in items if e.get("reason") == reason]


def healthz_seconds(port: int, timeout: float = 1.0) -> float:
    """Seconds ``/healthz`` of the control plane's health port took to answer 200 (fails
    when it takes longer than ``timeout``)."""
    started = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=timeout) as answer:
        assert answer.status == 200, answer.status
    return time.monotonic() - started
