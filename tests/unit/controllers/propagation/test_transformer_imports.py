"""Transformers talk only through the build: no transformer module imports another."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from federation.controllers.propagation.reconciler import TRANSFORMERS

PACKAGE = "federation.controllers.propagation"


def imported_modules(module: str) -> set[str]:
    """Every module ``module`` imports (``from X import y`` counts X and X.y)."""
    source = Path(str(importlib.import_module(module).__file__)).read_text()
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_no_transformer_imports_another() -> None:
    """Shared facts live on the Build, shared reads in lookups, rules in hub/ or the kit."""
    transformers = {step.__module__ for step in TRANSFORMERS}
    assert all(name.startswith(PACKAGE) for name in transformers)
    crossing = {module: sorted(imported_modules(module) & (transformers - {module}))
                for module in sorted(transformers)}
    assert {m: found for m, found in crossing.items() if found} == {}
