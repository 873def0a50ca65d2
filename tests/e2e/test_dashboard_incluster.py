"""`fedctl dashboard --in-cluster` on the local fleet: two ServiceAccount tokens, one of
them allowed one namespace only, each served with its own identity.

The dashboard runs as config/dashboard runs it (HTTPS, every request authenticated by a
TokenReview on the hub) with the fleet's kubeconfig standing for the pod's ServiceAccount:
that identity may read everything, so a viewer who sees only their namespace proves the
pages were read with the viewer's token, not with the dashboard's. Requests are plain
HTTPS calls (no browser: the pages are the local dashboard's, tested in Chromium by
tests/e2e/test_dashboard.py).
"""

from __future__ import annotations

import http.client
import re
import ssl
import subprocess
import sys
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from federation.controllers import applications as app_controller
from federation.dashboard import incluster
from tests.conftest import TestFleet
from tests.e2e.conftest import install
from tests.e2e.helpers import apply, get_json, wait_for

APP_API = "core.oam.dev/v1beta1"
RBAC_API = "rbac.authorization.k8s.io/v1"


class Served:
    """One `fedctl dashboard --in-cluster` process and its address."""

    def __init__(self, kubeconfig: Path, log: Path) -> None:
        self.log = log
        self.stream = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "federation", "dashboard", "--in-cluster",
             "--kubeconfig", str(kubeconfig), "--context", "hub", "--port", "0"],
            stdout=subprocess.PIPE, stderr=self.stream, text=True)
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        match = re.match(r"dashboard: https://127\.0\.0\.1:(\d+)/ ", first)
        assert match, f"fedctl dashboard printed {first!r}; log: {log.read_text()[-2000:]}"
        self.port = int(match.group(1))
        # the certificate is self-signed (its fingerprint printed); this checks the rest
        self.tls = ssl.create_default_context()
        self.tls.check_hostname = False
        self.tls.verify_mode = ssl.CERT_NONE

    @property
    def origin(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def call(self, method: str, path: str, token: str | None = None,
             form: dict[str, str] | None = None, headers: dict[str, str] | None = None
             ) -> tuple[int, http.client.HTTPMessage, str]:
        sent = dict(headers or {})
        if token:
            sent["Authorization"] = f"Bearer {token}"
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            sent["Content-Type"] = "application/x-www-form-urlencoded"
            sent.setdefault("Origin", self.origin)
        connection = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.tls,
                                                 timeout=30)
        try:
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            return response.status, response.headers, response.read().decode()
        finally:
            connection.close()

    def first_event(self, path: str, token: str) -> str:
        """The first message of the page's live stream."""
        connection = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.tls,
                                                 timeout=30)
        try:
            connection.request("GET", "/stream?" + urllib.parse.urlencode({"page": path}),
                               headers={"Authorization": f"Bearer {token}"})
            response = connection.getresponse()
            assert response.status == 200
            lines: list[str] = []
            while True:
                line = response.fp.readline().decode()
                if line == "\n" and lines:
                    return "\n".join(lines)
                if line.startswith("data: "):
                    lines.append(line[len("data: "):].rstrip("\n"))
        finally:
            connection.close()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.stream.close()


def application(name: str, ns: str) -> dict[str, Any]:
    """An Application no controller runs here: the pages list it, actions patch it."""
    return {"apiVersion": APP_API, "kind": "Application",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"components": [{"name": "web", "type": "webservice",
                                     "properties": {"image": "registry.local/web:1"}}]}}


def accounts(mine: str) -> list[dict[str, Any]]:
    """``admin`` (cluster-admin) in ``mine``, and ``viewer``: reads Applications in
    ``mine`` only, and may not patch them."""
    viewer_rules = [{"apiGroups": ["core.oam.dev"], "resources": ["applications"],
                     "verbs": ["get", "list", "watch"]}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "admin", "namespace": mine}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "viewer", "namespace": mine}},
        {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding",
         "metadata": {"name": f"{mine}-dashboard-admin"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "cluster-admin"},
         "subjects": [{"kind": "ServiceAccount", "name": "admin", "namespace": mine}]},
        {"apiVersion": RBAC_API, "kind": "Role",
         "metadata": {"name": "dashboard-viewer", "namespace": mine}, "rules": viewer_rules},
        {"apiVersion": RBAC_API, "kind": "RoleBinding",
         "metadata": {"name": "dashboard-viewer", "namespace": mine},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": "dashboard-viewer"},
         "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": mine}]},
    ]


def token(fleet: TestFleet, ns: str, account: str) -> str:
    """A token from the TokenRequest API (as the kubelet gets a pod's)."""
    made = fleet.kubectl("hub", "create", "token", account, "-n", ns, "--duration", "1h")
    return made.stdout.strip()


