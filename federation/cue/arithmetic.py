"""Binary operators on concrete values: arithmetic, concatenation, comparison, matching."""

from __future__ import annotations

import math
from typing import Any

from federation.cue import regex
from federation.cue.evaluator import Evaluator, Vertex
from federation.cue.values import Atom, Bottom, describe, kind_of

NUMBERS = ("int", "float")


def binary(ev: Evaluator, op: str, left: Any, right: Any, pos: str) -> Any:
    for side in (left, right):
        if isinstance(side, Bottom):
            return side
    if isinstance(left, Vertex) or isinstance(right, Vertex):
        return composite(ev, op, left, right, pos)
    if not isinstance(left, Atom) or not isinstance(right, Atom):
        other = left if not isinstance(left, Atom) else right
        return Bottom(f"{pos}: {op} needs concrete values, not {describe(other)}", True)
    a, b = left.value, right.value
    ka, kb = left.kind, right.kind
    if op in ("==", "!="):
        same = equal_atoms(left, right)
        return Atom(same if op == "==" else not same)
    if op in ("=~", "!~"):
        if ka != "string" or kb != "string":
            return Bottom(f"{pos}: {op} needs strings")
        ev.meter.size(len(a))
        matched = regex.search(b, a)
        return Atom(matched if op == "=~" else not matched)
    if op in ("<", "<=", ">", ">="):
        return compare(op, left, right, pos)
    if ka in NUMBERS and kb in NUMBERS:
        return numeric(op, a, b, ka == kb == "int", pos)
    return concatenate(ev, op, left, right, pos)


def equal_atoms(left: Atom, right: Atom) -> bool:
    ka, kb = left.kind, right.kind
    if ka in NUMBERS and kb in NUMBERS:
        return bool(left.value == right.value)
    return ka == kb and bool(left.value == right.value)


def compare(op: str, left: Atom, right: Atom, pos: str) -> Any:
    a, b = left.value, right.value
    comparable = (left.kind in NUMBERS and right.kind in NUMBERS) or (
        left.kind == right.kind and left.kind in ("string", "bytes"))
    if not comparable:
        return Bottom(f"{pos}: cannot compare {left.kind} and {right.kind}")
    result = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    return Atom(bool(result))


def numeric(op: str, a: Any, b: Any, ints: bool, pos: str) -> Any:
    try:
        result = arithmetic(op, a, b, ints)
    except OverflowError:
        return Bottom(f"{pos}: number out of range")
    except ZeroDivisionError:
        return Bottom(f"{pos}: division by zero")
    if result is None:
        return Bottom(f"{pos}: invalid operator {op} on numbers")
    if isinstance(result, float) and not math.isfinite(result):
        return Bottom(f"{pos}: number out of range")
    if isinstance(result, int) and result.bit_length() > 4096:
        return Bottom(f"{pos}: integer too large")
    return Atom(result)


def arithmetic(op: str, a: Any, b: Any, ints: bool) -> Any:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        if ints and (abs(a).bit_length() + abs(b).bit_length()) > 4096:
            raise OverflowError
        return a * b
    if op == "/":
        return float(a) / float(b)
    return None


def concatenate(ev: Evaluator, op: str, left: Atom, right: Atom, pos: str) -> Any:
    a, b = left.value, right.value
    ka, kb = left.kind, right.kind
    if op == "+" and ka == kb and ka in ("string", "bytes"):
        ev.meter.size(len(a) + len(b))
        return Atom(a + b)
    if op == "*" and {ka, kb} in ({"string", "int"}, {"bytes", "int"}):
        text, count = (a, b) if ka != "int" else (b, a)
        if count < 0:
            return Bottom(f"{pos}: negative repetition count")
        ev.meter.size(len(text) * count)
        return Atom(text * count)
    return Bottom(f"{pos}: invalid operands {ka} and {kb} of {op}")


def composite(ev: Evaluator, op: str, left: Any, right: Any, pos: str) -> Any:
    """Lists: ``+`` concatenates, ``*`` repeats, ``==`` compares; structs: ``==``."""
    from federation.cue import exporting

    if op in ("==", "!="):
        try:
            same = exporting.plain(ev, left) == exporting.plain(ev, right)
        except exporting.Incomplete as err:
            return Bottom(f"{pos}: {err}", incomplete=True)
        return Atom(same if op == "==" else not same)
    if isinstance(left, Vertex) and left.kind == "list":
        return list_arithmetic(ev, op, left, right, pos)
    return Bottom(f"{pos}: invalid operands {describe(left)} and {describe(right)} of {op}")


def list_arithmetic(ev: Evaluator, op: str, left: Vertex, right: Any, pos: str) -> Any:
    from federation.cue.builtins import make_list

    if op == "+" and isinstance(right, Vertex) and right.kind == "list":
        ev.meter.items(len(left.items) + len(right.items))
        return make_list(ev, [*left.items, *right.items])
    if op == "*" and isinstance(right, Atom) and kind_of(right.value) == "int":
        ev.meter.items(len(left.items) * max(right.value, 0))
        return make_list(ev, left.items * max(right.value, 0))
    return Bottom(f"{pos}: invalid operands of {op} on a list")
