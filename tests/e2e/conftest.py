"""e2e fixtures: the e2e marker, and a control plane (`fedctl run`) on the test fleet."""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import TestFleet
from tests.e2e.helpers import free_port


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/e2e runs on the real local fleet: mark it so `-m "not e2e"` works."""
    for item in items:
        if "/tests/e2e/" in str(item.path):
            item.add_marker(pytest.mark.e2e)



def install(fleet: TestFleet, *extra: str) -> None:
    """`fedctl install` with the fleet's admin kubeconfig (CRDs and the shipped RBAC)."""
    result = subprocess.run(
        [sys.executable, "-m", "federation", "install", "--kubeconfig", str(fleet.kubeconfig),
         "--hub-context", "hub", *extra], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


class ControlPlane:
    """A `fedctl run` process against the test fleet, with its log for failure reports.

    `fedctl install` runs as the fleet's admin and applies the shipped RBAC; `fedctl run`
    runs with the control plane's own kubeconfig (user federation:control-plane, no
    group): every e2e test thereby checks that the RBAC grants all the control plane needs.
    """

    def __init__(self, fleet: TestFleet, log_path: Path, *extra: str) -> None:
        self.fleet = fleet
        self.log_path = log_path
        self.health_port = free_port()
        self.kubeconfig = fleet.ensure_control_plane_identity()
        self.argv = [sys.executable, "-m", "federation", "run", "--kubeconfig",
                     str(self.kubeconfig), "--hub-context", "hub", "--metrics-bind-address",
                     f"127.0.0.1:{free_port()}", "--health-probe-bind-address",
                     f"127.0.0.1:{self.health_port}", *extra]
        self.process: subprocess.Popen[bytes] | None = None

    def install(self, *extra: str) -> None:
        """`fedctl install` as admin: CRDs, MemberClusters, RBAC on the hub and members."""
        install(self.fleet, "--clusters", str(self.fleet.clusters_file), *extra)

    def start(self) -> None:
        self.install()
        self.launch()

    def launch(self) -> None:
        """`fedctl run` alone (a restart: no `fedctl install` and its admin writes)."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log_tail()
            try:
                with socket.create_connection(("127.0.0.1", self.health_port), timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"fedctl run did not start: {self.log_tail()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@pytest.fixture(scope="module")
def control_plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[ControlPlane]:
    """`fedctl install` + `fedctl run` for the tests of one module."""
    log = Path(os.environ.get("FEDERATION_TEST_RUN_LOG") or
               tmp_path_factory.mktemp("run") / "fedctl-run.log")
    # Simulated reloaders listen on loopback, which the outbound policy refuses unless allowed
    # (as the local fleet's control plane does; tests/e2e/test_security_rollout.py runs one
    # without it).
    plane = ControlPlane(fleet_session, log, "--cleanup-wait", "8",
                         "--reloader-allow", "127.0.0.0/8")
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()
