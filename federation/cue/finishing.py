"""The last steps of gathering a vertex: patterns, closedness, disjunctions, kind, items."""

from __future__ import annotations

import json
from typing import Any

from federation.cue import syntax as s
from federation.cue.evaluator import Conjunct, Data, Env, Evaluator, Items, Vertex, path_text
from federation.cue.values import TOP, Atom, Bottom, Constraint, Top, describe, meet_scalars


def finish(ev: Evaluator, vertex: Vertex) -> None:
    if vertex.struct_disjs and vertex.err is None:
        decide_disjunction(ev, vertex)
        return
    if vertex.patterns and vertex.err is None:
        apply_patterns(ev, vertex)
    if vertex.closed and vertex.err is None:
        check_closed(ev, vertex)
    settle_kind(vertex)
    if vertex.reorder and len(vertex.arcs) > 1:
        vertex.arcs = dict(sorted(vertex.arcs.items(), key=lambda item: item[1].order))
    if vertex.kind == "list" and vertex.err is None:
        build_list(ev, vertex)
    if vertex.err is not None and not vertex.err.message.startswith(path_text(vertex.path)):
        where = path_text(vertex.path)
        vertex.err = Bottom(f"{where}: {vertex.err.message}", vertex.err.incomplete)


def settle_kind(vertex: Vertex) -> None:
    scalar = vertex.scalar
    has_scalar = not isinstance(scalar, Top)
    if vertex.list_sources:
        if vertex.kind == "struct" and vertex.arcs:
            vertex.err = vertex.err or Bottom("conflicting values (struct and list)")
        vertex.kind = "list"
    if vertex.kind in ("struct", "list") and has_scalar:
        if isinstance(scalar, Constraint) and vertex.kind in scalar.kinds:
            check_validators(vertex, scalar)
            return
        if vertex.embedded and vertex.kind == "struct" and not vertex.arcs:
            vertex.kind = "scalar"
            return
        vertex.err = vertex.err or Bottom(
            f"conflicting values ({vertex.kind} and {describe(scalar)})")
        return
    if vertex.kind == "top" and has_scalar:
        vertex.kind = "scalar"
    elif vertex.kind == "top" and vertex.saw_lit:
        vertex.kind = "struct"


def check_validators(vertex: Vertex, constraint: Constraint) -> None:
    """A validator builtin on a struct or list (``struct.MaxFields(3)``): counts regular
    fields or items (the struct is gathered, its fields not yet evaluated)."""
    if vertex.kind == "struct":
        entries: list[Any] = [n for n, a in vertex.arcs.items()
                              if a.regular and not n.startswith(("_", "#"))]
    else:
        entries = [object() for _ in vertex.list_sources]
    for op, operand in constraint.bounds:
        if op == "call" and not operand[1](entries):
            vertex.err = vertex.err or Bottom(f"invalid value: not satisfying {operand[0]}")
            return
        if op != "call":
            vertex.err = vertex.err or Bottom(f"invalid value: a {vertex.kind} with {op}")
            return


def label_matches(ev: Evaluator, pattern: s.Pattern, env: Env, name: str) -> bool:
    name = s.display(name)
    constraint = ev.eval(pattern.label, env)
    if isinstance(constraint, Vertex):
        return False
    return not isinstance(meet_scalars(Atom(name), constraint), Bottom)


def apply_patterns(ev: Evaluator, vertex: Vertex) -> None:
    for name, child in list(vertex.arcs.items()):
        if name.startswith(("_", "#")):
            continue
        for pattern, env, group in vertex.patterns:
            ev.meter.tick()
            if not label_matches(ev, pattern, env, name):
                continue
            if child.state != 0:
                vertex.err = Bottom(f"field {s.display(name)!r} used before its pattern applied")
                return
            scope = env if pattern.alias is None else Env(
                env, bindings={pattern.alias: Atom(s.display(name))})
            child.add(pattern.value, scope, None if group is None else (group, "[]"))


def check_closed(ev: Evaluator, vertex: Vertex) -> None:
    for allowed in vertex.closed.values():
        if allowed.open:
            continue
        for name in vertex.arcs:
            if name in allowed.labels or name.startswith(("_", "#")):
                continue
            if any(label_matches(ev, p, env, name) for p, env in allowed.patterns):
                continue
            vertex.err = Bottom(f"field {s.display(name)!r} not allowed (closed struct)")
            return


