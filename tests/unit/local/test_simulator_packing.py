"""The simulator's capacity model: first-fit packing, oldest workloads first."""

from typing import Any

import pytest

from federation.local import simulator
from tests.unit.clients import Unserved


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: int = 110,
         ready: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": str(pods)},
                       "conditions": [{"type": "Ready", "status": str(ready)}]}}


def workload(uid: str, replicas: int, created: str, cpu: str | None = None,
             memory: str | None = None) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    return {"metadata": {"uid": uid, "name": uid, "namespace": "ns",
                         "creationTimestamp": created, "generation": 3},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": requests}}]}}}}


@pytest.mark.parametrize(("text", "value"), [("250m", 0.25), ("2", 2.0), ("1Gi", 2.0**30),
                                             ("500M", 5e8), ("1.5", 1.5)])
def test_quantities_parse(text: str, value: float) -> None:
    """Kubernetes quantities with binary and decimal suffixes."""
    assert simulator.parse_quantity(text) == pytest.approx(value)


def test_pod_slots_cap_ready_replicas() -> None:
    """A member with room for 5 pods fits 5 of 8 replicas."""
    fitted = simulator.pack([workload("a", 8, "t1")], [node("n1", pods=3), node("n2", pods=2)])
    assert fitted == {"a": 5}


def test_older_workloads_keep_their_places() -> None:
    """The workload created first is packed first; the newer one gets what is left."""
    nodes = [node("n1", cpu="4")]
    fitted = simulator.pack([workload("new", 3, "t2", cpu="1"), workload("old", 3, "t1", cpu="1")],
                            nodes)
    assert fitted == {"old": 3, "new": 1}


def test_memory_requests_count_and_pack_across_nodes() -> None:
    """Replicas are placed first-fit over nodes by memory as well as cpu."""
    nodes = [node("n1", memory="3Gi"), node("n2", memory="2Gi")]
    assert simulator.pack([workload("m", 10, "t", memory="1Gi")], nodes) == {"m": 5}


def test_not_ready_and_cordoned_nodes_hold_nothing() -> None:
    """Only Ready, schedulable nodes count."""
    cordoned = node("c")
    cordoned["spec"]["unschedulable"] = True
    fitted = simulator.pack([workload("a", 4, "t")], [node("down", ready=False), cordoned])
    assert fitted == {"a": 0}


def test_deployment_status_is_complete_and_consistent() -> None:
    """Deployment status carries every field a real controller writes."""
    status = simulator.workload_status("Deployment", workload("d", 4, "t"), ready=3)
    assert status["observedGeneration"] == 3
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"],
            status["availableReplicas"], status["unavailableReplicas"]) == (4, 4, 3, 3, 1)
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Available": "False", "Progressing": "True"}


def test_unchanged_status_is_not_rewritten() -> None:
    """The same computed status compares equal even with fresh condition timestamps."""
    first = simulator.workload_status("Deployment", workload("d", 2, "t"), ready=2)
    second = simulator.workload_status("Deployment", workload("d", 2, "t"), ready=2)
    assert not simulator.status_differs(first, second)
    assert simulator.status_differs(first, {**second, "readyReplicas": 1})


class RecordingClient(Unserved):
    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def patch(self, resource: Any, name: str, patch: Any, **_: Any) -> dict[str, Any]:
        self.patches.append((name, patch["status"]))
        return dict(patch)


async def test_a_new_workload_gets_one_status_when_its_ready_delay_ends() -> None:
    """No "0 ready" status first: a new Deployment is written once, ready, after the delay
    (on virtual time); until then it has no status, which reads as not ready."""
    from federation.local.fleet import SimulatorSettings

    now = [100.0]
    client = RecordingClient()
    member = simulator.MemberSimulator(client, SimulatorSettings(ready_delay=1.0),
                                       {}, clock=lambda: now[0])
    deployment = {**workload("d", 2, "t"), "kind": "Deployment"}
    member.objects = {"nodes": {("", "n"): node("n")},
                      "deployments": {("ns", "d"): deployment}}
    await member._write_statuses()
    assert client.patches == []
    assert member._next_deadline() == 1.0
    now[0] += 1.0
    await member._write_statuses()
    assert [(name, status["readyReplicas"]) for name, status in client.patches] == [("d", 2)]


