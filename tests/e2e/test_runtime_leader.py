"""Two `fedctl run` processes against one hub: exactly one leads; the other takes over.

The replicas run as the control plane's least-privilege identity: the RBAC lets them
create Leases and renew only the one named by --leader-election-id (installed per test).
"""

from __future__ import annotations

import datetime
import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import install
from tests.e2e.helpers import apply, free_port, wait_for


class Replica:
    def __init__(self, kubeconfig: Path, lease: str, log: Path) -> None:
        self.kubeconfig, self.lease = kubeconfig, lease
        self.metrics_port, self.health_port = free_port(), free_port()
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, "-m", "federation", "run", "--kubeconfig", str(kubeconfig),
             "--hub-context", "hub", "--leader-elect", "--leader-election-id", lease,
             "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
             "--health-probe-bind-address", f"127.0.0.1:{self.health_port}"],
            stdout=log.open("w"), stderr=subprocess.STDOUT)

    def leading(self) -> bool | None:
        """True/False from /metrics; None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                        timeout=2) as response:
                text = response.read().decode()
        except (urllib.error.URLError, OSError):
            return None
        return "\nfederation_leader 1.0" in text

    def stop(self, signum: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signum)
            self.process.wait(timeout=40)


@pytest.fixture
def replicas(fleet: TestFleet, tmp_path: Path) -> Iterator[list[Replica]]:
    """Two replicas on a fresh lease; tests may append more (same kubeconfig and lease)."""
    lease = f"rt-leader-{uuid.uuid4().hex[:6]}"
    # --clusters: the members' RBAC too; without it a replica waits out the 30 s cache sync
    # of every member before it even stands for election.
    install(fleet, "--clusters", str(fleet.clusters_file), "--leader-election-id", lease)
    kubeconfig = fleet.ensure_control_plane_identity()
    started = [Replica(kubeconfig, lease, tmp_path / f"replica{i}.log") for i in (1, 2)]
    try:
        yield started
    finally:
        for replica in started:
            replica.stop(signal.SIGKILL)


def wait_for_one_leader(replicas: list[Replica], timeout: float) -> Replica:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = [r.leading() for r in replicas]
        if states.count(True) == 1 and None not in states:
            return replicas[states.index(True)]
        assert states.count(True) <= 1, "two leaders at once"
        time.sleep(0.2)
    logs = "\n".join(r.log.read_text()[-2000:] for r in replicas)
    raise AssertionError(f"no single leader within {timeout}s:\n{logs}")


@pytest.mark.timeout(150)
def test_exactly_one_leads_and_the_other_takes_over_within_the_lease(
        replicas: list[Replica]) -> None:
    """One of two replicas leads; SIGKILL it and the other leads within the 15 s lease
    (+ one 2 s retry); SIGTERM a leader and its released lease is taken at once."""
    leader = wait_for_one_leader(replicas, 60)
    standby = next(r for r in replicas if r is not leader)
    for _ in range(10):  # stays stable: still exactly one leader
        assert [r.leading() for r in replicas].count(True) == 1
        time.sleep(0.3)

    leader.stop(signal.SIGKILL)
    killed = time.monotonic()
    while standby.leading() is not True:
        assert time.monotonic() - killed < 15 + 2 + 3, "standby did not take over in time"
        time.sleep(0.2)
    takeover = time.monotonic() - killed
    assert takeover > 5, f"took over after {takeover:.1f}s: the lease was not respected"

    third = Replica(standby.kubeconfig, standby.lease, standby.log.with_name("replica3.log"))
    replicas.append(third)
    while third.leading() is None:
        time.sleep(0.2)
    time.sleep(3)  # let it observe the lease as held
    assert third.leading() is False
    standby.stop(signal.SIGTERM)
    terminated = time.monotonic()
    assert standby.process.returncode == 0
    assert "released the lease" in standby.log.read_text()
    while third.leading() is not True:
        assert time.monotonic() - terminated < 6, "a released lease was not taken at once"
        time.sleep(0.2)
    print(f"takeover after SIGKILL: {takeover:.1f}s; after SIGTERM: "
          f"{time.monotonic() - terminated:.1f}s")


LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def identity_of(replica: Replica) -> str:
    """The replica's leader-election identity, from its 'became leader' log line."""
    found = re.search(r" (\S+): became leader", replica.log.read_text())
    assert found, f"no 'became leader' line in {replica.log}"
    return found.group(1)


def logged_at(replica: Replica, text: str) -> float:
    """Epoch seconds of the first log line containing ``text`` (log times are local)."""
    for line in replica.log.read_text().splitlines():
        stamp = LOG_TIME.match(line)
        if stamp and text in line:
            return datetime.datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
    raise AssertionError(f"no log line with {text!r} in {replica.log}")


