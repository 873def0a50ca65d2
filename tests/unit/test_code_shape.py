"""The shape the code keeps: no function over 60 lines (issue 21's cap).

Ruff checks cyclomatic complexity (``C90``, cap in pyproject.toml); length is checked here
because ruff has no rule for it. A function's length counts its signature, docstring and
body, the lines a reader has to hold at once; decorators (a command's click options) are
declarations, not logic, and do not count. Generated protocol code is not ours.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "federation"
MAX_LINES = 60
GENERATED = ("_pb2.py", "_pb2_grpc.py")

WAIVED: dict[str, str] = {
    # "path::function": why (each entry is a debt with an issue behind it)
}


def functions(path: Path) -> Iterator[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            yield node.name, node.end_lineno - node.lineno + 1


def long_functions() -> dict[str, int]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name.endswith(GENERATED):
            continue
        for name, length in functions(path):
            if length > MAX_LINES:
                found[f"{path.relative_to(PACKAGE).as_posix()}::{name}"] = length
    return found


def test_no_function_is_longer_than_the_cap() -> None:
    over = {key: n for key, n in long_functions().items() if key not in WAIVED}
    assert not over, f"functions over {MAX_LINES} lines (split them): {over}"


def test_every_waiver_is_still_needed() -> None:
    stale = sorted(set(WAIVED) - set(long_functions()))
    assert not stale, f"waived functions now within {MAX_LINES} lines: drop {stale}"


def test_the_length_check_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    path = tmp_path / "sample.py"
    path.write_text(f"@decorator\ndef long():\n{body}\n\ndef short():\n    return 1\n")
    lengths = dict(functions(path))
    assert lengths["long"] == MAX_LINES + 1
    assert lengths["short"] == 2


def test_waivers_name_a_reason() -> None:
    assert all(reason.strip() for reason in WAIVED.values())
