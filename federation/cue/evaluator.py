"""The CUE evaluator: vertices gather conjuncts, unify them, and answer lazily.

A :class:`Vertex` is one node of the value graph (a field, a list element, the result of
an expression). It holds its *conjuncts*: every expression declared for it, each with the
lexical environment it was written in, wherever it was declared (the template's schema, a
user's fill, a default). Gathering a vertex (on first use) walks its struct and list
literals: fields become child vertices (not yet evaluated), comprehensions run once the
static fields are known, other expressions are evaluated and met (``&``) into one scalar.
Children are evaluated only when asked for, so a reference to a field declared later,
or a condition on a sibling field, just works; a vertex asked for its own value while it
is being gathered is a reference cycle, an error.

A reference to a struct adds the struct's *sources* (its literals with their environments)
to the referring vertex, so the referenced fields are re-bound there, as CUE does:
``#P: {a: int, b: a + 1}``, ``x: #P & {a: 2}`` gives ``x.b == 3``. A vertex with a single
reference as its only conjunct forwards to the referenced vertex instead (no copy).

Closedness: conjuncts carry a *group*; literals written inside a definition (``#X``) or
``close()`` belong to a closed group, and a field of a vertex must be allowed by every
closed group that contributed to it. Every step is charged to the :class:`Meter`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from federation.cue import builtins as bi
from federation.cue import syntax as s
from federation.cue.errors import CueError, Meter
from federation.cue.values import (
    TOP,
    TYPES,
    Atom,
    Bottom,
    Constraint,
    Disj,
    Top,
    default_of,
)

NEW, GATHERING, DONE = 0, 1, 2
OPEN = None


class Data:
    """JSON data given as a conjunct (a fill): plain values, no environment."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class Items:
    """List items already built (a builtin's or an operator's result), as a list conjunct."""

    __slots__ = ("items",)

    def __init__(self, items: list[Vertex]) -> None:
        self.items = items


class Conjunct:
    __slots__ = ("env", "group", "node")

    def __init__(self, node: Any, env: Env | None, group: Any) -> None:
        self.node = node  # a syntax node, Data, or an evaluated scalar
        self.env = env
        self.group = group  # None: open; else the closed group it belongs to


class Env:
    """One lexical frame: a struct literal's fields (in ``vertex``) or clause bindings."""

    __slots__ = ("bindings", "cache", "lit", "names", "parent", "vertex")

    def __init__(self, parent: Env | None, lit: s.StructLit | None = None,
                 vertex: Vertex | None = None, bindings: dict[str, Any] | None = None,
                 names: frozenset[str] | None = None) -> None:
        self.parent = parent
        self.lit = lit
        self.vertex = vertex
        self.bindings = bindings
        self.names = names if names is not None else (lit.names if lit is not None else None)
        self.cache: dict[str, Any] | None = None


class Allowed:
    """The fields one closed group allows: its labels, its patterns, or all (``...``)."""

    __slots__ = ("labels", "open", "patterns")

    def __init__(self) -> None:
        self.labels: set[str] = set()
        self.patterns: list[tuple[s.Pattern, Env]] = []
        self.open = False


class Vertex:
    __slots__ = (
        "arcs",
        "choices",
        "closed",
        "conjuncts",
        "deferred",
        "directives",
        "disj_count",
        "embedded",
        "err",
        "forward",
        "is_def",
        "items",
        "kind",
        "list_sources",
        "order",
        "path",
        "patterns",
        "regular",
        "reorder",
        "required",
        "saw_lit",
        "scalar",
        "sources",
        "state",
        "struct_disjs",
    )

    def __init__(self, path: tuple[str | int, ...], is_def: bool = False) -> None:
        self.path = path
        self.conjuncts: list[Conjunct] = []
        self.state = NEW
        self.is_def = is_def
        self.regular = False  # declared by a regular (not optional) field, or data
        self.required = False
        self.directives: list[tuple[str, str]] = []
        self.order: tuple[int, ...] = ()  # where the field is first declared (export order)
        self.choices: dict[int, Any] = {}  # a candidate's chosen branch per struct disjunction
        self.reset()

    def reset(self) -> None:
        self.arcs: dict[str, Vertex] = {}
        self.closed: dict[Any, Allowed] = {}
        self.deferred: deque[tuple[str, Any, Env | None, Any, tuple[int, ...]]] = deque()
        self.embedded = False  # a scalar came from an embedding (``{ if c { 1 } }``)
        self.err: Bottom | None = None
        self.forward: Vertex | None = None
        self.items: list[Vertex] = []
        self.kind = "top"  # "top", "scalar", "struct", "list"
        self.list_sources: list[Conjunct] = []
        self.patterns: list[tuple[s.Pattern, Env, Any]] = []
        self.scalar: Any = TOP
        self.sources: list[Conjunct] = []
        self.struct_disjs: list[tuple[int, Disj]] = []
        self.saw_lit = False
        self.disj_count = 0
        self.reorder = False  # some fields were declared out of source order

    def add(self, node: Any, env: Env | None, group: Any) -> None:
        if self.state != NEW:
            raise CueError(f"{path_text(self.path)}: field added after evaluation (a cycle)")
        self.conjuncts.append(Conjunct(node, env, group))

    @property
    def kind_name(self) -> str:
        return {"struct": "struct", "list": "list"}.get(self.kind, "a value")

    def target(self) -> Vertex:
        vertex = self
        while vertex.forward is not None:
            vertex = vertex.forward
        return vertex


