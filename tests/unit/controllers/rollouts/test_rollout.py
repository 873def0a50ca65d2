"""The rollout controller on virtual time: every state transition, each reloadPolicy,
maxUnavailableClusters, failure, the deadline, refusals and secrecy."""

from __future__ import annotations

import datetime
import itertools
import json
import logging
from collections.abc import Callable

import pytest

from federation.controllers.rollouts import Reconciler
from federation.hub import rollouts as hub_api
from tests.unit.controllers.rollouts.fakes import (
    INI_V1,
    MEMBERS,
    NS,
    Caller,
    Fleet,
    change,
    intervals,
    reconcile,
    reconciler,
    standard,
)

STATIC = INI_V1.replace("128M", "256M")
DYNAMIC = INI_V1.replace("100", "500")
IMMUTABLE = INI_V1.replace("server_id = 1", "server_id = 2")


async def settle(fleet: Fleet, rec: Reconciler) -> None:
    await reconcile(rec)


async def test_a_new_policy_over_copies_that_already_match_completes_at_once() -> None:
    """No change to roll: every cluster released and Done, nothing restarted."""
    fleet = Fleet()
    standard(fleet)
    result = await reconcile(reconciler(fleet))
    status = fleet.status()
    assert status["phase"] == "Complete" and status["action"] == "unchanged"
    assert status["done"] == list(MEMBERS) and status["pending"] == []
    version = hub_api.config_version(fleet.hub[("ConfigMap", NS, "db-config")])
    assert status["configVersion"] == version
    for cluster in MEMBERS:
        assert hub_api.released_version(fleet.hub[("ReconfigurePolicy", NS, "db")],
                                        cluster) == version
        assert hub_api.restart_version(fleet.hub[("ReconfigurePolicy", NS, "db")],
                                       cluster) is None
    assert result is None


async def test_restart_one_cluster_at_a_time_through_every_state() -> None:
    """Pending -> Updating (released; once the copy shows the new version, the restart
    stamp) -> Done, in order, never two at once."""
    fleet = Fleet()
    standard(fleet)
    rec = reconciler(fleet)
    await reconcile(rec)
    change(fleet, STATIC)
    version = hub_api.config_version(fleet.hub[("ConfigMap", NS, "db-config")])
    result = await reconcile(rec)
    status = fleet.status()
    assert status["action"] == "restart" and status["phase"] == "Rolling"
    assert status["changedParameters"] == ["my.ini:mysqld.innodb_buffer_pool_size"]
    assert fleet.states() == {"member1": "Updating", "member2": "Pending", "member3": "Pending"}
    first = status["clusters"][0]
    assert first["releasedVersion"] == version
    assert "restartVersion" not in first  # not before the new file is in the cluster
    assert first["startedAt"].endswith("Z") and "." in first["startedAt"]
    assert "restartVersion" not in status["clusters"][1]
    assert result is not None and result.requeue_after == 2.0
    for cluster in MEMBERS:
        # nothing happened in the member yet: still Updating, saying what it waits for
        fleet.advance(1)
        await reconcile(rec)
        assert fleet.states()[cluster] == "Updating"
        assert "waiting for the ConfigMap db-config" in fleet.status()["clusters"][
            MEMBERS.index(cluster)]["message"]
        fleet.propagate()  # the copy lands; no stamp yet, so nothing restarted
        index = MEMBERS.index(cluster)
        assert fleet.copies[cluster][("Deployment", NS, "db")]["metadata"]["generation"] == 1
        fleet.advance(1)
        await reconcile(rec)
        entry = fleet.status()["clusters"][index]
        assert entry["restartVersion"] == version and entry["state"] == "Updating"
        fleet.propagate()  # now the stamp: the workloads restart
        assert fleet.copies[cluster][("Deployment", NS, "db")]["metadata"]["generation"] == 2
        fleet.advance(1)
        await reconcile(rec)
        assert fleet.states()[cluster] == "Updating"  # restarted, not ready yet
        assert list(fleet.states().values()).count("Updating") == 1
        fleet.make_ready(cluster)
        fleet.advance(1)
        await reconcile(rec)
        assert fleet.states()[cluster] == "Done"
        assert list(fleet.states().values()).count("Updating") <= 1
    status = fleet.status()
    assert status["phase"] == "Complete" and status["done"] == list(MEMBERS)
    for entry in status["clusters"]:
        assert entry["workloads"] == [{"kind": "Deployment", "name": "db",
                                       "configVersion": version}]
    spans = intervals(status)
    assert len(spans) == 3
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert await reconcile(rec) is None  # complete: no polling


