"""CUE source text to tokens, with CUE's automatic comma insertion.

A newline becomes a comma after an identifier, a keyword, a literal, ``_|_``, ``)``,
``]``, ``}``, ``?``, ``!`` or ``...`` (the CUE spec's rule). Comments are kept only as
``+name=value`` directives (``// +patchKey=name``) handed to the next token. A string
with interpolations is one token whose parts are text and the token lists of each
``\\(expr)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from federation.cue.errors import CueError

OPERATORS = (
    "...", "_|_", "&&", "||", "==", "!=", "<=", ">=", "=~", "!~",
    "+", "-", "*", "/", "&", "|", "<", ">", "=", "!", "?", ":", ",", ".",
    "(", ")", "[", "]", "{", "}", "@",
)
KEYWORDS = frozenset({"for", "in", "if", "let", "import", "package", "true", "false", "null"})
COMMA_AFTER = frozenset({")", "]", "}", "?", "!", "...", "_|_"})
MULTIPLIERS = {"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
               "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
                  "v": "\v", "/": "/", "\\": "\\", '"': '"', "'": "'"}


@dataclass
class Token:
    kind: str  # "ident", "int", "float", "string", "op", "keyword", "eof"
    value: Any
    line: int
    col: int
    directives: tuple[tuple[str, str], ...] = ()
    is_bytes: bool = False
    attrs: list[Any] = field(default_factory=list)

    @property
    def pos(self) -> str:
        return f"{self.line}:{self.col}"


def tokenize(source: str, name: str) -> list[Token]:
    lexer = Lexer(source, name)
    return lexer.run(0)


class Lexer:
    def __init__(self, source: str, name: str) -> None:
        self.src = source
        self.name = name
        self.i = 0
        self.line = 1
        self.col = 1
        self.pending: list[tuple[str, str]] = []

    def fail(self, message: str) -> CueError:
        return CueError(f"{self.name}:{self.line}:{self.col}: {message}")

    def advance(self, n: int) -> None:
        for ch in self.src[self.i : self.i + n]:
            if ch == "\n":
                self.line += 1
                self.col = 1
            else:
                self.col += 1
        self.i += n

    def run(self, depth: int) -> list[Token]:
        """Tokens up to the end, or (depth > 0) up to the ``)`` closing an interpolation."""
        tokens: list[Token] = []
        parens = 0
        while True:
            newline = self.skip_space()
            if newline and tokens and wants_comma(tokens[-1]):
                tokens.append(Token("op", ",", self.line, self.col))
            if self.i >= len(self.src):
                if depth:
                    raise self.fail("unterminated interpolation")
                tokens.append(Token("eof", None, self.line, self.col))
                return tokens
            if depth and self.src[self.i] == ")" and parens == 0:
                self.advance(1)
                tokens.append(Token("eof", None, self.line, self.col))
                return tokens
            token = self.next_token(depth)
            if token.kind == "op" and token.value == "(":
                parens += 1
            elif token.kind == "op" and token.value == ")":
                parens -= 1
            tokens.append(token)

    def skip_space(self) -> bool:
        """Skips blanks and comments; True when a newline was crossed."""
        newline = False
        src = self.src
        while self.i < len(src):
            ch = src[self.i]
            if ch == "\n":
                newline = True
                self.advance(1)
            elif ch in " \t\r\ufeff":
                self.advance(1)
            elif src.startswith("//", self.i):
                end = src.find("\n", self.i)
                end = len(src) if end < 0 else end
                self.comment(src[self.i + 2 : end])
                self.advance(end - self.i)
            else:
                break
        return newline

    def comment(self, text: str) -> None:
        text = text.strip()
        if text.startswith("+") and "=" in text:
            key, _, value = text[1:].partition("=")
            self.pending.append((key.strip(), value.strip()))

    def next_token(self, depth: int) -> Token:
        line, col = self.line, self.col
        src, i = self.src, self.i
        ch = src[i]
        token: Token
        if ch == "#" or ch == '"' or ch == "'":
            string = self.try_string(depth)
            token = string if string is not None else self.ident()
        elif ch.isalpha() or ch in "_$":
            token = self.ident() if not src.startswith("_|_", i) else self.op()
        elif ch.isdigit() or (ch == "." and i + 1 < len(src) and src[i + 1].isdigit()):
            token = self.number()
        else:
            token = self.op()
        token.line, token.col = line, col
        if self.pending:
            token.directives = tuple(self.pending)
            self.pending = []
        return token

    def op(self) -> Token:
        for op in OPERATORS:
            if self.src.startswith(op, self.i):
                self.advance(len(op))
                return Token("op", op, 0, 0)
        raise self.fail(f"unexpected character {self.src[self.i]!r}")

    def ident(self) -> Token:
        src = self.src
        j = self.i
        while j < len(src) and src[j] in "#_$":
            j += 1
        while j < len(src) and (src[j].isalnum() or src[j] in "_$"):
            j += 1
        text = src[self.i : j]
        if not text or text.strip("#") == "":
            raise self.fail("invalid identifier")
        self.advance(j - self.i)
        return Token("keyword" if text in KEYWORDS else "ident", text, 0, 0)

    def number(self) -> Token:
        src = self.src
        j = self.i
        if src.startswith(("0x", "0X", "0o", "0O", "0b", "0B"), j):
            j += 2
            while j < len(src) and (src[j].isalnum() or src[j] == "_"):
                j += 1
            text = src[self.i : j].replace("_", "")
            self.advance(j - self.i)
            try:
                return Token("int", int(text, 0), 0, 0)
            except ValueError:
                raise self.fail("invalid number") from None
        return self.decimal()

    def decimal(self) -> Token:
        src = self.src
        j = self.i
        while j < len(src) and (src[j].isdigit() or src[j] == "_"):
            j += 1
        is_float = False
        if j < len(src) and src[j] == "." and not src.startswith("...", j):
            is_float = True
            j += 1
            while j < len(src) and (src[j].isdigit() or src[j] == "_"):
                j += 1
        if j < len(src) and src[j] in "eE":
            k = j + 1
            if k < len(src) and src[k] in "+-":
                k += 1
            if k < len(src) and src[k].isdigit():
                is_float = True
                j = k
                while j < len(src) and src[j].isdigit():
                    j += 1
        text = src[self.i : j].replace("_", "")
        for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "K", "M", "G", "T", "P"):
            if src.startswith(suffix, j) and not (
                j + len(suffix) < len(src) and src[j + len(suffix)].isalnum()
            ):
                self.advance(j + len(suffix) - self.i)
                return multiplied(text, MULTIPLIERS[suffix], self)
        self.advance(j - self.i)
        if len(text) > 400:
            raise self.fail("number literal too long")
        if is_float:
            return Token("float", float(text), 0, 0)
        return Token("int", int(text), 0, 0)

    def try_string(self, depth: int) -> Token | None:
        src = self.src
        j = self.i
        while j < len(src) and src[j] == "#":
            j += 1
        hashes = j - self.i
        if j >= len(src) or src[j] not in "\"'":
            return None
        quote = src[j]
        multi = src.startswith(quote * 3, j)
        self.advance(hashes + (3 if multi else 1))
        if multi:
            if not self.src.startswith("\n", self.i):
                raise self.fail("multi-line string must start with a newline")
            self.advance(1)
        parts = self.string_body(quote * 3 if multi else quote, "#" * hashes, depth)
        if multi:
            parts = dedent(parts, self)
        return Token("string", parts, 0, 0, is_bytes=quote == "'")

    def string_body(self, close: str, hashes: str, depth: int) -> list[str | list[Token]]:
        parts: list[str | list[Token]] = []
        text: list[str] = []
        src = self.src
        escape = "\\" + hashes
        terminator = close + hashes
        while True:
            if self.i >= len(src):
                raise self.fail("unterminated string")
            if src.startswith(terminator, self.i):
                self.advance(len(terminator))
                parts.append("".join(text))
                return parts
            ch = src[self.i]
            if ch == "\n" and len(close) == 1:
                raise self.fail("newline in string")
            if src.startswith(escape, self.i):
                self.advance(len(escape))
                if src.startswith("(", self.i):
                    self.advance(1)
                    parts.append("".join(text))
                    text = []
                    parts.append(self.run(depth + 1))
                    continue
                text.append(self.escape())
                continue
            text.append(ch)
            self.advance(1)

    def escape(self) -> str:
        src = self.src
        ch = src[self.i : self.i + 1]
        if ch in SIMPLE_ESCAPES:
            self.advance(1)
            return SIMPLE_ESCAPES[ch]
        width = {"x": 2, "u": 4, "U": 8}.get(ch)
        if width is None:
            digits = src[self.i : self.i + 3]
            if len(digits) == 3 and all(c in "01234567" for c in digits):
                self.advance(3)
                return chr(int(digits, 8))
            raise self.fail("unknown escape sequence")
        digits = src[self.i + 1 : self.i + 1 + width]
        try:
            code = int(digits, 16)
            result = chr(code)
        except ValueError:
            raise self.fail("invalid escape sequence") from None
        self.advance(1 + width)
        return result


def wants_comma(token: Token) -> bool:
    if token.kind in ("ident", "int", "float", "string"):
        return True
    if token.kind == "keyword":
        return token.value in ("true", "false", "null")
    return token.kind == "op" and token.value in COMMA_AFTER


def multiplied(text: str, factor: int, lexer: Lexer) -> Token:
    if len(text) > 400:
        raise lexer.fail("number literal too long")
    if "." in text or "e" in text.lower():
        from decimal import Decimal

        value = Decimal(text) * factor
        if value != value.to_integral_value():
            raise lexer.fail("number with a multiplier is not an integer")
        return Token("int", int(value), 0, 0)
    return Token("int", int(text) * factor, 0, 0)


def dedent(parts: list[str | list[Token]], lexer: Lexer) -> list[str | list[Token]]:
    """A multi-line string loses its last line's indentation from every line (CUE's rule)."""
    last = parts[-1]
    assert isinstance(last, str)
    newline = last.rfind("\n")
    indent = last[newline + 1 :]
    if newline < 0 and len(parts) == 1:
        indent = last
    if indent.strip(" \t"):
        raise lexer.fail("closing quote of a multi-line string must be on its own line")
    out: list[str | list[Token]] = []
    at_line_start = True
    for k, part in enumerate(parts):
        if isinstance(part, list):
            out.append(part)
            at_line_start = False
            continue
        if k == len(parts) - 1:
            part = part[: len(part) - len(indent)]
            part = part[:-1] if part.endswith("\n") else part
        out.append(strip_indent(part, indent, at_line_start))
        at_line_start = part.endswith("\n") if part else at_line_start
    return out


def strip_indent(text: str, indent: str, at_line_start: bool) -> str:
    lines = text.split("\n")
    for n, line in enumerate(lines):
        if (n > 0 or at_line_start) and line.startswith(indent):
            lines[n] = line[len(indent) :]
    return "\n".join(lines)
