"""The shipped control plane in-cluster, with member3 in pull mode and its agent from its own
shipped manifests (issue 22).

`fedctl local up --control-plane --in-cluster --pull member3` for the module
(:class:`~tests.e2e.conftest.InClusterControlPlane` with member3 pulled): `fedctl install
--control-plane` applies the control plane's manifests to the hub, member1 and member2 join
with `fedctl join --create-service-account`, and member3 with `fedctl join member3 --mode
pull --apply-agent`, which applies ``config/agent`` to member3 (namespace, ServiceAccount,
least-privilege RBAC, the ConfigMap naming member3 and the work server, the Secret holding
the agent's certificate, the Deployment). The pod runner runs the manager Deployment's two
replicas in the hub and the agent Deployment's pod in member3, each with its
ServiceAccount's token and no kubeconfig; the agent reaches the replicas' work servers
through the hub's ``federation-work`` Service (forwarded on loopback, as kube-proxy would).
On that fleet:

- the agent scenario of tests/e2e/test_agent.py: a template placed on member3 arrives there
  through the agent (written by the agent's ServiceAccount, says member3's audit log), its
  status flows back to the hub, an override applies, deletion removes the copy;
- the agent stopped (its pod runner): member3 goes NotReady and a tolerant policy fails
  over; started again, member3 is Ready;
- the propagation and failover scenarios of tests/e2e/test_incluster.py, member3 included.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from federation.local import pods
from tests.conftest import TestFleet
from tests.e2e import test_agent as agent
from tests.e2e import test_failover as failover
from tests.e2e import test_propagation as propagation
from tests.e2e.conftest import InClusterControlPlane
from tests.e2e.helpers import apply, get_json, wait_for

MEMBERS = ("member1", "member2", "member3")
AGENT_NAMESPACE, AGENT_NAME = TestFleet.AGENT
AGENT_USER = f"system:serviceaccount:{AGENT_NAMESPACE}:{AGENT_NAME}"
MC = "memberclusters.cluster.federation.io"


def agent_pods(fleet: TestFleet) -> list[pods.PodStatus]:
    return pods.statuses(fleet.state_dir, "member3", AGENT_NAMESPACE, AGENT_NAME)


def agent_log(fleet: TestFleet) -> str:
    where = pods.directory(fleet.state_dir, "member3", AGENT_NAMESPACE, AGENT_NAME)
    texts = []
    for path in sorted(where.glob("**/*.log")):
        texts.append(f"== {path}\n" + path.read_text(errors="replace")[-2000:])
    return "\n".join(texts) or "(no agent log)"


@pytest.fixture(scope="module")
def control_plane(fleet_session: TestFleet) -> Iterator[InClusterControlPlane]:
    """The shipped control plane in the hub and member3's shipped agent, for this module."""
    fleet = fleet_session
    fleet.set_pull(["member3"])
    plane = InClusterControlPlane(fleet, "--cleanup-wait=8")
    try:
        plane.start()
        try:
            pods.wait_ready(fleet.state_dir, "member3", AGENT_NAMESPACE, AGENT_NAME, 1, 120)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{agent_log(fleet)}") from None
        yield plane
    finally:
        fleet.stop_agent("member3")
        plane.stop()
        fleet.clear_pull()
        fleet.kubectl("hub", "patch", MC, "member3", "--type", "merge", "-p",
                      '{"spec":{"mode":null}}', check=False)
        # Not the namespace: the fleet has no namespace controller to finish deleting it.
        fleet.kubectl("member3", "-n", AGENT_NAMESPACE, "delete",
                      "deployment,configmap,secret", "--all", check=False)


@pytest.fixture
def ns(fleet: TestFleet, control_plane: InClusterControlPlane) -> Iterator[str]:
    """A fresh namespace once every member is Ready (member3 through its agent's pod)."""
    wait_for(lambda: all(failover.ready(fleet, m) for m in MEMBERS), timeout=90,
             what=f"every MemberCluster Ready\n{agent_log(fleet)}")
    name = f"incp-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    control_plane.check()
    for kinds in ("deployments,configmaps,services",
                  "propagationpolicies.policy.federation.io,overridepolicies.policy.federation.io"):
        fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false", check=False)


def writers_in_member3(fleet: TestFleet, namespace: str) -> set[str]:
    """The users whose writes of objects in ``namespace`` member3's API server logged (the
    copies; the status subresource is the simulator's, playing the member's kubelet)."""
    users = set()
    for line in (fleet.cluster_dir("member3") / "audit.log").read_text().splitlines():
        entry = json.loads(line)
        ref = entry.get("objectRef") or {}
        if ref.get("namespace") == namespace and not ref.get("subresource"):
            users.add(str((entry.get("user") or {}).get("username")))
    return users


