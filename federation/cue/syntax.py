"""The CUE syntax tree: immutable nodes, each with the ``line:col`` it starts at."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, eq=False)
class Node:
    pos: str


@dataclass(frozen=True, eq=False)
class Lit(Node):
    """null, a bool, an int, a float, a string or bytes."""

    value: Any


@dataclass(frozen=True, eq=False)
class Interp(Node):
    """A string with ``\\(expr)`` parts."""

    parts: tuple[str | Node, ...]
    is_bytes: bool


@dataclass(frozen=True, eq=False)
class Ident(Node):
    name: str


@dataclass(frozen=True, eq=False)
class BottomLit(Node):
    pass


@dataclass(frozen=True, eq=False)
class Select(Node):
    target: Node
    name: str


@dataclass(frozen=True, eq=False)
class Index(Node):
    target: Node
    index: Node


@dataclass(frozen=True, eq=False)
class Call(Node):
    func: Node
    args: tuple[Node, ...]


@dataclass(frozen=True, eq=False)
class Unary(Node):
    op: str
    operand: Node


@dataclass(frozen=True, eq=False)
class Binary(Node):
    op: str
    left: Node
    right: Node


@dataclass(frozen=True, eq=False)
class Disjunction(Node):
    """``a | *b | c``: each branch with its default mark."""

    branches: tuple[tuple[Node, bool], ...]


@dataclass(frozen=True, eq=False)
class Label:
    """A field's label: a name (``a``, ``"a-b"``, ``#A``, ``_a``) or a dynamic expression."""

    name: str | None
    expr: Node | None = None


@dataclass(frozen=True, eq=False)
class Field(Node):
    label: Label
    constraint: str  # "" regular, "?" optional, "!" required
    value: Node
    directives: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, eq=False)
class Pattern(Node):
    """``[expr]: value``, optionally ``[Name=expr]``."""

    label: Node
    value: Node
    alias: str | None


@dataclass(frozen=True, eq=False)
class Embed(Node):
    expr: Node


@dataclass(frozen=True, eq=False)
class LetDecl(Node):
    name: str
    expr: Node


@dataclass(frozen=True, eq=False)
class Ellipsis(Node):
    type: Node | None


@dataclass(frozen=True, eq=False)
class ForClause(Node):
    key: str | None
    value: str
    source: Node


@dataclass(frozen=True, eq=False)
class IfClause(Node):
    cond: Node


@dataclass(frozen=True, eq=False)
class LetClause(Node):
    name: str
    expr: Node


@dataclass(frozen=True, eq=False)
class Comprehension(Node):
    clauses: tuple[Node, ...]
    body: StructLit


@dataclass(frozen=True, eq=False)
class StructLit(Node):
    decls: tuple[Node, ...]

    def declares(self, name: str) -> bool:
        return name in self.names

    @property
    def names(self) -> frozenset[str]:
        cached = self.__dict__.get("_names")
        if cached is None:
            cached = frozenset(declared_names(self.decls))
            object.__setattr__(self, "_names", cached)
        return cached


@dataclass(frozen=True, eq=False)
class ListLit(Node):
    elems: tuple[Node, ...]
    tail: Node | None  # the type of `...T` (Top for a bare `...`); None: a closed list


@dataclass(frozen=True, eq=False)
class File(Node):
    imports: tuple[tuple[str, str], ...]  # (local name, import path)
    body: StructLit


QUOTED = "\x00"
"""Prefix of a quoted label that looks hidden or like a definition (``"_x"``, ``"#x"``): in
CUE those are regular fields, distinct from the identifiers ``_x`` and ``#x``."""


def quoted_key(name: str) -> str:
    """The arc key of a quoted label, a data key or a dynamic label."""
    return QUOTED + name if name.startswith(("_", "#")) else name


def display(key: str) -> str:
    return key[1:] if key.startswith(QUOTED) else key


def declared_names(decls: tuple[Node, ...]) -> set[str]:
    names: set[str] = set()
    for decl in decls:
        if isinstance(decl, Field) and decl.label.name is not None:
            names.add(decl.label.name)
        elif isinstance(decl, LetDecl):
            names.add(decl.name)
    return names
