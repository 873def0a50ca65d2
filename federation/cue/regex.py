"""Regular expressions with RE2's guarantees: CUE patterns match in linear time.

Patterns come from templates and subjects may be tenant values, so both are capped and a
pattern using what RE2 lacks (backreferences, lookaround, possessive or atomic groups) is
refused by :class:`CueError`.
"""

from __future__ import annotations

import re
from functools import lru_cache

from federation.cue.errors import CueError

MAX_PATTERN = 1_000
MAX_SUBJECT = 100_000
UNSUPPORTED = re.compile(r"\\[1-9]|\(\?[=!<>P]|\(\?<[=!]|\(\?>|[*+?}]\+")


@lru_cache(maxsize=512)
def compile_re2(pattern: str) -> re.Pattern[str]:
    if len(pattern) > MAX_PATTERN:
        raise CueError(f"regular expression longer than {MAX_PATTERN} characters")
    if UNSUPPORTED.search(pattern):
        raise CueError("regular expression uses a construct RE2 lacks "
                       "(backreference, lookaround or possessive repetition)")
    try:
        return re.compile(pattern)
    except re.error as err:
        raise CueError(f"invalid regular expression: {err.msg}") from None


def search(pattern: str, subject: object) -> bool:
    if isinstance(subject, bytes):
        subject = subject.decode("utf-8", "replace")
    if not isinstance(subject, str):
        return False
    check_subject(subject)
    return compile_re2(pattern).search(subject) is not None


def find(pattern: str, subject: str) -> str | None:
    check_subject(subject)
    match = compile_re2(pattern).search(subject)
    return None if match is None else match.group(0)


def find_all(pattern: str, subject: str, limit: int) -> list[str]:
    check_subject(subject)
    out: list[str] = []
    for match in compile_re2(pattern).finditer(subject):
        if 0 <= limit <= len(out):
            break
        out.append(match.group(0))
    return out


def replace_all(pattern: str, subject: str, repl: str, meter: object) -> str:
    """Go's ``$1`` / ``${name}`` replacement syntax, translated to Python's."""
    check_subject(subject)
    template = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: "\\g<" + (m.group(1) or m.group(2)) + ">",
                      repl.replace("\\", "\\\\"))
    try:
        return compile_re2(pattern).sub(template, subject)
    except (re.error, IndexError):
        raise CueError("invalid replacement in regexp.ReplaceAll") from None


def check_subject(subject: str) -> None:
    if len(subject) > MAX_SUBJECT:
        raise CueError(f"string longer than {MAX_SUBJECT} characters matched by a regexp")
