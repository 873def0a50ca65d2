"""A CUE evaluator for the language KubeVela's definitions are written in.

Pure: no I/O, no clock, no threads, and nothing else of :mod:`federation`. Templates are
admin-written, fills (a component's properties) are tenant data, so every evaluation runs
under a :class:`Budget` and every failure is a one-line :class:`CueError` that names the
CUE path and never quotes a value. See docs/applications.md, "our evaluator, measured
against CUE", for what it supports and how it was measured.
"""

from federation.cue.errors import Budget, CueError
from federation.cue.exporting import (
    Directive,
    Exported,
    Template,
    evaluate_expression,
    export,
    parse,
)

__all__ = [
    "Budget",
    "CueError",
    "Directive",
    "Exported",
    "Template",
    "evaluate_expression",
    "export",
    "parse",
]
