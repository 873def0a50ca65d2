"""Three `fedctl run --shards 3` replicas with a pull member (docs/runtime.md, "Pull
members with shards"): member3's agent streams to every replica, each replica writes the
copies of the keys it owns (member1 and member2 stay push members), and a replica killed
mid-burst hands its keys over with no member write lost or made twice.

Writes are counted in the members' own audit logs (member3's are made by its agent), so
"none twice, none lost" is the API servers' word, not ours.
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import TestFleet
from tests.e2e.conftest import install
from tests.e2e.helpers import apply, free_port, wait_for
from tests.e2e.test_agent import Agent, _only, ready
from tests.e2e.test_runtime_fencing import Write, parse
from tests.e2e.test_runtime_shards import burst, converged

TEMPLATES = 60
LEASE_DURATION = 15


class Replica:
    def __init__(self, kubeconfig: Path, lease: str, work_address: str, log: Path) -> None:
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, "-m", "federation", "run", "--kubeconfig", str(kubeconfig),
             "--hub-context", "hub", "--shards", "3", "--leader-election-id", lease,
             "--work-bind-address", work_address, "--cleanup-wait", "8",
             "--metrics-bind-address", f"127.0.0.1:{free_port()}",
             "--health-probe-bind-address", f"127.0.0.1:{free_port()}"],
            stdout=log.open("w"), stderr=subprocess.STDOUT)

    def holds_a_shard(self) -> bool:
        return " took shard " in self.log.read_text(errors="replace")

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


@pytest.fixture
def sharded(fleet: TestFleet, tmp_path: Path) -> Iterator[tuple[list[Replica], Agent]]:
    """Three replicas of `--shards 3`, each with its own work port, without member3's
    context (a pull member); member3 joined in pull mode; its agent dials all three."""
    lease = f"rt-pull-{uuid.uuid4().hex[:6]}"
    install(fleet, "--clusters", str(fleet.clusters_file), "--leader-election-id", lease)
    source = yaml.safe_load(fleet.ensure_control_plane_identity().read_text())
    without = tmp_path / "control-plane.yaml"
    without.write_text(yaml.safe_dump(_only(source, {"hub", "member1", "member2"}, "hub")))
    addresses = [f"127.0.0.1:{free_port()}" for _ in range(3)]
    joined = subprocess.run(
        [sys.executable, "-m", "federation", "join", "member3", "--mode", "pull",
         "--hub-kubeconfig", str(fleet.kubeconfig), "--hub-context", "hub",
         "--out-dir", str(tmp_path / "tls"), "--hub-address", addresses[0]],
        capture_output=True, text=True, timeout=60)
    assert joined.returncode == 0, joined.stderr
    replicas = [Replica(without, lease, address, tmp_path / f"replica{n}.log")
                for n, address in enumerate(addresses)]
    agent = Agent(fleet, tmp_path, ",".join(addresses))
    agent.start()
    try:
        wait_for(lambda: all(r.holds_a_shard() for r in replicas), timeout=90,
                 what="three shards taken")
        wait_for(lambda: ready(fleet) == "True", timeout=90,
                 what=f"member3 Ready through its agent\n{agent.log_tail()}")
        yield replicas, agent
    finally:
        agent.stop()
        for replica in replicas:
            replica.kill()
        fleet.kubectl("hub", "patch", "memberclusters.cluster.federation.io", "member3",
                      "--type", "merge", "-p", '{"spec":{"mode":null}}', check=False)


def member_writes(fleet: TestFleet, since: float) -> list[Write]:
    """Every write the members' API servers logged since ``since`` (rotated files too)."""
    found = []
    for member in fleet.member_names:
        for path in fleet.cluster_dir(member).glob("audit*.log"):
            for line in path.read_text(errors="replace").splitlines():
                try:
                    write = parse(member, line)
                except (ValueError, KeyError, json.JSONDecodeError):
                    continue  # a line being written
                if write.received >= since:
                    found.append(write)
    return found


def copies(writes: list[Write], namespace: str) -> dict[tuple[str, str], list[Write]]:
    """Successful writes that name one of our copies, by (member, template)."""
    found: dict[tuple[str, str], list[Write]] = collections.defaultdict(list)
    prefix = f"/api/v1/namespaces/{namespace}/configmaps/"
    for write in writes:
        path = write.uri.partition("?")[0]
        if path.startswith(prefix) and write.code < 300 and write.verb != "get":
            name = path[len(prefix):]
            if re.fullmatch(r"t\d+", name):
                found[(write.cluster, name)].append(write)
    return found


def creates(writes: list[Write], namespace: str) -> collections.Counter[str]:
    """Successful creates of ConfigMaps in ``namespace`` per member (a create's URI does
    not name the object, so they are counted, not matched)."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    return collections.Counter(w.cluster for w in writes if w.verb == "create" and
                               w.uri.partition("?")[0] == path and w.code < 300)


@pytest.mark.timeout(600)
def test_three_replicas_deliver_to_a_pull_member_and_hand_over_a_killed_ones_keys(
        fleet: TestFleet, sharded: tuple[list[Replica], Agent]) -> None:
    replicas, agent = sharded
    members = fleet.member_names
    namespace = f"rt-pull-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", namespace)
    apply(fleet, "hub", {
        "apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "all", "namespace": namespace},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                 "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}})
    time.sleep(LEASE_DURATION + 2)  # every replica past its claim wait: all keys owned
    start = time.time()
    burst(fleet, namespace, "1", TEMPLATES)
    wait_for(lambda: converged(fleet, namespace, "1", TEMPLATES), timeout=180, interval=2,
             what=f"version 1 on every member\n{agent.log_tail()}")
    streamed = set(re.findall(r"open \(cluster member3, replica (\S+),",
                              agent.log_path.read_text(errors="replace")))
    assert len(streamed) == 3, f"the agent streams to {streamed}, not to every replica"
    made = creates(member_writes(fleet, start), namespace)
    print(f"creates per member: {dict(made)}")
    assert all(made[m] == TEMPLATES for m in members), made  # member3's by its agent

    # Updates, with one replica killed mid-burst: member3 gets each once, from whichever
    # replica owns the key before or after the handover.
    start = time.time()
    applying = threading.Thread(target=burst, args=(fleet, namespace, "2", TEMPLATES))
    applying.start()
    time.sleep(0.5)
    replicas[1].kill()
    killed = time.time()
    applying.join()
    wait_for(lambda: converged(fleet, namespace, "2", TEMPLATES), timeout=LEASE_DURATION + 90,
             interval=1, what=f"version 2 on every member after the kill\n"
                              f"{agent.log_tail()}\n{replicas[0].tail()}")
    print(f"converged {time.time() - killed:.1f}s after the kill")
    written = copies(member_writes(fleet, start), namespace)
    doubled = {k: len(w) for k, w in written.items() if len(w) > 1}
    lost = [(m, f"t{i}") for m in members for i in range(TEMPLATES)
            if (m, f"t{i}") not in written]
    assert not doubled, f"copies written twice across the kill: {list(doubled.items())[:5]}"
    assert not lost, f"copies not written: {lost[:5]}"
    assert agent.process is not None and agent.process.poll() is None
    fleet.kubectl("hub", "delete", "namespace", namespace, "--wait=false", check=False)
