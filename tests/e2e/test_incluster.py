"""The control plane in-cluster: the shipped Deployment, run by the local pod runner.

One in-cluster control plane serves the module (`fedctl local up --control-plane
--in-cluster`, :class:`~tests.e2e.conftest.InClusterControlPlane`): `fedctl install
--control-plane` applies the shipped manifests, each push member is joined with `fedctl join
--create-service-account` (a least-privilege token in a hub Secret), and the manager
Deployment's two replicas run as local processes with their ServiceAccount's tokens, rotated
every :data:`TOKEN_ROTATE` seconds, and no kubeconfig anywhere. On it:

- existing scenarios, reused as they are (their functions are called with this module's
  fixtures): weighted division and an override (docs/propagation.md), duplication and
  deletion, and a member stopped under the control plane (docs/failover.md);
- killing the leader replica: the standby takes over within the lease, and the member API
  servers' audit logs show every change written exactly once;
- a token rotated mid-run, the old one then revoked: the replicas go on without a restart.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from federation.local import pods, podspec
from tests.conftest import TestFleet, kubectl_binary
from tests.e2e import test_failover as failover
from tests.e2e import test_propagation as propagation
from tests.e2e.conftest import InClusterControlPlane
from tests.e2e.helpers import apply, get_json, get_or_none, wait_for

MEMBERS = ("member1", "member2", "member3")
TOKEN_ROTATE = 15.0
"""Seconds between each pod's tokens: a rotation within a test's patience (the kubelet
rotates at 80% of an hour)."""
LEASE_DURATION, RETRY_PERIOD = 15.0, 2.0
"""The shipped Deployment's `--leader-elect-lease-duration` and `--leader-elect-retry-period`."""
HANDOVER_SLACK = 3.0
"""A loaded 2-core machine: the standby's poll, the API server's answer."""


@pytest.fixture(scope="module")
def control_plane(fleet_session: TestFleet) -> Iterator[InClusterControlPlane]:
    """The shipped control plane in the hub, for this module (replaces conftest's)."""
    plane = InClusterControlPlane(fleet_session, "--cleanup-wait=8",
                                  token_rotate=TOKEN_ROTATE)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def ns(fleet: TestFleet, control_plane: InClusterControlPlane) -> Iterator[str]:
    """A fresh namespace once every member is Ready (joined from its Secret); what the
    propagation and failover modules' own `ns` fixtures do, together."""
    wait_for(lambda: all(failover.ready(fleet, m) for m in MEMBERS), timeout=90,
             what="every MemberCluster Ready (engaged from its join Secret)")
    name = f"inc-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    control_plane.check()
    for kinds in ("deployments,configmaps,services",
                  "propagationpolicies.policy.federation.io,overridepolicies.policy.federation.io"):
        fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false", check=False)


# -- what runs --------------------------------------------------------------------------------


def environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().partition("=")[::2] for item in raw if item)


def command_line(pid: int) -> list[str]:
    return [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]


@pytest.mark.timeout(120)
def test_the_shipped_deployment_runs_two_replicas_one_leading_without_a_kubeconfig(
        fleet: TestFleet, control_plane: InClusterControlPlane) -> None:
    """Two ready replicas of the shipped Deployment's template, exactly one holding the
    Lease; each runs `fedctl run` with the shipped args, its ServiceAccount token from the
    pod's mount, no kubeconfig (no flag, no KUBECONFIG, no ~/.kube), capabilities dropped;
    the hub's Deployment reports 2/2 ready."""
    from federation.deploy import manifests

    replicas = wait_for(lambda: [p for p in control_plane.pods() if p.ready] or None,
                        timeout=60, what="ready replicas")
    assert len(replicas) == 2
    leader = wait_for(control_plane.leader, timeout=40, what="a replica holding the Lease")
    shipped = manifests.manager_args(manifests.Options())
    for pod in replicas:
        pid = pod.containers["manager"].pid
        argv, env = command_line(pid), environment(pid)
        assert argv[1:4] == ["-m", "federation", "run"], argv
        assert not [a for a in argv if "kubeconfig" in a], argv
        assert "KUBECONFIG" not in env
        assert not (Path(env["HOME"]) / ".kube").exists()
        mount = Path(env["FEDERATION_SERVICE_ACCOUNT_MOUNT"])
        assert mount.is_relative_to(pod.directory)
        assert {p.name for p in mount.iterdir()} >= {"token", "ca.crt", "namespace"}
        assert (mount / "namespace").read_text() == "federation-system"
        assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
        assert env["KUBERNETES_SERVICE_PORT"] == str(fleet.spec("hub").apiserver_port)
        # The shipped args, in order, each declared port bound per replica on loopback,
        # then the fleet's overlay and this module's.
        ports = {8081: pod.ports["health"], 8443: pod.ports["metrics"], 9443: pod.ports["work"]}
        assert argv[3:] == [*(podspec.remap_ports(a, ports) for a in shipped),
                            "--reloader-allow=127.0.0.0/8", "--cleanup-wait=8"], argv
        status = Path(f"/proc/{pid}/status").read_text()
        assert "CapEff:\t0000000000000000" in status and "NoNewPrivs:\t1" in status
    assert leader.name in {p.name for p in replicas}
    deployment = get_json(fleet, "hub", "deployment", control_plane.NAME, "-n",
                          control_plane.NAMESPACE)
    assert deployment["status"]["readyReplicas"] == 2
    assert deployment["status"]["updatedReplicas"] == 2


