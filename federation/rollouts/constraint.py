"""The configuration constraint: what each parameter of a config file allows.

Modelled on KubeBlocks' ``ConfigConstraint`` (apps.kubeblocks.io/v1beta1): the file format
(``fileFormatConfig.format``), the parameters that can change online (``dynamicParameters``),
those that need a restart (``staticParameters``) and those that must never change
(``immutableParameters``), classified with KubeBlocks' rules (issue 24, read from its
``IsDynamicParameter``/``IsUpdateDynamicParameters`` and the immutable-parameter checks):

- ini parameters inside ``fileFormatConfig.iniConfig.sectionName`` are named bare
  (``max_connections``); those of other sections keep ``section.key``;
- a parameter no list names is static when a dynamic list is given, dynamic when only a
  static list is given, static when neither is (our ``defaultParameterClass``, when set,
  decides instead);
- a name in several lists takes the most restrictive (immutable, then static, then
  dynamic): KubeBlocks refuses any change to an immutable parameter whatever else lists
  it, and restarts for a parameter in the static list even if the dynamic list has it too;
- an empty list may be written ``null`` (Helm renders an empty ``range`` so).

We add ``parametersSchema`` as a map from a parameter name or glob to a validation rule
(KubeBlocks' ``{topLevelKey, cue, schemaInJSON}`` shape is read by
:mod:`federation.rollouts.kubeblocks`). Names in the lists may be globs (``fnmatch``: ``*``,
``?``, ``[...]``; KubeBlocks' names contain none of these, so its exact names match the
same). Unknown fields are refused with their path, as for every model we load.
"""

from __future__ import annotations

import enum
import fnmatch
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from federation.rollouts.formats import FileFormat, FormatError, Value


class ParameterClass(enum.StrEnum):
    """How a change to a parameter can take effect."""

    DYNAMIC = "dynamic"  # applied online by the running process
    STATIC = "static"  # needs the process restarted
    IMMUTABLE = "immutable"  # may never change once set


# Most restrictive first: the first class whose list matches is the parameter's class.
_PRECEDENCE = (ParameterClass.IMMUTABLE, ParameterClass.STATIC, ParameterClass.DYNAMIC)


class ValueType(enum.StrEnum):
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    STRING = "string"
    ENUM = "enum"


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class IniConfig(_Model):
    section_name: str = ""
    """The section whose parameters are named bare (KubeBlocks: ``mysqld``)."""


class FileFormatConfig(_Model):
    format: FileFormat
    ini_config: IniConfig | None = None

    @model_validator(mode="after")
    def _ini_only(self) -> FileFormatConfig:
        if self.ini_config is not None and self.format is not FileFormat.INI:
            raise ValueError(f"iniConfig applies to format ini, not {self.format.value}")
        return self

    @property
    def section(self) -> str:
        """The ini section named bare ("" when none)."""
        return self.ini_config.section_name if self.ini_config is not None else ""


class ParameterSchema(_Model):
    """A validation rule for one parameter (or every parameter its glob matches)."""

    type: ValueType = ValueType.STRING
    minimum: float | None = Field(default=None, allow_inf_nan=False)
    maximum: float | None = Field(default=None, allow_inf_nan=False)
    pattern: str | None = Field(default=None, max_length=1024)
    """A regular expression the whole value must match (``string`` only). Python's engine
    backtracks, so a pattern such as ``([a-z0-9]+)*`` takes exponential time on some
    values: values longer than :data:`MAX_MATCHED` are refused without matching, and the
    rollout controller matches in a worker process with a deadline."""
    enum: tuple[str, ...] = ()
    """The allowed values, compared as text (``enum`` only)."""

    @model_validator(mode="after")
    def _consistent(self) -> ParameterSchema:
        numeric = self.type in (ValueType.INT, ValueType.FLOAT)
        if (self.minimum is not None or self.maximum is not None) and not numeric:
            raise ValueError(f"minimum/maximum apply to int and float, not {self.type.value}")
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise ValueError(f"minimum {self.minimum} is above maximum {self.maximum}")
        if self.pattern is not None:
            if self.type is not ValueType.STRING:
                raise ValueError(f"pattern applies to string, not {self.type.value}")
            try:
                re.compile(self.pattern)
            except re.error as err:
                message = f"pattern {self.pattern!r} is not a regular expression: {err}"
                raise ValueError(message) from None
        if (self.type is ValueType.ENUM) != bool(self.enum):
            raise ValueError("type enum needs a non-empty enum list, and only it takes one")
        return self


