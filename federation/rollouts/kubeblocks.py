"""KubeBlocks' configuration objects read unchanged into our constraint model (issue 24).

Two kinds carry a config file's rules in KubeBlocks: ``ConfigConstraint``
(``apps.kubeblocks.io/v1beta1``) and ``ParametersDefinition``
(``parameters.kubeblocks.io/v1alpha1``). :func:`load` takes either object as written (their
field names, their shapes; every field their API defines is known here) and returns a
:class:`Loaded`: our :class:`~federation.rollouts.constraint.ConfigConstraintSpec`, which
classifies with KubeBlocks' rules, plus what the object says about reloading. A field that
we cannot honour is refused by name (:class:`Refused`, ``field: reason``), never dropped.

What each field becomes:

- ``fileFormatConfig`` (``format``, ``iniConfig.sectionName``): the same, ``dotenv`` read as
  our ``env``; a format we do not parse is refused.
- ``staticParameters``, ``dynamicParameters``, ``immutableParameters``: the same (``null``
  is empty; overlaps resolve as KubeBlocks does).
- ``parametersSchema``: ``schemaInJSON`` (an OpenAPI v3 schema of the object named
  ``topLevelKey``) becomes one validation rule per property (``type`` integer, number,
  boolean or string; ``minimum``, ``maximum``, ``enum``, ``pattern``); any other keyword in
  a property is refused by name. ``cue`` is kept but **not evaluated** (docs/rollouts.md,
  "Not done", says what validating it as KubeBlocks does needs): a schema given only as
  CUE validates no value, which :attr:`Loaded.notes` says.
- ``reloadAction``: whether a dynamic change may be applied online, and which action the
  member's reloader runs for it (:class:`Reload`). The control plane never runs anything a
  hub object names: ``shellTrigger``'s ``command``/``scriptConfig``/``toolsSetup`` and
  ``tplScriptTrigger``'s script are KubeBlocks' way to run a program in every pod, which
  for us is the member admin's ``fedctl reloader --action`` (docs/security.md, "KubeBlocks
  reload actions"). ``targetPodSelector`` is refused: every ready reloader of a workload
  is called.
- ``mergeReloadAndRestart`` and ``reloadStaticParamsBeforeRestart``: the same fields of
  our constraint, honoured as KubeBlocks does: before a restart, the changed dynamic
  parameters (``false``), or the dynamic and static ones (``true``), are pushed online
  through the reloaders, then the workloads restart. Without a ``reloadAction`` nothing
  reloads online, so nothing is pushed (KubeBlocks too only restarts then, unless a
  ComponentDefinition we do not read supplies a reconfigure action).
- ``componentDef``, ``serviceVersion``, ``templateName``, ``fileName``: KubeBlocks' choice
  of the component file the definition governs; a ReconfigurePolicy names its file and
  constraint itself, so these select nothing here (:attr:`Loaded.selector` keeps them).
- ``downwardAPIChangeTriggeredActions`` and ``deletedPolicy``: refused (commands run on
  downward-API changes; resetting deleted parameters to defaults).

Pure: objects in, a model out.
"""

from __future__ import annotations

import dataclasses
import enum
import signal
from collections.abc import Mapping
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from federation.rollouts.constraint import (
    ConfigConstraintSpec,
    FileFormatConfig,
    IniConfig,
    ParameterSchema,
    ValueType,
)
from federation.rollouts.formats import FileFormat

CONFIG_CONSTRAINT = ("apps.kubeblocks.io/v1beta1", "ConfigConstraint")
PARAMETERS_DEFINITION = ("parameters.kubeblocks.io/v1alpha1", "ParametersDefinition")

KUBEBLOCKS_FORMATS = ("ini", "yaml", "json", "xml", "hcl", "dotenv", "toml", "properties",
                      "redis", "props-plus", "props-ultra")
"""Every ``CfgFileFormat`` KubeBlocks defines."""


