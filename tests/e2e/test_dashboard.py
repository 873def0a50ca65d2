"""`fedctl dashboard` in a real headless browser (Debian's Chromium, driven by selenium
through Debian's chromedriver) on the local fleet, with the control plane running.

Pages change while the browser watches them: each test sets a marker on ``window`` before
changing the hub and checks it is still there after, so an update that came by reloading
the page fails. Screenshots go to the pytest tmp dir (printed); with
``DASHBOARD_SCREENSHOTS=docs`` a few are also copied to docs/images for docs/dashboard.md.
"""

from __future__ import annotations

import base64
import functools
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from federation.hub import bindings as bindings_
from federation.local import pki
from tests.conftest import ROOT, TestFleet
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_json, get_or_none, wait_for

SCRIPT = "<script>alert(1)</script>"
DETECTION_BOUND = 15.0
"""NotReady on the hub (tests/e2e/test_failover.py); the page may add its stream's pause."""
DOCS_IMAGES = ROOT / "docs" / "images"
POLICY_API = "policy.federation.io/v1alpha1"


class Dashboard:
    """One `fedctl dashboard` process and the link it printed."""

    def __init__(self, kubeconfig: Path, log: Path) -> None:
        self.log = log
        self.stream = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "federation", "dashboard", "--kubeconfig", str(kubeconfig),
             "--context", "hub", "--port", "0"],
            stdout=subprocess.PIPE, stderr=self.stream, text=True)
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        match = re.match(r"dashboard: (http://127\.0\.0\.1:\d+)/\?token=\S+", first)
        assert match, f"fedctl dashboard printed {first!r}; log: {log.read_text()[-2000:]}"
        self.link, self.origin = first.split(": ", 1)[1].strip(), match.group(1)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.stream.close()


@pytest.fixture(scope="module")
def plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[ControlPlane]:
    log = tmp_path_factory.mktemp("run") / "fedctl-run.log"
    found = ControlPlane(fleet_session, log, "--cleanup-wait", "8",
                         "--app-local-cluster", "member1")
    found.start()
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture(scope="module")
def admin_dashboard(fleet_session: TestFleet, plane: ControlPlane,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    found = Dashboard(fleet_session.kubeconfig,
                      tmp_path_factory.mktemp("dashboard") / "dashboard.log")
    yield found
    found.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.fail("chromium and chromedriver not found: scripts/system-deps.sh installs "
                    "Debian's chromium and chromium-driver (.ci/run does)")
    options = Options()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 "--window-size=1360,900",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    found = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    found.implicitly_wait(0)
    yield found
    found.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def screenshot(browser: WebDriver, shots: Path, name: str, full: bool = True) -> None:
    """Saved under the tmp dir; copied to docs/images when asked (DASHBOARD_SCREENSHOTS=docs)."""
    if full:  # the whole page, not only the window
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(1360, min(max(int(height) + 40, 600), 2400))
    path = shots / f"{name}.png"
    browser.save_screenshot(str(path))
    browser.set_window_size(1360, 900)
    print(f"screenshot: {path}")
    if os.environ.get("DASHBOARD_SCREENSHOTS") == "docs":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, DOCS_IMAGES / f"dashboard-{name}.png")


def visit(browser: WebDriver, url: str, css: str, timeout: float = 30) -> None:
    """Open ``url`` until it shows ``css`` (the dashboard's own watch may be a moment behind
    kubectl's answer: a page for an object it has not seen yet is 404)."""
    def shown() -> bool:
        if not browser.find_elements(By.CSS_SELECTOR, css):
            browser.get(url)
        return bool(browser.find_elements(By.CSS_SELECTOR, css))
    wait_for(shown, timeout=timeout, interval=0.5, what=f"{css} on {url}")


def mark(browser: WebDriver) -> None:
    browser.execute_script("window.__notReloaded = true;")


def not_reloaded(browser: WebDriver) -> bool:
    return bool(browser.execute_script("return window.__notReloaded === true;"))


def texts(browser: WebDriver, css: str) -> list[str]:
    """The elements' text, read in one script (the live part may be replaced between two
    WebDriver calls, leaving a stale element)."""
    found: list[str] = browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), e => e.innerText.trim());",
        css)
    return found


def attributes(browser: WebDriver, css: str, name: str) -> list[str]:
    found: list[str] = browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]),"
        " e => e.getAttribute(arguments[1]));", css, name)
    return found


def click(browser: WebDriver, css: str) -> None:
    """Click with the keyboard's and mouse's path, again if the live part replaced it."""
    def clicked() -> bool:
        try:
            browser.find_element(By.CSS_SELECTOR, css).click()
        except StaleElementReferenceException:
            return False
        return True
    wait_for(clicked, timeout=10, what=f"a click on {css}")