class ConfigConstraintSpec(_Model):
    file_format_config: FileFormatConfig
    dynamic_parameters: tuple[str, ...] = ()
    static_parameters: tuple[str, ...] = ()
    immutable_parameters: tuple[str, ...] = ()
    default_parameter_class: ParameterClass | None = None
    """The class of a parameter no list names; None: KubeBlocks' rule (static when a
    dynamic list is given, dynamic when only a static list is, else static)."""
    parameters_schema: dict[str, ParameterSchema] = Field(default_factory=dict)
    online_reload: bool = True
    """False: nothing can apply a change to the running process, so a dynamic change
    restarts too (a KubeBlocks object without ``reloadAction``, as KubeBlocks does)."""
    merge_reload_and_restart: bool = True
    """KubeBlocks' field. True: a change that needs a restart is applied by the restart
    alone. False: its changed dynamic parameters are first pushed online through the
    reloaders, then the workloads restart."""
    reload_static_params_before_restart: bool = False
    """KubeBlocks' field. True: before a restart, the changed static parameters are pushed
    online too (with the dynamic ones), for engines that take them online and apply them
    on restart (``ALTER SYSTEM``)."""

    @field_validator("dynamic_parameters", "static_parameters", "immutable_parameters",
                     mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        return () if value is None else value

    @property
    def before_restart(self) -> frozenset[ParameterClass]:
        """The classes of changed parameters pushed online before a restart, as KubeBlocks
        decides (``NeedDynamicReloadAction``, ``ReloadStaticParameters``): none without a
        way to reload online."""
        if not self.online_reload:
            return frozenset()
        if self.reload_static_params_before_restart:
            return frozenset({ParameterClass.DYNAMIC, ParameterClass.STATIC})
        if not self.merge_reload_and_restart:
            return frozenset({ParameterClass.DYNAMIC})
        return frozenset()

    @property
    def file_format(self) -> FileFormat:
        return self.file_format_config.format

    @property
    def unlisted_class(self) -> ParameterClass:
        """The class of a parameter no list names."""
        if self.default_parameter_class is not None:
            return self.default_parameter_class
        if not self.dynamic_parameters and self.static_parameters:
            return ParameterClass.DYNAMIC
        return ParameterClass.STATIC

    def classify(self, name: str) -> ParameterClass:
        """The class of parameter ``name``: the most restrictive list that matches it."""
        lists = {
            ParameterClass.IMMUTABLE: self.immutable_parameters,
            ParameterClass.STATIC: self.static_parameters,
            ParameterClass.DYNAMIC: self.dynamic_parameters,
        }
        for cls in _PRECEDENCE:
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in lists[cls]):
                return cls
        return self.unlisted_class

    def named(self, parameters: dict[str, Value]) -> dict[str, Value]:
        """``parameters`` as parsed, under the names the lists use: an ini parameter of
        ``iniConfig.sectionName`` loses its ``section.`` prefix. A bare name that another
        section's ``section.key`` already takes is refused (two parameters, one name)."""
        section = self.file_format_config.section
        if not section:
            return parameters
        prefix = f"{section}."
        named: dict[str, Value] = {}
        for name, value in parameters.items():
            bare = name.removeprefix(prefix)
            if bare in named:
                raise FormatError(self.file_format,
                                  f"parameter {bare!r} of section [{section}] is also the "
                                  "name of a parameter of another section")
            named[bare] = value
        return named

    def validate_value(self, name: str, value: Value) -> list[str]:
        """Every rule of ``parametersSchema`` that ``value`` breaks, each naming the parameter."""
        problems: list[str] = []
        for pattern, rule in self.parameters_schema.items():
            if fnmatch.fnmatchcase(name, pattern):
                items = value if isinstance(value, tuple) else (value,)
                problems.extend(
                    f"parameter {name!r}: {problem}"
                    for item in items
                    if (problem := check(rule, item)) is not None
                )
        return problems


def check(rule: ParameterSchema, value: Value) -> str | None:
    """What is wrong with ``value`` under ``rule`` (the rule named), or None."""
    if value is None or isinstance(value, tuple):
        return f"{_show(value)} is not a single {rule.type.value} value"
    if rule.type in (ValueType.INT, ValueType.FLOAT):
        number = _number(value, integer=rule.type is ValueType.INT)
        if number is None:
            return f"{_show(value)} is not {'an int' if rule.type is ValueType.INT else 'a float'}"
        if rule.minimum is not None and number < rule.minimum:
            return f"{_show(value)} is below minimum {_num(rule.minimum)}"
        if rule.maximum is not None and number > rule.maximum:
            return f"{_show(value)} is above maximum {_num(rule.maximum)}"
        return None
    text = _text(value)
    if rule.type is ValueType.BOOL and text.lower() not in _BOOLS:
        return f"{_show(value)} is not a bool (one of {', '.join(sorted(_BOOLS))})"
    if rule.type is ValueType.ENUM and text not in rule.enum:
        return f"{_show(value)} is not in enum [{', '.join(rule.enum)}]"
    if rule.pattern is not None and len(text) > MAX_MATCHED:
        return f"the value is longer than {MAX_MATCHED} characters, too long to match a pattern"
    if rule.pattern is not None and re.fullmatch(rule.pattern, text) is None:
        # The value is not quoted: a patterned string may be a password or a token.
        return f"the value does not match pattern {rule.pattern!r}"
    return None


MAX_MATCHED = 4096
"""Characters of a value matched against a ``pattern``: a patterned value is a name, a
host, a size, never a document."""

_BOOLS = frozenset({"true", "false", "on", "off", "yes", "no", "1", "0"})


def _number(value: str | int | float | bool, integer: bool) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return None if integer else value
    try:
        return int(value.strip()) if integer else float(value.strip())
    except ValueError:
        return None


def _text(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _show(value: Value) -> str:
    return repr(value)


def _num(bound: float) -> str:
    return str(int(bound)) if bound.is_integer() else str(bound)