@pytest.mark.parametrize("max_unavailable", [1, 2])
async def test_max_unavailable_clusters_is_never_exceeded(max_unavailable: int) -> None:
    fleet = Fleet(("a", "b", "c", "d", "e"))
    standard(fleet, maxUnavailableClusters=max_unavailable)
    rec = reconciler(fleet)
    await reconcile(rec)
    change(fleet, STATIC)
    most = 0
    for _ in range(40):
        await reconcile(rec)
        updating = [c for c, s in fleet.states().items() if s == "Updating"]
        most = max(most, len(updating))
        assert len(updating) <= max_unavailable
        fleet.propagate()
        if updating:
            fleet.make_ready(updating[0])  # one finishes at a time
        fleet.advance(1)
        if fleet.status()["phase"] == "Complete":
            break
    assert fleet.status()["phase"] == "Complete"
    assert most == max_unavailable
    spans = intervals(fleet.status())
    for moment in (s for s, _ in spans):
        assert sum(1 for s, f in spans if s <= moment < f) <= max_unavailable


async def test_cluster_order_goes_first() -> None:
    fleet = Fleet()
    standard(fleet, clusterOrder=["member3"])
    rec = reconciler(fleet)
    await reconcile(rec)
    change(fleet, STATIC)
    await reconcile(rec)
    assert [c["name"] for c in fleet.status()["clusters"]] == ["member3", "member1", "member2"]
    assert fleet.states()["member3"] == "Updating"


