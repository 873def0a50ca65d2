"""Refusals (nothing released), conflicts, secrecy, namespace isolation, constraint
validity and reloader discovery."""

from __future__ import annotations

import base64
import copy
import json

from federation.controllers.rollouts import constraints, rollout
from federation.controllers.rollouts.view import reloader_addresses
from federation.hub import rollouts as hub_api
from federation.runtime.reconcile import Request
from tests.unit.controllers.rollouts.fakes import (
    CONSTRAINT,
    INI_V1,
    MEMBERS,
    NS,
    Caller,
    Fleet,
    change,
    reconcile,
    reconciler,
    standard,
)


async def refused_after(fleet: Fleet, content: str) -> dict[str, object]:
    rec = reconciler(fleet, Caller())
    await reconcile(rec)
    before = copy.deepcopy(fleet.status()["clusters"])
    copies = copy.deepcopy(fleet.copies)
    change(fleet, content)
    await reconcile(rec)
    status = fleet.status()
    assert status["phase"] == "Refused" and status["action"] == "refused"
    assert status["clusters"] == before  # nothing released, no stamp moved
    assert fleet.copies == copies
    fleet.propagate()
    assert fleet.copies == copies  # propagation has nothing to write either
    return status


async def test_an_immutable_change_is_refused_naming_the_parameter() -> None:
    fleet = Fleet()
    standard(fleet)
    await refused_after(fleet, INI_V1.replace("server_id = 1", "server_id = 2"))
    accepted = fleet.condition("Accepted")
    assert accepted["status"] == "False" and accepted["reason"] == "ImmutableParameterChanged"
    assert "'my.ini:mysqld.server_id'" in accepted["message"]
    assert fleet.condition("Progressing")["reason"] == "Refused"


async def test_an_invalid_value_is_refused_naming_the_rule_not_the_value() -> None:
    fleet = Fleet()
    standard(fleet)
    status = await refused_after(fleet, INI_V1.replace("100", "-77"))
    accepted = fleet.condition("Accepted")
    assert accepted["reason"] == "InvalidValue"
    assert "'my.ini:mysqld.max_connections'" in accepted["message"]
    assert "minimum: 1" in accepted["message"]
    assert "-77" not in json.dumps(status)


async def test_an_unparsable_file_is_refused() -> None:
    fleet = Fleet()
    standard(fleet)
    await refused_after(fleet, "[mysqld\nbroken")
    accepted = fleet.condition("Accepted")
    assert accepted["reason"] == "InvalidFile" and "my.ini: the hub's" in accepted["message"]


async def test_a_missing_constraint_is_constraint_not_found() -> None:
    fleet = Fleet()
    standard(fleet, files=[{"key": "my.ini", "constraintRef": "nope"}])
    await reconcile(reconciler(fleet))
    accepted = fleet.condition("Accepted")
    assert accepted["reason"] == "ConstraintNotFound"
    assert accepted["message"] == ("spec.files[0].constraintRef: ConfigConstraint 'nope' "
                                   "not found")
    assert fleet.status()["phase"] == "Refused" and fleet.status()["clusters"] == []


async def test_an_invalid_constraint_refuses_its_policies() -> None:
    fleet = Fleet()
    standard(fleet)
    fleet.hub[("ConfigConstraint", "", "mysql")]["spec"]["dynamicParameter"] = ["x"]
    await reconcile(reconciler(fleet))
    accepted = fleet.condition("Accepted")
    assert accepted["reason"] == "InvalidConstraint"
    assert "spec.dynamicParameter" in accepted["message"]


async def test_an_invalid_spec_names_the_field() -> None:
    fleet = Fleet()
    standard(fleet, reloadPolicy="sometimes", maxUnavailableClusters=0)
    await reconcile(reconciler(fleet))
    accepted = fleet.condition("Accepted")
    assert accepted["reason"] == "InvalidSpec"
    assert "spec.reloadPolicy:" in accepted["message"]
    assert "spec.maxUnavailableClusters:" in accepted["message"]


async def test_an_unknown_spec_field_is_refused_by_name() -> None:
    fleet = Fleet()
    standard(fleet)
    # there is no namespace field: refused by name, never honoured
    fleet.hub[("ReconfigurePolicy", NS, "db")]["spec"]["configRef"]["namespace"] = "victim"
    await reconcile(reconciler(fleet))
    accepted = fleet.condition("Accepted")
    assert accepted["reason"] == "InvalidSpec"
    assert "spec.configRef.namespace: Extra inputs are not permitted" in accepted["message"]