def path_text(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + s.display(part)
    return out or "value"


class Evaluator:
    """One evaluation: the meter, the depth counter and the imported packages."""

    def __init__(self, meter: Meter, imports: dict[str, str], template: str) -> None:
        self.meter = meter
        self.imports = imports
        self.template = template
        self.depth = 0
        self.max_depth = meter.budget.depth
        self.max_steps = meter.budget.steps

    # -- depth

    def enter(self, where: Any) -> None:
        """One level deeper; ``where`` (a position or a path) is formatted only on error."""
        self.depth += 1
        if self.depth > self.max_depth:
            text = where if isinstance(where, str) else path_text(where)
            raise CueError(f"{self.template}:{text}: evaluation depth budget of "
                           f"{self.max_depth} exceeded")

    def leave(self) -> None:
        self.depth -= 1

    # -- vertices

    def gather(self, vertex: Vertex) -> Vertex:
        """The vertex's arcs, items and scalar, gathered once; follows forwards."""
        while vertex.forward is not None:
            vertex = vertex.forward
        if vertex.state != NEW:
            return vertex
        vertex.state = GATHERING
        self.enter(vertex.path)
        try:
            gathering.gather(self, vertex)
        finally:
            self.depth -= 1
        vertex.state = DONE
        return vertex.target()

    def value(self, vertex: Vertex) -> Any:
        """The vertex as a value: itself for a struct or list, else its scalar."""
        vertex = vertex.target()
        if vertex.state == GATHERING:
            return Bottom(f"{path_text(vertex.path)}: reference cycle")
        vertex = self.gather(vertex)
        if vertex.err is not None:
            return vertex.err
        if vertex.kind in ("struct", "list"):
            return vertex
        return vertex.scalar

    def arc(self, vertex: Vertex, name: str) -> Vertex | Bottom:
        vertex = self.gather(vertex)
        if vertex.err is not None and vertex.kind not in ("struct",):
            return vertex.err
        if vertex.kind != "struct":
            if vertex.kind == "top":
                return Bottom(f"field {s.display(name)!r} not found", incomplete=True)
            return Bottom(f"field {s.display(name)!r} selected from a {vertex.kind_name}")
        child = vertex.arcs.get(name)
        if child is None:
            return Bottom(f"field {s.display(name)!r} not found", incomplete=True)
        if not child.regular:
            return Bottom(f"field {s.display(name)!r} not found (optional, not set)", True)
        return child

    # -- expressions

    def eval(self, node: Any, env: Env | None) -> Any:
        """A node's value: a scalar, a :class:`Bottom`, or a (gathered) :class:`Vertex`."""
        meter = self.meter
        meter.steps += 1
        if meter.steps > self.max_steps:
            meter.tick(0)  # raises the step budget's error
        self.enter(getattr(node, "pos", "?") if self.depth >= self.max_depth else "")
        try:
            handler = expressions.HANDLERS.get(type(node))
            if handler is None:
                return expressions.evaluate(self, node, env)
            return handler(self, node, env)
        finally:
            self.depth -= 1

    def concrete(self, node: Any, env: Env | None) -> Any:
        """A node's value with defaults chosen, as a vertex or a scalar."""
        value = self.eval(node, env)
        if isinstance(value, Vertex):
            value = self.value(value)
        return default_of(value)

    def anonymous(self, node: Any, env: Env | None, group: Any = None) -> Vertex:
        vertex = Vertex(("(" + getattr(node, "pos", "?") + ")",))
        vertex.regular = True
        vertex.add(node, env, group)
        return self.gather(vertex)

    def lookup(self, name: str, env: Env | None, pos: str) -> Any:
        frame = env
        while frame is not None:
            if frame.bindings is not None and name in frame.bindings:
                return frame.bindings[name]
            if frame.names is not None and name in frame.names:
                return self.lookup_in_frame(frame, name)
            frame = frame.parent
        if name in self.imports:
            return bi.Package(self.imports[name])
        if name in TYPES:
            return TYPES[name]
        if name in bi.UNIVERSE:
            return bi.UNIVERSE[name]
        return Bottom(f"reference {name!r} not found")

    def lookup_in_frame(self, frame: Env, name: str) -> Any:
        lets = lets_of(frame.lit)
        if name in lets:
            if frame.cache is None:
                frame.cache = {}
            if name not in frame.cache:
                frame.cache[name] = Bottom(f"let {name!r}: cycle")
                frame.cache[name] = self.eval(lets[name], frame)
            return frame.cache[name]
        assert frame.vertex is not None
        vertex = frame.vertex.target()
        arc = vertex.arcs.get(name)
        if arc is None and vertex.state != GATHERING:
            return self.arc(vertex, name)
        if arc is None:
            return Bottom(f"field {s.display(name)!r} not found", incomplete=True)
        if not arc.regular:
            return Bottom(f"field {s.display(name)!r} not found (optional, not set)", True)
        return arc

    # -- walking a gathered struct or list

    def fields(self, vertex: Vertex) -> Iterator[tuple[str, Vertex]]:
        """Regular, exported fields in declaration order."""
        for name, child in list(vertex.arcs.items()):
            if child.regular and not name.startswith(("_", "#")):
                yield s.display(name), child


def lets_of(lit: s.StructLit | None) -> dict[str, s.Node]:
    if lit is None:
        return {}
    cached: dict[str, s.Node] | None = lit.__dict__.get("_lets")
    if cached is None:
        cached = {d.name: d.expr for d in lit.decls if isinstance(d, s.LetDecl)}
        object.__setattr__(lit, "_lets", cached)
    return cached


def is_scalar(value: Any) -> bool:
    return isinstance(value, Atom | Constraint | Disj | Top | Bottom)


# The evaluator's parts call back into it: imported last, used at call time.
from federation.cue import expressions, gathering  # noqa: E402
