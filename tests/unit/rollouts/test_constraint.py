"""The constraint model: classification by name and glob, validation rules, refused fields."""

from __future__ import annotations

import pydantic
import pytest

from federation.rollouts.constraint import ConfigConstraintSpec, ParameterClass
from federation.rollouts.formats import FileFormat, FormatError, Value


def _spec(**fields: object) -> ConfigConstraintSpec:
    return ConfigConstraintSpec.model_validate({"fileFormatConfig": {"format": "ini"}, **fields})


def test_loads_kubeblocks_style_names() -> None:
    """The camelCase names of KubeBlocks' ConfigConstraint load, format included."""
    spec = _spec(dynamicParameters=["mysqld.max_connections"],
                 staticParameters=["mysqld.innodb_*"], immutableParameters=["mysqld.port"],
                 defaultParameterClass="dynamic",
                 parametersSchema={"mysqld.max_connections": {"type": "int", "minimum": 1}})
    assert spec.file_format is FileFormat.INI
    assert spec.classify("mysqld.max_connections") is ParameterClass.DYNAMIC
    assert spec.classify("mysqld.innodb_buffer_pool_size") is ParameterClass.STATIC
    assert spec.classify("mysqld.port") is ParameterClass.IMMUTABLE
    assert spec.classify("mysqld.unlisted") is ParameterClass.DYNAMIC


def test_unlisted_parameters_follow_kubeblocks_rule() -> None:
    """KubeBlocks' IsDynamicParameter: with a dynamic list an unlisted parameter is static;
    with only a static list it is dynamic; with neither it is static."""
    assert _spec().classify("anything") is ParameterClass.STATIC
    assert _spec(dynamicParameters=["a"]).classify("b") is ParameterClass.STATIC
    assert _spec(dynamicParameters=["a"], staticParameters=["s"]).classify("b") \
        is ParameterClass.STATIC
    assert _spec(staticParameters=["s"]).classify("b") is ParameterClass.DYNAMIC
    assert _spec(staticParameters=["s"]).classify("s") is ParameterClass.STATIC
    assert _spec(immutableParameters=["i"]).classify("b") is ParameterClass.STATIC
    assert _spec(staticParameters=["s"], defaultParameterClass="static").classify("b") \
        is ParameterClass.STATIC


def test_empty_lists_written_null_are_empty() -> None:
    """Helm renders an empty range as null: the list is empty, not an error."""
    spec = _spec(staticParameters=None, dynamicParameters=None, immutableParameters=None)
    assert spec.static_parameters == () and spec.classify("x") is ParameterClass.STATIC


def test_ini_section_parameters_are_named_bare() -> None:
    """KubeBlocks names the parameters of iniConfig.sectionName bare (max_connections):
    a dynamic one stays dynamic; those of other sections keep section.key."""
    spec = _spec(fileFormatConfig={"format": "ini", "iniConfig": {"sectionName": "mysqld"}},
                 dynamicParameters=["max_connections"], staticParameters=["client.port"])
    named = spec.named({"mysqld.max_connections": "200", "client.port": "3306"})
    assert named == {"max_connections": "200", "client.port": "3306"}
    assert spec.classify("max_connections") is ParameterClass.DYNAMIC
    assert spec.classify("client.port") is ParameterClass.STATIC


def test_a_bare_name_taken_by_another_section_is_refused() -> None:
    """[mysqld] a.b and [a] b would both be 'a.b': refused rather than one dropped."""
    spec = _spec(fileFormatConfig={"format": "ini", "iniConfig": {"sectionName": "mysqld"}})
    with pytest.raises(FormatError, match="also the name"):
        spec.named({"a.b": "1", "mysqld.a.b": "2"})


