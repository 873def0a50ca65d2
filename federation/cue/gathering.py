"""Gathering one vertex: its conjuncts met into fields, list items and a scalar.

Two passes, so a comprehension or an embedding sees every statically declared field of
the struct it is in: first the literals and data (fields become child vertices, nothing
is evaluated), then the deferred work in order (expressions met in, embeddings,
comprehensions, dynamic labels), each of which may declare more. Then patterns apply to
the fields, closedness is checked, disjunctions of structs are decided and list items are
built.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from federation.cue import syntax as s
from federation.cue.evaluator import (
    Allowed,
    Conjunct,
    Data,
    Env,
    Evaluator,
    Items,
    Vertex,
    is_scalar,
    path_text,
)
from federation.cue.values import Atom, Bottom, Disj, describe, located, meet_scalars

Key = tuple[int, ...]


def gather(ev: Evaluator, vertex: Vertex) -> None:
    if try_forward(ev, vertex):
        return
    for index, conjunct in enumerate(vertex.conjuncts):
        add_conjunct(ev, vertex, conjunct, (index,))
    run_all_deferred(ev, vertex)
    finish(ev, vertex)


def run_all_deferred(ev: Evaluator, vertex: Vertex) -> None:
    """The deferred work in order, except that a comprehension whose clauses name a field
    another queued comprehension declares waits for it (CUE runs comprehensions to a
    fixpoint: ``if msg == ""`` must not read ``msg`` before a nested ``if`` queued earlier
    sets it, as the fluxcd addon's customStatus does); when every queued item waits, the
    first runs (no deadlock, the old order)."""
    names = _Names()
    waited = 0
    while vertex.deferred and vertex.err is None:
        item = vertex.deferred.popleft()
        kind, node, env, group, key = item
        if kind == "comprehension" and waited <= len(vertex.deferred) and \
                names.waits(ev, node, vertex.deferred):
            vertex.deferred.append(item)
            waited += 1
            continue
        waited = 0
        run_deferred(ev, vertex, kind, node, env, group, key)


class _Names:
    """What a comprehension reads (the identifiers of its clauses) and declares (the static
    labels of its body, nested comprehensions' included), each computed once per run."""

    def __init__(self) -> None:
        self.read: dict[int, frozenset[str]] = {}
        self.declared: dict[int, frozenset[str]] = {}

    def waits(self, ev: Evaluator, node: s.Comprehension, queue: Any) -> bool:
        reads = self._reads(ev, node)
        if not reads:
            return False
        for kind, other, *_ in queue:
            ev.meter.tick()
            if kind == "comprehension" and other is not node and \
                    reads & self._declares(ev, other):
                return True
        return False

    def _reads(self, ev: Evaluator, node: s.Comprehension) -> frozenset[str]:
        found = self.read.get(id(node))
        if found is None:
            found = frozenset(_identifiers(ev, node.clauses))
            self.read[id(node)] = found
        return found

    def _declares(self, ev: Evaluator, node: s.Comprehension) -> frozenset[str]:
        found = self.declared.get(id(node))
        if found is None:
            labels: set[str] = set()
            for decl in node.body.decls:
                ev.meter.tick()
                if isinstance(decl, s.Field) and decl.label.name is not None:
                    labels.add(decl.label.name)
                elif isinstance(decl, s.Comprehension):
                    labels |= self._declares(ev, decl)
            found = frozenset(labels)
            self.declared[id(node)] = found
        return found


def _identifiers(ev: Evaluator, nodes: Any) -> Iterator[str]:
    """The identifiers an expression names (a walk of its syntax, charged)."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        ev.meter.tick()
        if isinstance(node, s.Ident):
            yield node.name
        elif isinstance(node, s.Node | s.Label):
            stack.extend(v for f in dataclasses.fields(node)
                         if isinstance(v := getattr(node, f.name), s.Node | s.Label | tuple))
        elif isinstance(node, tuple):
            stack.extend(node)


def try_forward(ev: Evaluator, vertex: Vertex) -> bool:
    """A vertex whose one conjunct is a reference to a struct or list becomes that vertex."""
    if len(vertex.conjuncts) != 1 or vertex.is_def:
        return False
    conjunct = vertex.conjuncts[0]
    if not isinstance(conjunct.node, s.Ident | s.Select | s.Index):
        return False
    value = ev.eval(conjunct.node, conjunct.env)
    if isinstance(value, Vertex):
        target = value.target()
        if target is vertex or target.state == 1:
            vertex.err = Bottom(f"{path_text(vertex.path)}: reference cycle")
            return True
        target = ev.gather(target)
        if target.kind in ("struct", "list") and conjunct.group is None:
            vertex.forward = target
            return True
    vertex.deferred.append(("value", value, conjunct.env, conjunct.group, (0,)))
    run_all_deferred(ev, vertex)
    finish(ev, vertex)
    return True


def add_conjunct(ev: Evaluator, vertex: Vertex, conjunct: Conjunct, key: Key) -> None:
    """``key`` orders the fields it declares: by source position, as CUE exports them."""
    node, env, group = conjunct.node, conjunct.env, conjunct.group
    ev.meter.tick()
    if isinstance(node, s.StructLit):
        add_struct_lit(ev, vertex, node, env, group, key)
    elif isinstance(node, s.ListLit | Items):
        vertex.list_sources.append(conjunct)
    elif isinstance(node, Data):
        add_data(ev, vertex, conjunct, key)
    elif isinstance(node, s.Binary) and node.op == "&":
        add_conjunct(ev, vertex, Conjunct(node.left, env, group), (*key, 0))
        add_conjunct(ev, vertex, Conjunct(node.right, env, group), (*key, 1))
    elif isinstance(node, s.Lit):
        meet(vertex, Atom(node.value))
    elif isinstance(node, Vertex) or is_scalar(node):
        vertex.deferred.append(("value", node, env, group, key))
    else:
        vertex.deferred.append(("expr", node, env, group, key))


def add_struct_lit(ev: Evaluator, vertex: Vertex, lit: s.StructLit, env: Env | None,
                   group: Any, key: Key) -> None:
    ev.meter.tick(2 + len(lit.decls))  # the frame, the source and each declaration
    vertex.sources.append(Conjunct(lit, env, group))
    vertex.saw_lit = True
    frame = Env(env, lit, vertex)
    allowed = vertex.closed.setdefault(group, Allowed()) if group is not None else None
    for index, decl in enumerate(lit.decls):
        at = (*key, index)
        if isinstance(decl, s.Field) and decl.label.name is not None:
            add_field(vertex, decl.label.name, decl, frame, group, at)
            if allowed is not None:
                allowed.labels.add(decl.label.name)
        elif isinstance(decl, s.Field):
            vertex.deferred.append(("field", decl, frame, group, at))
        elif isinstance(decl, s.Pattern):
            vertex.patterns.append((decl, frame, group))
            if allowed is not None:
                allowed.patterns.append((decl, frame))
        elif isinstance(decl, s.Embed):
            vertex.deferred.append(("embed", decl.expr, frame, group, at))
        elif isinstance(decl, s.Comprehension):
            vertex.deferred.append(("comprehension", decl, frame, group, at))
        elif isinstance(decl, s.Ellipsis) and allowed is not None:
            allowed.open = True
    if not any(isinstance(d, s.Embed | s.Comprehension) for d in lit.decls) or any(
        isinstance(d, s.Field | s.Pattern | s.Ellipsis) for d in lit.decls
    ):
        vertex.kind = "struct" if vertex.kind == "top" else vertex.kind


def child_group(group: Any, vertex: Vertex, name: str) -> Any:
    if name.startswith("#"):
        return ("#", id(vertex), name)
    return None if group is None else (group, name)


def add_field(vertex: Vertex, name: str, decl: s.Field, frame: Env, group: Any,
              key: Key) -> None:
    child = vertex.arcs.get(name)
    if child is None:
        child = Vertex((*vertex.path, name), is_def=name.startswith("#"))
        vertex.arcs[name] = child
        child.order = key
    elif key < child.order:
        child.order = key
        vertex.reorder = True
    child.add(decl.value, frame, child_group(group, vertex, name))
    if decl.constraint != "?":
        child.regular = True
    if decl.constraint == "!":
        child.required = True
    for directive in decl.directives:
        if directive not in child.directives:
            child.directives.append(directive)


def add_data(ev: Evaluator, vertex: Vertex, conjunct: Conjunct, key: Key) -> None:
    data = conjunct.node.value
    if isinstance(data, dict):
        vertex.sources.append(conjunct)
        vertex.kind = "struct" if vertex.kind == "top" else vertex.kind
        vertex.saw_lit = True
        for index, (name, item) in enumerate(data.items()):
            ev.meter.tick()
            name = s.quoted_key(name)
            child = vertex.arcs.get(name)
            if child is None:
                child = Vertex((*vertex.path, name))
                vertex.arcs[name] = child
                child.order = (*key, index)
            child.add(Data(item), None, None)
            child.regular = True
    elif isinstance(data, list | tuple):
        vertex.list_sources.append(conjunct)
    else:
        meet(vertex, Atom(data))


def meet(vertex: Vertex, value: Any) -> None:
    result = meet_scalars(vertex.scalar, value)
    if isinstance(result, Bottom) and vertex.err is None:
        vertex.err = result
    vertex.scalar = result


def run_deferred(ev: Evaluator, vertex: Vertex, kind: str, node: Any, env: Env | None,
                 group: Any, key: Key) -> None:
    if kind == "comprehension":
        for n, body_env in enumerate(comprehension_envs(ev, vertex, node.clauses, 0, env)):
            add_struct_lit(ev, vertex, node.body, body_env, group, (*key, n))
        vertex.reorder = True
        return
    if kind == "field":
        add_dynamic_field(ev, vertex, node, env, group, key)
        vertex.reorder = True
        return
    value = node if kind == "value" else ev.eval(node, env)
    if kind == "embed" and not isinstance(value, Vertex):
        vertex.embedded = True
    add_value(ev, vertex, value, group if kind == "embed" else "keep", node, key)


def add_value(ev: Evaluator, vertex: Vertex, value: Any, group: Any, node: Any,
              key: Key) -> None:
    if isinstance(value, Vertex):
        merge_vertex(ev, vertex, value, group, key)
    elif isinstance(value, Disj) and any(isinstance(v, Vertex) for v, _ in value.branches):
        ordinal = vertex.disj_count
        vertex.disj_count += 1
        if ordinal in vertex.choices:
            add_value(ev, vertex, vertex.choices[ordinal], group, node, key)
        else:
            vertex.struct_disjs.append((ordinal, value))
    elif is_scalar(value):
        meet(vertex, value)
    else:
        where = getattr(node, "pos", "?")
        vertex.err = Bottom(f"{where}: a package or function used as a value")


def merge_vertex(ev: Evaluator, vertex: Vertex, other: Vertex, group: Any, key: Key) -> None:
    """``vertex & other``: other's sources join vertex (re-bound there) and so do its limits."""
    other = other.target()
    if other.state == 1:
        vertex.err = Bottom(f"{path_text(vertex.path)}: reference cycle")
        return
    for index, source in enumerate(other.conjuncts):
        kept = source.group if group == "keep" else group
        add_conjunct(ev, vertex, Conjunct(source.node, source.env, kept), (*key, index))
    vertex.reorder = True


def add_dynamic_field(ev: Evaluator, vertex: Vertex, decl: s.Field, env: Env | None,
                      group: Any, at: Key) -> None:
    assert decl.label.expr is not None
    label = ev.concrete(decl.label.expr, env)
    if isinstance(label, Bottom):
        vertex.err = Bottom(f"{decl.pos}: dynamic label: {label.message}", label.incomplete)
        return
    if not (isinstance(label, Atom) and isinstance(label.value, str)):
        vertex.err = Bottom(f"{decl.pos}: a dynamic label must be a string, not {describe(label)}")
        return
    key = s.quoted_key(label.value)
    if len(label.value) > 10_000:
        vertex.err = Bottom(f"{decl.pos}: dynamic label too long")
        return
    if vertex.arcs.get(key) is not None and vertex.arcs[key].state != 0:
        vertex.err = Bottom(f"{decl.pos}: field {label.value!r} declared after its use")
        return
    assert env is not None
    add_field(vertex, key, decl, env, group, at)
    if group is not None:
        vertex.closed.setdefault(group, Allowed()).labels.add(key)


def comprehension_envs(ev: Evaluator, vertex: Vertex, clauses: tuple[s.Node, ...], i: int,
                       env: Env | None) -> Iterator[Env | None]:
    if vertex.err is not None:
        return
    ev.meter.tick()
    if i == len(clauses):
        yield env
        return
    clause = clauses[i]
    if isinstance(clause, s.IfClause):
        cond = ev.concrete(clause.cond, env)
        if isinstance(cond, Atom) and isinstance(cond.value, bool):
            if cond.value:
                yield from comprehension_envs(ev, vertex, clauses, i + 1, env)
            return
        vertex.err = clause_error(clause, cond, "if needs a bool")
        return
    if isinstance(clause, s.LetClause):
        bound = Env(env, bindings={clause.name: ev.eval(clause.expr, env)})
        yield from comprehension_envs(ev, vertex, clauses, i + 1, bound)
        return
    assert isinstance(clause, s.ForClause)
    for key, item in iterate(ev, vertex, clause, env):
        names = {clause.value: item}
        if clause.key is not None:
            names[clause.key] = key
        yield from comprehension_envs(ev, vertex, clauses, i + 1, Env(env, bindings=names))


def clause_error(clause: s.Node, value: Any, need: str) -> Bottom:
    if isinstance(value, Bottom):
        return located(clause.pos, value)
    return Bottom(f"{clause.pos}: {need}, not {describe(value)}", incomplete=True)


def iterate(ev: Evaluator, vertex: Vertex, clause: s.ForClause,
            env: Env | None) -> Iterator[tuple[Atom, Any]]:
    source = ev.eval(clause.source, env)
    if isinstance(source, Vertex):
        source = ev.value(source)
    if isinstance(source, Vertex) and source.kind == "struct":
        for name, child in list(ev.fields(source)):
            ev.meter.tick()
            yield Atom(name), child
        return
    if isinstance(source, Vertex) and source.kind == "list":
        for index, item in enumerate(list(source.items)):
            ev.meter.tick()
            yield Atom(index), item
        return
    vertex.err = clause_error(clause, source, "for needs a struct or a list")


def finish(ev: Evaluator, vertex: Vertex) -> None:
    from federation.cue import finishing

    finishing.finish(ev, vertex)