async def test_a_missing_file_key_is_invalid_spec() -> None:
    fleet = Fleet()
    standard(fleet, files=[{"key": "other.ini", "constraintRef": "mysql"}])
    await reconcile(reconciler(fleet))
    accepted = fleet.condition("Accepted")
    assert accepted["reason"] == "InvalidSpec"
    assert accepted["message"].startswith("spec.files[0].key: 'other.ini'")


async def test_a_second_policy_of_the_same_config_is_a_conflict() -> None:
    fleet = Fleet()
    standard(fleet)
    younger = fleet.add_policy("db-too", workloads=[{"kind": "Deployment", "name": "other"}])
    younger["metadata"]["creationTimestamp"] = "2026-11-23T05:10:00Z"
    rec = reconciler(fleet)
    await reconcile(rec)
    await reconcile(rec, "db-too")
    assert fleet.status()["phase"] == "Complete"
    accepted = fleet.condition("Accepted", "db-too")
    assert accepted["reason"] == "Conflict"
    assert accepted["message"].startswith("ConfigMap db-config is governed by "
                                          "ReconfigurePolicy db")
    assert fleet.status("db-too")["clusters"] == []  # it released nothing
    # the older one goes: the younger one takes over
    del fleet.hub[("ReconfigurePolicy", NS, "db")]
    await reconcile(rec, "db-too")
    assert fleet.status("db-too")["phase"] == "Complete"


async def test_a_shared_workload_is_a_conflict_too() -> None:
    fleet = Fleet()
    standard(fleet)
    fleet.config_map(INI_V1, name="other-config")
    younger = fleet.add_policy("db-too", configRef={"kind": "ConfigMap", "name": "other-config"})
    younger["metadata"]["creationTimestamp"] = "2026-11-23T05:10:00Z"
    await reconcile(reconciler(fleet), "db-too")
    assert fleet.condition("Accepted", "db-too")["message"].startswith(
        "Deployment db is governed by ReconfigurePolicy db")


async def test_a_secret_value_never_reaches_the_status() -> None:
    """A Secret-backed config: changed names in status, the value only in the call."""
    fleet = Fleet(("member1",))
    fleet.put(copy.deepcopy(CONSTRAINT))
    password = "s3cr3t-Pa55word"
    fleet.secret("[mysqld]\npassword = old-password-1\n")
    fleet.copy_everywhere("Secret", "db-secret")
    fleet.deployment()
    fleet.endpoints("member1", "10.0.0.9")
    fleet.add_policy(configRef={"kind": "Secret", "name": "db-secret"})
    caller = Caller()
    caller.fail["10.0.0.9:9901"] = f"apply failed: password={password} rejected"
    rec = reconciler(fleet, caller)
    await reconcile(rec)
    secret = fleet.hub[("Secret", NS, "db-secret")]
    secret["data"]["my.ini"] = base64.b64encode(
        f"[mysqld]\npassword = {password}\n".encode()).decode()
    await reconcile(rec)
    fleet.propagate()
    await reconcile(rec)
    status = fleet.status()
    assert status["changedParameters"] == ["my.ini:mysqld.password"]
    assert caller.calls[0]["params"] == {"mysqld.password": password}
    assert status["phase"] == "Failed"
    text = json.dumps(status)
    assert password not in text and "old-password-1" not in text
    assert "password=<redacted> rejected" in status["clusters"][0]["message"]


async def test_an_invalid_secret_value_is_refused_without_quoting_it() -> None:
    fleet = Fleet(("member1",))
    fleet.put(copy.deepcopy(CONSTRAINT))
    fleet.secret(INI_V1)
    fleet.copy_everywhere("Secret", "db-secret")
    fleet.add_policy(configRef={"kind": "Secret", "name": "db-secret"})
    rec = reconciler(fleet)
    await reconcile(rec)
    fleet.hub[("Secret", NS, "db-secret")]["data"]["my.ini"] = base64.b64encode(
        INI_V1.replace("100", "zzTOPSECRETzz").encode()).decode()
    await reconcile(rec)
    assert fleet.condition("Accepted")["reason"] == "InvalidValue"
    assert "zzTOPSECRETzz" not in json.dumps(fleet.status())


async def test_names_resolve_only_in_the_policy_namespace() -> None:
    """A ConfigMap of the same name in another namespace is not this policy's config."""
    fleet = Fleet()
    fleet.put(copy.deepcopy(CONSTRAINT))
    fleet.config_map(INI_V1, namespace="victim")
    fleet.copy_everywhere(namespace="victim")
    fleet.add_policy(namespace="attacker")
    await reconcile(reconciler(fleet), namespace="attacker")
    accepted = next(
        c for c in fleet.hub[("ReconfigurePolicy", "attacker", "db")]["status"]["conditions"]
        if c["type"] == "Accepted")
    assert accepted["reason"] == "ConfigNotFound"
    assert "in the policy's namespace" in accepted["message"]