# -- what runs --------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_member3s_agent_runs_from_its_shipped_deployment_with_its_service_account(
        fleet: TestFleet, control_plane: InClusterControlPlane) -> None:
    """The agent's pod runs `fedctl agent` from the shipped Deployment's template, with its
    ServiceAccount's token from the pod's mount and nothing else: no kubeconfig, no file
    of its certificate or key (it reads them from its Secret through the API); member3's
    MemberCluster is in pull mode and Ready; the control plane runs its two replicas."""
    running = wait_for(lambda: [p for p in agent_pods(fleet) if p.ready] or None, timeout=60,
                       what="the agent's pod ready")
    assert len(running) == 1
    pid = running[0].containers["agent"].pid
    assert pid is not None
    argv = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    env = dict(item.decode().partition("=")[::2]
               for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if item)
    assert argv[1:4] == ["-m", "federation", "agent"], argv
    assert "--cluster-name=member3" in argv
    assert f"--tls-secret={AGENT_NAMESPACE}/federation-agent-tls" in argv
    assert not [a for a in argv if "kubeconfig" in a or a.startswith("--tls-key")], argv
    assert "KUBECONFIG" not in env
    assert env["KUBERNETES_SERVICE_PORT"] == str(fleet.spec("member3").apiserver_port)
    mount = Path(env["FEDERATION_SERVICE_ACCOUNT_MOUNT"])
    assert (mount / "namespace").read_text() == AGENT_NAMESPACE
    assert not [p for p in running[0].directory.rglob("*")
                if p.is_file() and b"PRIVATE KEY" in p.read_bytes()]
    member = get_json(fleet, "hub", MC, "member3")
    assert member["spec"]["mode"] == "Pull"
    assert "kubeconfigSecretRef" not in member["spec"]
    wait_for(lambda: agent.ready(fleet) == "True", timeout=60,
             what=f"member3 Ready through its agent\n{agent_log(fleet)}")
    assert len([p for p in control_plane.pods() if p.ready]) == 2


# -- the agent scenario --------------------------------------------------------------------------


@pytest.mark.timeout(240)
def test_pull_member_gets_its_share_status_override_and_deletion_in_cluster(
        fleet: TestFleet, ns: str) -> None:
    """tests/e2e/test_agent.py's scenario (5:3:2, the hub's 10 ready, member3's override,
    deletion) with the shipped control plane and agent; member3's copies written by the
    agent's ServiceAccount alone."""
    agent.test_pull_member_gets_its_share_status_override_and_deletion(fleet, ns)
    assert writers_in_member3(fleet, ns) == {AGENT_USER}


@pytest.mark.timeout(240)
def test_agent_stopped_makes_member3_not_ready_and_a_tolerant_policy_fails_over_in_cluster(
        fleet: TestFleet, ns: str) -> None:
    """tests/e2e/test_agent.py's stopped agent, the agent being its Deployment's pod: its
    runner stopped (`fedctl local stop-agent member3`), member3 is NotReady within the
    bound and the tolerant workload's replicas move; started again, member3 is Ready."""
    tolerate = [{"key": agent.NOT_READY, "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 5}]
    apply(fleet, "hub", agent.deployment("fo", ns, 6),
          agent.weighted("fo", ns, {"member1": 1, "member2": 1, "member3": 1}, tolerate))
    wait_for(lambda: agent.replicas(fleet, "fo", ns) ==
             {"member1": 2, "member2": 2, "member3": 2}, timeout=90, what="2/2/2")
    assert fleet.stop_agent("member3")
    started = time.monotonic()
    try:
        wait_for(lambda: agent.ready(fleet) == "False", timeout=60, interval=0.3,
                 what="member3 NotReady")
        detection = time.monotonic() - started
        assert detection <= agent.NOT_READY_BOUND, f"NotReady after {detection:.1f}s"
        wait_for(lambda: agent._decision(fleet, "fo", ns) == {"member1": 3, "member2": 3},
                 timeout=60, what="failover to member1+member2")
    finally:
        fleet.start_agent("member3")
    wait_for(lambda: agent.ready(fleet) == "True", timeout=90,
             what=f"member3 Ready again\n{agent_log(fleet)}")


# -- existing scenarios, member3 pulled -----------------------------------------------------------


@pytest.mark.timeout(180)
def test_weighted_deployment_in_cluster_with_a_pull_member(fleet: TestFleet, ns: str) -> None:
    """tests/e2e/test_propagation.py's weighted division, member3's share by its agent."""
    propagation.test_weighted_deployment_is_divided_and_reports_ready(fleet, ns)
    assert writers_in_member3(fleet, ns) == {AGENT_USER}


@pytest.mark.timeout(180)
def test_image_override_in_cluster_with_a_pull_member(fleet: TestFleet, ns: str) -> None:
    """tests/e2e/test_propagation.py's override to member2 (not member3's copy)."""
    propagation.test_image_override_reaches_only_member2(fleet, ns)


@pytest.mark.timeout(180)
def test_duplication_and_deletion_in_cluster_with_a_pull_member(fleet: TestFleet,
                                                                ns: str) -> None:
    """tests/e2e/test_propagation.py's duplicated ConfigMap, then its deletion everywhere
    (member3's copy deleted by its agent)."""
    propagation.test_configmap_is_duplicated_and_deletion_removes_every_copy(fleet, ns)


@pytest.mark.timeout(300)
def test_stopped_member_fails_over_in_cluster_with_a_pull_member(fleet: TestFleet,
                                                                 ns: str) -> None:
    """tests/e2e/test_failover.py's stopped member2, member3 pulled."""
    failover.test_stopped_member_fails_over_tolerant_workloads_and_returns_clean(fleet, ns)