def namespace(fleet: TestFleet) -> str:
    name = f"dash-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    return name


def remove(fleet: TestFleet, ns: str) -> None:
    """Delete what a test made while the control plane still runs (Applications and
    templates first, waiting for their finalizers), then the namespace: the fleet has no
    namespace controller, so objects left in a namespace being deleted stay there for the
    modules after this one (the write budget's cold restart counts every hub write)."""
    fleet.kubectl("hub", "delete", "applications.core.oam.dev,deployments", "--all", "-n", ns,
                  "--wait=false", check=False)
    wait_for(lambda: not get_json(fleet, "hub", "applications.core.oam.dev,deployments",
                                  "-n", ns)["items"],
             timeout=120, what=f"the Applications and Deployments of {ns} deleted")
    fleet.kubectl("hub", "delete", "propagationpolicies.policy.federation.io", "--all", "-n", ns,
                  "--wait=false", check=False)
    fleet.kubectl("hub", "delete", "namespace", ns, "--wait=false")


def deployment(name: str, ns: str, replicas: int) -> list[dict[str, Any]]:
    return [{"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": name, "namespace": ns},
             "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                      "template": {"metadata": {"labels": {"app": name}},
                                   "spec": {"containers": [{"name": "app",
                                                            "image": "registry.local/a:1"}]}}}},
            {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
             "metadata": {"name": name, "namespace": ns},
             "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": name}],
                      "placement": {
                          # opted into failover, so a failed member's replicas move
                          "clusterTolerations": [{
                              "key": "cluster.federation.io/not-ready", "operator": "Exists",
                              "effect": "NoExecute", "tolerationSeconds": 10}],
                          "replicaScheduling": {
                          "replicaSchedulingType": "Divided",
                          "replicaDivisionPreference": "Weighted"}}}}]


def approve_app(name: str, ns: str) -> dict[str, Any]:
    """Deploy to member1, wait for an approval, then deploy to member2."""
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"components": [{"name": "web", "type": "webservice",
                                     "properties": {"image": "registry.local/web:1",
                                                    "replicas": 1}}],
                     "policies": [
                         {"name": "first", "type": "topology",
                          "properties": {"clusters": ["member1"]}},
                         {"name": "then", "type": "topology",
                          "properties": {"clusters": ["member2"]}}],
                     "workflow": {"steps": [
                         {"name": "canary", "type": "deploy",
                          "properties": {"policies": ["first"]}},
                         {"name": "approval", "type": "approve",
                          "properties": {"message": SCRIPT}},
                         {"name": "rollout", "type": "deploy",
                          "properties": {"policies": ["then"]}}]}}}


def app_phase(fleet: TestFleet, ns: str, name: str) -> str:
    found = get_or_none(fleet, "hub", "applications.core.oam.dev", name, "-n", ns) or {}
    return str((found.get("status") or {}).get("status") or "")


def wanted_sum(browser: WebDriver) -> int:
    total = 0
    for cell in texts(browser, "#replica-bars td[data-cluster]"):
        found = re.search(r"ready of (\d+)", cell)
        total += int(found.group(1)) if found else 0
    return total


def test_the_fleet_page_shows_the_members(admin_dashboard: Dashboard, browser: WebDriver,
                                          shots: Path) -> None:
    started = time.monotonic()
    browser.get(admin_dashboard.link)
    first_paint = time.monotonic() - started
    wait_for(lambda: texts(browser, "td[data-member-ready]") == ["True"] * 3, timeout=60,
             what="3 ready members on the fleet page")
    assert attributes(browser, "tr[data-member]", "data-member") == \
        ["member1", "member2", "member3"]
    assert "3 members, 3 ready" in browser.page_source
    print(f"fleet page loaded in {first_paint:.2f}s")
    screenshot(browser, shots, "fleet")


