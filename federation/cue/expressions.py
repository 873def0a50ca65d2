"""Evaluating expressions: references, selectors, operators, calls, literals."""

from __future__ import annotations

from typing import Any

from federation.cue import builtins as bi
from federation.cue import syntax as s
from federation.cue.evaluator import Conjunct, Env, Evaluator, Vertex
from federation.cue.values import (
    TOP,
    Atom,
    Bottom,
    Constraint,
    Disj,
    Top,
    bound,
    describe,
    disjunction,
    kind_of,
    located,
    meet_scalars,
)

COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})


def evaluate(ev: Evaluator, node: Any, env: Env | None) -> Any:
    handler = HANDLERS.get(type(node))
    if handler is None:
        if isinstance(node, (Vertex, Atom | Constraint | Disj | Top | Bottom)):
            return node
        raise AssertionError(f"cannot evaluate {type(node).__name__}")  # our bug, not input
    return handler(ev, node, env)


def eval_lit(ev: Evaluator, node: s.Lit, env: Env | None) -> Any:
    return Atom(node.value)


def eval_ident(ev: Evaluator, node: s.Ident, env: Env | None) -> Any:
    if node.name == "_":
        return TOP
    value = ev.lookup(node.name, env, node.pos)
    if isinstance(value, Bottom):
        return located(node.pos, value)
    return value


def eval_bottom(ev: Evaluator, node: s.BottomLit, env: Env | None) -> Any:
    return Bottom(f"{node.pos}: explicit error (_|_)")


def eval_select(ev: Evaluator, node: s.Select, env: Env | None) -> Any:
    target = ev.eval(node.target, env)
    if isinstance(target, bi.Package):
        return target.member(node.name, node.pos)
    return select(ev, target, node.name, node.pos)


def select(ev: Evaluator, target: Any, name: str, pos: str) -> Any:
    if isinstance(target, Bottom):
        return target
    if isinstance(target, Vertex):
        found = ev.arc(target, name)
        if isinstance(found, Bottom):
            return located(pos, found)
        return found
    if isinstance(target, Top | Constraint | Disj):
        return Bottom(f"{pos}: field {s.display(name)!r} selected from a non-concrete value", True)
    return Bottom(f"{pos}: field {s.display(name)!r} selected from {describe(target)}")


def eval_index(ev: Evaluator, node: s.Index, env: Env | None) -> Any:
    target = ev.eval(node.target, env)
    index = ev.concrete(node.index, env)
    if isinstance(index, Bottom):
        return index
    if isinstance(target, Vertex):
        target = ev.gather(target)
        if isinstance(index, Atom) and isinstance(index.value, str):
            return select(ev, target, s.quoted_key(index.value), node.pos)
        if target.kind == "list" and isinstance(index, Atom) and kind_of(index.value) == "int":
            if 0 <= index.value < len(target.items):
                return target.items[index.value]
            return Bottom(f"{node.pos}: index out of range", incomplete=True)
    if isinstance(target, Bottom):
        return target
    return Bottom(f"{node.pos}: invalid index ({describe(index)} of {describe(target)})")


def eval_call(ev: Evaluator, node: s.Call, env: Env | None) -> Any:
    func = ev.eval(node.func, env)
    if isinstance(func, Bottom):
        return func
    if not isinstance(func, bi.Builtin):
        return Bottom(f"{node.pos}: cannot call {describe(func)}")
    args = [ev.eval(arg, env) for arg in node.args]
    return func.call(ev, args, node.pos)


def eval_unary(ev: Evaluator, node: s.Unary, env: Env | None) -> Any:
    operand = ev.concrete(node.operand, env)
    if isinstance(operand, Bottom):
        return operand
    if not isinstance(operand, Atom):
        return Bottom(f"{node.pos}: {node.op} needs a concrete value, not {describe(operand)}",
                      incomplete=True)
    value = operand.value
    kind = operand.kind
    if node.op == "!" and kind == "bool":
        return Atom(not value)
    if node.op in ("-", "+") and kind in ("int", "float"):
        return Atom(-value if node.op == "-" else value)
    if node.op in ("<", "<=", ">", ">=", "!=", "=~", "!~", "=="):
        result = bound(node.op, value)
        if isinstance(result, Bottom):
            return Bottom(f"{node.pos}: {result.message}")
        return result
    return Bottom(f"{node.pos}: invalid operand {kind} of unary {node.op}")


def eval_disjunction(ev: Evaluator, node: s.Disjunction, env: Env | None) -> Any:
    branches: list[tuple[Any, bool]] = []
    for branch, mark in node.branches:
        value = ev.eval(branch, env)
        if isinstance(value, Vertex):
            value = ev.value(value)
        if isinstance(value, Disj):
            branches.extend((v, m and mark if mark else m) for v, m in value.branches)
        else:
            branches.append((value, mark))
    return disjunction(branches, Bottom(f"{node.pos}: every disjunct is an error"))


