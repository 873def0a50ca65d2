"""KubeVela's HTTP workflow steps on the local fleet, with a real `fedctl run`:

- ``request`` GETs a JSON answer from a test server on loopback; its output feeds a later
  ``apply-component`` step, whose ConfigMap in member1 holds the answer's value;
- ``webhook`` POSTs the Application to the same server;
- ``check-metrics`` queries the server's fake Prometheus ``/api/v1/query`` (a metrics
  source, not the Kubernetes API) until its condition has held for ``duration``.

The control plane runs with ``--request-allow 127.0.0.0/8`` and ``--notification-allow
127.0.0.0/8`` (the server listens on loopback, which the outbound policy refuses
otherwise: the unit tests perform that refusal). The URL carries a token that must not
appear in the Application's status, its Events or the control plane's log.
"""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane, app_namespace, running_plane
from tests.e2e.helpers import apply, get_json, get_or_none, wait_for


@pytest.fixture(scope="module")
def http_plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[ControlPlane]:
    yield from running_plane(fleet_session, tmp_path_factory, "--request-allow", "127.0.0.0/8",
                             "--notification-allow", "127.0.0.0/8")


class Server:
    """An HTTP server on 127.0.0.1 in a thread: a JSON answer, a webhook, a Prometheus."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, bytes]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append(("GET", self.path, b""))
                if self.path.startswith("/greeting"):
                    self.answer({"greeting": "hello"})
                elif self.path.startswith("/api/v1/query"):
                    self.answer({"status": "success", "data": {"resultType": "vector",
                                 "result": [{"metric": {}, "value": [1, "10"]}]}})
                else:
                    self.answer({}, 404)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                server.requests.append(("POST", self.path, self.rfile.read(length)))
                self.answer({"ok": True})

            def answer(self, body: dict[str, Any], status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def ns(fleet: TestFleet, http_plane: ControlPlane) -> Iterator[str]:
    yield from app_namespace(fleet, http_plane, "http")


def application(ns: str, port: int) -> dict[str, Any]:
    base = f"http://127.0.0.1:{port}"
    return {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "calls", "namespace": ns},
        "spec": {
            "components": [{"name": "greeting", "type": "config",
                            "properties": {"data": {"fixed": "1"}}}],
            "workflow": {"steps": [
                {"name": "ask", "type": "request",
                 "properties": {"url": f"{base}/greeting?token=SECRET-TOKEN",
                                "header": {"X-Tenant": ns}},
                 "outputs": [{"name": "greeting", "valueFrom": "response.greeting"}]},
                {"name": "apply", "type": "apply-component",
                 "properties": {"component": "greeting", "cluster": "member1"},
                 "inputs": [{"from": "greeting", "parameterKey": "data.greeting"}]},
                {"name": "hook", "type": "webhook",
                 "properties": {"url": {"value": f"{base}/hook?token=SECRET-TOKEN"}}},
                {"name": "check", "type": "check-metrics",
                 "properties": {"query": "sum(up)", "metricEndpoint": base,
                                "condition": ">=3", "duration": "3s",
                                "failDuration": "1m"}}]}}}


def workflow_of(fleet: TestFleet, ns: str) -> dict[str, Any]:
    found = get_or_none(fleet, "hub", "applications.core.oam.dev", "calls", "-n", ns) or {}
    flow: dict[str, Any] = (found.get("status") or {}).get("workflow") or {}
    return flow


def test_request_webhook_and_check_metrics_run_off_the_reconcile(
        fleet: TestFleet, ns: str, http_plane: ControlPlane) -> None:
    with Server() as server:
        apply(fleet, "hub", application(ns, server.port))
        flow = wait_for(lambda: (lambda f: f if f.get("phase") in ("succeeded", "failed")
                                 else None)(workflow_of(fleet, ns)),
                        timeout=90, what="the workflow ended")
        steps = {s["name"]: s for s in flow["steps"]}
        assert flow["phase"] == "succeeded", steps
        assert steps["check"]["message"] == "The metric check has passed successfully."
        config = get_or_none(fleet, "member1", "configmap", "greeting", "-n", ns)
        assert config is not None and config["data"]["greeting"] == "hello"
        gets = [path for method, path, _ in server.requests if method == "GET"]
        assert gets[0] == "/greeting?token=SECRET-TOKEN"
        queries = [urllib.parse.parse_qs(urllib.parse.urlsplit(p).query) for p in gets
                   if p.startswith("/api/v1/query?")]
        assert queries and queries[0] == {"query": ["sum(up)"], "namespace": [ns]}
        posts = [json.loads(body) for method, _, body in server.requests if method == "POST"]
        assert [p["metadata"]["name"] for p in posts] == ["calls"]
        assert "managedFields" not in posts[0]["metadata"]
    app = get_or_none(fleet, "hub", "applications.core.oam.dev", "calls", "-n", ns)
    events = get_json(fleet, "hub", "events", "-n", ns).get("items", [])
    assert app is not None  # its spec holds the URL as written; its status must not
    assert "SECRET-TOKEN" not in json.dumps(app["status"]) + json.dumps(events)
    assert "SECRET-TOKEN" not in http_plane.log_path.read_text(errors="replace")