def test_most_restrictive_match_wins() -> None:
    """A broad dynamic glob cannot loosen a parameter listed as static or immutable."""
    spec = _spec(dynamicParameters=["*"], staticParameters=["s.static*"],
                 immutableParameters=["s.static_id"])
    assert spec.classify("s.static_id") is ParameterClass.IMMUTABLE
    assert spec.classify("s.static_x") is ParameterClass.STATIC
    assert spec.classify("s.other") is ParameterClass.DYNAMIC


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"dynamicParameter": ["a"]}, "dynamicParameter"),
        ({"fileFormatConfig": {"format": "hcl"}}, "fileFormatConfig.format"),
        ({"fileFormatConfig": {"format": "ini", "iniConfig": {"section": "x"}}},
         "fileFormatConfig.iniConfig.section"),
        ({"fileFormatConfig": {"format": "yaml", "iniConfig": {"sectionName": "x"}}},
         "fileFormatConfig"),
        ({"defaultParameterClass": "sometimes"}, "defaultParameterClass"),
        ({"parametersSchema": {"a": {"type": "int", "minimum": 5, "maximum": 1}}},
         "parametersSchema.a"),
        ({"parametersSchema": {"a": {"type": "string", "minimum": 1}}}, "parametersSchema.a"),
        ({"parametersSchema": {"a": {"type": "int", "pattern": "x"}}}, "parametersSchema.a"),
        ({"parametersSchema": {"a": {"type": "string", "pattern": "("}}}, "parametersSchema.a"),
        ({"parametersSchema": {"a": {"type": "enum"}}}, "parametersSchema.a"),
        ({"parametersSchema": {"a": {"type": "int", "maximum": "inf"}}},
         "parametersSchema.a.maximum"),
        ({"parametersSchema": {"a": {"typo": "int"}}}, "parametersSchema.a.typo"),
    ],
)
def test_bad_fields_are_refused_with_their_path(fields: dict[str, object], path: str) -> None:
    """Unknown fields, unknown formats and inconsistent rules fail, naming the field."""
    with pytest.raises(pydantic.ValidationError) as err:
        _spec(**fields)
    locations = {".".join(str(p) for p in e["loc"]) for e in err.value.errors()}
    assert path in locations, locations


RULES = {
    "n": {"type": "int", "minimum": 1, "maximum": 100},
    "f": {"type": "float", "minimum": 0.5},
    "b": {"type": "bool"},
    "e": {"type": "enum", "enum": ["ROW", "STATEMENT"]},
    "p": {"type": "string", "pattern": "[a-z]+"},
    "list.*": {"type": "int", "maximum": 9},
}


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("n", "50", None),
        ("n", 50, None),
        ("n", "0", "parameter 'n': '0' is below minimum 1"),
        ("n", 101, "parameter 'n': 101 is above maximum 100"),
        ("n", "5.5", "parameter 'n': '5.5' is not an int"),
        ("n", True, "parameter 'n': True is not an int"),
        ("n", None, "parameter 'n': None is not a single int value"),
        ("f", "0.75", None),
        ("f", 0.25, "parameter 'f': 0.25 is below minimum 0.5"),
        ("f", "x", "parameter 'f': 'x' is not a float"),
        ("b", "ON", None),
        ("b", False, None),
        ("b", "maybe", "parameter 'b': 'maybe' is not a bool"),
        ("e", "ROW", None),
        ("e", "MIXED", "parameter 'e': 'MIXED' is not in enum [ROW, STATEMENT]"),
        ("p", "abc", None),
        ("p", "abc1", "parameter 'p': the value does not match pattern '[a-z]+'"),
        ("list.x", (1, 2), None),
        ("list.x", (1, 12), "parameter 'list.x': 12 is above maximum 9"),
        ("unruled", "anything", None),
    ],
)
def test_validation_names_parameter_and_rule(name: str, value: Value, problem: str | None) -> None:
    """Each broken rule is reported with the parameter, the value and the rule it breaks."""
    problems = _spec(parametersSchema=RULES).validate_value(name, value)
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_overlapping_lists_resolve_as_kubeblocks() -> None:
    """KubeBlocks accepts a name in two lists (MySQL's allow-suspicious-udfs is static and
    immutable): immutable refuses every change, static restarts even if listed dynamic."""
    spec = _spec(dynamicParameters=["a.b", "d"], staticParameters=["a.b", "s"],
                 immutableParameters=["s"])
    assert spec.classify("a.b") is ParameterClass.STATIC
    assert spec.classify("s") is ParameterClass.IMMUTABLE
    assert spec.classify("d") is ParameterClass.DYNAMIC
    assert _spec(dynamicParameters=["a.b", "a.b"]).classify("a.b") is ParameterClass.DYNAMIC


def test_pattern_failure_does_not_echo_the_value() -> None:
    """A patterned string may be a secret: the message names the parameter and rule only."""
    spec = _spec(parametersSchema={"s.password": {"pattern": "[A-Za-z0-9]{12,}"}})
    [problem] = spec.validate_value("s.password", "hunter2")
    assert "hunter2" not in problem and "s.password" in problem and "{12,}" in problem