# -- existing scenarios, in-cluster -------------------------------------------------------------


@pytest.mark.timeout(180)
def test_weighted_deployment_in_cluster(fleet: TestFleet, ns: str) -> None:
    """tests/e2e/test_propagation.py's weighted division, with the shipped control plane."""
    propagation.test_weighted_deployment_is_divided_and_reports_ready(fleet, ns)


@pytest.mark.timeout(180)
def test_image_override_in_cluster(fleet: TestFleet, ns: str) -> None:
    """tests/e2e/test_propagation.py's override to member2, with the shipped control plane."""
    propagation.test_image_override_reaches_only_member2(fleet, ns)


@pytest.mark.timeout(180)
def test_duplication_and_deletion_in_cluster(fleet: TestFleet, ns: str) -> None:
    """tests/e2e/test_propagation.py's duplicated ConfigMap, then its deletion everywhere."""
    propagation.test_configmap_is_duplicated_and_deletion_removes_every_copy(fleet, ns)


@pytest.mark.timeout(300)
def test_stopped_member_fails_over_in_cluster(fleet: TestFleet, ns: str) -> None:
    """tests/e2e/test_failover.py's stopped member2, with the shipped control plane."""
    failover.test_stopped_member_fails_over_tolerant_workloads_and_returns_clean(fleet, ns)


# -- the leader killed ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CopyWrite:
    """One write of a copy, as a member's API server logged it."""

    member: str
    verb: str
    name: str
    code: int
    user_agent: str
    received: float
    """When the API server received it (epoch seconds, microseconds)."""
    completed: float
    """When it logged the outcome: the response sent, or the request aborted."""


def stamp(value: str) -> float:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def copy_writes(fleet: TestFleet, namespace: str, since: float) -> list[CopyWrite]:
    """Every write of a ConfigMap in ``namespace`` that the members' API servers received
    after ``since`` (epoch seconds) from a fedctl process, from their audit logs."""
    found = []
    for member in MEMBERS:
        for line in (fleet.cluster_dir(member) / "audit.log").read_text().splitlines():
            entry = json.loads(line)
            ref = entry.get("objectRef") or {}
            received = stamp(entry["requestReceivedTimestamp"])
            if (ref.get("resource") == "configmaps" and ref.get("namespace") == namespace
                    and entry.get("userAgent", "").startswith("fedctl/") and received >= since):
                found.append(CopyWrite(
                    member, entry["verb"], str(ref.get("name")),
                    int((entry.get("responseStatus") or {}).get("code", 0)),
                    entry["userAgent"], received, stamp(entry["stageTimestamp"])))
    return found


def creation_times(fleet: TestFleet, namespace: str) -> dict[tuple[str, str], float]:
    """(member, name) -> creationTimestamp (whole seconds) of every ConfigMap held now."""
    held = {}
    for member in MEMBERS:
        for item in get_json(fleet, member, "configmaps", "-n", namespace)["items"]:
            meta = item["metadata"]
            held[(member, meta["name"])] = stamp(meta["creationTimestamp"])
    return held


ABORTED_STORE_SLACK = 5.0
"""Seconds after an aborted create's logged outcome in which etcd may still store it: the
API server answers 500 when the client goes away, while the storage call it started goes
on (Kubernetes' finishRequest runs it in a goroutine of its own)."""