class Refused(ValueError):
    """A KubeBlocks object we cannot honour: ``field: reason`` (one line)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True,
                              extra="forbid", frozen=True)


class _Open(BaseModel):
    """Parts whose content we keep but do not read field by field (a label selector, a
    JSON schema property); their checks are in :func:`load`."""

    model_config = ConfigDict(extra="allow", frozen=True)


class KbIniConfig(_Model):
    section_name: str = ""


class KbFileFormatConfig(_Model):
    format: str
    ini_config: KbIniConfig | None = None


class KbParametersSchema(_Model):
    top_level_key: str = ""
    cue: str = ""
    schema_in_json: dict[str, Any] | None = Field(default=None, alias="schemaInJSON")


class ScriptConfig(_Model):
    script_config_map_ref: str
    namespace: str = ""


class ToolConfig(_Model):
    name: str = ""
    as_container_image: bool | None = None
    image: str = ""
    image_mappings: list[dict[str, Any]] | None = None
    command: list[str] | None = None


class ToolsSetup(_Model):
    mount_point: str
    tool_configs: list[ToolConfig] | None = None


class ShellTrigger(_Model):
    command: list[str]
    sync: bool | None = None
    batch_reload: bool | None = None
    batch_params_formatter_template: str = ""
    tools_setup: ToolsSetup | None = None
    script_config: ScriptConfig | None = None


class TplScriptTrigger(_Model):
    script_config_map_ref: str
    namespace: str = ""
    sync: bool | None = None


class UnixSignalTrigger(_Model):
    signal: str
    process_name: str


class AutoTrigger(_Model):
    process_name: str = ""


class ReloadAction(_Model):
    unix_signal_trigger: UnixSignalTrigger | None = None
    shell_trigger: ShellTrigger | None = None
    tpl_script_trigger: TplScriptTrigger | None = Field(default=None,
                                                        alias="tplScriptTrigger")
    auto_trigger: AutoTrigger | None = None
    target_pod_selector: _Open | None = None


class KbSpec(_Model):
    """The union of both kinds' specs; :func:`load` checks which fields each kind has."""

    file_format_config: KbFileFormatConfig | None = None
    static_parameters: tuple[str, ...] = ()
    dynamic_parameters: tuple[str, ...] = ()
    immutable_parameters: tuple[str, ...] = ()
    parameters_schema: KbParametersSchema | None = None
    reload_action: ReloadAction | None = None
    merge_reload_and_restart: bool | None = None
    reload_static_params_before_restart: bool | None = None
    downward_api_change_triggered_actions: list[dict[str, Any]] | None = Field(
        default=None, alias="downwardAPIChangeTriggeredActions")
    component_def: str = ""
    service_version: str = ""
    template_name: str = ""
    file_name: str = ""
    deleted_policy: dict[str, Any] | None = None

    @field_validator("static_parameters", "dynamic_parameters", "immutable_parameters",
                     mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        return () if value is None else value


_ONLY_PARAMETERS_DEFINITION = ("componentDef", "serviceVersion", "templateName", "fileName",
                               "deletedPolicy")
_ONLY_CONFIG_CONSTRAINT = ("downwardAPIChangeTriggeredActions",)


class ReloadKind(enum.StrEnum):
    """How a dynamic change reaches the process, by KubeBlocks' trigger."""

    NONE = "none"  # no reloadAction: KubeBlocks restarts for every change
    SIGNAL = "signal"  # unixSignalTrigger: our reloader's signal action
    EXEC = "exec"  # shellTrigger: the member admin's exec/template action
    TEMPLATE = "template"  # tplScriptTrigger: likewise
    AUTO = "auto"  # autoTrigger: the process watches its files itself


@dataclasses.dataclass(frozen=True)
class Reload:
    kind: ReloadKind
    signal: str = ""
    """For :attr:`ReloadKind.SIGNAL`: the signal name (``SIGHUP``)."""

    @property
    def online(self) -> bool:
        """Whether a dynamic change is applied without a restart."""
        return self.kind is not ReloadKind.NONE


@dataclasses.dataclass(frozen=True)
class Loaded:
    kind: str
    spec: ConfigConstraintSpec
    reload: Reload
    notes: tuple[str, ...] = ()
    """What was accepted with a limit a reader must know (CUE not evaluated, a trigger's
    program left to the member's reloader)."""
    selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """``componentDef``, ``serviceVersion``, ``templateName``, ``fileName`` as given."""


def load(doc: Mapping[str, Any]) -> Loaded:
    """The object ``doc`` (a whole ConfigConstraint or ParametersDefinition) in our model;
    raises :class:`Refused` naming the field."""
    kind = (str(doc.get("apiVersion") or ""), str(doc.get("kind") or ""))
    if kind not in (CONFIG_CONSTRAINT, PARAMETERS_DEFINITION):
        raise Refused("kind", f"{'/'.join(kind)} is not a KubeBlocks ConfigConstraint "
                              "(apps.kubeblocks.io/v1beta1) or ParametersDefinition "
                              "(parameters.kubeblocks.io/v1alpha1)")
    raw = doc.get("spec")
    if not isinstance(raw, Mapping):
        raise Refused("spec", "must be a mapping")
    _check_kind_fields(kind, raw)
    try:
        spec = KbSpec.model_validate(raw)
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in ("spec", *first["loc"]))
        raise Refused(where, first["msg"]) from None
    notes: list[str] = []
    file_format, rules = _format(spec), _schema(spec.parameters_schema, notes)
    reload = _reload(spec.reload_action, notes)
    constraint = ConfigConstraintSpec(
        file_format_config=file_format, dynamic_parameters=spec.dynamic_parameters,
        static_parameters=spec.static_parameters,
        immutable_parameters=spec.immutable_parameters, parameters_schema=rules,
        online_reload=reload.online,
        merge_reload_and_restart=spec.merge_reload_and_restart is not False,
        reload_static_params_before_restart=bool(spec.reload_static_params_before_restart))
    selector = {key: value for key, value in (
        ("componentDef", spec.component_def), ("serviceVersion", spec.service_version),
        ("templateName", spec.template_name), ("fileName", spec.file_name)) if value}
    return Loaded(kind[1], constraint, reload, tuple(notes), selector)