async def test_a_ready_delay_that_ends_during_a_pass_is_still_woken_for() -> None:
    """The pass that skipped a new workload took longer than the workload's remaining
    delay: the next deadline is still that workload's (at once), not "none"."""
    from federation.local.fleet import SimulatorSettings

    now = [100.0]
    client = RecordingClient()
    member = simulator.MemberSimulator(client, SimulatorSettings(ready_delay=1.0),
                                       {}, clock=lambda: now[0])
    member.objects = {"nodes": {("", "n"): node("n")},
                      "deployments": {("ns", "d"): {**workload("d", 1, "t"),
                                                    "kind": "Deployment"}}}
    await member._write_statuses()
    assert client.patches == []
    now[0] += 5.0  # the pass's other writes took longer than the delay left
    assert member._next_deadline() == 0.01
    await member._write_statuses()
    assert [name for name, _ in client.patches] == ["d"]
    assert member._next_deadline() is None


async def test_a_changed_pod_template_rolls_for_the_ready_delay_a_scale_does_not() -> None:
    """A new pod template: observed at once, but no replica counts as updated until the
    delay ends (the old ones stay ready and available); a replica count change alone is
    no rollout."""
    from federation.local.fleet import SimulatorSettings

    now = [100.0]
    client = RecordingClient()
    member = simulator.MemberSimulator(client, SimulatorSettings(ready_delay=1.0),
                                       {}, clock=lambda: now[0])
    deployment = {**workload("d", 2, "t"), "kind": "Deployment"}
    deployment["metadata"]["generation"] = 1
    member.objects = {"nodes": {("", "n"): node("n")},
                      "deployments": {("ns", "d"): deployment}}
    now[0] += 0.0
    await member._write_statuses()
    now[0] += 1.0
    await member._write_statuses()
    deployment["status"] = client.patches[-1][1]
    assert deployment["status"]["updatedReplicas"] == 2

    changed = {**deployment, "metadata": {**deployment["metadata"], "generation": 2},
               "spec": {**deployment["spec"], "template": {
                   **deployment["spec"]["template"],
                   "metadata": {"annotations": {"restarted": "1"}}}}}
    member.objects["deployments"][("ns", "d")] = changed
    await member._write_statuses()
    rolling = client.patches[-1][1]
    assert (rolling["observedGeneration"], rolling["updatedReplicas"],
            rolling["readyReplicas"]) == (2, 0, 2)
    assert {c["type"]: c["reason"] for c in rolling["conditions"]} == {
        "Available": "MinimumReplicasAvailable", "Progressing": "ReplicaSetUpdated"}
    changed["status"] = rolling
    now[0] += 1.0
    await member._write_statuses()
    assert client.patches[-1][1]["updatedReplicas"] == 2

    scaled = {**changed, "metadata": {**changed["metadata"], "generation": 3},
              "spec": {**changed["spec"], "replicas": 3}, "status": client.patches[-1][1]}
    member.objects["deployments"][("ns", "d")] = scaled
    await member._write_statuses()
    assert client.patches[-1][1]["updatedReplicas"] == 3


async def test_passes_are_at_least_the_pass_interval_apart() -> None:
    """Events right after a pass wait for the interval to end (and join one pass); a pass
    long enough ago leaves none to wait."""
    from federation.local.fleet import SimulatorSettings

    now = [100.0]
    member = simulator.MemberSimulator(RecordingClient(),
                                       SimulatorSettings(pass_interval=0.2), {},
                                       clock=lambda: now[0])
    assert member._pass_floor() < 0, "the first pass waited"
    member.objects = {"nodes": {("", "n"): node("n")}}
    await member._write_statuses()
    now[0] += 0.05
    assert abs(member._pass_floor() - 0.15) < 1e-9
    now[0] += 0.5
    assert member._pass_floor() < 0