def eval_struct(ev: Evaluator, node: s.StructLit, env: Env | None) -> Any:
    return ev.anonymous(node, env)


def eval_list(ev: Evaluator, node: s.ListLit, env: Env | None) -> Any:
    return ev.anonymous(node, env)


def eval_interp(ev: Evaluator, node: s.Interp, env: Env | None) -> Any:
    out: list[str] = []
    size = 0
    for part in node.parts:
        if isinstance(part, str):
            out.append(part)
            size += len(part)
            continue
        value = ev.concrete(part, env)
        text = interpolated_text(value)
        if isinstance(text, Bottom):
            return located(part.pos, text)
        out.append(text)
        size += len(text)
        ev.meter.size(size)
    joined = "".join(out)
    return Atom(joined.encode("utf-8", "surrogatepass") if node.is_bytes else joined)


def interpolated_text(value: Any) -> str | Bottom:
    if isinstance(value, Bottom):
        return value
    if not isinstance(value, Atom):
        return Bottom(f"interpolation of a non-concrete value ({describe(value)})", True)
    kind = value.kind
    if kind == "string":
        return str(value.value)
    if kind == "bytes":
        return bytes(value.value).decode("utf-8", "replace")
    if kind == "bool":
        return "true" if value.value else "false"
    if kind in ("int", "float"):
        return bi.number_text(value.value)
    return Bottom(f"interpolation of {kind}")


def eval_binary(ev: Evaluator, node: s.Binary, env: Env | None) -> Any:
    op = node.op
    if op == "&":
        return meet_values(ev, ev.eval(node.left, env), ev.eval(node.right, env), node)
    if op in ("==", "!=") and (isinstance(node.left, s.BottomLit) or
                               isinstance(node.right, s.BottomLit)):
        other = node.right if isinstance(node.left, s.BottomLit) else node.left
        failed = is_error(ev, other, env)
        return Atom(failed if op == "==" else not failed)
    if op in ("&&", "||"):
        return logical(ev, node, env)
    left = ev.concrete(node.left, env)
    right = ev.concrete(node.right, env)
    from federation.cue import arithmetic

    return arithmetic.binary(ev, op, left, right, node.pos)


def is_error(ev: Evaluator, node: s.Node, env: Env | None) -> bool:
    """``x == _|_``: x is missing or an error (a non-concrete value is not an error)."""
    value = ev.eval(node, env)
    if isinstance(value, Vertex):
        value = ev.value(value)
    return isinstance(value, Bottom)


def logical(ev: Evaluator, node: s.Binary, env: Env | None) -> Any:
    left = ev.concrete(node.left, env)
    if not (isinstance(left, Atom) and left.kind == "bool"):
        return operand_error(node, left)
    if node.op == "&&" and not left.value:
        return Atom(False)
    if node.op == "||" and left.value:
        return Atom(True)
    right = ev.concrete(node.right, env)
    if not (isinstance(right, Atom) and right.kind == "bool"):
        return operand_error(node, right)
    return right


def operand_error(node: s.Binary, value: Any) -> Bottom:
    if isinstance(value, Bottom):
        return value
    return Bottom(f"{node.pos}: {node.op} needs bools, not {describe(value)}",
                  incomplete=not isinstance(value, Atom))


def meet_values(ev: Evaluator, left: Any, right: Any, node: s.Node) -> Any:
    if not isinstance(left, Vertex) and not isinstance(right, Vertex) and not (
        has_vertex(left) or has_vertex(right)
    ):
        result = meet_scalars(left, right)
        if isinstance(result, Bottom):
            return located(node.pos, result)
        return result
    vertex = Vertex(("(" + node.pos + ")",))
    vertex.regular = True
    vertex.conjuncts = [Conjunct(left, None, None), Conjunct(right, None, None)]
    return ev.gather(vertex)


def has_vertex(value: Any) -> bool:
    return isinstance(value, Disj) and any(isinstance(v, Vertex) for v, _ in value.branches)


HANDLERS: dict[type, Any] = {
    s.Lit: eval_lit,
    s.Ident: eval_ident,
    s.BottomLit: eval_bottom,
    s.Select: eval_select,
    s.Index: eval_index,
    s.Call: eval_call,
    s.Unary: eval_unary,
    s.Binary: eval_binary,
    s.Disjunction: eval_disjunction,
    s.StructLit: eval_struct,
    s.ListLit: eval_list,
    s.Interp: eval_interp,
}
