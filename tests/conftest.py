"""Shared fixtures. The ``fleet`` fixture is the only way e2e tests reach clusters.

The fleet under test lives in its own state directory (``.fleet-test``) and
kubeconfig (``kubeconfigs/test.local.yaml``), apart from the fleet that
``make run`` starts, because e2e tests stop, freeze and restart members. A
fleet already running there is reused and left running; one this session
started is torn down at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from federation.local import binaries
from federation.local import fleet as fleet_lib
from tests.kube_reads import KubeReads

ROOT = Path(__file__).resolve().parent.parent
STATE_DIR = Path(os.environ.get("FEDERATION_TEST_STATE_DIR", ROOT / ".fleet-test"))
KUBECONFIG = Path(os.environ.get("FEDERATION_TEST_KUBECONFIG",
                                 ROOT / "kubeconfigs" / "test.local.yaml"))
MEMBERS = 3


class TestFleet(fleet_lib.Fleet):
    """The fleet plus conveniences for tests."""

    __test__ = False
    reads: KubeReads | None = None
    """Set while a test marked ``fast_reads`` runs: ``get -o json`` answered in process."""

    def kubectl(self, context: str, *args: str, check: bool = True,
                timeout: float = 30) -> subprocess.CompletedProcess[str]:
        answered = self.reads.get(context, args, timeout) if self.reads is not None else None
        if answered is None:
            return run_kubectl(self.kubeconfig, context, *args, check=check, timeout=timeout)
        if check and answered.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {answered.stderr.strip()}")
        return answered

    @property
    def member_names(self) -> list[str]:
        return [c.name for c in self.load().members]


def kubectl_binary() -> str:
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl not found: install Debian's kubernetes-client (.ci/run does)")
    return found


def run_kubectl(kubeconfig: Path, context: str, *args: str, check: bool = True,
                timeout: float = 30) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [kubectl_binary(), "--kubeconfig", str(kubeconfig), "--context", context, *args],
        capture_output=True, text=True, timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
    return result


_READS: dict[Path, KubeReads] = {}


def _kube_reads(target: TestFleet) -> KubeReads:
    """One reader per kubeconfig for the session (its discovery and connections kept)."""
    return _READS.setdefault(target.kubeconfig, KubeReads(target.kubeconfig))


def _all_ready(target: TestFleet) -> bool:
    try:
        return all(s.ready for s in target.status())
    except fleet_lib.FleetError:
        return False


@pytest.fixture(scope="session")
def fleet_binaries() -> binaries.KubeBinaries:
    try:
        return binaries.find_binaries()
    except binaries.BinaryError as exc:
        pytest.fail(f"{exc} (README's test command runs the install first)")


@pytest.fixture(scope="session")
def fleet_session(fleet_binaries: binaries.KubeBinaries) -> Iterator[TestFleet]:
    target = TestFleet(STATE_DIR, KUBECONFIG)
    reused = target.exists() and _all_ready(target)
    if not reused:
        target.down()
        target.up(MEMBERS, progress=print)
    try:
        yield target
    finally:
        if not reused:
            target.down()


@pytest.fixture
def fleet(fleet_session: TestFleet, request: pytest.FixtureRequest) -> Iterator[TestFleet]:
    """The shared fleet; every cluster a test stopped or froze is brought back afterwards.
    In a test marked ``fast_reads`` its ``kubectl get -o json`` is answered in process
    (tests/kube_reads.py): modules opt in once their waits are known not to lean on
    kubectl's own slowness."""
    if request.node.get_closest_marker("fast_reads") is not None:
        fleet_session.reads = _kube_reads(fleet_session)
    try:
        yield fleet_session
    finally:
        fleet_session.reads = None
    for status in fleet_session.status():
        if status.frozen:
            fleet_session.thaw(status.name)
        if not status.apiserver_pid or not status.etcd_pid:
            fleet_session.start(status.name)
