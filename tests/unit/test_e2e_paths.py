"""`make test` gives its e2e run the directories to collect (Makefile's E2E_PATHS), so that
it does not collect every unit test only to deselect it. A test module marked e2e anywhere
else would then be skipped without a word: this finds one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def e2e_paths() -> list[str]:
    found = re.search(r"^E2E_PATHS := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert found, "Makefile defines no E2E_PATHS"
    return found.group(1).split()


def test_every_e2e_module_is_under_the_paths_make_test_collects() -> None:
    paths = e2e_paths()
    assert "tests/e2e" in paths  # conftest marks everything there e2e
    outside = [path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").rglob("*.py")
               if "mark.e2e" in path.read_text(encoding="utf-8")
               and not any(path.relative_to(ROOT).as_posix().startswith(f"{p}/")
                           for p in paths)
               and path != Path(__file__).resolve()]
    assert outside == [], f"e2e modules `make test` would not collect: {outside}"


def test_the_paths_exist() -> None:
    assert [p for p in e2e_paths() if not (ROOT / p).is_dir()] == []
