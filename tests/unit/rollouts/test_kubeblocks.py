"""KubeBlocks' ConfigConstraint and ParametersDefinition in our model: each field honoured
or refused by name, never dropped."""

from __future__ import annotations

from typing import Any

import pytest

from federation.rollouts import kubeblocks
from federation.rollouts.constraint import ParameterClass, ValueType
from federation.rollouts.formats import FileFormat


def cc(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps.kubeblocks.io/v1beta1", "kind": "ConfigConstraint",
            "metadata": {"name": "mysql"},
            "spec": {"fileFormatConfig": {"format": "ini",
                                          "iniConfig": {"sectionName": "mysqld"}}, **spec}}


def pd(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "parameters.kubeblocks.io/v1alpha1", "kind": "ParametersDefinition",
            "metadata": {"name": "redis"},
            "spec": {"fileName": "redis.conf", "fileFormatConfig": {"format": "redis"},
                     **spec}}


def test_a_mysql_constraint_loads_with_kubeblocks_classes() -> None:
    loaded = kubeblocks.load(cc(
        staticParameters=["allow-suspicious-udfs", "innodb_buffer_pool_size"],
        immutableParameters=["allow-suspicious-udfs"], dynamicParameters=None,
        parametersSchema={"topLevelKey": "MysqlParameter", "cue": "#MysqlParameter: {}"},
        reloadAction={"tplScriptTrigger": {"scriptConfigMapRef": "mysql-reload",
                                           "namespace": "kb-system", "sync": True}}))
    spec = loaded.spec
    assert spec.file_format is FileFormat.INI
    assert spec.classify("allow-suspicious-udfs") is ParameterClass.IMMUTABLE
    assert spec.classify("innodb_buffer_pool_size") is ParameterClass.STATIC
    assert spec.classify("max_connections") is ParameterClass.DYNAMIC  # only a static list
    assert spec.named({"mysqld.max_connections": "1"}) == {"max_connections": "1"}
    assert loaded.reload == kubeblocks.Reload(kubeblocks.ReloadKind.TEMPLATE)
    assert loaded.notes == (
        "parametersSchema.cue is not evaluated: no value is validated",
        "reloadAction.tplScriptTrigger: its program is not run by the control plane; "
        "the member's reloader runs its own --action")


def test_a_parameters_definition_keeps_its_selector_and_maps_its_trigger() -> None:
    loaded = kubeblocks.load(pd(componentDef="redis-7", templateName="redis-config",
                                staticParameters=["port"], mergeReloadAndRestart=False,
                                reloadAction={"autoTrigger": {"processName": "redis"}}))
    assert loaded.kind == "ParametersDefinition"
    assert loaded.selector == {"componentDef": "redis-7", "templateName": "redis-config",
                               "fileName": "redis.conf"}
    assert loaded.reload.kind is kubeblocks.ReloadKind.AUTO and loaded.reload.online
    assert loaded.notes == ()
    assert loaded.spec.before_restart == {ParameterClass.DYNAMIC}


def test_restart_flags_say_what_is_pushed_online_before_a_restart() -> None:
    """KubeBlocks' NeedDynamicReloadAction / ReloadStaticParameters: the default merges
    (restart only); reloadStaticParamsBeforeRestart pushes static and dynamic; without a
    reloadAction nothing can push."""
    auto: dict[str, Any] = {"reloadAction": {"autoTrigger": {}}}
    both = {ParameterClass.DYNAMIC, ParameterClass.STATIC}
    assert kubeblocks.load(pd(**auto)).spec.before_restart == set()
    assert kubeblocks.load(pd(mergeReloadAndRestart=True, **auto)).spec.before_restart == set()
    assert kubeblocks.load(pd(reloadStaticParamsBeforeRestart=True,
                              **auto)).spec.before_restart == both
    assert kubeblocks.load(pd(mergeReloadAndRestart=False, reloadStaticParamsBeforeRestart=True,
                              **auto)).spec.before_restart == both
    unloaded = kubeblocks.load(pd(mergeReloadAndRestart=False)).spec
    assert not unloaded.merge_reload_and_restart and unloaded.before_restart == set()


