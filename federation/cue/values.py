"""Scalar values of the CUE lattice and their meet (``&``).

A scalar is ``TOP`` (``_``), a :class:`Bottom` (an error), an :class:`Atom` (a concrete
null, bool, int, float, string or bytes), a :class:`Constraint` (a set of kinds narrowed by
bounds: ``int``, ``>=0``, ``=~"re"``, ``string & !=""``) or a :class:`Disj` (a disjunction
with default marks). Structs and lists are vertices (:mod:`federation.cue.evaluator`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from federation.cue import regex

SCALAR_KINDS = frozenset({"null", "bool", "int", "float", "string", "bytes"})
ALL_KINDS = SCALAR_KINDS | {"struct", "list"}


class Top:
    __slots__ = ()

    def __repr__(self) -> str:
        return "_"


TOP = Top()


@dataclass(frozen=True)
class Bottom:
    """An error value; ``incomplete`` when more data could resolve it (a missing field)."""

    message: str
    incomplete: bool = False


@dataclass(frozen=True)
class Atom:
    value: Any  # None, bool, int, float, str, bytes

    @property
    def kind(self) -> str:
        return kind_of(self.value)


@dataclass(frozen=True)
class Constraint:
    kinds: frozenset[str]
    bounds: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Disj:
    branches: tuple[tuple[Any, bool], ...]  # (value, is default); values may be vertices

    @property
    def has_default(self) -> bool:
        return any(mark for _, mark in self.branches)


POSITION = re.compile(r"(^|\s)\d+:\d+: ")


def located(pos: str, error: Bottom) -> Bottom:
    """The error with the position it arose at (the innermost one is kept)."""
    if POSITION.search(error.message):
        return error
    return Bottom(f"{pos}: {error.message}", error.incomplete)


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    return "bytes"


TYPES: dict[str, Constraint] = {
    "int": Constraint(frozenset({"int"})),
    "float": Constraint(frozenset({"float"})),
    "number": Constraint(frozenset({"int", "float"})),
    "string": Constraint(frozenset({"string"})),
    "bytes": Constraint(frozenset({"bytes"})),
    "bool": Constraint(frozenset({"bool"})),
    "null": Constraint(frozenset({"null"})),
}

BOUND_KINDS = {
    "<": frozenset({"int", "float", "string", "bytes"}),
    "<=": frozenset({"int", "float", "string", "bytes"}),
    ">": frozenset({"int", "float", "string", "bytes"}),
    ">=": frozenset({"int", "float", "string", "bytes"}),
    "=~": frozenset({"string", "bytes"}),
    "!~": frozenset({"string", "bytes"}),
    "!=": ALL_KINDS,
}


def describe(value: Any) -> str:
    """A value's kind for an error message (never the value itself: it may be tenant data)."""
    if isinstance(value, Atom):
        return value.kind
    if isinstance(value, Constraint):
        return "|".join(sorted(value.kinds)) if value.kinds != ALL_KINDS else "_"
    if isinstance(value, Disj):
        return "a disjunction"
    if isinstance(value, Top):
        return "_"
    if isinstance(value, Bottom):
        return "_|_"
    return getattr(value, "kind_name", "a value")


def bound(op: str, operand: Any) -> Constraint | Bottom:
    """A unary comparison (``>=0``, ``=~"re"``) as a constraint."""
    if op == "==":
        return Constraint(frozenset({kind_of(operand)}), (("==", operand),))
    kinds = BOUND_KINDS[op]
    if op in ("=~", "!~"):
        if not isinstance(operand, str):
            return Bottom(f"{op} needs a string pattern")
        regex.compile_re2(operand)
    elif op != "!=" and kind_of(operand) not in kinds:
        return Bottom(f"{op} needs a number or a string")
    if op in ("<", "<=", ">", ">=") and kind_of(operand) in ("int", "float"):
        kinds = frozenset({"int", "float"})
    elif op in ("<", "<=", ">", ">="):
        kinds = frozenset({kind_of(operand)})
    return Constraint(kinds, ((op, operand),))


