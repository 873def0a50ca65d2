"""Formats: parse(render(x)) == x per format, and malformed input is refused by line or key."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.rollouts import formats
from federation.rollouts.formats import FileFormat, FormatError, Value

# Characters str.splitlines() breaks on: a line-oriented value cannot hold them.
_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_any_char = st.characters(exclude_categories=["Cs"])
_line_char = st.characters(exclude_categories=["Cs"], exclude_characters=_BREAKS)
_word = st.text("abcdefghijklmnopqrstuvwxyzABCDEFXYZ0123456789_-", min_size=1, max_size=8)


def _same(a: dict[str, Value], b: dict[str, Value]) -> bool:
    return a.keys() == b.keys() and all(formats.same_value(a[k], b[k]) for k in a)


def _flat(tree: Any, prefix: str = "") -> dict[str, Value]:
    out: dict[str, Value] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, prefix + key + "."))
        else:
            out[prefix + key] = value
    return out


def _nested(scalars: st.SearchStrategy[Value], keys: st.SearchStrategy[str]) -> st.SearchStrategy:
    leaf = st.one_of(scalars, st.lists(scalars, max_size=3).map(tuple))
    tree = st.recursive(
        st.dictionaries(keys, leaf, min_size=1, max_size=4),
        lambda children: st.dictionaries(keys, st.one_of(leaf, children), min_size=1, max_size=4),
        max_leaves=12,
    )
    return tree.map(_flat)


_nested_keys = st.text(_any_char, min_size=1, max_size=8).filter(lambda k: "." not in k)
_yaml_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                          st.text(_any_char, max_size=12))
_toml_scalars = st.one_of(st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
                          st.floats(), st.text(_any_char, max_size=12))
_stripped_line = st.text(_line_char, max_size=12).filter(lambda v: v == v.strip())

_ini_keys = st.tuples(_word, st.text("abcXYZ019_.-", min_size=1, max_size=8)).map(".".join)
_env_keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
_props_keys = st.text("abcXYZ019_.-/", min_size=1, max_size=10)

_xml_keys = st.from_regex(r"[a-z_][a-z0-9_-]{0,6}", fullmatch=True)
_xml_text = st.text(st.characters(exclude_categories=["Cs", "Cc"]), max_size=10).filter(
    lambda v: v == v.strip())
_xml_tree = st.recursive(
    st.dictionaries(_xml_keys, _xml_text, min_size=1, max_size=4),
    lambda children: st.dictionaries(_xml_keys, st.one_of(_xml_text, children), min_size=1,
                                     max_size=4),
    max_leaves=12).map(_flat)


def _rooted(root: str, tree: dict[str, Value]) -> dict[str, Value]:
    return {f"{root}.{name}": value for name, value in tree.items()}


GENERATED = {
    FileFormat.YAML: _nested(_yaml_scalars, _nested_keys),
    FileFormat.JSON: _nested(_yaml_scalars, _nested_keys),
    FileFormat.TOML: _nested(_toml_scalars, _nested_keys),
    FileFormat.INI: st.dictionaries(_ini_keys, _stripped_line, max_size=8),
    FileFormat.PROPERTIES: st.dictionaries(
        _props_keys, _stripped_line.filter(lambda v: not v.endswith("\\")), max_size=8),
    FileFormat.ENV: st.dictionaries(_env_keys, st.text(_line_char | st.just("\n"), max_size=12),
                                    max_size=8),
    # Java properties hold any key and value (escapes cover blanks, separators, line breaks).
    FileFormat.PROPS_PLUS: st.dictionaries(st.text(_any_char, max_size=8),
                                           st.text(_any_char, max_size=12), max_size=8),
    FileFormat.PROPS_ULTRA: st.dictionaries(st.text(_any_char, max_size=8),
                                            st.text(_any_char, max_size=12), max_size=8),
    # xml: one root element, element names, text without edge blanks.
    FileFormat.XML: st.builds(_rooted, _xml_keys, _xml_tree),
    # redis: a directive word and its arguments as redis.conf writes them (re-quoted).
    FileFormat.REDIS: st.dictionaries(
        st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True),
        st.lists(st.text(_any_char.filter(lambda c: c not in "\n'"), max_size=6),
                 max_size=3).map(lambda args: formats._redis_encode(args)), max_size=8),
}


@pytest.mark.parametrize("file_format", list(FileFormat))
def test_round_trip(file_format: FileFormat) -> None:
    """parse(render(x)) == x, types included, for maps the format can hold."""

    @settings(max_examples=150, deadline=None)
    @given(GENERATED[file_format])
    def check(parameters: dict[str, Value]) -> None:
        text = formats.render(file_format, parameters)
        assert _same(formats.parse(file_format, text), parameters), text

    check()


_any_value = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                       st.text(_any_char, max_size=6))
_any_map = st.dictionaries(st.text(_any_char, max_size=6),
                           st.one_of(_any_value, st.lists(_any_value, max_size=2).map(tuple)),
                           max_size=5)


@pytest.mark.parametrize("file_format", list(FileFormat))
def test_render_refuses_rather_than_corrupts(file_format: FileFormat) -> None:
    """For any map, render either raises FormatError or writes content that parses back to it."""

    @settings(max_examples=300, deadline=None)
    @given(_any_map)
    def check(parameters: dict[str, Value]) -> None:
        try:
            text = formats.render(file_format, parameters)
        except FormatError as err:
            assert str(err).startswith(file_format.value + ": ")
            return
        assert _same(formats.parse(file_format, text), parameters), text

    check()


def test_nested_formats_flatten_to_dotted_keys() -> None:
    """yaml, json and toml give the same dotted parameters for the same tree."""
    expected = {"server.port": 8080, "server.tls.enabled": True, "name": "x", "tags": ("a", "b")}
    assert formats.parse(FileFormat.YAML,
                         "server:\n  port: 8080\n  tls: {enabled: true}\nname: x\ntags: [a, b]\n"
                         ) == expected
    assert formats.parse(FileFormat.JSON, '{"server": {"port": 8080, "tls": {"enabled": true}},'
                                          ' "name": "x", "tags": ["a", "b"]}') == expected
    assert formats.parse(FileFormat.TOML, 'name = "x"\ntags = ["a", "b"]\n[server]\nport = 8080\n'
                                          "[server.tls]\nenabled = true\n") == expected


def test_ini_keeps_case_and_does_not_inherit_default() -> None:
    """[DEFAULT] is an ordinary section: its keys are not copied into the others."""
    text = "[DEFAULT]\nA = 1\n[mysqld]\nMax_Connections = 100\n"
    expected = {"DEFAULT.A": "1", "mysqld.Max_Connections": "100"}
    assert formats.parse(FileFormat.INI, text) == expected


def test_env_and_properties_dialects() -> None:
    """export, quotes, comments and the three properties separators."""
    env = 'export A=1\nB="two words # not a comment"\nC=\'x\'\nD=plain # comment\n'
    assert formats.parse(FileFormat.ENV, env) == {
        "A": "1", "B": "two words # not a comment", "C": "x", "D": "plain"}
    props = "# c\n! c\na=1\nb : 2\nc 3\nd=x=y\n"
    assert formats.parse(FileFormat.PROPERTIES, props) == {"a": "1", "b": "2", "c": "3", "d": "x=y"}


def test_java_properties_as_kubeblocks_reads_them() -> None:
    """props-plus/props-ultra: continuation lines, escapes, every separator, and a key set
    twice keeps its last value (Pulsar's broker.conf sets one twice)."""
    text = ("# broker.conf\n! c\nbrokerDeleteInactiveTopicsEnabled=true\nb : 2\nc 3\n"
            "list = a,\\\n     b\nkey\\ with\\:sep = \\u0041\\t\nempty\n"
            "brokerDeleteInactiveTopicsEnabled=false\n")
    expected = {"brokerDeleteInactiveTopicsEnabled": "false", "b": "2", "c": "3",
                "list": "a,b", "key with:sep": "A\t", "empty": ""}
    for fmt in (FileFormat.PROPS_PLUS, FileFormat.PROPS_ULTRA):
        assert formats.parse(fmt, text) == expected
    assert formats.render(FileFormat.PROPS_PLUS, {"a": "1"}) == "a = 1\n"
    assert formats.render(FileFormat.PROPS_ULTRA, {"a": "1"}) == "a=1\n"


def test_redis_names_repeated_directives_by_their_first_arguments() -> None:
    """A directive set once is one parameter; one repeated (save, client-output-buffer-limit)
    is named by as many first arguments as tell the lines apart, as KubeBlocks names them."""
    text = ("# redis.conf\nbind 0.0.0.0 -::1\nsave 900 1\nsave 300 10\n"
            "client-output-buffer-limit normal 0 0 0\n"
            "client-output-buffer-limit replica 256mb 64mb 60\n"
            "requirepass \"two words\"\nappendonly yes\nappendonly no\n"
            "rename-command 'FLUSHALL' \"\"\n")
    assert formats.parse(FileFormat.REDIS, text) == {
        "bind": "0.0.0.0 -::1", "save 900": "1", "save 300": "10",
        "client-output-buffer-limit normal": "0 0 0",
        "client-output-buffer-limit replica": "256mb 64mb 60",
        "requirepass": '"two words"', "appendonly no": "", "appendonly yes": "",
        "rename-command": 'FLUSHALL ""'}


def test_xml_as_kubeblocks_reads_it() -> None:
    """Element paths under the root, attributes as -name, text beside children as #text;
    comments and the XML declaration are not parameters."""
    text = ('<?xml version="1.0"?>\n<clickhouse>\n  <!-- logging -->\n'
            '  <logger><level>trace</level></logger>\n'
            '  <max_connections> 4096 </max_connections>\n'
            '  <remote_servers incl="clickhouse_remote_servers"/>\n'
            '  <macros replace="1">m<shard>01</shard></macros>\n</clickhouse>\n')
    assert formats.parse(FileFormat.XML, text) == {
        "clickhouse.logger.level": "trace", "clickhouse.max_connections": "4096",
        "clickhouse.remote_servers.-incl": "clickhouse_remote_servers",
        "clickhouse.macros.-replace": "1", "clickhouse.macros.#text": "m",
        "clickhouse.macros.shard": "01"}


def test_xml_declares_no_entities() -> None:
    """A DTD could declare entities (an expansion bomb, an external file): refused before
    any parser sees it."""
    bomb = ('<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>'
            "<x><y>&b;</y></x>")
    with pytest.raises(FormatError, match="document type declaration"):
        formats.parse(FileFormat.XML, bomb)


def test_parse_errors_do_not_quote_values() -> None:
    """A config line may hold a password: parse errors name the line, never its text."""
    for file_format, content in [
        (FileFormat.INI, "[s]\nhunter2-secret\n"),
        (FileFormat.INI, "hunter2-secret = 1\n"),
        (FileFormat.ENV, "A=1\nhunter2-secret\n"),
        (FileFormat.PROPERTIES, "a=hunter2-secret \\\n"),
        (FileFormat.JSON, '{"a": hunter2-secret}'),
        (FileFormat.TOML, "a = hunter2-secret\n"),
        (FileFormat.YAML, "a: [hunter2-secret\n"),
    ]:
        with pytest.raises(FormatError) as err:
            formats.parse(file_format, content)
        assert "hunter2" not in str(err.value), str(err.value)


def test_same_value_tells_types_apart() -> None:
    """1, 1.0, True and "1" are four different values; nan equals nan."""
    values: list[Value] = [1, 1.0, True, "1"]
    for i, a in enumerate(values):
        for j, b in enumerate(values):
            assert formats.same_value(a, b) is (i == j)
    assert formats.same_value(math.nan, math.nan)
    assert not formats.same_value((1,), (True,))


@pytest.mark.parametrize(
    ("file_format", "content", "fragment"),
    [
        (FileFormat.JSON, '{"a": 1,\n "b": }', "json: line 2"),
        (FileFormat.JSON, '{"a": 1, "a": 2}', "json: key 'a' appears twice"),
        (FileFormat.JSON, "[1, 2]", "json: the document must be a mapping"),
        (FileFormat.JSON, '{"a.b": 1}', "json: key 'a.b'"),
        (FileFormat.JSON, '{"a": {}}', "json: key 'a' is an empty mapping"),
        (FileFormat.JSON, '{"a": [{"b": 1}]}', "json: key 'a[0]'"),
        (FileFormat.YAML, "a: 1\nb: [1, 2\n", "yaml: line 3"),
        (FileFormat.YAML, "a:\n  b: 1\n c: 2\n", "yaml: line 3"),
        (FileFormat.YAML, "- 1\n", "yaml: the document must be a mapping"),
        (FileFormat.YAML, "a: 2020-01-01\n", "yaml: key 'a'"),
        (FileFormat.TOML, "a = 1\nb = \n", "toml: Invalid value (at line 2"),
        (FileFormat.TOML, "a = 1979-05-27\n", "toml: key 'a'"),
        (FileFormat.INI, "[s]\na = 1\n[s]\n", "ini: line 3: section [s] appears twice"),
        (FileFormat.INI, "[s]\na = 1\na = 2\n", "ini: line 3: key 'a' appears twice in [s]"),
        (FileFormat.INI, "a = 1\n", "ini: line 1: a key before any [section]"),
        (FileFormat.INI, "[s]\npassword\n", "ini: line 2: not 'key = value'"),
        (FileFormat.JSON, '{"a": ' + "9" * 5000 + "}", "json: "),
        (FileFormat.YAML, "a: " + "9" * 5000, "yaml: "),
        (FileFormat.YAML, "a: \x08", "yaml: "),
        (FileFormat.TOML, "a = " + "9" * 5000, "toml: "),
        (FileFormat.INI, "[a.b]\nx = 1\n", "ini: section [a.b]"),
        (FileFormat.PROPERTIES, "a=1\nb=2\na=3\n", "properties: line 3: key 'a' appears twice"),
        (FileFormat.PROPERTIES, "a=1 \\\n  2\n", "properties: line 1: continuation"),
        (FileFormat.ENV, "A=1\nnot a line\n", "env: line 2: expected NAME=value"),
        (FileFormat.ENV, 'A="open\n', "env: line 1: unterminated double quote"),
        (FileFormat.ENV, "A=1\nA=2\n", "env: line 2: A appears twice"),
        (FileFormat.PROPS_PLUS, "a=1\nb=\\u12\n", "props-plus: line 2: malformed"),
        (FileFormat.REDIS, "a 1\nrequirepass \"open\n", "redis: line 2: unterminated"),
        (FileFormat.REDIS, "a \"x\"y\n", "redis: line 1: a closing quote"),
        (FileFormat.XML, "<a>\n<b>\n</a>\n", "xml: line 3"),
        (FileFormat.XML, "<a><b>1</b><b>2</b></a>", "xml: element a.b repeats"),
        (FileFormat.XML, "<a>x<b>1</b>y</a>", "xml: element a: text between"),
        (FileFormat.XML, "<a.b>1</a.b>", "xml: key 'a.b'"),
    ],
)
def test_malformed_input_names_format_and_place(
    file_format: FileFormat, content: str, fragment: str
) -> None:
    """Every parse error starts with the format and names the line or the key."""
    with pytest.raises(FormatError) as err:
        formats.parse(file_format, content)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("file_format", "parameters", "fragment"),
    [
        (FileFormat.TOML, {"a": None}, "toml: parameter 'a': toml has no null value"),
        (FileFormat.YAML, {"a": 1, "a.b": 2}, "yaml: parameter 'a.b' is nested under a value"),
        (FileFormat.JSON, {"a.b": 1, "a": 2}, "json: parameter 'a' collides"),
        (FileFormat.INI, {"nosection": "1"}, "ini: parameter 'nosection' is not 'section.key'"),
        (FileFormat.INI, {"s.k": 1}, "ini: parameter 's.k': values are strings"),
        (FileFormat.ENV, {"1A": "x"}, "env: parameter '1A' is not a variable name"),
        (FileFormat.PROPERTIES, {"a b": "x"}, "properties: parameter 'a b'"),
        (FileFormat.PROPS_PLUS, {"a": 1}, "props-plus: parameter 'a': values are strings"),
        (FileFormat.REDIS, {"a": "two  spaces"}, "redis: these parameters cannot be written"),
        (FileFormat.XML, {"a": "1", "b": "2"}, "xml: the parameters must share one root"),
        (FileFormat.XML, {"a.b": 1}, "xml: parameter 'b': values are strings"),
    ],
)
def test_render_refusals_name_the_parameter(
    file_format: FileFormat, parameters: dict[str, Value], fragment: str
) -> None:
    """A map the format cannot hold is refused, naming the parameter, never written lossily."""
    with pytest.raises(FormatError) as err:
        formats.render(file_format, parameters)
    assert fragment in str(err.value)
