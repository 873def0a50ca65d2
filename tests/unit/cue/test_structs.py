"""Structs: field kinds, patterns, definitions, closedness, let, embedding."""

from __future__ import annotations

from typing import Any

import pytest

from federation.cue import CueError
from tests.unit.cue.helpers import run


def test_optional_fields_are_not_exported_unless_set() -> None:
    source = "a: {x?: int, y: 1}\nb: {x?: int} & {x: 2}\n"
    assert run(source) == {"a": {"y": 1}, "b": {"x": 2}}


def test_required_fields_must_be_given() -> None:
    assert run("a: {x!: int} & {x: 3}\n") == {"a": {"x": 3}}
    with pytest.raises(CueError, match=r"a\.x"):
        run("a: {x!: int}\n")


def test_definitions_hidden_fields_and_lets_are_not_exported() -> None:
    source = "#D: {a: 1}\n_h: 2\nlet L = 3\nx: #D.a + _h + L\n"
    assert run(source, fields=["#D", "_h", "x"]) == {"x": 6}


def test_dynamic_labels_and_interpolated_labels() -> None:
    source = 'k: "key"\nm: {(k): 1, "\\(k)-2": 2}\n'
    assert run(source) == {"k": "key", "m": {"key": 1, "key-2": 2}}


def test_pattern_constraints_apply_to_every_matching_field() -> None:
    source = 'a: {[string]: {kind: "x"}}\na: {p: {}, q: {n: 1}}\n'
    assert run(source) == {"a": {"p": {"kind": "x"}, "q": {"kind": "x", "n": 1}}}
    source = 'b: {[=~"^n"]: int, [Name=_]: {id: Name}}\n'
    with pytest.raises(CueError, match=r"b\.name"):
        run(source, fill={"b": {"name": "not an int"}})


def test_pattern_with_alias_names_the_field() -> None:
    assert run("a: {[N=string]: {id: N}}\na: x: {}\n") == {"a": {"x": {"id": "x"}}}


def test_a_definition_is_closed_and_refuses_unknown_fields() -> None:
    source = "#P: {port: int, name?: string}\nok: #P & {port: 1}\n"
    assert run(source, fields=["ok"]) == {"ok": {"port": 1}}
    with pytest.raises(CueError, match="'extra' not allowed"):
        run(source + "bad: #P & {port: 1, extra: 2}\n", fields=["bad"])


def test_a_definition_is_closed_recursively_and_ellipsis_opens_it() -> None:
    source = "#P: {meta: {name: string}, labels: {...}}\n"
    ok = source + 'x: #P & {meta: name: "n", labels: any: "y"}\n'
    assert run(ok, fields=["x"]) == {"x": {"meta": {"name": "n"}, "labels": {"any": "y"}}}
    with pytest.raises(CueError, match="'other' not allowed"):
        run(source + 'y: #P & {meta: {name: "n", other: 1}, labels: {}}\n', fields=["y"])


def test_close_closes_a_struct() -> None:
    with pytest.raises(CueError, match="'b' not allowed"):
        run("a: close({a: int}) & {a: 1, b: 2}\n")


def test_embedding_merges_a_struct_and_a_scalar_embedding_is_the_value() -> None:
    source = "base: {a: 1}\nx: {base, b: 2}\ny: {if true {3}}\nz: {if false {3}}\n"
    assert run(source) == {"base": {"a": 1}, "x": {"a": 1, "b": 2}, "y": 3, "z": {}}


def test_references_resolve_lexically_including_fields_declared_later() -> None:
    source = "a: b + 1\nb: c.d\nc: {d: 2, e: d * 10}\nout: {a: 0, inner: a}\n"
    assert run(source) == {"a": 3, "b": 2, "c": {"d": 2, "e": 20}, "out": {"a": 0, "inner": 0}}


def test_a_definition_referenced_twice_is_rebound_in_each_place() -> None:
    source = "#P: {a: int, b: a + 1}\nx: #P & {a: 1}\ny: #P & {a: 10}\n"
    assert run(source, fields=["x", "y"]) == {"x": {"a": 1, "b": 2}, "y": {"a": 10, "b": 11}}


def test_lattice_meet_of_schema_fill_and_defaults() -> None:
    """A value is the meet of all its declarations, from the template and from the fill."""
    source = 'parameter: {image: string, replicas: *1 | int, policy: *"Always" | "Never"}\n'
    fill = {"parameter": {"image": "nginx", "policy": "Never"}}
    assert run(source, fill=fill) == {
        "parameter": {"image": "nginx", "replicas": 1, "policy": "Never"}}


def test_quoted_labels_and_data_keys_that_look_hidden_are_regular_fields() -> None:
    """``"_x"`` and ``"#x"`` are fields in CUE, distinct from the identifiers ``_x``, ``#x``."""
    source = 'out: {for k, v in parameter {(k): v}}\na: {"_q": 1, "#d": 2, _h: 3}\nb: a["_q"]\n'
    assert run(source, fill={"parameter": {"_x": "1", "#y": "2"}}, fields=["out", "a", "b"]) == {
        "out": {"_x": "1", "#y": "2"}, "a": {"_q": 1, "#d": 2}, "b": 1}


def test_a_fill_cannot_reach_a_hidden_field_or_a_definition_of_the_template() -> None:
    source = ('parameter: {_fixed: "template", #D: {a: 1}}\n'
              "out: [parameter._fixed, parameter.#D.a]\n")
    assert run(source, fill={"parameter": {"_fixed": "tenant", "#D": {"a": 2}}},
               fields=["out"]) == {"out": ["template", 1]}


@pytest.mark.parametrize(("source", "expected"), [
    # the zookeeper-operator addon's `containers: [] | [...]`, filled with []
    ("p: {c: [] | [...]}\np: c: []\nx: p.c", []),
    ("x: [] | [...]", []),
    ("x: [1] | [1, ...]", [1]),
    ("x: {a: 1} | {a: int}\nx: a: 1", {"a": 1}),
])
def test_disjuncts_that_end_equal_are_one_value_as_in_cue(source: str, expected: Any) -> None:
    """CUE (v0.4.3, the oracle) drops a disjunct equal to another instead of calling the
    disjunction ambiguous."""
    assert run(source, fields=["x"]) == {"x": expected}


def test_disjuncts_that_differ_stay_ambiguous() -> None:
    with pytest.raises(CueError, match="ambiguous disjunction"):
        run("x: {a: 1} | {b: 1}", fields=["x"])
    with pytest.raises(CueError, match="ambiguous disjunction"):
        run("x: {a: 1} | {a: true}", fields=["x"])


def test_a_condition_waits_for_a_nested_comprehension_that_sets_its_field() -> None:
    """CUE runs comprehensions to a fixpoint: ``if msg != ""`` reads ``msg`` after the
    nested ``if`` queued before it set it (the fluxcd addon's customStatus), and a nested
    condition still sees a field a later comprehension sets."""
    source = ('msg: *"" | string\nif true {\n  st: {ok: true}\n  if st.ok { msg: "ready" }\n}\n'
              'if msg == "" { out: "waiting" }\nif msg != "" { out: msg }\n')
    assert run(source, fields=["out"]) == {"out": "ready"}
    source = "x: *0 | int\nif true { if x == 1 { y: 2 } }\nif true { x: 1 }\n"
    assert run(source, fields=["x", "y"]) == {"x": 1, "y": 2}
