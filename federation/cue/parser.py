"""Tokens to a :mod:`federation.cue.syntax` tree: a recursive-descent parser of CUE.

Nesting is capped (:attr:`Budget.depth`) so hostile text cannot exhaust Python's stack;
every syntax error is a :class:`CueError` with ``line:col``.
"""

from __future__ import annotations

from federation.cue import syntax as s
from federation.cue.errors import CueError
from federation.cue.lexer import Token, tokenize

BINARY_PRECEDENCE = {
    "&": 2, "||": 3, "&&": 4,
    "==": 5, "!=": 5, "<": 5, "<=": 5, ">": 5, ">=": 5, "=~": 5, "!~": 5,
    "+": 6, "-": 6, "*": 7, "/": 7,
}
UNARY = frozenset({"+", "-", "!", "*", "<", "<=", ">", ">=", "!=", "=~", "!~", "=="})


def parse_file(source: str, name: str, max_depth: int) -> s.File:
    parser = Parser(tokenize(source, name), name, max_depth)
    return parser.file()


def parse_expression(source: str, name: str, max_depth: int) -> s.Node:
    parser = Parser(tokenize(source, name), name, max_depth)
    expr = parser.expr()
    parser.skip_commas()
    parser.expect_eof()
    return expr


class Parser:
    def __init__(self, tokens: list[Token], name: str, max_depth: int) -> None:
        self.tokens = tokens
        self.k = 0
        self.name = name
        self.depth = 0
        self.max_depth = max_depth

    # -- tokens

    @property
    def tok(self) -> Token:
        return self.tokens[self.k]

    def peek(self, n: int = 1) -> Token:
        return self.tokens[min(self.k + n, len(self.tokens) - 1)]

    def is_op(self, value: str, token: Token | None = None) -> bool:
        token = token or self.tok
        return token.kind == "op" and token.value == value

    def is_keyword(self, value: str) -> bool:
        return self.tok.kind == "keyword" and self.tok.value == value

    def take(self) -> Token:
        token = self.tok
        if token.kind != "eof":
            self.k += 1
        return token

    def expect(self, value: str) -> Token:
        if not self.is_op(value):
            raise self.fail(f"expected {value!r}")
        return self.take()

    def fail(self, message: str, token: Token | None = None) -> CueError:
        token = token or self.tok
        found = "end of input" if token.kind == "eof" else describe(token)
        return CueError(f"{self.name}:{token.pos}: {message}, found {found}")

    def expect_eof(self) -> None:
        if self.tok.kind != "eof":
            raise self.fail("expected end of input")

    def skip_commas(self) -> None:
        while self.is_op(","):
            self.take()

    def enter(self) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            raise self.fail(f"nesting depth budget of {self.max_depth} exceeded")

    # -- file and declarations

    def file(self) -> s.File:
        pos = self.tok.pos
        self.skip_commas()
        if self.is_keyword("package"):
            self.take()
            if self.tok.kind != "ident":
                raise self.fail("expected a package name")
            self.take()
            self.skip_commas()
        imports: list[tuple[str, str]] = []
        while self.is_keyword("import"):
            self.take()
            imports.extend(self.import_specs())
            self.skip_commas()
        decls = self.decls(closing=None)
        return s.File(pos, tuple(imports), s.StructLit(pos, tuple(decls)))

    def import_specs(self) -> list[tuple[str, str]]:
        if not self.is_op("("):
            return [self.import_spec()]
        self.take()
        specs = []
        self.skip_commas()
        while not self.is_op(")"):
            specs.append(self.import_spec())
            self.skip_commas()
        self.take()
        return specs

    def import_spec(self) -> tuple[str, str]:
        alias = None
        if self.tok.kind == "ident":
            alias = self.take().value
        if self.tok.kind != "string" or len(self.tok.value) != 1:
            raise self.fail("expected an import path")
        path = self.take().value[0]
        local = alias or path.rsplit("/", 1)[-1].split(":")[0]
        return local, path

    def decls(self, closing: str | None) -> list[s.Node]:
        out: list[s.Node] = []
        while True:
            self.skip_commas()
            if closing is None and self.tok.kind == "eof":
                return out
            if closing is not None and self.is_op(closing):
                return out
            if self.tok.kind == "eof":
                raise self.fail(f"expected {closing!r}")
            out.append(self.decl())
            self.skip_attributes()
            if not (self.is_op(",") or self.tok.kind == "eof" or
                    (closing is not None and self.is_op(closing))):
                raise self.fail("expected ',' or newline after a declaration")

    def decl(self) -> s.Node:
        token = self.tok
        if self.is_op("..."):
            self.take()
            typ = None if self.is_op(",") or self.is_op("}") else self.expr()
            return s.Ellipsis(token.pos, typ)
        if self.is_keyword("let"):
            self.take()
            name = self.ident_name()
            self.expect("=")
            return s.LetDecl(token.pos, name, self.expr())
        if self.is_keyword("for") or self.is_keyword("if"):
            return self.comprehension()
        if self.is_op("@"):
            self.skip_attributes()
            return s.Embed(token.pos, s.Ident(token.pos, "_"))
        if self.starts_field():
            return self.field()
        return s.Embed(token.pos, self.expr())

    def starts_field(self) -> bool:
        """A label followed by ``:``, ``?:`` or ``!:`` (else the declaration is an embedding)."""
        token = self.tok
        if token.kind in ("ident", "string") or (
            token.kind == "keyword" and token.value not in ("for", "if", "let")
        ):
            after = 1
        elif self.is_op("(") or self.is_op("["):
            after = self.balanced_end(self.k) - self.k
        else:
            return False
        nxt = self.peek(after)
        if self.is_op("?", nxt) or self.is_op("!", nxt):
            nxt = self.peek(after + 1)
        return self.is_op(":", nxt)

    def balanced_end(self, k: int) -> int:
        depth = 0
        while k < len(self.tokens):
            token = self.tokens[k]
            if token.kind == "op" and token.value in "([{":
                depth += 1
            elif token.kind == "op" and token.value in ")]}":
                depth -= 1
                if depth == 0:
                    return k + 1
            elif token.kind == "eof":
                return k
            k += 1
        return k

    def field(self) -> s.Node:
        token = self.tok
        self.enter()
        try:
            if self.is_op("["):
                return self.pattern()
            label = self.label()
            constraint = ""
            if self.is_op("?") or self.is_op("!"):
                constraint = self.take().value
            self.expect(":")
            value = self.field_value()
            return s.Field(token.pos, label, constraint, value, token.directives)
        finally:
            self.depth -= 1

    def field_value(self) -> s.Node:
        """The value after ``:``; ``a: b: 1`` nests a one-field struct."""
        if self.starts_field() and not self.is_op("["):
            inner = self.field()
            self.skip_attributes()
            return s.StructLit(inner.pos, (inner,))
        if self.is_op("[") and self.starts_field() and self.pattern_ahead():
            inner = self.field()
            return s.StructLit(inner.pos, (inner,))
        return self.expr()

    def pattern_ahead(self) -> bool:
        end = self.balanced_end(self.k)
        return self.is_op(":", self.tokens[end]) if end < len(self.tokens) else False

    def pattern(self) -> s.Node:
        token = self.expect("[")
        alias = None
        if self.tok.kind == "ident" and self.is_op("=", self.peek()):
            alias = self.take().value
            self.take()
        label = self.expr()
        self.expect("]")
        self.expect(":")
        return s.Pattern(token.pos, label, self.field_value(), alias)

    def label(self) -> s.Label:
        token = self.tok
        if token.kind in ("ident", "keyword"):
            self.take()
            return s.Label(token.value)
        if token.kind == "string":
            self.take()
            if len(token.value) == 1:
                return s.Label(s.quoted_key(token.value[0]))
            return s.Label(None, self.interpolation(token))
        if self.is_op("("):
            self.take()
            expr = self.expr()
            self.expect(")")
            return s.Label(None, expr)
        raise self.fail("expected a label")

    def ident_name(self) -> str:
        if self.tok.kind != "ident":
            raise self.fail("expected an identifier")
        return str(self.take().value)

    def skip_attributes(self) -> None:
        while self.is_op("@"):
            self.take()
            if self.tok.kind not in ("ident", "keyword"):
                raise self.fail("expected an attribute name")
            self.take()
            if not self.is_op("("):
                raise self.fail("expected '(' after an attribute name")
            self.k = self.balanced_end(self.k)

    def comprehension(self) -> s.Comprehension:
        token = self.tok
        clauses = self.clauses()
        if not self.is_op("{"):
            raise self.fail("expected '{' after a comprehension clause")
        body = self.struct_lit()
        return s.Comprehension(token.pos, tuple(clauses), body)

    def clauses(self) -> list[s.Node]:
        clauses: list[s.Node] = []
        while True:
            token = self.tok
            if self.is_keyword("for"):
                self.take()
                first = self.ident_name()
                key, value = None, first
                if self.is_op(","):
                    self.take()
                    key, value = first, self.ident_name()
                if not self.is_keyword("in"):
                    raise self.fail("expected 'in'")
                self.take()
                clauses.append(s.ForClause(token.pos, key, value, self.expr()))
            elif self.is_keyword("if"):
                self.take()
                clauses.append(s.IfClause(token.pos, self.expr()))
            elif self.is_keyword("let") and clauses:
                self.take()
                name = self.ident_name()
                self.expect("=")
                clauses.append(s.LetClause(token.pos, name, self.expr()))
            else:
                return clauses

    # -- expressions

    def expr(self) -> s.Node:
        self.enter()
        try:
            return self.disjunction()
        finally:
            self.depth -= 1

    def disjunction(self) -> s.Node:
        token = self.tok
        branches = [self.disjunct()]
        while self.is_op("|"):
            self.take()
            branches.append(self.disjunct())
        if len(branches) == 1 and not branches[0][1]:
            return branches[0][0]
        return s.Disjunction(token.pos, tuple(branches))

    def disjunct(self) -> tuple[s.Node, bool]:
        if self.is_op("*"):
            self.take()
            return self.binary(2), True
        return self.binary(2), False

    def binary(self, min_prec: int) -> s.Node:
        left = self.unary()
        while True:
            token = self.tok
            prec = BINARY_PRECEDENCE.get(token.value) if token.kind == "op" else None
            if prec is None or prec < min_prec:
                return left
            self.take()
            self.enter()
            try:
                right = self.binary(prec + 1)
            finally:
                self.depth -= 1
            left = s.Binary(token.pos, token.value, left, right)

    def unary(self) -> s.Node:
        token = self.tok
        if token.kind == "op" and token.value in UNARY and token.value != "*":
            self.take()
            self.enter()
            try:
                return s.Unary(token.pos, token.value, self.unary())
            finally:
                self.depth -= 1
        return self.primary()

    def primary(self) -> s.Node:
        node = self.operand()
        while True:
            token = self.tok
            if self.is_op("."):
                self.take()
                name = self.tok
                if name.kind in ("ident", "keyword"):
                    self.take()
                    node = s.Select(token.pos, node, name.value)
                elif name.kind == "string" and len(name.value) == 1:
                    self.take()
                    node = s.Select(token.pos, node, name.value[0])
                else:
                    raise self.fail("expected a field name after '.'")
            elif self.is_op("["):
                self.take()
                index = self.expr()
                self.expect("]")
                node = s.Index(token.pos, node, index)
            elif self.is_op("("):
                node = s.Call(token.pos, node, tuple(self.arguments()))
            else:
                return node

    def arguments(self) -> list[s.Node]:
        self.expect("(")
        args = []
        self.skip_commas()
        while not self.is_op(")"):
            args.append(self.expr())
            if not self.is_op(")"):
                self.expect(",")
                self.skip_commas()
        self.take()
        return args

    def operand(self) -> s.Node:
        token = self.tok
        if token.kind in ("int", "float"):
            self.take()
            return s.Lit(token.pos, token.value)
        if token.kind == "string":
            self.take()
            return self.string(token)
        if token.kind == "keyword" and token.value in ("true", "false", "null"):
            self.take()
            return s.Lit(token.pos, {"true": True, "false": False, "null": None}[token.value])
        if token.kind == "ident":
            self.take()
            return s.Ident(token.pos, token.value)
        if self.is_op("_|_"):
            self.take()
            return s.BottomLit(token.pos)
        if self.is_op("("):
            self.take()
            inner = self.expr()
            self.expect(")")
            return inner
        if self.is_op("{"):
            return self.struct_lit()
        if self.is_op("["):
            return self.list_lit()
        raise self.fail("expected an expression")

    def string(self, token: Token) -> s.Node:
        parts = token.value
        if len(parts) == 1:
            text = parts[0]
            return s.Lit(token.pos, text.encode("utf-8", "surrogatepass") if token.is_bytes
                         else text)
        return self.interpolation(token)

    def interpolation(self, token: Token) -> s.Interp:
        out: list[str | s.Node] = []
        for part in token.value:
            if isinstance(part, str):
                if part:
                    out.append(part)
                continue
            sub = Parser(part, self.name, self.max_depth - self.depth)
            expr = sub.expr()
            sub.skip_commas()
            sub.expect_eof()
            out.append(expr)
        return s.Interp(token.pos, tuple(out), token.is_bytes)

    def struct_lit(self) -> s.StructLit:
        token = self.expect("{")
        self.enter()
        try:
            decls = self.decls("}")
        finally:
            self.depth -= 1
        self.take()
        return s.StructLit(token.pos, tuple(decls))

    def list_lit(self) -> s.ListLit:
        token = self.expect("[")
        self.enter()
        elems: list[s.Node] = []
        tail: s.Node | None = None
        try:
            self.skip_commas()
            while not self.is_op("]"):
                if self.is_op("..."):
                    ell = self.take()
                    tail = s.Ident(ell.pos, "_") if self.is_op("]") or self.is_op(",") \
                        else self.expr()
                    self.skip_commas()
                    break
                if self.is_keyword("for") or self.is_keyword("if"):
                    elems.append(self.comprehension())
                else:
                    elems.append(self.expr())
                self.skip_attributes()
                if not self.is_op("]"):
                    self.expect(",")
                    self.skip_commas()
        finally:
            self.depth -= 1
        self.expect("]")
        return s.ListLit(token.pos, tuple(elems), tail)


def describe(token: Token) -> str:
    if token.kind == "op":
        return repr(token.value)
    if token.kind in ("ident", "keyword"):
        return f"identifier {token.value!r}" if token.kind == "ident" else repr(token.value)
    return token.kind
