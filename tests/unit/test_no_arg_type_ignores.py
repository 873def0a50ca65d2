"""No mypy ignore of ``arg-type`` anywhere in tests/ or federation/ (issue 21, item 6).

Such a comment hides a constructor or function that demands a concrete class where a
protocol would do, and leaves the fake passed to it unchecked. Take the narrowest protocol
that says what is used instead (``contexts/client.py``: ObjectReader, ObjectClient,
ClusterAPI; ``contexts/multicluster.py``: MultiCluster and its parts; ``kit/events.py``:
EventSink; ``controllers/kit/kinds.py``: Kinds; ``runtime/manager.py``: Fleet, Host, Engager),
and give a fake the bases of ``tests/unit/clients.py``.

A unit test rather than a ``make lint`` step: it runs wherever the unit suite runs (every
helper's check and ``make test``), needs no shell pattern kept portable across greps, and
its failure names each file and line.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("federation", "tests")
IGNORE = re.compile(r"#\s*type:\s*ignore\[[^\]]*\barg-type\b")
"""An ignore list naming arg-type, alone or with other codes."""

WAITING: frozenset[str] = frozenset()
"""Files allowed an ignore for now (none: every constructor takes a protocol)."""


def offending_lines() -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py*")):
            if path.suffix not in (".py", ".pyi"):
                continue
            text = path.read_text(encoding="utf-8")
            lines = [n for n, line in enumerate(text.splitlines(), 1) if IGNORE.search(line)]
            if lines:
                found[path.relative_to(ROOT).as_posix()] = lines
    return found


def test_the_pattern_finds_every_spelling() -> None:
    """Alone, among other codes, with or without spaces; not other codes. (The comments
    are built from pieces, so that this file does not match itself.)"""
    for head, codes in (("# type: ignore", "arg-type"), ("#type:ignore", "misc, arg-type"),
                        ("# type: ignore", "arg-type,return-value")):
        line = f"f(x)  {head}[{codes}]"
        assert IGNORE.search(line), line
    for line in ("f(x)  # type: ignore" + "[attr-defined]", "f(x)  # arg-type is fine here"):
        assert not IGNORE.search(line), line


def test_no_arg_type_ignores() -> None:
    """Every call type-checks against what its callee declares."""
    found = offending_lines()
    unexpected = {path: lines for path, lines in found.items() if path not in WAITING}
    assert not unexpected, "take a protocol instead of ignoring arg-type: " + ", ".join(
        f"{path}:{','.join(map(str, lines))}" for path, lines in sorted(unexpected.items()))


def test_the_waiting_list_only_shrinks() -> None:
    """A waiting file that has no such ignore any more leaves the list for good."""
    found = offending_lines()
    done = sorted(path for path in WAITING if path not in found)
    assert not done, f"remove from WAITING (no arg-type ignore left): {', '.join(done)}"
