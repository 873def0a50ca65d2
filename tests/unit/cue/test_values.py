"""Lists, comprehensions, unification, disjunctions, operators, references."""

from __future__ import annotations

from typing import Any

import pytest

from federation.cue import CueError
from tests.unit.cue.helpers import run


def test_open_lists_constrain_every_element() -> None:
    source = "a: [...{name: string, port: *80 | int}]\nb: [1, 2, ...int]\nc: [...string]\n"
    fill = {"a": [{"name": "x"}, {"name": "y", "port": 8080}], "b": [1, 2, 3]}
    assert run(source, fill=fill) == {
        "a": [{"name": "x", "port": 80}, {"name": "y", "port": 8080}], "b": [1, 2, 3], "c": []}
    with pytest.raises(CueError, match=r"b\[2\]"):
        run(source, fill={"b": [1, 2, "three"]})


def test_closed_lists_of_different_lengths_conflict() -> None:
    with pytest.raises(CueError, match="list"):
        run("a: [1, 2] & [1, 2, 3]\n")


def test_list_comprehensions() -> None:
    source = (
        "l: [3, 1, 2]\n"
        "a: [for x in l if x > 1 {x * 10}]\n"
        "b: [for i, x in l {i}]\n"
        "c: [for x in l for y in [1, 2] if x == y {[x, y]}]\n"
        "d: [for x in l let y = x + 1 {y}]\n"
        'e: [for k, v in {p: 1, q: 2} {"\\(k)=\\(v)"}]\n'
    )
    assert run(source, fields=["a", "b", "c", "d", "e"]) == {
        "a": [30, 20], "b": [0, 1, 2], "c": [[1, 1], [2, 2]], "d": [4, 2, 3],
        "e": ["p=1", "q=2"]}


def test_struct_comprehensions_and_conditional_fields() -> None:
    source = (
        'names: ["a", "b"]\n'
        "m: {for i, n in names {(n): i}}\n"
        "x: {if len(names) > 1 {many: true}\nif len(names) > 5 {lots: true}}\n"
    )
    assert run(source) == {"names": ["a", "b"], "m": {"a": 0, "b": 1}, "x": {"many": True}}


def test_basic_types_bounds_and_enumerations() -> None:
    assert run('a: int & >0 & <10 & 5\nb: string & !="" & "x"\nc: ("a" | "b") & "b"\n'
               'd: =~"^[a-z]+$" & "abc"\ne: !~"x" & "abc"\nf: number & 1.5\n') == {
        "a": 5, "b": "x", "c": "b", "d": "abc", "e": "abc", "f": 1.5}
    for bad in ("a: int & 1.5", "a: >0 & -1", 'a: string & !="" & ""', 'a: =~"^x" & "y"',
                'a: ("a" | "b") & "c"', "a: float & 1", "a: bool & 1", "a: 1 & 2"):
        with pytest.raises(CueError, match=r"^template: a: "):
            run(bad + "\n")


def test_defaults_are_chosen_on_export_and_dropped_by_a_conflicting_fill() -> None:
    source = 'a: *"TCP" | "UDP"\nb: a & "UDP"\nc: *1 | 2 | 3\nd: c & (2 | 3)\ne: *1 | int\n'
    assert run(source, fields=["a", "b", "c", "e"]) == {"a": "TCP", "b": "UDP", "c": 1, "e": 1}
    with pytest.raises(CueError, match=r"^template: d: "):  # 2 | 3 has no default
        run(source, fields=["d"])


def test_incomplete_values_are_errors_on_export() -> None:
    for source in ("a: int\n", "a: string | int\n", "a: >3\n", "a: {b: string}\n"):
        with pytest.raises(CueError, match="incomplete"):
            run(source)


def test_the_error_check_idiom() -> None:
    source = (
        "p: {set: 1, opt?: int, deep: {}}\n"
        "a: p.set != _|_\nb: p.opt != _|_\nc: p.missing == _|_\nd: p.deep.x.y != _|_\n"
        "e: p.set == _|_\nf: (p.set + 1) != _|_\ng: (p.set & 2) == _|_\nh: int != _|_\n"
    )
    assert run(source, fields=list("abcdefgh")) == {
        "a": True, "b": False, "c": True, "d": False, "e": False, "f": True, "g": True,
        "h": True}