@pytest.fixture(name="setup", scope="module")
def fixture_setup(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[Served, str, str, str, str]]:
    fleet = fleet_session
    install(fleet, "--clusters", str(fleet.clusters_file))  # the CRDs and MemberClusters
    mine, other = (f"dashic-{uuid.uuid4().hex[:6]}" for _ in range(2))
    for ns in (mine, other):
        fleet.kubectl("hub", "create", "namespace", ns)
    apply(fleet, "hub", *accounts(mine), application("mine", mine),
          application("theirs", other))
    served = Served(fleet.kubeconfig, tmp_path_factory.mktemp("dashboard") / "dashboard.log")
    try:
        yield (served, mine, other, token(fleet, mine, "admin"), token(fleet, mine, "viewer"))
    finally:
        served.stop()
        fleet.kubectl("hub", "delete", "clusterrolebinding", f"{mine}-dashboard-admin",
                      check=False)
        for ns in (mine, other):
            fleet.kubectl("hub", "delete", "applications.core.oam.dev", "--all", "-n", ns,
                          check=False)
            fleet.kubectl("hub", "delete", "namespace", ns, "--wait=false", check=False)


def listed(served: Served, user_token: str, wanted: str) -> str:
    """The Applications page once ``wanted`` is on it (the user's watches start on the
    first request)."""
    found: list[str] = [""]

    def shown() -> bool:
        status, _, body = served.call("GET", "/applications", user_token)
        assert status == 200, body
        found[0] = body
        return wanted in body

    wait_for(shown, timeout=30, what=f"{wanted} on the Applications page")
    return found[0]


def test_no_token_or_a_forged_one_gets_the_sign_in_page_only(
        setup: tuple[Served, str, str, str, str]) -> None:
    served, mine, _, _, _ = setup
    for user_token in (None, "forged", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"):
        status, headers, body = served.call("GET", "/applications", user_token)
        assert status == 401, user_token
        assert 'name="token"' in body and mine not in body
        assert "script-src 'self'" in headers["Content-Security-Policy"]


def test_each_user_sees_what_their_own_token_may_read(
        setup: tuple[Served, str, str, str, str]) -> None:
    served, mine, other, admin, viewer = setup
    everything = listed(served, admin, other)
    assert "mine" in everything and "theirs" in everything
    narrowed = listed(served, viewer, "mine")
    assert other not in narrowed and "theirs" not in narrowed
    assert f"namespace {mine} only" in narrowed
    assert f"as system:serviceaccount:{mine}:viewer" in narrowed
    status, _, fleet_page = served.call("GET", "/", viewer)
    assert status == 200 and "member1" not in fleet_page  # MemberClusters: not the viewer's
    wait_for(lambda: 'data-member="member1"' in served.call("GET", "/", admin)[2],
             timeout=30, what="member1 on the admin's fleet page")
    assert "theirs" not in served.first_event("/applications", viewer)


def test_an_action_is_the_users_own_write(fleet_session: TestFleet,
                                          setup: tuple[Served, str, str, str, str]) -> None:
    served, mine, _, admin, viewer = setup
    path = f"/application/{mine}/mine/rollback"
    listed(served, viewer, "mine")
    status, _, body = served.call("POST", path, viewer,
                                  form={"csrf": incluster.csrf_of(viewer)})
    assert status == 403, body
    assert "rollback refused by the hub: hub: 403 Forbidden" in body
    assert f"system:serviceaccount:{mine}:viewer" in body  # the hub refused the viewer

    def annotations() -> dict[str, str]:
        found = get_json(fleet_session, "hub", "applications.core.oam.dev", "mine", "-n", mine)
        return dict(found["metadata"].get("annotations") or {})

    assert app_controller.ROLLBACK not in annotations()  # refused: nothing written
    # without the CSRF token, or from another origin, even the admin writes nothing
    refused = served.call("POST", path, admin, form={"csrf": incluster.csrf_of(viewer)})
    cross = served.call("POST", path, admin, form={"csrf": incluster.csrf_of(admin)},
                        headers={"Origin": "https://evil.example"})
    assert (refused[0], cross[0]) == (403, 403)
    status, headers, body = served.call("POST", path, admin,
                                        form={"csrf": incluster.csrf_of(admin)})
    assert status == 303, body
    assert headers["Location"] == f"/application/{mine}/mine?done=rollback"
    assert annotations()[app_controller.ROLLBACK].startswith("0@")


def test_sign_in_sets_a_strict_cookie_that_serves_the_user(
        setup: tuple[Served, str, str, str, str]) -> None:
    served, mine, _, _, viewer = setup
    status, headers, _ = served.call("POST", "/login", form={"token": viewer})
    assert status == 303
    cookie = headers["Set-Cookie"]
    assert all(flag in cookie for flag in ("HttpOnly", "Secure", "SameSite=Strict"))
    value = cookie.split(";")[0]
    status, _, body = served.call("GET", "/applications", headers={"Cookie": value})
    assert status == 200 and f"as system:serviceaccount:{mine}:viewer" in body
