"""helmchart on the local fleet: a chart of our own (tests/fixtures/helm/shopfront: a
Deployment and a ConfigMap templated from values) served by a chart repository on loopback
(an ``index.yaml`` and the archive), allowed to the control plane with ``--chart-allow
127.0.0.1/32``; an Application of type helmchart with values delivers the rendered objects
to two members, and a change of values reaches them. Attack: a chart URL on a loopback
address the operator did not allow is refused (renderFailed, nothing delivered, the
listener never asked).
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.local import helm
from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane, app_namespace, running_plane
from tests.e2e.helpers import apply, get_or_none, wait_for

CHART = Path(__file__).resolve().parents[1] / "fixtures" / "helm" / "shopfront"
APP_API = "core.oam.dev/v1beta1"


def archive() -> bytes:
    """The fixture chart as `helm package` would lay it out."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as packed:
        for path in sorted(CHART.rglob("*")):
            if path.is_file():
                packed.add(path, arcname=f"shopfront/{path.relative_to(CHART)}")
    return out.getvalue()


class ChartRepository:
    """A chart repository on 127.0.0.1: index.yaml and the archive; records the paths
    asked for."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        data = archive()
        index = {"apiVersion": "v1", "entries": {"shopfront": [
            {"name": "shopfront", "version": "0.2.0", "urls": ["shopfront-0.2.0.tgz"],
             "digest": hashlib.sha256(data).hexdigest()},
            {"name": "shopfront", "version": "0.3.0-rc.1", "urls": ["missing.tgz"]}]}}
        self.files = {"/index.yaml": yaml.safe_dump(index).encode(),
                      "/shopfront-0.2.0.tgz": data}
        self.asked: list[str] = []
        repository = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server calls it by this name
                repository.asked.append(self.path)
                body = repository.files.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args: Any) -> None:
                return None

        self.server = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       name="chart repository", daemon=True)

    def __enter__(self) -> ChartRepository:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def repository() -> Iterator[ChartRepository]:
    with ChartRepository() as repo:
        yield repo


@pytest.fixture(scope="module")
def helm_plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[ControlPlane]:
    assert helm.find() is not None, helm.MISSING
    yield from running_plane(fleet_session, tmp_path_factory, "--cleanup-wait", "8",
                             "--chart-allow", "127.0.0.1/32")


@pytest.fixture
def ns(fleet: TestFleet, helm_plane: ControlPlane) -> Iterator[str]:
    yield from app_namespace(fleet, helm_plane, "helm")


def application(ns: str, chart: dict[str, Any], values: dict[str, Any],
                name: str = "shop") -> dict[str, Any]:
    return {
        "apiVersion": APP_API, "kind": "Application",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "components": [{"name": "front", "type": "helmchart",
                            "properties": {"chart": chart, "values": values}}],
            "policies": [{"name": "two", "type": "topology",
                          "properties": {"clusters": ["member1", "member2"]}}],
            "workflow": {"steps": [{"name": "deploy", "type": "deploy",
                                    "properties": {"policies": ["two"]}}]}}}


def app_status(fleet: TestFleet, ns: str, name: str = "shop") -> dict[str, Any]:
    found = get_or_none(fleet, "hub", "applications.core.oam.dev", name, "-n", ns) or {}
    status: dict[str, Any] = found.get("status") or {}
    return status


def greeting(fleet: TestFleet, member: str, ns: str) -> str | None:
    found = get_or_none(fleet, member, "configmap", "front-settings", "-n", ns) or {}
    value = (found.get("data") or {}).get("greeting")
    return str(value) if value is not None else None


def test_a_helm_chart_from_a_repository_delivers_to_two_members_with_its_values(
        fleet: TestFleet, ns: str, repository: ChartRepository) -> None:
    chart = {"source": "shopfront", "repoURL": repository.url, "version": "latest"}
    apply(fleet, "hub", application(ns, chart, {"replicas": 2, "greeting": "hello members"}))
    for member in ("member1", "member2"):
        wait_for(functools.partial(lambda m: greeting(fleet, m, ns) == "hello members",
                                   member), timeout=90, what=f"the chart's ConfigMap in {member}")
        deployment = get_or_none(fleet, member, "deployment", "front-front", "-n", ns)
        assert deployment is not None
        assert deployment["spec"]["replicas"] == 2
        assert deployment["metadata"]["labels"]["app.kubernetes.io/instance"] == "front"
        audit = get_or_none(fleet, member, "configmap", "front-helm-release", "-n", ns)
        assert audit is not None and audit["data"]["resourceCount"] == "2"
    # latest is 0.2.0 (0.3.0-rc.1 is a pre-release): its archive was fetched
    assert "/shopfront-0.2.0.tgz" in repository.asked
    assert "/missing.tgz" not in repository.asked
    wait_for(lambda: app_status(fleet, ns).get("status") == "running", timeout=90,
             what="the Application running")
    # new values: a new render reaches both members
    apply(fleet, "hub", application(ns, chart, {"replicas": 2, "greeting": "second"}))
    for member in ("member1", "member2"):
        wait_for(functools.partial(lambda m: greeting(fleet, m, ns) == "second", member),
                 timeout=90, what=f"the new values in {member}")


def test_a_chart_url_the_operator_did_not_allow_is_refused(
        fleet: TestFleet, ns: str) -> None:
    """The attack: a tenant aims the control plane's chart fetch at a loopback listener
    outside ``--chart-allow`` (127.0.0.2: loopback, not allowed)."""
    with ChartRepository("127.0.0.2") as hidden:
        chart = {"source": f"{hidden.url}/shopfront-0.2.0.tgz"}
        apply(fleet, "hub", application(ns, chart, {}, name="sneaky"))
        status = wait_for(lambda: app_status(fleet, ns, "sneaky").get("status") ==
                          "renderFailed" and app_status(fleet, ns, "sneaky"), timeout=60,
                          what="renderFailed")
        message = status["conditions"][0]["message"]
        assert "destination refused by the control plane's outbound policy" in message
        assert "\n" not in message
        assert hidden.asked == []
    for member in ("member1", "member2"):
        assert get_or_none(fleet, member, "configmap", "front-settings", "-n", ns) is None