async def test_reloaders_are_looked_up_only_in_the_policy_namespace() -> None:
    """Another namespace's reloader of the same service name is never called."""
    fleet = Fleet(("member1",))
    standard(fleet)
    fleet.endpoints("member1", "10.9.9.9", namespace="victim")
    caller = Caller()
    rec = reconciler(fleet, caller)
    await reconcile(rec)
    change(fleet, INI_V1.replace("100", "500"))
    await reconcile(rec)
    fleet.propagate()
    await reconcile(rec)
    assert caller.calls == []
    assert "a reloader of Deployment db" in fleet.status()["clusters"][0]["message"]
    fleet.endpoints("member1", "10.0.0.1")
    await reconcile(rec)
    assert [c["address"] for c in caller.calls] == ["10.0.0.1:9901"]


async def test_constraint_valid_condition() -> None:
    fleet = Fleet()
    fleet.put(copy.deepcopy(CONSTRAINT))
    bad = copy.deepcopy(CONSTRAINT)
    bad["metadata"]["name"] = "bad"
    bad["spec"]["fileFormatConfig"]["format"] = "hcl"
    fleet.put(bad)
    rec = constraints.Reconciler(fleet, fleet)
    for name in ("mysql", "bad"):
        await rec.reconcile(Request("hub", "ConfigConstraint.config.federation.io", "", name))
    good = fleet.hub[("ConfigConstraint", "", "mysql")]["status"]["conditions"][0]
    assert good["status"] == "True"
    wrong = fleet.hub[("ConfigConstraint", "", "bad")]["status"]["conditions"][0]
    assert wrong["status"] == "False" and wrong["reason"] == "Invalid"
    assert wrong["message"].startswith("spec.fileFormatConfig.format:")
    writes = len(fleet.constraint_writes)
    await rec.reconcile(Request("hub", "ConfigConstraint.config.federation.io", "", "bad"))
    assert len(fleet.constraint_writes) == writes == 2  # unchanged: not written again


def test_reloader_addresses_from_endpoint_slices() -> None:
    slices = [
        {"ports": [{"name": "metrics", "port": 9000}, {"name": "reloader", "port": 9901}],
         "endpoints": [{"addresses": ["10.0.0.2", "10.0.0.1"]},
                       {"addresses": ["10.0.0.3"], "conditions": {"ready": False}},
                       {"addresses": ["fd00::1"]}, {"addresses": ["localhost"]},
                       {"addresses": ["bad host; rm"]}, {"addresses": [7]}]},
        {"ports": [{"name": "other", "port": 1}], "endpoints": [{"addresses": ["10.1.1.1"]}]},
        {"ports": [{"name": "reloader", "port": 70000}],
         "endpoints": [{"addresses": ["10.2.2.2"]}]},
    ]
    assert reloader_addresses(slices) == ["10.0.0.1:9901", "10.0.0.2:9901", "[fd00::1]:9901",
                                          "localhost:9901"]


def test_cluster_order() -> None:
    assert rollout.ordered(["c", "a", "b"], ["b", "zz", "b"]) == ["b", "a", "c"]
    assert rollout.ordered(list(MEMBERS), []) == list(MEMBERS)


def test_released_and_restart_versions_are_what_propagation_reads() -> None:
    state = rollout.ClusterState("member1", rollout.UPDATING, "restart", "v2", "v2",
                                 "2026-11-23T05:30:00.000000Z")
    doc = {"status": {"clusters": [state.to_json()]}}
    assert hub_api.released_version(doc, "member1") == "v2"
    assert hub_api.restart_version(doc, "member1") == "v2"


async def test_a_file_key_that_would_read_as_an_option_is_invalid_spec() -> None:
    """Issue 20, finding 14: a reloader template's ``{{ configFile }}`` alone in an argument
    must never start with '-': such a key is refused before any rollout."""
    fleet = Fleet()
    standard(fleet, files=[{"key": "--config=/etc/shadow", "constraintRef": "mysql"}])
    await reconcile(reconciler(fleet))
    accepted = fleet.condition("Accepted")
    assert accepted["reason"] == "InvalidSpec"
    assert accepted["message"].startswith("spec.files.0.key: String should match pattern")
