"""Regular expressions with RE2's guarantee: matching takes time linear in the subject.

CUE's patterns (``=~``, ``!~``, ``regexp``) are RE2 syntax. Patterns come from templates
and subjects may be tenant values, so a backtracking engine (Python's ``re``) could be
made to run for years by ``(a+)+$`` on ``"aaaa…b"``. Here the pattern is parsed by Python's
own regex parser (the syntax is nearly RE2's), refused if it uses what RE2 lacks
(backreferences, lookaround, atomic groups, possessive repetition), compiled to a small
instruction list, and run by a Pike VM (Thompson's simulation with thread priorities, as
RE2 and Go do): every step is O(program) and charged to the evaluation's meter, so the
worst case is the budget, never a hang. ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII,
``$`` is the end of the text, and ``.`` is not a newline, as in Go; flags ``(?i)``,
``(?s)`` and ``(?m)`` apply to the whole pattern.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from re import _parser as sre  # type: ignore[attr-defined]
from typing import Any

from federation.cue.errors import CueError, active_meter

MAX_PATTERN = 1_000
MAX_SUBJECT = 100_000
MAX_PROGRAM = 5_000
MAX_REPEAT = 1_000  # RE2's own limit on {n,m}
REFUSED = {"GROUPREF", "GROUPREF_EXISTS", "ASSERT", "ASSERT_NOT", "ATOMIC_GROUP",
           "POSSESSIVE_REPEAT"}
WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
CATEGORIES: dict[str, Callable[[str], bool]] = {
    "CATEGORY_DIGIT": lambda c: "0" <= c <= "9",
    "CATEGORY_NOT_DIGIT": lambda c: not "0" <= c <= "9",
    "CATEGORY_WORD": lambda c: c in WORD,
    "CATEGORY_NOT_WORD": lambda c: c not in WORD,
    "CATEGORY_SPACE": lambda c: c in " \t\n\f\r\v",
    "CATEGORY_NOT_SPACE": lambda c: c not in " \t\n\f\r\v",
}

Step = Callable[[int], None]


@dataclass(frozen=True)
class Program:
    """Instructions: ("char", test), ("split", a, b), ("jmp", a), ("assert", kind), ("match",)."""

    code: tuple[tuple[Any, ...], ...]
    multiline: bool


def compile_re2(pattern: str) -> Program:
    return _compile(pattern)


@lru_cache(maxsize=512)
def _compile(pattern: str) -> Program:
    if len(pattern) > MAX_PATTERN:
        raise CueError(f"regular expression longer than {MAX_PATTERN} characters")
    try:
        parsed = sre.parse(pattern)
    except (re.error, RecursionError, OverflowError) as err:
        reason = getattr(err, "msg", "too complex")
        raise CueError(f"invalid regular expression: {reason}") from None
    flags = parsed.state.flags
    compiler = Compiler(bool(flags & re.IGNORECASE), bool(flags & re.DOTALL))
    compiler.sequence(list(parsed))
    compiler.emit(("match",))
    return Program(tuple(compiler.code), bool(flags & re.MULTILINE))


class Compiler:
    def __init__(self, icase: bool, dotall: bool) -> None:
        self.code: list[tuple[Any, ...]] = []
        self.icase = icase
        self.dotall = dotall

    def emit(self, instruction: tuple[Any, ...]) -> int:
        if len(self.code) >= MAX_PROGRAM:
            raise CueError("regular expression too large once compiled")
        self.code.append(instruction)
        return len(self.code) - 1

    def sequence(self, items: list[tuple[Any, Any]]) -> None:
        for op, arg in items:
            self.item(str(op), arg)

    def item(self, op: str, arg: Any) -> None:
        if op in REFUSED:
            raise CueError("regular expression uses a construct RE2 lacks "
                           "(backreference, lookaround, atomic group or possessive repetition)")
        if op in ("LITERAL", "NOT_LITERAL", "ANY", "IN"):
            self.emit(("char", self.tester(op, arg)))
        elif op == "AT":
            self.emit(("assert", str(arg)))
        elif op == "SUBPATTERN":
            _, add_flags, _, body = arg
            if add_flags & ~(re.IGNORECASE | re.UNICODE):
                raise CueError("regular expression uses an unsupported group flag")
            self.sequence(list(body))
        elif op == "BRANCH":
            self.branch(list(arg[1]))
        elif op in ("MAX_REPEAT", "MIN_REPEAT"):
            self.repeat(arg, greedy=op == "MAX_REPEAT")
        else:
            raise CueError(f"regular expression uses an unsupported construct ({op.lower()})")

    def branch(self, alternatives: list[Any]) -> None:
        jumps: list[int] = []
        for index, alternative in enumerate(alternatives):
            if index < len(alternatives) - 1:
                split = self.emit(("split", 0, 0))
                self.sequence(list(alternative))
                jumps.append(self.emit(("jmp", 0)))
                self.code[split] = ("split", split + 1, len(self.code))
            else:
                self.sequence(list(alternative))
        for jump in jumps:
            self.code[jump] = ("jmp", len(self.code))

    def repeat(self, arg: Any, greedy: bool) -> None:
        low, high, body = arg
        unbounded = high == sre.MAXREPEAT
        if low > MAX_REPEAT or (not unbounded and high > MAX_REPEAT):
            raise CueError(f"regular expression repeats more than {MAX_REPEAT} times")
        for _ in range(low):
            self.sequence(list(body))
        if unbounded:
            split = self.emit(("split", 0, 0))
            self.sequence(list(body))
            self.emit(("jmp", split))
            self.code[split] = self.choice(split + 1, len(self.code), greedy)
            return
        splits = []
        for _ in range(high - low):
            splits.append(self.emit(("split", 0, 0)))
            self.sequence(list(body))
        for split in splits:
            self.code[split] = self.choice(split + 1, len(self.code), greedy)

    @staticmethod
    def choice(body: int, after: int, greedy: bool) -> tuple[str, int, int]:
        return ("split", body, after) if greedy else ("split", after, body)

    def tester(self, op: str, arg: Any) -> Callable[[str], bool]:
        if op == "ANY":
            return (lambda c: True) if self.dotall else (lambda c: c != "\n")
        if op in ("LITERAL", "NOT_LITERAL"):
            wanted = chr(arg)
            if self.icase:
                folded = wanted.lower()
                same: Callable[[str], bool] = lambda c: c.lower() == folded  # noqa: E731
            else:
                same = lambda c: c == wanted  # noqa: E731
            return same if op == "LITERAL" else (lambda c: not same(c))
        return self.char_class(list(arg))

    def char_class(self, items: list[tuple[Any, Any]]) -> Callable[[str], bool]:
        negate = bool(items) and str(items[0][0]) == "NEGATE"
        tests: list[Callable[[str], bool]] = []
        for op, arg in items[1:] if negate else items:
            tests.append(self.class_item(str(op), arg))
        icase = self.icase

        def test(c: str) -> bool:
            hit = any(t(c) for t in tests) or (icase and any(t(c.swapcase()) for t in tests))
            return hit != negate

        return test

    def class_item(self, op: str, arg: Any) -> Callable[[str], bool]:
        if op == "LITERAL":
            wanted = chr(arg)
            return lambda c: c == wanted
        if op == "RANGE":
            low, high = chr(arg[0]), chr(arg[1])
            return lambda c: low <= c <= high
        if op == "CATEGORY":
            return CATEGORIES[str(arg)]
        raise CueError(f"regular expression uses an unsupported class item ({op.lower()})")


def at(kind: str, text: str, pos: int, multiline: bool) -> bool:
    if kind in ("AT_BEGINNING", "AT_BEGINNING_LINE"):
        return pos == 0 or (multiline and text[pos - 1] == "\n")
    if kind == "AT_BEGINNING_STRING":
        return pos == 0
    if kind in ("AT_END", "AT_END_LINE"):
        return pos == len(text) or (multiline and text[pos] == "\n")
    if kind == "AT_END_STRING":
        return pos == len(text)
    before = pos > 0 and text[pos - 1] in WORD
    after = pos < len(text) and text[pos] in WORD
    return (before != after) if kind == "AT_BOUNDARY" else (before == after)


def add_thread(program: Program, threads: list[tuple[int, int]], seen: set[int], pc: int,
               start: int, text: str, pos: int) -> None:
    """Follows jumps, splits and assertions from ``pc`` (in priority order, no recursion)."""
    stack = [pc]
    while stack:
        pc = stack.pop()
        if pc in seen:
            continue
        seen.add(pc)
        instruction = program.code[pc]
        kind = instruction[0]
        if kind == "jmp":
            stack.append(instruction[1])
        elif kind == "split":
            stack.append(instruction[2])
            stack.append(instruction[1])
        elif kind == "assert":
            if at(instruction[1], text, pos, program.multiline):
                stack.append(pc + 1)
        else:
            threads.append((pc, start))


def run(program: Program, text: str, step: Step) -> tuple[int, int] | None:
    """The leftmost-first match's span (Go's semantics), or None."""
    threads: list[tuple[int, int]] = []
    add_thread(program, threads, set(), 0, 0, text, 0)
    found: tuple[int, int] | None = None
    for pos in range(len(text) + 1):
        step(len(threads) + 1)
        following: list[tuple[int, int]] = []
        seen: set[int] = set()
        char = text[pos] if pos < len(text) else ""
        for pc, start in threads:
            instruction = program.code[pc]
            if instruction[0] == "match":
                found = (start, pos)
                break  # lower-priority threads lose to this match
            if char and instruction[1](char):
                add_thread(program, following, seen, pc + 1, start, text, pos + 1)
        if found is None and pos < len(text):
            add_thread(program, following, seen, 0, pos + 1, text, pos + 1)
        if not following:
            return found
        threads = following
    return found


def subject_of(subject: object) -> str | None:
    if isinstance(subject, bytes):
        subject = subject.decode("utf-8", "replace")
    if not isinstance(subject, str):
        return None
    check_subject(subject)
    return subject


def search(pattern: str, subject: object, step: Step | None = None) -> bool:
    text = subject_of(subject)
    return text is not None and run(compile_re2(pattern), text, step or active_meter().tick) \
        is not None


def find(pattern: str, subject: str, step: Step | None = None) -> str | None:
    text = subject_of(subject)
    if text is None:
        return None
    span = run(compile_re2(pattern), text, step or active_meter().tick)
    return None if span is None else text[span[0]:span[1]]


def find_all(pattern: str, subject: str, limit: int, step: Step | None = None) -> list[str]:
    text = subject_of(subject) or ""
    program = compile_re2(pattern)
    out: list[str] = []
    pos = 0
    tick = step or active_meter().tick
    while pos <= len(text) and not (0 <= limit <= len(out)):
        span = run(program, text[pos:], tick)
        if span is None:
            break
        out.append(text[pos + span[0]:pos + span[1]])
        pos += max(span[1], span[0] + 1)
    return out


def check_subject(subject: str) -> None:
    if len(subject) > MAX_SUBJECT:
        raise CueError(f"string longer than {MAX_SUBJECT} characters matched by a regexp")