def check_bound(op: str, operand: Any, value: Any) -> bool:
    if op == "call":  # a validator builtin (strings.MaxRunes(63)): (name, predicate)
        return bool(operand[1](value))
    if op == "!=":
        return bool(value != operand or kind_of(value) != kind_of(operand))
    if op == "==":
        return bool(value == operand)
    if op in ("=~", "!~"):
        matched = regex.search(operand, value)
        return matched if op == "=~" else not matched
    try:
        if op == "<":
            return bool(value < operand)
        if op == "<=":
            return bool(value <= operand)
        if op == ">":
            return bool(value > operand)
        return bool(value >= operand)
    except TypeError:
        return False


def meet_scalars(a: Any, b: Any) -> Any:
    """``a & b`` for two non-struct values."""
    if isinstance(a, Bottom):
        return a
    if isinstance(b, Bottom):
        return b
    if isinstance(a, Top):
        return b
    if isinstance(b, Top):
        return a
    if isinstance(a, Disj) or isinstance(b, Disj):
        return meet_disjunctions(a, b)
    if not isinstance(a, Atom | Constraint) or not isinstance(b, Atom | Constraint):
        return conflict(a, b)
    if isinstance(a, Atom) and isinstance(b, Atom):
        if a.kind == b.kind and a.value == b.value:
            return a
        return conflict(a, b)
    if isinstance(a, Atom):
        assert isinstance(b, Constraint)
        return atom_in(a, b)
    if isinstance(b, Atom):
        assert isinstance(a, Constraint)
        return atom_in(b, a)
    kinds = a.kinds & b.kinds
    if not kinds:
        return conflict(a, b)
    bounds = a.bounds + tuple(x for x in b.bounds if x not in a.bounds)
    return Constraint(kinds, bounds)


def conflict(a: Any, b: Any) -> Bottom:
    if isinstance(a, Atom) and isinstance(b, Atom) and a.kind == b.kind:
        return Bottom(f"conflicting values (two different {a.kind}s)")
    return Bottom(f"conflicting values ({describe(a)} and {describe(b)})")


def atom_in(atom: Atom, constraint: Constraint) -> Atom | Bottom:
    if atom.kind not in constraint.kinds:
        return Bottom(f"conflicting values ({atom.kind} and {describe(constraint)})")
    for op, operand in constraint.bounds:
        if not check_bound(op, operand, atom.value):
            text = operand[0] if op == "call" else f"{op}{operand_text(operand)}"
            return Bottom(f"invalid value: a {atom.kind} not satisfying {text}")
    return atom


def operand_text(operand: Any) -> str:
    """A bound's operand comes from the template (admin text), never from a parameter."""
    return repr(operand) if isinstance(operand, str) else str(operand)


def meet_disjunctions(a: Any, b: Any) -> Any:
    """CUE's rule: values and defaults meet separately, ``<v1,d1> & <v2,d2> = <v1&v2, d1&d2>``."""
    left = a.branches if isinstance(a, Disj) else ((a, False),)
    right = b.branches if isinstance(b, Disj) else ((b, False),)
    left_marked = any(m for _, m in left)
    right_marked = any(m for _, m in right)
    out: list[tuple[Any, bool]] = []
    for va, ma in left:
        for vb, mb in right:
            value = meet_scalars(va, vb)
            if isinstance(value, Bottom):
                continue
            mark = (ma or not left_marked) and (mb or not right_marked)
            out.append((value, mark))
    return disjunction(out, first_error=Bottom("no disjunct matches (conflicting values)"))


def disjunction(branches: list[tuple[Any, bool]], first_error: Bottom) -> Any:
    """Normalized: errors dropped, equal atoms merged, marks kept only when some are unmarked."""
    merged: list[tuple[Any, bool]] = []
    for value, mark in branches:
        if isinstance(value, Bottom):
            continue
        for k, (seen, seen_mark) in enumerate(merged):
            if isinstance(seen, Atom) and seen == value and seen.kind == getattr(value, "kind", ""):
                merged[k] = (seen, seen_mark or mark)
                break
        else:
            merged.append((value, mark))
    if not merged:
        return first_error
    if all(mark for _, mark in merged):
        merged = [(v, False) for v, _ in merged]
    if len(merged) == 1:
        return merged[0][0]
    return Disj(tuple(merged))


def default_of(value: Any) -> Any:
    """The value a disjunction stands for where a concrete value is needed."""
    if not isinstance(value, Disj):
        return value
    marked = [v for v, m in value.branches if m]
    if len(marked) == 1:
        return marked[0]
    if not marked:
        return value
    return Disj(tuple((v, False) for v in marked))