def test_no_reload_action_means_no_online_reload() -> None:
    """KubeBlocks restarts for every change when nothing can reload the process."""
    assert not kubeblocks.load(pd()).reload.online


def test_unix_signal_trigger_maps_onto_the_signal_action() -> None:
    loaded = kubeblocks.load(cc(reloadAction={"unixSignalTrigger": {
        "signal": "SIGHUP", "processName": "mysqld"}}))
    assert loaded.reload == kubeblocks.Reload(kubeblocks.ReloadKind.SIGNAL, signal="SIGHUP")


def test_schema_in_json_becomes_rules() -> None:
    loaded = kubeblocks.load(cc(parametersSchema={"topLevelKey": "MysqlParameter",
                                                  "schemaInJSON": {"properties": {
                                                      "MysqlParameter": {"properties": {
        "max_connections": {"type": "integer", "minimum": 1, "maximum": 100000},
        "binlog_format": {"type": "string", "enum": ["ROW", "STATEMENT"]},
        "innodb_flush_log_at_trx_commit": {"type": "number", "description": "x"}}}}}}))
    rules = loaded.spec.parameters_schema
    assert rules["max_connections"].type is ValueType.INT
    assert rules["binlog_format"].enum == ("ROW", "STATEMENT")
    assert loaded.spec.validate_value("max_connections", "0") == [
        "parameter 'max_connections': '0' is below minimum 1"]
    assert loaded.notes == ()


@pytest.mark.parametrize(("doc", "field"), [
    (cc(reloadAction={"autoTrigger": {}, "targetPodSelector": {"matchLabels": {"a": "b"}}}),
     "spec.reloadAction.targetPodSelector"),
    (cc(reloadAction={"autoTrigger": {}, "shellTrigger": {"command": ["x"]}}),
     "spec.reloadAction"),
    (cc(reloadAction={"unixSignalTrigger": {"signal": "SIGNOPE", "processName": "x"}}),
     "spec.reloadAction.unixSignalTrigger.signal"),
    (cc(downwardAPIChangeTriggeredActions=[{"name": "x"}]),
     "spec.downwardAPIChangeTriggeredActions"),
    (cc(componentDef="mysql"), "spec.componentDef"),
    (pd(downwardAPIChangeTriggeredActions=[]), "spec.downwardAPIChangeTriggeredActions"),
    (pd(deletedPolicy={"deletedMethod": "Reset"}), "spec.deletedPolicy"),
    (cc(staticParameter=["typo"]), "spec.staticParameter"),
    (pd(fileFormatConfig={"format": "hcl"}), "spec.fileFormatConfig.format"),
    (pd(fileFormatConfig={"format": "word"}), "spec.fileFormatConfig.format"),
    (pd(fileFormatConfig=None), "spec.fileFormatConfig"),
    (pd(fileFormatConfig={"format": "yaml", "iniConfig": {"sectionName": "x"}}),
     "spec.fileFormatConfig.iniConfig"),
    (cc(parametersSchema={"schemaInJSON": {"properties": {"a": {"type": "object"}}}}),
     "spec.parametersSchema.schemaInJSON.properties.a.type"),
    (cc(parametersSchema={"schemaInJSON": {"properties": {"a": {"multipleOf": 2}}}}),
     "spec.parametersSchema.schemaInJSON.properties.a.multipleOf"),
    ({"apiVersion": "apps.kubeblocks.io/v1alpha1", "kind": "ConfigConstraint", "spec": {}},
     "kind"),
])
def test_what_cannot_be_honoured_is_refused_by_name(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(kubeblocks.Refused) as err:
        kubeblocks.load(doc)
    assert err.value.field == field and "\n" not in str(err.value)


def test_dotenv_reads_as_env() -> None:
    assert kubeblocks.load(pd(fileFormatConfig={"format": "dotenv"})).spec.file_format \
        is FileFormat.ENV