def decide_disjunction(ev: Evaluator, vertex: Vertex) -> None:
    """Tries each branch of the first disjunction of structs; one survivor (or default) wins."""
    ordinal, disj = vertex.struct_disjs[0]
    survivors: list[tuple[Vertex, bool]] = []
    for branch, mark in disj.branches:
        candidate = Vertex(vertex.path, vertex.is_def)
        candidate.regular = vertex.regular
        candidate.conjuncts = list(vertex.conjuncts)
        candidate.choices = {**vertex.choices, ordinal: branch}
        candidate = ev.gather(candidate)
        if candidate.err is None and deep_ok(ev, candidate, 0):
            survivors.append((candidate, mark))
    marked = [c for c, m in survivors if m]
    chosen = marked if marked else [c for c, _ in survivors]
    if len(chosen) > 1 and same_values(ev, chosen):
        chosen = chosen[:1]  # CUE drops a disjunct equal to another: ([] | [...]) & []
    if len(chosen) == 1:
        adopt(vertex, chosen[0])
    elif not chosen:
        vertex.err = Bottom(f"{path_text(vertex.path)}: no disjunct matches")
    else:
        vertex.err = Bottom(f"{path_text(vertex.path)}: ambiguous disjunction of structs",
                            incomplete=True)


def same_values(ev: Evaluator, candidates: list[Vertex]) -> bool:
    """Every candidate concrete and equal to the first (JSON text, so ``1`` is not
    ``true`` nor ``1.0``, as in CUE)."""
    from federation.cue.exporting import Incomplete, plain

    try:
        texts = {json.dumps(plain(ev, c), sort_keys=True) for c in candidates}
    except Incomplete:
        return False
    return len(texts) == 1


def adopt(vertex: Vertex, winner: Vertex) -> None:
    for slot in ("arcs", "closed", "err", "forward", "items", "kind", "list_sources", "reorder",
                 "patterns", "scalar", "sources", "saw_lit", "embedded"):
        setattr(vertex, slot, getattr(winner, slot))
    vertex.struct_disjs = []


def deep_ok(ev: Evaluator, vertex: Vertex, depth: int) -> bool:
    """No error anywhere below (a disjunct fails on any conflict, however deep)."""
    vertex = ev.gather(vertex)
    if vertex.err is not None and not vertex.err.incomplete:
        return False
    if depth > ev.meter.budget.depth:
        return False
    children = list(vertex.arcs.values()) if vertex.kind == "struct" else vertex.items
    for child in children:
        ev.meter.tick()
        if child.regular and not deep_ok(ev, child, depth + 1):
            return False
    return not isinstance(vertex.scalar, Bottom)


def list_elements(ev: Evaluator, vertex: Vertex,
                  source: Conjunct) -> tuple[list[Conjunct], Conjunct | None]:
    node = source.node
    group = None if source.group is None else (source.group, "[]")
    if isinstance(node, Data):
        return [Conjunct(Data(item), None, None) for item in node.value], None
    if isinstance(node, Items):
        return [Conjunct(item, None, None) for item in node.items], None
    assert isinstance(node, s.ListLit)
    elements: list[Conjunct] = []
    for elem in node.elems:
        if isinstance(elem, s.Comprehension):
            from federation.cue.gathering import comprehension_envs

            for env in comprehension_envs(ev, vertex, elem.clauses, 0, source.env):
                ev.meter.tick()
                elements.append(Conjunct(elem.body, env, group))
        else:
            elements.append(Conjunct(elem, source.env, group))
        ev.meter.items(len(elements))
    tail = None if node.tail is None else Conjunct(node.tail, source.env, group)
    return elements, tail


def build_list(ev: Evaluator, vertex: Vertex) -> None:
    parts = [list_elements(ev, vertex, source) for source in vertex.list_sources]
    if vertex.err is not None:
        return
    closed = {len(elements) for elements, tail in parts if tail is None}
    if len(closed) > 1:
        vertex.err = Bottom("conflicting list lengths")
        return
    length = closed.pop() if closed else max((len(e) for e, _ in parts), default=0)
    ev.meter.items(length)
    for elements, _ in parts:
        if len(elements) > length:
            vertex.err = Bottom("list longer than allowed (closed list)")
            return
    for index in range(length):
        item = Vertex((*vertex.path, index))
        item.regular = True
        for elements, tail in parts:
            chosen = elements[index] if index < len(elements) else tail
            if chosen is not None and not is_top(chosen.node):
                item.conjuncts.append(chosen)
        if not item.conjuncts:
            item.conjuncts.append(Conjunct(TOP, None, None))
        vertex.items.append(item)


def is_top(node: Any) -> bool:
    return isinstance(node, s.Ident) and node.name == "_"
