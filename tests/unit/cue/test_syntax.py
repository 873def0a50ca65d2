"""Lexing and parsing: what the CUE spec says each form means."""

from __future__ import annotations

import pytest

from federation.cue import CueError, parse
from tests.unit.cue.helpers import run


def test_newlines_insert_commas_and_comments_are_ignored() -> None:
    source = 'a: 1 // one\nb: "x" /* not a comment opener in CUE */\n'
    with pytest.raises(CueError):  # CUE has no block comments
        parse(source)
    assert run("a: 1 // one\nb: [1,\n 2,\n]\nc: {x: 1, y: 2}\n") == {
        "a": 1, "b": [1, 2], "c": {"x": 1, "y": 2}}


def test_string_forms() -> None:
    source = r'''
a: "tab\tquote\" unicode\u00e9 slash\/"
b: #"raw \n stays \#n escapes"#
c: """
    first
      indented
    last
    """
d: "sum \(1 + 2) and \("nested \(true)")"
e: #"raw \#(1 + 1) interpolation"#
f: 'bytes'
'''
    assert run(source, fields=["a", "b", "c", "d", "e"]) == {
        "a": 'tab\tquote" unicode\u00e9 slash/',
        "b": "raw \\n stays \n escapes",
        "c": "first\n  indented\nlast",
        "d": "sum 3 and nested true",
        "e": "raw 2 interpolation",
    }
    assert run(source, fields=["f"]) == {"f": b"bytes"}


def test_numbers() -> None:
    assert run("a: 0x1F\nb: 0o17\nc: 0b101\nd: 1_000\ne: 1.5e3\nf: .5\ng: 2Ki\nh: 1.5M\n") == {
        "a": 31, "b": 15, "c": 5, "d": 1000, "e": 1500.0, "f": 0.5, "g": 2048,
        "h": 1_500_000}


def test_keywords_top_bottom_and_attributes() -> None:
    assert run('a: null\nb: true\nc: false\nd: _ & 3\ne: 1 @go(E) @json("x")\n') == {
        "a": None, "b": True, "c": False, "d": 3, "e": 1}


def test_nested_shorthand_and_quoted_labels() -> None:
    assert run('a: b: c: 1\n"app.oam.dev/name": "x"\na: b: d: 2\n') == {
        "a": {"b": {"c": 1, "d": 2}}, "app.oam.dev/name": "x"}


@pytest.mark.parametrize("source", [
    "a: {", "a: [1, 2", 'a: "open', "a: 1 +", "a: b: ", "a: \"\\q\"", "for x in y {",
    "a: #\"x\"", "a: \"\"\"x\"\"\"", "@", "a: 1 1",
])
def test_syntax_errors_are_cue_errors_with_a_position(source: str) -> None:
    with pytest.raises(CueError, match=r"\d+:\d+"):
        parse(source)


def test_imports_other_than_the_pure_standard_packages_are_refused_by_name() -> None:
    for path in ("vela/op", "vela/kube", "tool/exec", "tool/file", "tool/http", "example.com/x"):
        with pytest.raises(CueError, match=path.replace(".", r"\.")):
            parse(f'import "{path}"\na: 1\n')
    parse('import (\n\t"strings"\n\tj "encoding/json"\n)\na: strings.ToUpper("x")\n')