def writes_by(fleet: TestFleet, identity: str) -> list[tuple[float, str, str, str]]:
    """(received at, cluster, verb, URI) of every write the API servers' audit logs
    attribute to ``identity`` (by User-Agent), on the hub and every member."""
    found = []
    for cluster in ("hub", *fleet.member_names):
        path = fleet.cluster_dir(cluster) / "audit.log"
        assert path.exists(), (f"{path} missing: the test fleet was started without audit "
                               "logging; `fedctl local down --state-dir .fleet-test` first")
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if identity in entry.get("userAgent", ""):
                received = datetime.datetime.fromisoformat(
                    entry["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()
                found.append((received, cluster, entry["verb"], entry["requestURI"]))
    return sorted(found)


IN_FLIGHT = 0.5
"""Seconds after the loss line within which a request frozen mid-flight may still arrive."""


@pytest.mark.timeout(240)
def test_a_deposed_leader_makes_no_write_after_it_logs_the_loss(
        fleet: TestFleet, replicas: list[Replica]) -> None:
    """SIGSTOP a busy leader past its lease, let the standby take over, SIGCONT it: the
    API servers' audit logs (hub and members) show no write from its identity after its
    'leadership lost' line (requests frozen mid-flight may land on resuming); it exits 1."""
    leader = wait_for_one_leader(replicas, 60)
    standby = next(r for r in replicas if r is not leader)
    identity = identity_of(leader)
    namespace = f"rt-fence-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", namespace)
    policy = {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
              "metadata": {"name": "all", "namespace": namespace},
              "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                       "placement": {"replicaScheduling": {
                           "replicaSchedulingType": "Duplicated"}}}}
    maps = [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": f"cm-{i}", "namespace": namespace}, "data": {"i": str(i)}}
            for i in range(150)]
    try:
        apply(fleet, "hub", policy, *maps)

        # Freeze the leader while it is writing copies to the members.
        def busy() -> bool:
            return any(cluster != "hub" and namespace in uri
                       for _, cluster, _, uri in writes_by(fleet, identity))

        wait_for(busy, timeout=60, interval=0.1, what="the leader writing to members")
        leader.process.send_signal(signal.SIGSTOP)
        stopped = time.time()
        before = len(writes_by(fleet, identity))
        wait_for(lambda: standby.leading() is True, timeout=45, what="the standby leading")
        resumed = time.time()
        leader.process.send_signal(signal.SIGCONT)
        assert leader.process.wait(timeout=40) == 1
        lost_at = logged_at(leader, "leadership lost")

        writes = writes_by(fleet, identity)
        # A request frozen between its fence check (passed: still leading) and its bytes
        # reaching the socket arrives when the process resumes, before it can know it lost:
        # the residual window docs/security.md names (Kubernetes has no server-side fencing
        # token). What must hold is the rule: nothing after the loss is logged. The
        # loss is logged within milliseconds of resuming, racing those requests to the API
        # server on this loaded machine, so arrivals up to IN_FLIGHT after it count as in
        # flight; anything later would be a new write, which the fence refuses.
        in_flight = [w for w in writes if resumed <= w[0] <= lost_at + IN_FLIGHT]
        late = [w for w in writes if w[0] > lost_at + IN_FLIGHT]
        refused = leader.log.read_text().count("not sent")
        print(f"{before} writes before the freeze at {stopped:.3f}; resumed after "
              f"{resumed - stopped:.1f}s; loss logged {lost_at - resumed:+.3f}s after "
              f"resuming; {refused} writes refused by the fence; in flight at the freeze: "
              f"{in_flight}; late writes: {late}")
        assert before > 0, "the audit log attributed no write to the leader"
        assert late == [], f"the deposed leader wrote after losing: {late}"
        text = leader.log.read_text()
        for noise in ("Unclosed client session", "never awaited", "Traceback"):
            assert noise not in text, f"{noise!r} in the deposed leader's log"
    finally:
        fleet.kubectl("hub", "-n", namespace, "delete", "configmaps,propagationpolicies",
                      "--all", "--wait=false", check=False)

        def cleaned() -> bool:
            items = json.loads(fleet.kubectl("hub", "-n", namespace, "get", "configmaps",
                                             "-o", "json").stdout)["items"]
            return not [i for i in items if i["metadata"]["name"].startswith("cm-")]

        if standby.process.poll() is None:  # the new leader releases the finalizers
            wait_for(cleaned, timeout=90, what="templates deleted")