def test_scaling_a_hub_deployment_moves_its_bars_without_a_reload(
        fleet: TestFleet, admin_dashboard: Dashboard, browser: WebDriver, shots: Path) -> None:
    ns = namespace(fleet)
    apply(fleet, "hub", *deployment("web", ns, 3))
    binding = bindings_.binding_name("web", "Deployment")
    wait_for(lambda: get_or_none(fleet, "hub", "resourcebindings", binding, "-n", ns),
             timeout=60, what="the binding")
    visit(browser, f"{admin_dashboard.origin}/workload/{ns}/{binding}", "#replica-bars")
    wait_for(lambda: wanted_sum(browser) == 3, timeout=60, what="bars of 3 replicas")
    mark(browser)
    fleet.kubectl("hub", "scale", "deployment", "web", "-n", ns, "--replicas=9")
    wait_for(lambda: wanted_sum(browser) == 9, timeout=60, what="bars of 9 replicas")
    assert not_reloaded(browser)
    wait_for(lambda: all(re.match(r"(\d+) ready of \1$", t) for t in
                         texts(browser, "#replica-bars td[data-cluster]")),
             timeout=60, what="every cluster's replicas ready on the page")
    assert not_reloaded(browser)
    screenshot(browser, shots, "workload")
    # what-if: the same engine as `fedctl plan --live --fail member1`
    Select(browser.find_element(By.ID, "fail")).select_by_value("member1")
    browser.find_element(By.CSS_SELECTOR, "#whatif button[type=submit]").click()
    wait_for(lambda: browser.find_elements(By.ID, "whatif-result"), timeout=30,
             what="the what-if answer")
    rows = {r.find_element(By.TAG_NAME, "th").text: r.find_elements(By.TAG_NAME, "td")[1].text
            for r in browser.find_elements(By.CSS_SELECTOR, "#whatif-result tbody tr")}
    assert rows.get("member1") == "0" and sum(int(v) for v in rows.values()) == 9, rows
    screenshot(browser, shots, "workload-whatif")
    remove(fleet, ns)


def test_an_application_is_approved_from_its_page_and_its_timeline_advances(
        fleet: TestFleet, admin_dashboard: Dashboard, browser: WebDriver, shots: Path) -> None:
    ns = namespace(fleet)
    apply(fleet, "hub", approve_app("shop", ns))
    wait_for(lambda: app_phase(fleet, ns, "shop") == "workflowSuspending", timeout=90,
             what="the Application waiting at its approve step")
    visit(browser, f"{admin_dashboard.origin}/application/{ns}/shop", "#timeline")
    wait_for(lambda: texts(browser, "li.step[data-step=approval] > .badge") == ["suspended"],
             timeout=30, what="the approve step suspended on the page")
    assert attributes(browser, "button[data-action=approve]", "disabled") == [None]
    screenshot(browser, shots, "application-waiting")
    click(browser, "button[data-action=approve]")
    wait_for(lambda: "approve requested" in browser.page_source, timeout=30,
             what="the approval acknowledged")
    mark(browser)
    wait_for(lambda: texts(browser, "li.step[data-step=rollout] > .badge") == ["succeeded"],
             timeout=90, what="the timeline past the approval, without a reload")
    assert texts(browser, "li.step[data-step=approval] > .badge") == ["succeeded"]
    assert not_reloaded(browser)
    screenshot(browser, shots, "application")
    remove(fleet, ns)


def test_tenant_text_is_shown_as_text(fleet: TestFleet, admin_dashboard: Dashboard,
                                      browser: WebDriver, shots: Path) -> None:
    """An Event about an object named <script>, with <script> in its message."""
    ns = namespace(fleet)
    apply(fleet, "hub", {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "hostile", "namespace": ns},
        "involvedObject": {"kind": "ConfigMap", "namespace": ns, "name": SCRIPT},
        "reason": "Hostile", "message": f"{SCRIPT} <img src=x onerror=alert(2)>",
        "type": "Warning", "count": 1})
    browser.get(f"{admin_dashboard.origin}/events?namespace={ns}")
    wait_for(lambda: f"ConfigMap {SCRIPT}" in texts(browser, "table.events td"),
             timeout=30, what="the event, its object's name as text")
    assert browser.execute_script("return document.scripts.length") == 1
    assert not browser.find_elements(By.CSS_SELECTOR, "main img")
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - reading it is the check
    screenshot(browser, shots, "events")
    remove(fleet, ns)


