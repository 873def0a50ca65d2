"""e2e fixtures: the e2e marker, and a control plane (`fedctl run`) on the test fleet."""

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from federation.local import pods as pod_runner
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
            started = time.monotonic()
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            with self.log_path.open("a") as log:
                log.write(f"== SIGTERM -> exit {time.monotonic() - started:.1f}s "
                          f"(status {self.process.returncode})\n")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@pytest.fixture(scope="module")
def control_plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[ControlPlane]:
    """`fedctl install` + `fedctl run` for the tests of one module."""
    # Simulated reloaders listen on loopback, which the outbound policy refuses unless allowed
    # (as the local fleet's control plane does; tests/e2e/test_security_rollout.py runs one
    # without it).
    yield from running_plane(fleet_session, tmp_path_factory, "--cleanup-wait", "8",
                             "--reloader-allow", "127.0.0.0/8")


def running_plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory,
                  *args: str) -> Iterator[ControlPlane]:
    """A module's `fedctl run` with ``args`` (its log where FEDERATION_TEST_RUN_LOG says),
    stopped after the module's tests: a module fixture yields from it."""
    log = Path(os.environ.get("FEDERATION_TEST_RUN_LOG") or
               tmp_path_factory.mktemp("run") / "fedctl-run.log")
    plane = ControlPlane(fleet_session, log, *args)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


def app_namespace(fleet: TestFleet, plane: ControlPlane, prefix: str,
                  *members: str) -> Iterator[str]:
    """A fresh hub namespace ``prefix-xxxxxx`` (and the same in ``members``) for one test's
    Applications; after the test, it fails if the module's `fedctl run` exited, and the
    namespace's Applications (and the member namespaces) are deleted without waiting."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    for member in members:
        fleet.kubectl(member, "create", "namespace", name)
    yield name
    if plane.process is not None and plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{plane.log_tail()}")
    fleet.kubectl("hub", "delete", "applications.core.oam.dev", "--all", "-n", name,
                  "--wait=false", check=False)
    for member in members:
        fleet.kubectl(member, "delete", "namespace", name, "--wait=false", check=False)


class InClusterControlPlane:
    """The control plane as a platform team runs it: `fedctl install --control-plane` applies
    the shipped manifests to the hub, `fedctl join --create-service-account` stores each
    member's token in a hub Secret, and the local pod runner runs the manager Deployment's
    two replicas as a kubelet would (their ServiceAccount's rotated tokens, no kubeconfig;
    `fedctl local up --control-plane --in-cluster`). Same interface as :class:`ControlPlane`
    for the scenarios that run both ways."""

    NAMESPACE, NAME = "federation-system", "federation-controller-manager"
    process: subprocess.Popen[bytes] | None = None
    """No host process to watch: :meth:`check` looks at the pods instead."""

    def __init__(self, fleet: TestFleet, *extra: str, token_rotate: float | None = None) -> None:
        self.fleet, self.extra, self.token_rotate = fleet, extra, token_rotate

    @property
    def runner_dir(self) -> Path:
        return pod_runner.directory(self.fleet.state_dir, "hub", self.NAMESPACE, self.NAME)

    def install(self, *extra: str) -> None:
        """`fedctl install` as admin (the hub API and RBAC), as for the host process."""
        install(self.fleet, "--clusters", str(self.fleet.clusters_file), *extra)

    def start(self) -> None:
        self.fleet.start_control_plane(print, self.extra, in_cluster=True,
                                       token_rotate=self.token_rotate)
        try:
            ready = pod_runner.wait_ready(self.fleet.state_dir, "hub", self.NAMESPACE,
                                          self.NAME, 2, 180)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.log_tail()}") from None
        # The shipped manifests start clean on a fresh hub: no replica exited on its way up
        # (it did, before `fedctl install --control-plane` made the work CA it needs).
        restarts = {p.name: p.containers["manager"].restarts for p in ready}
        assert set(restarts.values()) == {0}, f"{restarts}\n{self.log_tail()}"

    def pods(self) -> list[pod_runner.PodStatus]:
        return pod_runner.statuses(self.fleet.state_dir, "hub", self.NAMESPACE, self.NAME)

    def lease_holder(self) -> str:
        lease = json.loads(self.fleet.kubectl("hub", "-n", "kube-system", "get", "lease",
                                              self.NAME, "-o", "json", check=False).stdout
                           or "{}")
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    def leader(self) -> pod_runner.PodStatus | None:
        """The pod whose container holds the Lease (identity: host_pid_random)."""
        holder = self.lease_holder().split("_")
        for pod in self.pods():
            pid = pod.containers["manager"].pid
            if len(holder) >= 3 and pid is not None and holder[-2] == str(pid):
                return pod
        return None

    def check(self) -> None:
        """Fail when a replica restarted or the runner refused the Deployment."""
        refused = pod_runner.refusal(self.fleet.state_dir, "hub", self.NAMESPACE, self.NAME)
        assert refused is None, refused

    def stop(self) -> None:
        """Stop the pods and undo the in-cluster setup, so later modules' host-process
        control planes see the hub as `fedctl install` left it."""
        pod_runner.stop(self.fleet.state_dir, "hub", self.NAMESPACE, self.NAME)
        self.fleet.kubectl("hub", "-n", self.NAMESPACE, "delete", "deployment", self.NAME,
                           "--ignore-not-found", check=False)
        for member in self.fleet.member_names:
            self.fleet.kubectl("hub", "patch", "memberclusters.cluster.federation.io", member,
                               "--type=json", "-p",
                               '[{"op":"remove","path":"/spec/kubeconfigSecretRef"}]',
                               check=False)
            self.fleet.kubectl("hub", "-n", self.NAMESPACE, "delete", "secret",
                               f"{member}-kubeconfig", "--ignore-not-found", check=False)

    def log_tail(self, lines: int = 40) -> str:
        texts = []
        for path in [self.runner_dir / "runner.log",
                     *sorted(self.runner_dir.glob("pods/*/manager.log"))]:
            try:
                tail = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            texts.append(f"== {path}\n" + "\n".join(tail))
        return "\n".join(texts) or "(no log)"
