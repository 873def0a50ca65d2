"""The predeclared functions and the standard packages, with Go's semantics."""

from __future__ import annotations

import pytest

from federation.cue import CueError
from tests.unit.cue.helpers import run

IMPORTS = ('import (\n\t"strings"\n\t"strconv"\n\t"list"\n\t"math"\n\t"regexp"\n'
           '\t"encoding/json"\n\t"encoding/base64"\n\t"encoding/yaml"\n)\n')


def values(body: str) -> dict[str, object]:
    return run(IMPORTS + body)


def test_len_counts_bytes_of_strings_items_of_lists_and_fields_of_structs() -> None:
    assert values('a: len("héllo")\nb: len([1, 2])\nc: len({x: 1, y?: 2, _h: 3})\n') == {
        "a": 6, "b": 2, "c": 1}


def test_strings() -> None:
    assert values(
        'a: strings.Join(["a", "b"], "-")\nb: strings.Split("a,b,,c", ",")\n'
        'c: strings.Contains("abc", "b")\nd: strings.HasPrefix("abc", "ab")\n'
        'e: strings.HasSuffix("abc", "bc")\nf: strings.Replace("aaa", "a", "b", 2)\n'
        'g: strings.ToLower("AbC")\nh: strings.ToUpper("aBc")\ni: strings.TrimSpace("  x ")\n'
        'j: strings.TrimPrefix("git://x", "git://")\nk: strings.TrimSuffix("x.yaml", ".yaml")\n'
        'l: strings.SliceRunes("héllo", 1, 3)\nm: strings.Index("chicken", "ken")\n'
        'n: strings.Replace("aaa", "a", "b", -1)\n') == {
        "a": "a-b", "b": ["a", "b", "", "c"], "c": True, "d": True, "e": True, "f": "bba",
        "g": "abc", "h": "ABC", "i": "x", "j": "x", "k": "x", "l": "él", "m": 4, "n": "bbb"}


def test_strconv() -> None:
    assert values(
        'a: strconv.FormatInt(255, 16)\nb: strconv.FormatInt(-8, 2)\nc: strconv.Atoi("42")\n'
        'd: strconv.Quote("a\\"b")\ne: strconv.ParseInt("-ff", 16, 64)\n'
        'f: strconv.ParseBool("true")\ng: strconv.Itoa(7)\n') == {
        "a": "ff", "b": "-1000", "c": 42, "d": '"a\\"b"', "e": -255, "f": True, "g": "7"}
    with pytest.raises(CueError, match="Atoi"):
        values('a: strconv.Atoi("4x")\n')


def test_list_and_math() -> None:
    assert values(
        "a: list.Concat([[1], [2, 3], []])\nb: list.Contains([1, 2], 2)\n"
        "c: list.FlattenN([1, [2, [3]]], 1)\nd: list.Range(0, 10, 3)\ne: list.Drop([1, 2, 3], 1)\n"
        "f: list.Take([1, 2, 3], 2)\ng: list.Slice([1, 2, 3, 4], 1, 3)\n"
        'h: list.SortStrings(["b", "a"])\ni: math.Floor(2.7)\nj: list.Sum([1, 2])\n') == {
        "a": [1, 2, 3], "b": True, "c": [1, 2, [3]], "d": [0, 3, 6, 9], "e": [2, 3],
        "f": [1, 2], "g": [2, 3], "h": ["a", "b"], "i": 2.0, "j": 3}


def test_encodings() -> None:
    assert values(
        'a: json.Marshal({x: 1, y: ["a", true, null]})\nb: json.Unmarshal("{\\"k\\": [1, 2.5]}")\n'
        'c: base64.Encode(null, "hello")\nd: base64.Decode(null, "aGVsbG8=")\n'
        "e: yaml.Marshal({x: 1, y: [\"a\"]})\n") == {
        "a": '{"x":1,"y":["a",true,null]}', "b": {"k": [1, 2.5]}, "c": "aGVsbG8=",
        "d": b"hello", "e": "x: 1\ny:\n- a\n"}
    with pytest.raises(CueError, match="Unmarshal"):
        values('a: json.Unmarshal("{not json")\n')


def test_regexp() -> None:
    assert values('a: regexp.Match("^v[0-9]+$", "v12")\nb: regexp.Find("[0-9]+", "ab123c")\n'
                  'c: regexp.FindAll("[a-z]", "a1b2", -1)\n'
                  'd: regexp.ReplaceAll("[0-9]", "a1b2", "<$0>")\n') == {
        "a": True, "b": "123", "c": ["a", "b"], "d": "a<1>b<2>"}


def test_and_or_and_validators() -> None:
    assert values('a: and([int, >0, 3])\nb: or(["x", "y"]) & "y"\n'
                  "c: strings.MaxRunes(3) & \"abc\"\n") == {"a": 3, "b": "y", "c": "abc"}
    with pytest.raises(CueError, match="MaxRunes"):
        values('a: strings.MaxRunes(2) & "abc"\n')


def test_unknown_functions_and_wrong_arguments_are_errors() -> None:
    for body in ('a: strings.Nope("x")\n', 'a: strings.ToLower(1)\n', "a: len(1)\n",
                 'a: strconv.FormatInt("1", 10)\n', "a: div(1, 0)\n"):
        with pytest.raises(CueError, match=r"^template: a: "):
            values(body)


def test_path_is_go_path() -> None:
    assert run('import "path"\na: path.Dir("/var/log/x.log")\nb: path.Base("/var/log/x.log")\n'
               'c: path.Ext("x.tar.gz")\nd: path.Join(["a", "b/../c"])\n'
               'e: path.Clean("/../a//b/./c/..")\nf: path.Dir("x")\n') == {
        "a": "/var/log", "b": "x.log", "c": ".gz", "d": "a/c", "e": "/a/b", "f": "."}


def test_struct_validators_count_regular_fields() -> None:
    source = 'import "struct"\na: struct.MaxFields(2) & {x: 1, y?: 2, _h: 3}\n'
    assert run(source) == {"a": {"x": 1}}
    with pytest.raises(CueError, match="MaxFields"):
        run('import "struct"\na: struct.MaxFields(1) & {x: 1, y: 2}\n')