def restricted_kubeconfig(fleet: TestFleet, user: str, ns: str, path: Path) -> Path:
    """A kubeconfig for ``user`` (a client certificate from the hub's CA, in no group),
    its context's namespace ``ns``: a tenant's own kubeconfig."""
    hub_pki = fleet.pki("hub")
    ca_key = serialization.load_pem_private_key(hub_pki.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca_cert = x509.load_pem_x509_certificate(hub_pki.ca_cert.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    cert = pki._client_certificate(key, ca_key, ca_cert, pki._name(user))
    config = yaml.safe_load(fleet.kubeconfig.read_text())
    context = next(c for c in config["contexts"] if c["name"] == "hub")["context"]
    cluster = next(c for c in config["clusters"] if c["name"] == context["cluster"])
    pem = serialization.Encoding.PEM
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "hub",
        "clusters": [cluster],
        "contexts": [{"name": "hub", "context": {"cluster": cluster["name"], "user": user,
                                                 "namespace": ns}}],
        "users": [{"name": user, "user": {
            "client-certificate-data": _b64(cert.public_bytes(pem)),
            "client-key-data": _b64(key.private_bytes(
                pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))}}]}))
    path.chmod(0o600)
    return path


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def viewer_role(ns: str, user: str) -> list[dict[str, Any]]:
    """Read-only on this namespace's workloads, Applications and events; no patch."""
    rules = [{"apiGroups": ["work.federation.io"], "resources": ["resourcebindings"],
              "verbs": ["get", "list", "watch"]},
             {"apiGroups": ["core.oam.dev"], "resources": ["applications"],
              "verbs": ["get", "list", "watch"]},
             {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]}]
    return [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": "dashboard-viewer", "namespace": ns}, "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "dashboard-viewer", "namespace": ns},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": "dashboard-viewer"},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                           "name": user}]}]


def test_a_user_with_one_namespace_sees_it_only_and_may_not_act(
        fleet: TestFleet, plane: ControlPlane, browser: WebDriver, shots: Path,
        tmp_path: Path) -> None:
    mine, other = namespace(fleet), namespace(fleet)
    apply(fleet, "hub", *deployment("mine", mine, 2), *deployment("theirs", other, 2),
          *viewer_role(mine, "dash-viewer"), approve_app("gated", mine))
    for ns, name in ((mine, "mine"), (other, "theirs")):
        wait_for(functools.partial(get_or_none, fleet, "hub", "resourcebindings",
                                   bindings_.binding_name(name, "Deployment"), "-n", ns),
                 timeout=60, what=f"the binding in {ns}")
    wait_for(lambda: app_phase(fleet, mine, "gated") == "workflowSuspending", timeout=90,
             what="the viewer's Application waiting for approval")
    viewer = Dashboard(restricted_kubeconfig(fleet, "dash-viewer", mine,
                                             tmp_path / "viewer.yaml"),
                       tmp_path / "viewer-dashboard.log")
    try:
        browser.get(viewer.link)
        browser.get(f"{viewer.origin}/workloads")
        wait_for(lambda: "mine" in texts(browser, "tbody th a"), timeout=30,
                 what="the viewer's workload")
        assert texts(browser, "tbody th a") == ["mine"]
        assert other not in browser.page_source
        assert f"namespace {mine} only" in browser.page_source
        screenshot(browser, shots, "viewer-workloads")
        visit(browser, f"{viewer.origin}/application/{mine}/gated", "#timeline")
        assert attributes(browser, "button[data-action=approve]", "disabled") == [""]
        [why] = texts(browser, "#why-approve")
        assert why.startswith("the hub says you may not patch this Application"), why
        # the attack: re-enable the button in the page; the hub refuses the write itself
        browser.execute_script("const b = document.querySelector("
                               "'button[data-action=approve]'); b.disabled = false; b.click();")
        wait_for(lambda: browser.find_elements(By.ID, "outcome"), timeout=30,
                 what="the refusal shown")
        [said] = texts(browser, "#outcome")
        assert said.startswith("approve refused by the hub: hub: 403 Forbidden"), said
        assert "dash-viewer" in said
        # answered at the POST's URL, the page's live stream still follows the Application
        wait_for(lambda: browser.execute_script("return document.body.dataset.live")
                 == "connected", timeout=15, what="the refused page's live stream connected")
        screenshot(browser, shots, "viewer-refused")
        assert app_phase(fleet, mine, "gated") == "workflowSuspending"
    finally:
        viewer.stop()
        for ns in (mine, other):
            remove(fleet, ns)


def test_a_stopped_member_turns_not_ready_on_the_page(
        fleet: TestFleet, admin_dashboard: Dashboard, browser: WebDriver, shots: Path) -> None:
    browser.get(admin_dashboard.link)
    wait_for(lambda: texts(browser, "td[data-member-ready=member2]") == ["True"], timeout=60,
             what="member2 ready on the page")
    mark(browser)
    fleet.stop("member2")
    started = time.monotonic()
    wait_for(lambda: texts(browser, "td[data-member-ready=member2]") == ["False"],
             timeout=DETECTION_BOUND + 5, interval=0.1, what="member2 not ready on the page")
    print(f"member2 not ready on the page {time.monotonic() - started:.1f}s after the stop")
    assert not_reloaded(browser)
    screenshot(browser, shots, "fleet-member-down")
    fleet.start("member2")
    wait_for(lambda: texts(browser, "td[data-member-ready=member2]") == ["True"], timeout=90,
             what="member2 ready again on the page")
