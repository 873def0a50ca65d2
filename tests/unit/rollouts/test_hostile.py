"""Issue 20, findings 1 and 17, the pure part: the config files a tenant can put in a
governed ConfigMap that froze the rollout controller (a quadratic ini line, a YAML alias
bomb, nesting deep enough to raise RecursionError, a backtracking pattern) are refused by
the parsers themselves, fast, each with a reason class, and no parser message quotes the
file. Each test has a wall-time bound: on the old code the first ones never return."""

from __future__ import annotations

import time

import pytest

from federation.rollouts import analysis, constraint, formats
from federation.rollouts.constraint import ConfigConstraintSpec, ParameterSchema, ValueType
from federation.rollouts.formats import FileFormat, FormatError, Reason
from federation.untrusted.text import unquoted

SECRET = "S3cretTokenValue42"


def alias_bomb(levels: int = 40) -> str:
    """About 1.1 KB that expands to 2**40 values."""
    lines = ["l0: &l0 {a: 1, b: 2}"]
    lines += [f"l{i}: &l{i} {{a: *l{i - 1}, b: *l{i - 1}}}" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def deep(fmt: FileFormat, depth: int) -> str:
    if fmt is FileFormat.JSON:
        return '{"a": ' + "[" * depth + "]" * depth + "}"
    if fmt is FileFormat.YAML:
        return "a: " + "[" * depth + "]" * depth + "\n"
    return "a = " + "[" * depth + "]" * depth + "\n"


def refused(fmt: FileFormat, content: str, seconds: float = 2.0) -> FormatError:
    started = time.perf_counter()
    with pytest.raises(FormatError) as err:
        formats.parse(fmt, content)
    assert time.perf_counter() - started < seconds, "the refusal took too long"
    assert "\n" not in str(err.value)
    return err.value


@pytest.mark.timeout(30)
@pytest.mark.parametrize("line", [
    "k" + " " * 45_000 + "v",  # quadratic in configparser: a minute per parse before
    "k" + " " * 45_000 + "v = 1",
])
def test_an_ini_line_configparser_is_quadratic_on_is_refused_at_once(line: str) -> None:
    error = refused(FileFormat.INI, f"[mysqld]\n{line}\n", seconds=0.5)
    assert error.reason is Reason.LINE_TOO_LONG and "line 2" in str(error)


@pytest.mark.timeout(30)
def test_blanks_where_configparser_does_not_look_are_fine() -> None:
    """A value or a comment full of blanks is no key: still parsed, still linear."""
    content = "[s]\n#" + " " * 45_000 + "x\nk = a" + " " * 45_000 + "b\n"
    started = time.perf_counter()
    assert formats.parse(FileFormat.INI, content) == {"s.k": "a" + " " * 45_000 + "b"}
    assert time.perf_counter() - started < 1


@pytest.mark.timeout(30)
def test_a_yaml_alias_bomb_is_refused_before_it_expands() -> None:
    error = refused(FileFormat.YAML, alias_bomb())
    assert error.reason is Reason.TOO_MANY_VALUES


@pytest.mark.timeout(30)
def test_a_recursive_alias_is_its_own_class() -> None:
    """The capped loader's class, not words: a recursive alias is `recursive alias` (as
    docs/rollouts.md lists), though its message also speaks of values."""
    error = refused(FileFormat.YAML, "loop: &a [*a]\n")
    assert error.reason is Reason.RECURSIVE_ALIAS


@pytest.mark.timeout(20)
@pytest.mark.parametrize("fmt", [FileFormat.JSON, FileFormat.YAML, FileFormat.TOML])
@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_deep_nesting_is_a_refusal_not_a_recursion_error(fmt: FileFormat, depth: int) -> None:
    error = refused(fmt, deep(fmt, depth), seconds=5)
    assert error.reason is Reason.NESTED_TOO_DEEP, error


@pytest.mark.timeout(30)
@pytest.mark.parametrize("fmt", [FileFormat.JSON, FileFormat.YAML, FileFormat.TOML])
def test_nesting_below_the_recursion_limit_but_past_ours_is_refused(fmt: FileFormat) -> None:
    depth = formats.LIMITS.max_depth + 5
    assert refused(fmt, deep(fmt, depth)).reason is Reason.NESTED_TOO_DEEP


@pytest.mark.timeout(30)
def test_a_file_larger_than_the_limit_is_refused_unread() -> None:
    content = "a: " + "x" * (formats.LIMITS.max_bytes + 1)
    assert refused(FileFormat.YAML, content, seconds=0.5).reason is Reason.TOO_LARGE


@pytest.mark.timeout(30)
def test_a_legitimate_900_kib_yaml_file_parses() -> None:
    lines = [f"section{i}:\n  value: {'v' * 30}{i}\n" for i in range(16_000)]
    content = "".join(lines)
    assert 850 * 1024 < len(content) < 1024 * 1024
    assert len(formats.parse(FileFormat.YAML, content)) == 16_000


@pytest.mark.parametrize(("fmt", "content"), [
    (FileFormat.YAML, f"a: *{SECRET}\n"),  # "found undefined alias 'S3cret...'" before
    (FileFormat.YAML, f"a: &{SECRET} [*{SECRET}]\n"),
    (FileFormat.YAML, f"a: !{SECRET} x\n"),
    (FileFormat.YAML, f"a: !!python/name:{SECRET} x\n"),
    (FileFormat.YAML, f'a: "\\{SECRET}"\n'),
    (FileFormat.YAML, f"a: b\n`{SECRET}\n"),
    (FileFormat.TOML, f"a = 1\n{SECRET}\n"),
    (FileFormat.TOML, f"[a]\nb = 1\n[a]\n{SECRET} = 1\n"),
    (FileFormat.TOML, f'a = {{ "{SECRET}" = 1, "{SECRET}" = 2 }}\n'),
    (FileFormat.JSON, f'{{"a": {SECRET}}}'),
    (FileFormat.INI, f"[s]\n{SECRET}\n"),
])
def test_no_parser_message_quotes_the_file(fmt: FileFormat, content: str) -> None:
    """Finding 17: a Secret-backed file's text must not reach a status through a parser's
    message."""
    error = refused(fmt, content)
    assert SECRET not in str(error) and SECRET.lower() not in str(error).lower(), error


def test_unquoted_keeps_the_place_and_drops_the_text() -> None:
    assert unquoted("line 3, column 4: found undefined alias 'x y'") == \
        "line 3, column 4: found undefined alias …"
    assert unquoted("Expected '=' after a key (at line 1, column 3)") == \
        "Expected … after a key (at line 1, column 3)"
    assert unquoted("recursive alias *secret (line 2)") == "recursive alias (line 2)"
    assert unquoted("odd 'unpaired quote and secret") == "odd"


@pytest.mark.timeout(30)
def test_a_long_value_is_not_matched_against_a_pattern() -> None:
    """The length cap of pattern checks: the match itself is bounded by the worker's
    deadline (the controller's tests), this bounds what reaches it."""
    rule = ParameterSchema(type=ValueType.STRING, pattern="([a-z0-9]+)*")
    started = time.perf_counter()
    found = constraint.check(rule, "a" * (constraint.MAX_MATCHED + 1) + "!")
    assert time.perf_counter() - started < 0.5
    assert found is not None and "too long to match" in found


def test_a_pattern_longer_than_the_limit_is_an_invalid_constraint() -> None:
    with pytest.raises(ValueError, match="at most 1024"):
        ParameterSchema(type=ValueType.STRING, pattern="a" * 1025)


SPEC = ConfigConstraintSpec.model_validate({
    "fileFormatConfig": {"format": "yaml"}, "dynamicParameters": ["a.*"],
    "parametersSchema": {"a.name": {"type": "string", "pattern": "[a-z]+"}}})


def test_the_worker_answers_names_never_values() -> None:
    found = analysis.answer(analysis.diff_request(SPEC, "a: {name: x, n: 1}\n",
                                                  f"a: {{name: {SECRET}, n: 2}}\n"))
    assert found == {"changes": [["a.name", "changed", "dynamic"], ["a.n", "changed", "dynamic"]],
                     "invalid": ["a.name"]}
    online = analysis.answer(analysis.online_request(SPEC, "a: {name: y, n: 2}\n", ["a.n"]))
    assert online == {"params": {"a.n": "2"}}


@pytest.mark.timeout(20)
@pytest.mark.parametrize(("old", "new", "side", "reason"), [
    ("a: 1\n", alias_bomb(), "new", "too many values"),
    (deep(FileFormat.YAML, 100_000), "a: 1\n", "old", "nested too deep"),
    ("a: 1\n", f"a: *{SECRET}\n", "new", "syntax"),
])
def test_the_worker_turns_every_failure_into_an_answer(old: str, new: str, side: str,
                                                       reason: str) -> None:
    found = analysis.answer(analysis.diff_request(SPEC, old, new), analysis._Parsed())
    assert found["side"] == side and found["reason"] == reason, found
    assert SECRET not in found["error"]


def test_the_worker_parses_a_content_once() -> None:
    parsed = analysis._Parsed()
    for old in ("a: {n: 1}\n", "a: {n: 2}\n", "a: {n: 1}\n"):
        analysis.answer(analysis.diff_request(SPEC, old, "a: {n: 3}\n"), parsed)
    assert len(parsed.entries) == 3  # the new content once, each old content once


def test_the_worker_memo_is_bounded() -> None:
    parsed = analysis._Parsed(budget=100)
    for i in range(50):
        parsed.parse(FileFormat.YAML, f"a: {i}{'x' * 20}\n")
    assert parsed.size <= 100 and len(parsed.entries) <= 5