def test_quantities_parse_the_same_through_the_memo() -> None:
    assert simulator.parse_quantity("250m") == 0.25
    assert simulator.parse_quantity(" 1Gi ") == 2**30
    assert simulator.parse_quantity(3) == 3.0
    assert simulator.parse_quantity("250m") == 0.25


async def test_the_echo_of_our_own_status_write_needs_no_pass() -> None:
    """The watch event carrying the version our status write made shows what the pass
    computed: it updates the cache but marks nothing dirty; any other version does."""
    from federation.contexts import client as kube
    from federation.local.fleet import SimulatorSettings

    class AnsweringClient(RecordingClient):
        async def patch(self, resource: Any, name: str, patch: Any, **_: Any
                        ) -> dict[str, Any]:
            self.patches.append((name, patch["status"]))
            return {"metadata": {"name": name, "resourceVersion": "42"}, **patch}

    now = [100.0]
    member = simulator.MemberSimulator(AnsweringClient(),
                                       SimulatorSettings(ready_delay=0.0), {},
                                       clock=lambda: now[0])
    deployment = {**workload("d", 1, "t"), "kind": "Deployment"}
    member.objects = {"nodes": {("", "n"): node("n")}, "deployments": {("ns", "d"): deployment}}
    await member._write_statuses()
    assert member.client.patches  # type: ignore[attr-defined]
    echo = {**deployment, "metadata": {**deployment["metadata"], "resourceVersion": "42"}}
    member.dirty.clear()
    member._apply_event(kube.DEPLOYMENTS, {"type": "MODIFIED", "object": echo})
    assert not member.dirty.is_set()
    assert member.objects["deployments"][("ns", "d")] is echo
    other = {**deployment, "metadata": {**deployment["metadata"], "resourceVersion": "43"}}
    member._apply_event(kube.DEPLOYMENTS, {"type": "MODIFIED", "object": other})
    assert member.dirty.is_set()


async def test_a_version_whose_status_is_right_is_not_computed_again() -> None:
    """Once a workload's version shows the status a pass would write, later passes skip it
    until its version (or its readiness) changes: a settled member costs little per pass."""
    from federation.local.fleet import SimulatorSettings

    now = [100.0]
    client = RecordingClient()
    member = simulator.MemberSimulator(client, SimulatorSettings(ready_delay=0.0),
                                       {}, clock=lambda: now[0])
    deployment = {**workload("d", 1, "t"), "kind": "Deployment"}
    deployment["metadata"]["resourceVersion"] = "5"
    member.objects = {"nodes": {("", "n"): node("n")}, "deployments": {("ns", "d"): deployment}}
    await member._write_statuses()
    deployment["status"] = client.patches[-1][1]
    deployment["metadata"]["resourceVersion"] = "6"
    await member._write_statuses()
    assert len(client.patches) == 1 and member.settled["d"] == ("6", 1, False)
    deployment["status"] = {}  # only a new version can change it; the memo trusts that
    await member._write_statuses()
    assert len(client.patches) == 1
    deployment["metadata"]["resourceVersion"] = "7"
    await member._write_statuses()
    assert len(client.patches) == 2


def test_one_copy_told_unhealthy_reports_unhealthy_while_its_member_stays() -> None:
    """Application failover's fault: the annotation on one member's copy (not the hub
    template) makes only that copy report no replica ready, and the built-in
    InterpretHealth then calls it unhealthy; its neighbours are untouched."""
    from federation.interpreter import native

    told = workload("a", 2, "t")
    told["metadata"]["annotations"] = {simulator.UNHEALTHY_ANNOTATION: "true"}
    status = simulator.workload_status("Deployment", told, ready=2)
    assert (status["readyReplicas"], status["availableReplicas"]) == (0, 0)
    assert native.HEALTH["Deployment"]({**told, "status": status}) is False
    other = workload("b", 2, "t")
    healthy = simulator.workload_status("Deployment", other, ready=2)
    assert native.HEALTH["Deployment"]({**other, "status": healthy}) is True