def test_index_and_selection() -> None:
    source = 'l: [10, 20]\nm: {"a-b": {c: 3}}\na: l[1]\nb: m["a-b"].c\nc: m."a-b".c\n'
    assert run(source, fields=["a", "b", "c"]) == {"a": 20, "b": 3, "c": 3}
    with pytest.raises(CueError, match="index out of range"):
        run("l: [1]\na: l[3]\n", fields=["a"])


def test_arithmetic_and_comparison() -> None:
    source = (
        "a: 7 + 3 * 2 - 1\nb: 7 / 2\nc: div(-7, 2)\nd: mod(-7, 2)\ne: quo(-7, 2)\n"
        "f: rem(-7, 2)\ng: -(3)\nh: 1 + 0.5\ni: 2 < 3 && !(1 == 2) || false\n"
        'j: "ab" + "cd"\nk: "ab" * 2\nl: [1] + [2]\nm: "b" > "a"\nn: "abc" =~ "^a"\n'
        'o: "abc" !~ "^a"\np: 1 == 1.0\n'
    )
    assert run(source) == {
        "a": 12, "b": 3.5, "c": -4, "d": 1, "e": -3, "f": -1, "g": -3, "h": 1.5, "i": True,
        "j": "abcd", "k": "abab", "l": [1, 2], "m": True, "n": True, "o": False, "p": True}


def test_operator_type_errors() -> None:
    for bad in ('a: 1 + "x"', "a: !1", 'a: "x" && true', "a: 1 / 0", "a: [1] * -1 + 1",
                'a: 1 < "x"'):
        with pytest.raises(CueError, match=r"^template: a: "):
            run(bad + "\n")


def test_reference_cycles_are_errors_not_hangs() -> None:
    for source in ("a: b\nb: a\n", "a: a + 1\n", "a: {x: b.x}\nb: {x: a.x}\n",
                   "a: [for x in a {x}]\n"):
        with pytest.raises(CueError):
            run(source)


def test_interpolation_formats_each_kind() -> None:
    assert run('a: "\\(1) \\(2.0) \\(0.5) \\(true) \\(null == null) \\("s")"\n') == {
        "a": "1 2.0 0.5 true true s"}
    with pytest.raises(CueError, match="interpolation"):
        run('a: "\\({x: 1})"\n')


def test_a_health_policy_in_kubevelas_style() -> None:
    """Status snippets read the live object through context.output, defaults filling gaps."""
    source = (
        "ready: {replicas: *0 | int} & {\n"
        "\tif context.output.status.readyReplicas != _|_ {\n"
        "\t\treplicas: context.output.status.readyReplicas\n\t}\n"
        "}\n"
        "_healthy: context.output.spec.replicas == ready.replicas\n"
        "isHealth: *_healthy | bool\n"
        "if context.output.metadata.annotations[\"skip\"] != _|_ {isHealth: true}\n"
        'message: "Ready:\\(ready.replicas)/\\(context.output.spec.replicas)"\n'
    )
    live: dict[str, Any] = {"spec": {"replicas": 2}, "status": {}, "metadata": {}}
    assert run(source, fill={"context": {"output": live}}, fields=["isHealth", "message"]) == {
        "isHealth": False, "message": "Ready:0/2"}
    live["metadata"] = {"annotations": {"skip": "1"}}
    assert run(source, fill={"context": {"output": live}}, fields=["isHealth"]) == {
        "isHealth": True}


def test_numbers_out_of_range_are_errors() -> None:
    big = "1" + "0" * 300
    for source in (f"a: {big}.0 * {big}.0\n", f"a: {big} * {big} * {big} * {big} * {big}\n",
                   f"a: {big} * {big} * {big} * {big} / 3\n",
                   'import "math"\na: math.Pow(10, 400)\n'):
        with pytest.raises(CueError, match=r"^template: a: .*(range|large)"):
            run(source)