def stored_by(write: CopyWrite, created: float | None) -> bool:
    """Whether the object held now was created by ``write``: its creationTimestamp
    (truncated to the second) is no earlier than the request's receipt and no later than
    its outcome plus :data:`ABORTED_STORE_SLACK`. Used for an aborted create, whose
    outcome the audit log cannot say."""
    return created is not None and \
        math.floor(write.received) <= created <= write.completed + ABORTED_STORE_SLACK


def creates_done(writes: list[CopyWrite], aborted: list[CopyWrite],
                 held: dict[tuple[str, str], float]) -> Counter[tuple[str, str]]:
    """How many creates of each copy were stored: every one answered 2xx, plus each
    aborted one whose object the member holds (the API server logs a create whose client
    died as 500 even when etcd had stored it). With no copy deleted, a second stored
    create is impossible (it is a 409, refused), so a create aborted for a copy that a 2xx
    create also made cannot have been stored."""
    done = Counter((w.member, w.name) for w in writes
                   if w.verb == "create" and 200 <= w.code < 300)
    for write in aborted:
        key = (write.member, write.name)
        if write.verb == "create" and key not in done and stored_by(write, held.get(key)):
            done[key] += 1
    return done


def config_maps(namespace: str, count: int, value: str) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": f"cm-{i}", "namespace": namespace}, "data": {"v": value}}
            for i in range(count)]


def copies_say(fleet: TestFleet, namespace: str, count: int, value: str) -> bool:
    for member in MEMBERS:
        listed = get_or_none(fleet, member, "configmaps", "-n", namespace)
        found = {i["metadata"]["name"]: i.get("data") for i in (listed or {}).get("items", [])}
        if any(found.get(f"cm-{i}") != {"v": value} for i in range(count)):
            return False
    return True


@pytest.mark.timeout(240)
def test_killing_the_leader_hands_over_within_the_lease_with_no_lost_or_duplicated_write(
        fleet: TestFleet, ns: str, control_plane: InClusterControlPlane) -> None:
    """SIGKILL the leader replica while it writes copies (a crashed container): the standby
    holds the Lease within lease duration + one retry; the pod runner restarts the killed
    container, which stands by. Templates created before the kill and changed during the
    handover reach every member, and the members' audit logs show each copy created exactly
    once and changed at most once, by one replica or the other, and no write refused (the
    killed replica's requests in flight are aborted, 500; an aborted create that etcd stored
    anyway, found by its copy's creationTimestamp, is that copy's one create): nothing lost,
    nothing written twice (audit logs count every write request the API server received, per
    object and with the writer's identity; the request counters of /metrics have neither,
    and a write equal to what is stored leaves no resourceVersion behind)."""
    count = 30
    started = time.time()
    leader = wait_for(control_plane.leader, timeout=40, what="a leader")
    holder = control_plane.lease_holder()
    policy = {"apiVersion": propagation.POLICY_API, "kind": "PropagationPolicy",
              "metadata": {"name": "all", "namespace": ns},
              "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                       "placement": {"replicaScheduling": {
                           "replicaSchedulingType": "Duplicated"}}}}
    apply(fleet, "hub", policy, *config_maps(ns, count, "one"))
    wait_for(lambda: len(copy_writes(fleet, ns, started)) >= 3, timeout=60, interval=0.05,
             what="the leader writing copies")
    os.kill(leader.containers["manager"].pid, signal.SIGKILL)
    killed = time.monotonic()
    apply(fleet, "hub", *config_maps(ns, count, "two"))  # changed during the handover
    wait_for(lambda: control_plane.lease_holder() not in ("", holder), timeout=40,
             interval=0.1, what="another replica holding the Lease")
    handover = time.monotonic() - killed
    wait_for(lambda: copies_say(fleet, ns, count, "two"), timeout=90, what="every copy 'two'")
    time.sleep(3)  # anything late (a duplicate) would land by now
    writes = copy_writes(fleet, ns, started)
    done = [w for w in writes if 200 <= w.code < 300]
    # A request the killed replica had in flight is aborted by the API server when its
    # client dies (500), whether or not etcd stored it: a stored create counts as the one
    # create of its copy (the new leader then finds it and at most updates it), one not
    # stored is made by the new leader. Any other refusal is a duplicate (409) or a bug.
    aborted = [w for w in writes if w.code == 500 and holder in w.user_agent]
    refused = [w for w in writes if not 200 <= w.code < 300 and w not in aborted]
    creates = creates_done(writes, aborted, creation_times(fleet, ns))
    changes = Counter((w.member, w.name) for w in done if w.verb in ("update", "patch"))
    writers = Counter(w.user_agent for w in done)
    print(f"handover {handover:.1f}s after the kill; {len(done)} copy writes done by "
          f"{dict(writers)}; aborted by the kill: {aborted}; refused: {refused}")
    assert handover <= LEASE_DURATION + RETRY_PERIOD + HANDOVER_SLACK
    expected = {(m, f"cm-{i}") for m in MEMBERS for i in range(count)}
    assert set(creates) == expected, "a copy was never created"
    assert set(creates.values()) == {1}, f"created twice: {creates.most_common(3)}"
    # 'two' either was the content of the create (the change arrived first) or one update.
    assert all(n <= 1 for n in changes.values()), f"changed twice: {changes.most_common(3)}"
    assert refused == [], "a write was refused (a duplicate create is a 409)"
    assert not [w for w in writes if w.verb == "delete"], "a copy was deleted"
    assert len(writers) == 2, "one replica made every write: the handover was not mid-write"
    restarted = wait_for(lambda: [p for p in control_plane.pods()
                                  if p.name == leader.name and p.ready], timeout=90,
                         what="the killed replica restarted and ready")
    assert restarted[0].containers["manager"].restarts == \
        leader.containers["manager"].restarts + 1


