"""Text someone else wrote, made safe to put in one log line, Event or condition message.

A log line, an Event's message and a condition's message are read by people and parsed by
tools one line at a time: a newline in text another party controls would forge a line of
its own, a terminal escape would repaint the reader's screen, and an unbounded length would
grow every record that carries it. :func:`one_line` escapes line breaks and every other
non-printable character (``\\n``, ``\\x1b``) and clips the result. :func:`unquoted` goes
further for a parser's message about text that may be secret: it keeps the parser's words
and drops what they quote of the text.
"""

from __future__ import annotations

import re

ELLIPSIS = "..."


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` on one line, non-printable characters escaped; with ``limit``, at most that
    many characters of the escaped text, then :data:`ELLIPSIS` when some were cut."""
    clipped = limit is not None and len(text) > limit
    if clipped:
        text = text[:limit]
    if not text.isprintable():
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode()
                       for c in text)
    if limit is not None and len(text) > limit:
        text, clipped = text[:limit], True
    return text + ELLIPSIS if clipped else text


_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_ANCHOR = re.compile(r"[*&!]\S*")


def unquoted(message: str) -> str:
    """A parser's message without the text it parsed: every quoted span (``'...'``,
    ``"..."``) becomes ``…``, an alias, anchor or tag name (``*x``, ``&x``, ``!x``) is
    dropped, and a quote left unpaired cuts the rest. One line (blanks collapsed)."""
    text = _ANCHOR.sub("", _QUOTED.sub("…", " ".join(message.split())))
    cut = min((i for i in (text.find("'"), text.find('"')) if i >= 0), default=len(text))
    return " ".join(text[:cut].split()).rstrip(" :,")
