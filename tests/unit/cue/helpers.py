"""Evaluate a snippet and return its exported fields (all top-level regular fields by default)."""

from __future__ import annotations

import re
from typing import Any

from federation.cue import Budget, export, parse

LABEL = re.compile(r'^("(?:[^"\\]|\\.)*"|[A-Za-z$][\w$-]*)\s*[?!]?:', re.M)


def top_labels(source: str) -> list[str]:
    labels = []
    for match in LABEL.finditer(source):
        label = match.group(1).strip('"')
        if label not in labels:
            labels.append(label)
    return labels


def run(source: str, fill: dict[str, Any] | None = None, fields: list[str] | None = None,
        budget: Budget | None = None) -> dict[str, Any]:
    template = parse(source)
    wanted = fields if fields is not None else top_labels(source)
    return export(template, fill or {}, wanted, budget or Budget()).values