# -- the token rotated -----------------------------------------------------------------------


def token_answer(fleet: TestFleet, token: str) -> subprocess.CompletedProcess[str]:
    """`kubectl get --raw /api` with ``token`` alone (no client certificate)."""
    hub = fleet.spec("hub")
    return subprocess.run(
        [kubectl_binary(), "--kubeconfig", "/dev/null", "--server", hub.server,
         "--certificate-authority", str(fleet.pki("hub").ca_cert), "--token", token,
         "get", "--raw", "/api"], capture_output=True, text=True, timeout=30)


@pytest.mark.timeout(240)
def test_a_rotated_token_is_picked_up_and_the_old_one_revoked_without_a_restart(
        fleet: TestFleet, ns: str, control_plane: InClusterControlPlane) -> None:
    """The pod runner writes the leader a new token mid-run; the test revokes the old one
    (deletes the Secret it is bound to, as deleting a pod revokes its tokens) and checks
    the hub now refuses it. The leader keeps its pid, its restart count and the Lease
    (renewed past the revocation), and a template created after it still reaches every
    member: the replicas use the new token, read from the mount, with no restart."""
    leader = wait_for(control_plane.leader, timeout=40, what="a leader")
    pid, restarts = leader.containers["manager"].pid, leader.containers["manager"].restarts
    mount = leader.directory / "serviceaccount"
    old_token, old_binding = (mount / "token").read_text(), leader.token_binding
    assert token_answer(fleet, old_token).returncode == 0

    def rotated() -> pods.PodStatus | None:
        now = next((p for p in control_plane.pods() if p.name == leader.name), None)
        return now if now is not None and now.token_binding != old_binding else None

    wait_for(rotated, timeout=TOKEN_ROTATE + 20, what="a new token written")
    new_token = (mount / "token").read_text()
    assert new_token != old_token
    fleet.kubectl("hub", "-n", control_plane.NAMESPACE, "delete", "secret", old_binding)
    revoked = time.time()
    wait_for(lambda: token_answer(fleet, old_token).returncode != 0, timeout=20,
             what="the old token refused")
    assert "Unauthorized" in token_answer(fleet, old_token).stderr
    assert token_answer(fleet, new_token).returncode == 0

    policy = propagation.weighted_policy("web", ns, {m: 1 for m in MEMBERS})
    apply(fleet, "hub", propagation.deployment("web", ns, 3), policy)
    wait_for(lambda: all((get_or_none(fleet, m, "deployment", "web", "-n", ns) or {})
                         .get("status", {}).get("readyReplicas") == 1 for m in MEMBERS),
             timeout=90, what="web placed 1/1/1 and ready after the revocation")

    def renewed_since_revocation() -> bool:
        lease = get_json(fleet, "hub", "lease", control_plane.NAME, "-n", "kube-system")
        renew = datetime.datetime.fromisoformat(
            lease["spec"]["renewTime"].replace("Z", "+00:00")).timestamp()
        return renew > revoked + 1

    wait_for(renewed_since_revocation, timeout=20, what="the Lease renewed after revocation")
    now = next(p for p in control_plane.pods() if p.name == leader.name)
    assert now.containers["manager"].pid == pid
    assert now.containers["manager"].restarts == restarts
    still = control_plane.leader()
    assert still is not None and still.name == leader.name
