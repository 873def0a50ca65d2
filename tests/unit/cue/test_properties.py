"""Properties: unification of concrete JSON is commutative and idempotent, and parsing any
text ends in a template or a CueError, never another exception."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from federation.cue import Budget, CueError, evaluate_expression, export, parse

SCALARS = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text("abc", min_size=1, max_size=2), inner, max_size=3),
    max_leaves=10,
)
MEET = parse("out: a & b\n")


def meet(a: Any, b: Any) -> tuple[str, Any]:
    try:
        return "ok", export(MEET, {"a": a, "b": b}, ["out"]).values["out"]
    except CueError:
        return "error", None


@settings(max_examples=150, deadline=None)
@given(JSON, JSON)
def test_unification_is_commutative(a: Any, b: Any) -> None:
    assert meet(a, b) == meet(b, a)


@settings(max_examples=150, deadline=None)
@given(JSON)
def test_unification_is_idempotent_on_concrete_json(a: Any) -> None:
    assert meet(a, a) == ("ok", a)


@settings(max_examples=150, deadline=None)
@given(JSON)
def test_json_is_cue_and_exports_unchanged(a: Any) -> None:
    template = parse(f"out: {json.dumps(a, ensure_ascii=False)}\n")
    assert export(template, {}, ["out"]).values == {"out": a}


ALPHABET = st.sampled_from([*'abc:{}[]()"\\#_|*&!=<>~.,\n\t 0123456789+-/@?$\'',
                            "for", "if", "let", "in", "import", "_|_", '"""', "\\(", "..."])


@settings(max_examples=400, deadline=None)
@given(st.lists(ALPHABET, max_size=40).map("".join))
def test_parse_never_raises_anything_but_cue_error(text: str) -> None:
    try:
        template = parse(text)
    except CueError:
        return
    with contextlib.suppress(CueError):
        export(template, {}, ["a", "b"], Budget(steps=20_000))


@settings(max_examples=200, deadline=None)
@given(st.lists(ALPHABET, max_size=30).map("".join))
def test_expressions_never_raise_anything_but_cue_error(text: str) -> None:
    with contextlib.suppress(CueError):
        evaluate_expression(text, {"a": {"b": [1, "x"]}}, Budget(steps=20_000))