def _check_kind_fields(kind: tuple[str, str], raw: Mapping[str, Any]) -> None:
    foreign = _ONLY_PARAMETERS_DEFINITION if kind == CONFIG_CONSTRAINT \
        else _ONLY_CONFIG_CONSTRAINT
    for name in foreign:
        if name in raw:
            raise Refused(f"spec.{name}", f"not a field of {kind[1]}")
    for name in ("downwardAPIChangeTriggeredActions", "deletedPolicy"):
        if raw.get(name):
            raise Refused(f"spec.{name}", "not supported: " + (
                "commands run on downward API changes belong to the member's reloader"
                if name.startswith("downward") else
                "a rollout never deletes parameters to reset them to defaults"))


def _format(spec: KbSpec) -> FileFormatConfig:
    given = spec.file_format_config
    if given is None:
        raise Refused("spec.fileFormatConfig", "required: a rollout parses the file")
    name = "env" if given.format == "dotenv" else given.format
    try:
        fmt = FileFormat(name)
    except ValueError:
        known = "a KubeBlocks format we do not parse yet" \
            if given.format in KUBEBLOCKS_FORMATS else "not a KubeBlocks format"
        raise Refused("spec.fileFormatConfig.format", f"{given.format!r}: {known}") from None
    ini = given.ini_config
    if ini is not None and fmt is not FileFormat.INI:
        raise Refused("spec.fileFormatConfig.iniConfig", f"applies to ini, not {name}")
    return FileFormatConfig(format=fmt, ini_config=None if ini is None
                            else IniConfig(section_name=ini.section_name))