async def test_a_cluster_order_typo_is_refused_by_name_and_nothing_rolls() -> None:
    fleet = Fleet()
    standard(fleet, clusterOrder=["member3", "membr1"])
    rec = reconciler(fleet)
    await reconcile(rec)
    change(fleet, STATIC)
    await reconcile(rec)
    status = fleet.status()
    accepted = next(c for c in status["conditions"] if c["type"] == "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "InvalidSpec")
    assert accepted["message"].startswith("spec.clusterOrder[1]: no member cluster 'membr1'")
    assert status["phase"] == "Refused"
    assert not any(c.get("releasedVersion") for c in status.get("clusters") or [])


async def test_online_calls_every_reloader_with_the_new_values_and_restarts_nothing() -> None:
    fleet = Fleet()
    standard(fleet)
    for index, cluster in enumerate(MEMBERS):
        fleet.endpoints(cluster, f"127.0.0.{index + 1}")
    caller = Caller()
    rec = reconciler(fleet, caller)
    await reconcile(rec)
    change(fleet, DYNAMIC)
    version = hub_api.config_version(fleet.hub[("ConfigMap", NS, "db-config")])
    await reconcile(rec)
    status = fleet.status()
    assert status["action"] == "online"
    assert status["changedParameters"] == ["my.ini:mysqld.max_connections"]
    first = status["clusters"][0]
    assert first["state"] == "Updating" and first["releasedVersion"] == version
    assert "restartVersion" not in first
    await reconcile(rec)
    assert caller.calls == []  # the copy is not at the new version yet: no call
    for cluster in MEMBERS:
        fleet.propagate()
        await reconcile(rec)
        assert fleet.states()[cluster] == "Done"
    assert [c["address"] for c in caller.calls] == ["127.0.0.1:9901", "127.0.0.2:9901",
                                                    "127.0.0.3:9901"]
    assert caller.calls[0] == {"address": "127.0.0.1:9901", "namespace": "shop",
                               "config_spec": "db-config",
                               "config_file": "my.ini",
                               "params": {"mysqld.max_connections": "500"}, "timeout": 10.0}
    status = fleet.status()
    assert status["phase"] == "Complete"
    assert all(c["workloads"][0]["configVersion"] == version for c in status["clusters"])
    assert all("restartVersion" not in c for c in status["clusters"])
    for cluster in MEMBERS:  # no restart: the pod template is untouched
        live = fleet.copies[cluster][("Deployment", NS, "db")]
        assert live["metadata"]["generation"] == 1


async def test_online_without_any_reloader_waits_then_fails_at_the_deadline() -> None:
    fleet = Fleet()
    standard(fleet, progressDeadlineSeconds=60)
    rec = reconciler(fleet, Caller())
    await reconcile(rec)
    change(fleet, DYNAMIC)
    await reconcile(rec)
    fleet.propagate()
    fleet.advance(30)
    result = await reconcile(rec)
    assert fleet.states()["member1"] == "Updating"
    assert "a reloader of Deployment db" in fleet.status()["clusters"][0]["message"]
    assert result is not None and result.requeue_after == 2.0
    fleet.advance(29)
    result = await reconcile(rec)
    assert result is not None and result.requeue_after == pytest.approx(1.01)
    fleet.advance(2)
    await reconcile(rec)
    status = fleet.status()
    assert status["phase"] == "Failed"
    assert status["clusters"][0]["message"].startswith("ProgressDeadlineExceeded")
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and "member1" in failed["message"]
    assert status["done"] == [] and status["pending"] == list(MEMBERS)


async def test_a_failing_reloader_stops_the_rollout_listing_done_and_pending() -> None:
    fleet = Fleet()
    standard(fleet)
    for index, cluster in enumerate(MEMBERS):
        fleet.endpoints(cluster, f"127.0.0.{index + 1}")
    caller = Caller()
    caller.fail["127.0.0.2:9901"] = "action exited 1: max_connections=500 refused"
    rec = reconciler(fleet, caller)
    await reconcile(rec)
    change(fleet, DYNAMIC)
    for _ in range(6):
        await reconcile(rec)
        fleet.propagate()
        fleet.advance(1)
    status = fleet.status()
    assert status["phase"] == "Failed"
    assert status["done"] == ["member1"] and status["pending"] == ["member2", "member3"]
    assert fleet.states() == {"member1": "Done", "member2": "Failed", "member3": "Pending"}
    version = hub_api.config_version(fleet.hub[("ConfigMap", NS, "db-config")])
    assert status["clusters"][2]["releasedVersion"] != version  # never released
    message = status["clusters"][1]["message"]
    assert message.startswith("ReloaderFailed: Deployment db reloader 127.0.0.2:9901")
    assert "500" not in json.dumps(status)  # the reloader echoed the value: redacted
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert "done: member1; pending: member2, member3" in failed["message"]
    assert next(c for c in status["conditions"] if c["type"] == "Progressing")["status"] \
        == "False"
    calls = len(caller.calls)
    fleet.advance(600)
    assert await reconcile(rec) is None
    assert len(caller.calls) == calls  # stopped: nothing further is called or released


def _unreachable() -> Caller:
    caller = Caller()
    caller.raise_for["10.0.0.9:9901"] = "10.0.0.9:9901: TLS handshake failed"
    return caller


@pytest.mark.parametrize(("make_caller", "why"), [
    # the reloader cannot be reached: said without the transport's detail (finding 10)
    (_unreachable, "(my.ini): destination unreachable"),
    (lambda: None, "no reloader client"),  # fedctl run has no client: fail, never pass
])
async def test_an_online_step_without_an_answer_fails_the_cluster(
        make_caller: Callable[[], Caller | None], why: str) -> None:
    fleet = Fleet(("member1",))
    standard(fleet)
    fleet.endpoints("member1", "10.0.0.9")
    rec = reconciler(fleet, make_caller())
    await reconcile(rec)
    change(fleet, DYNAMIC)
    await reconcile(rec)
    fleet.propagate()
    await reconcile(rec)
    assert fleet.states() == {"member1": "Failed"}
    assert why in fleet.status()["clusters"][0]["message"]


async def test_restart_past_the_deadline_fails_and_stops() -> None:
    fleet = Fleet()
    standard(fleet)
    rec = reconciler(fleet)
    await reconcile(rec)
    change(fleet, STATIC)
    await reconcile(rec)
    fleet.propagate()  # the new file lands
    await reconcile(rec)  # then the stamp
    fleet.propagate()  # restarted, never ready
    fleet.advance(301)
    await reconcile(rec)
    status = fleet.status()
    assert status["phase"] == "Failed"
    message = status["clusters"][0]["message"]
    assert message.startswith("ProgressDeadlineExceeded: not done after 300s")
    assert "Deployment db: the new generation to be observed" in message
    assert fleet.states() == {"member1": "Failed", "member2": "Pending", "member3": "Pending"}


async def test_reload_policy_none_releases_and_reloads_nothing() -> None:
    fleet = Fleet(("member1",))
    standard(fleet, reloadPolicy="none")
    fleet.endpoints("member1", "10.0.0.9")
    caller = Caller()
    rec = reconciler(fleet, caller)
    await reconcile(rec)
    change(fleet, STATIC)
    await reconcile(rec)
    assert fleet.status()["action"] == "none" and fleet.states() == {"member1": "Updating"}
    fleet.propagate()
    await reconcile(rec)
    assert fleet.states() == {"member1": "Done"}
    assert caller.calls == [] and "restartVersion" not in fleet.status()["clusters"][0]


async def test_reload_policy_restart_restarts_even_a_dynamic_change() -> None:
    fleet = Fleet(("member1",))
    standard(fleet, reloadPolicy="restart")
    rec = reconciler(fleet, Caller())
    await reconcile(rec)
    change(fleet, DYNAMIC)
    await reconcile(rec)
    assert fleet.status()["action"] == "restart"
    fleet.propagate()
    await reconcile(rec)
    assert fleet.status()["clusters"][0]["restartVersion"]


async def test_reload_policy_online_refuses_a_static_change() -> None:
    fleet = Fleet()
    standard(fleet, reloadPolicy="online")
    rec = reconciler(fleet, Caller())
    await reconcile(rec)
    before = [dict(c) for c in fleet.status()["clusters"]]
    change(fleet, STATIC)
    await reconcile(rec)
    status = fleet.status()
    assert status["phase"] == "Refused"
    accepted = fleet.condition("Accepted")
    assert accepted["status"] == "False" and accepted["reason"] == "StaticChangeNeedsRestart"
    assert "'my.ini:mysqld.innodb_buffer_pool_size'" in accepted["message"]
    assert status["clusters"] == before  # nothing released


async def test_format_only_change_is_unchanged_everywhere_at_once() -> None:
    fleet = Fleet()
    standard(fleet)
    rec = reconciler(fleet)
    await reconcile(rec)
    change(fleet, INI_V1.replace(" = ", "=") + "\n")
    await reconcile(rec)
    assert fleet.status()["phase"] == "Complete" and fleet.status()["action"] == "unchanged"


async def test_a_cluster_without_a_copy_gets_its_first_copy_without_a_rollout() -> None:
    fleet = Fleet()
    standard(fleet)
    del fleet.copies["member2"][("ConfigMap", NS, "db-config")]
    rec = reconciler(fleet)
    await reconcile(rec)
    change(fleet, STATIC)
    await reconcile(rec)
    assert fleet.states()["member2"] == "Done"
    assert next(c for c in fleet.status()["clusters"] if c["name"] == "member2")["action"] \
        == "unchanged"


async def test_an_unlisted_data_key_is_a_static_change() -> None:
    fleet = Fleet(("member1",))
    standard(fleet)
    rec = reconciler(fleet)
    await reconcile(rec)
    fleet.hub[("ConfigMap", NS, "db-config")]["data"]["notes.txt"] = "hello"
    await reconcile(rec)
    assert fleet.status()["action"] == "restart"
    assert fleet.status()["changedParameters"] == ["notes.txt"]


async def test_a_new_version_mid_rollout_starts_over_and_keeps_restart_stamps() -> None:
    fleet = Fleet()
    standard(fleet)
    rec = reconciler(fleet)
    await reconcile(rec)
    change(fleet, STATIC)
    first = hub_api.config_version(fleet.hub[("ConfigMap", NS, "db-config")])
    await reconcile(rec)
    fleet.propagate()
    await reconcile(rec)
    fleet.propagate()
    fleet.make_ready("member1")
    await reconcile(rec)
    assert fleet.states()["member1"] == "Done"
    fleet.propagate()  # member2's file lands...
    await reconcile(rec)  # ...and it is stamped
    change(fleet, STATIC.replace("256M", "512M"))
    second = hub_api.config_version(fleet.hub[("ConfigMap", NS, "db-config")])
    await reconcile(rec)
    status = fleet.status()
    assert status["configVersion"] == second
    assert status["clusters"][0]["releasedVersion"] == second  # member1 goes again, first
    assert status["clusters"][0]["restartVersion"] == first  # until the new file is there
    assert status["clusters"][0]["state"] == "Updating"
    fleet.propagate()
    await reconcile(rec)
    assert fleet.status()["clusters"][0]["restartVersion"] == second
    # member2 had started the first version: back to Pending, its stamp kept (dropping
    # it would restart its workloads once more)
    assert status["clusters"][1] == {"name": "member2", "state": "Pending",
                                     "action": "restart", "releasedVersion": first,
                                     "restartVersion": first, "workloads": []}
    assert status["clusters"][2]["state"] == "Pending"
    assert "restartVersion" not in status["clusters"][2]


async def test_a_policy_generation_change_starts_over() -> None:
    fleet = Fleet()
    standard(fleet)
    rec = reconciler(fleet, Caller())
    await reconcile(rec)
    change(fleet, DYNAMIC)
    await reconcile(rec)
    fleet.advance(400)
    fleet.propagate()
    await reconcile(rec)
    assert fleet.status()["phase"] == "Failed"  # no reloader, past the deadline
    policy = fleet.hub[("ReconfigurePolicy", NS, "db")]
    policy["spec"]["reloadPolicy"] = "none"
    policy["metadata"]["generation"] = 2
    await reconcile(rec)
    status = fleet.status()
    assert status["observedGeneration"] == 2 and status["phase"] == "Rolling"
    # member1's copy has the version already; the others begin again, with the new policy
    assert fleet.states() == {"member1": "Done", "member2": "Updating", "member3": "Pending"}
    assert [c["action"] for c in status["clusters"]] == ["unchanged", "none", "none"]


async def test_a_stale_cache_write_is_retried_not_forced() -> None:
    fleet = Fleet()
    standard(fleet)
    fleet.stale = True
    result = await reconcile(reconciler(fleet))
    assert result is not None and result.requeue_after == 0.5
    assert fleet.writes == []


async def test_nothing_is_written_when_nothing_changed() -> None:
    fleet = Fleet()
    standard(fleet)
    rec = reconciler(fleet)
    await reconcile(rec)
    writes = len(fleet.writes)
    fleet.advance(10)
    await reconcile(rec)
    assert len(fleet.writes) == writes


async def test_the_status_is_merge_patched_with_dropped_keys_nulled() -> None:
    fleet = Fleet()
    standard(fleet)
    rec = reconciler(fleet)
    fleet.hub[("ReconfigurePolicy", NS, "db")]["status"] = {"leftover": 1}
    await reconcile(rec)
    assert fleet.writes[-1]["status"]["leftover"] is None
    assert set(fleet.writes[-1]) == {"status"}


async def test_a_deleted_policy_is_left_alone() -> None:
    fleet = Fleet()
    assert await reconcile(reconciler(fleet), "gone") is None
    assert fleet.writes == []


async def test_logs_name_parameters_never_values(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fleet = Fleet(("member1",))
    standard(fleet)
    fleet.endpoints("member1", "10.0.0.9")
    rec = reconciler(fleet, Caller())
    await reconcile(rec)
    change(fleet, INI_V1.replace("max_connections = 100", "max_connections = 4242"))
    await reconcile(rec)
    fleet.propagate()
    await reconcile(rec)
    assert fleet.states() == {"member1": "Done"}
    assert "mysqld.max_connections" in caplog.text and "4242" not in caplog.text


def test_timestamps_have_microseconds() -> None:
    from federation.controllers.rollouts import rollout

    moment = datetime.datetime(2026, 11, 23, 5, 30, 1, 123456, tzinfo=datetime.UTC)
    assert rollout.stamp(moment) == "2026-11-23T05:30:01.123456Z"
    assert rollout.parse_stamp(rollout.stamp(moment)) == moment


@pytest.mark.parametrize(("status", "waiting"), [
    ({"observedGeneration": 1}, "the new generation to be observed"),
    ({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "readyReplicas": 3,
      "availableReplicas": 3}, "1/3 replicas updated"),
    ({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 3, "readyReplicas": 3,
      "availableReplicas": 3}, "1 old replicas to go"),
    ({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
      "availableReplicas": 2}, "2/3 updated replicas ready"),
    ({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
      "availableReplicas": 3}, None),
    ({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3},
     None),  # a StatefulSet reports no availability
])
def test_a_restart_waits_as_kubectl_rollout_status_does(
        status: dict[str, int], waiting: str | None) -> None:
    from federation.controllers.rollouts.reconciler import restart_wait

    live = {"metadata": {"generation": 2},
            "spec": {"replicas": 3, "template": {"metadata": {"annotations": {
                hub_api.CONFIG_VERSION_ANNOTATION: "v2"}}}},
            "status": status}
    assert restart_wait(live, "v2") == waiting
    assert restart_wait(live, "v3") == f"the pod template stamp " \
                                       f"{hub_api.CONFIG_VERSION_ANNOTATION}=v3"
    assert restart_wait(None, "v2") == "its copy to appear"


async def test_a_cluster_that_cannot_be_read_waits_then_fails_at_its_deadline() -> None:
    """A member gone during its step does not stall the rollout for ever: the step says
    what it waits for, and its deadline still runs."""
    fleet = Fleet()
    standard(fleet)
    rec = reconciler(fleet)
    await reconcile(rec)
    change(fleet, STATIC)
    await reconcile(rec)
    fleet.away.add("member1")
    fleet.advance(10)
    result = await reconcile(rec)
    entry = fleet.status()["clusters"][0]
    assert entry["state"] == "Updating" and result is not None
    assert entry["message"] == ("waiting for the cluster to answer "
                                "(member1: connection refused)")
    fleet.advance(300)
    await reconcile(rec)
    status = fleet.status()
    assert status["phase"] == "Failed"
    assert status["clusters"][0]["message"].startswith(
        "ProgressDeadlineExceeded: not done after 300s: waiting for the cluster to answer")
    assert fleet.states() == {"member1": "Failed", "member2": "Pending", "member3": "Pending"}