_JSON_TYPES = {"integer": ValueType.INT, "number": ValueType.FLOAT,
               "boolean": ValueType.BOOL, "string": ValueType.STRING}
_RULE_KEYWORDS = frozenset({"type", "minimum", "maximum", "enum", "pattern", "description",
                            "default", "format"})
"""Keywords of a property we honour (``description``, ``default`` and ``format`` describe,
constrain nothing a rollout checks: ``default`` is the engine's, ``format`` is OpenAPI's
annotation such as int64)."""


def _schema(given: KbParametersSchema | None, notes: list[str]) -> dict[str, ParameterSchema]:
    if given is None:
        return {}
    if given.cue:
        notes.append("parametersSchema.cue is not evaluated: "
                     + ("values are checked against schemaInJSON only"
                        if given.schema_in_json else "no value is validated"))
    if not given.schema_in_json:
        return {}
    properties = given.schema_in_json.get("properties")
    if given.top_level_key and isinstance(properties, Mapping) \
            and isinstance(properties.get(given.top_level_key), Mapping):
        properties = properties[given.top_level_key].get("properties")
    if not isinstance(properties, Mapping):
        raise Refused("spec.parametersSchema.schemaInJSON.properties",
                      "must map each parameter to its schema")
    return {str(name): _rule(str(name), prop) for name, prop in properties.items()}


def _rule(name: str, prop: object) -> ParameterSchema:
    field = f"spec.parametersSchema.schemaInJSON.properties.{name}"
    if not isinstance(prop, Mapping):
        raise Refused(field, "must be a schema")
    unknown = sorted(set(prop) - _RULE_KEYWORDS)
    if unknown:
        raise Refused(f"{field}.{unknown[0]}", "not a keyword we check (type, minimum, "
                                                "maximum, enum, pattern)")
    value_type = _JSON_TYPES.get(str(prop.get("type", "string")))
    if value_type is None:
        raise Refused(f"{field}.type", f"{prop.get('type')!r} is not integer, number, "
                                        "boolean or string")
    enum_values = tuple(str(v) for v in prop.get("enum") or ())
    try:
        return ParameterSchema(type=ValueType.ENUM if enum_values else value_type,
                               minimum=prop.get("minimum"), maximum=prop.get("maximum"),
                               pattern=prop.get("pattern"), enum=enum_values)
    except pydantic.ValidationError as err:
        raise Refused(field, err.errors()[0]["msg"]) from None


def _reload(action: ReloadAction | None, notes: list[str]) -> Reload:
    if action is None:
        return Reload(ReloadKind.NONE)
    if action.target_pod_selector is not None:
        raise Refused("spec.reloadAction.targetPodSelector",
                      "not supported: every ready reloader of a workload is called")
    triggers = [name for name, value in (
        ("unixSignalTrigger", action.unix_signal_trigger),
        ("shellTrigger", action.shell_trigger), ("tplScriptTrigger", action.tpl_script_trigger),
        ("autoTrigger", action.auto_trigger)) if value is not None]
    if len(triggers) != 1:
        raise Refused("spec.reloadAction", f"needs exactly one trigger, not "
                                           f"{', '.join(triggers) or 'none'}")
    if action.unix_signal_trigger is not None:
        name = action.unix_signal_trigger.signal
        if name not in signal.Signals.__members__:
            raise Refused("spec.reloadAction.unixSignalTrigger.signal",
                          f"{name!r} is not a signal name")
        return Reload(ReloadKind.SIGNAL, signal=name)
    if action.auto_trigger is not None:
        return Reload(ReloadKind.AUTO)
    notes.append(f"reloadAction.{triggers[0]}: its program is not run by the control plane; "
                 "the member's reloader runs its own --action")
    return Reload(ReloadKind.EXEC if action.shell_trigger is not None else ReloadKind.TEMPLATE)
