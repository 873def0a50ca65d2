"""From a gathered vertex to concrete JSON, and the :mod:`federation.cue` entry points."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.cue import builtins as bi
from federation.cue import stdlib  # noqa: F401  (registers the standard packages)
from federation.cue import syntax as s
from federation.cue.errors import Budget, CueError, Meter
from federation.cue.evaluator import Conjunct, Data, Env, Evaluator, Vertex, path_text
from federation.cue.parser import parse_expression, parse_file
from federation.cue.values import Atom, Bottom, default_of, describe

DEFAULT_BUDGET = Budget()
DIRECTIVES = frozenset({"patchKey", "patchStrategy"})
Path = tuple[str | int, ...]


class Incomplete(Exception):
    """A value that must be concrete is not, or is an error (the message says which)."""


@dataclass(frozen=True)
class Directive:
    """A ``// +name=value`` comment on a field, at ``path`` below the exported field."""

    path: Path
    name: str
    value: str


@dataclass(frozen=True)
class Exported:
    values: dict[str, Any]
    directives: tuple[Directive, ...]


@dataclass(frozen=True)
class Template:
    """A parsed template: immutable, reusable across evaluations, safe to cache."""

    name: str
    file: s.File
    imports: tuple[tuple[str, str], ...]


def parse(source: str, *, name: str = "template", budget: Budget = DEFAULT_BUDGET) -> Template:
    """The template of ``source`` (``name`` prefixes every error about it); the budget's
    ``source_bytes`` and ``depth`` apply."""
    if len(source) > budget.source_bytes:
        raise CueError(f"{name}: template larger than {budget.source_bytes} bytes")
    try:
        file = parse_file(source, name, budget.depth)
    except RecursionError:
        raise CueError(f"{name}: nesting too deep") from None
    for _local, path in file.imports:
        if path not in bi.PACKAGES:
            raise CueError(f"{name}: import {path!r} is not supported (only the pure standard "
                           f"packages: {', '.join(sorted(bi.PACKAGES))})")
    return Template(name, file, file.imports)


class Exporter:
    def __init__(self, ev: Evaluator, name: str) -> None:
        self.ev = ev
        self.name = name
        self.count = 0
        self.directives: list[Directive] = []

    def fail(self, path: Path, message: str) -> CueError:
        return CueError(f"{self.name}: {path_text(path)}: {message}")

    def export(self, vertex: Vertex, path: Path, rel: Path) -> Any:
        self.count += 1
        budget = self.ev.meter.budget
        if self.count > budget.output_values:
            raise self.fail(path, f"output value budget of {budget.output_values} exceeded")
        if len(path) > budget.depth:
            raise self.fail(path, f"depth budget of {budget.depth} exceeded")
        self.ev.meter.tick()
        for name, value in vertex.directives:
            if name in DIRECTIVES:
                self.directives.append(Directive(rel, name, value))
        target = self.ev.gather(vertex)
        if target.err is not None:
            raise self.fail(path, strip(target.err.message, path))
        if target.kind == "struct":
            return {name: self.export(child, (*path, name), (*rel, name))
                    for name, child in self.ev.fields(target)}
        if target.kind == "list":
            return [self.export(item, (*path, i), (*rel, i))
                    for i, item in enumerate(target.items)]
        return self.scalar(target.scalar, path)

    def scalar(self, value: Any, path: Path) -> Any:
        value = default_of(value)
        if isinstance(value, Vertex):
            return self.export(value, path, ())
        if isinstance(value, Atom):
            return value.value
        if isinstance(value, Bottom):
            raise self.fail(path, strip(value.message, path))
        raise self.fail(path, f"incomplete value ({describe(value)})")


def strip(message: str, path: Path) -> str:
    prefix = path_text(path) + ": "
    return message[len(prefix):] if message.startswith(prefix) else message


def plain(ev: Evaluator, value: Any) -> Any:
    """A value as JSON data for a builtin or a comparison; :class:`Incomplete` if it is not."""
    if isinstance(value, Vertex):
        exporter = Exporter(ev, "value")
        try:
            return exporter.export(value, (), ())
        except CueError as err:
            raise Incomplete(str(err).split(": ", 1)[-1]) from None
    value = default_of(value)
    if isinstance(value, Atom):
        return value.value
    if isinstance(value, Vertex):
        return plain(ev, value)
    if isinstance(value, Bottom):
        raise Incomplete(value.message)
    raise Incomplete(f"incomplete value ({describe(value)})")


def check_data(data: Any, path: Path, meter: Meter) -> None:
    """Fill data is JSON: string keys; null, bool, numbers, strings, lists and maps only."""
    stack = [(data, path)]
    while stack:
        value, where = stack.pop()
        meter.tick()
        if len(where) > meter.budget.depth:
            raise CueError(f"{path_text(where)}: depth budget of {meter.budget.depth} exceeded")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise CueError(f"{path_text(where)}: a key is not a string")
                stack.append((item, (*where, key)))
        elif isinstance(value, list | tuple):
            stack.extend((item, (*where, i)) for i, item in enumerate(value))
        elif isinstance(value, str):
            meter.size(len(value))
        elif not (value is None or isinstance(value, bool | int | float)):
            raise CueError(f"{path_text(where)}: not JSON data ({type(value).__name__})")


def export(template: Template, fill: Mapping[str, Any], fields: Sequence[str],
           budget: Budget = DEFAULT_BUDGET) -> Exported:
    meter = Meter(budget)
    fill = dict(fill)
    check_data(fill, (), meter)
    ev = Evaluator(meter, dict(template.imports), template.name)
    root = Vertex(())
    root.regular = True
    outer = Env(None, names=frozenset(fill), vertex=root)
    root.conjuncts = [Conjunct(template.file.body, outer, None), Conjunct(Data(fill), None, None)]
    try:
        with meter.active():
            return export_fields(ev, root, template.name, fields)
    except RecursionError:
        raise CueError(f"{template.name}: evaluation nested too deeply") from None


def export_fields(ev: Evaluator, root: Vertex, name: str, fields: Sequence[str]) -> Exported:
    root = ev.gather(root)
    if root.err is not None:
        raise CueError(f"{name}: {root.err.message}")
    if "parameter" in root.arcs:
        check_parameter(ev, root.arcs["parameter"], name)
    exporter = Exporter(ev, name)
    values: dict[str, Any] = {}
    for field in fields:
        arc = root.arcs.get(field)
        if arc is None or not arc.regular or field.startswith(("_", "#")):
            continue  # absent, optional, hidden or a definition: not part of the output
        values[field] = exporter.export(arc, (field,), ())
    return Exported(values, tuple(exporter.directives))


def check_parameter(ev: Evaluator, vertex: Vertex, name: str) -> None:
    """A user's properties that conflict with the schema are refused, naming the field."""
    stack: list[tuple[Vertex, Path]] = [(vertex, ("parameter",))]
    while stack:
        current, path = stack.pop()
        ev.meter.tick()
        target = ev.gather(current)
        if target.err is not None and not target.err.incomplete:
            raise CueError(f"{name}: {path_text(path)}: {strip(target.err.message, path)}")
        if isinstance(target.scalar, Bottom) and not target.scalar.incomplete:
            raise CueError(f"{name}: {path_text(path)}: {strip(target.scalar.message, path)}")
        if target.kind == "struct":
            stack.extend((child, (*path, key)) for key, child in target.arcs.items()
                         if child.regular)
        elif target.kind == "list":
            stack.extend((item, (*path, i)) for i, item in enumerate(target.items))


def evaluate_expression(expr: str, scope: Mapping[str, Any],
                        budget: Budget = DEFAULT_BUDGET) -> Any:
    """A CUE expression over concrete JSON names (``status.step1.phase == "succeeded"``)."""
    if len(expr) > budget.source_bytes:
        raise CueError(f"expression larger than {budget.source_bytes} bytes")
    meter = Meter(budget)
    scope = dict(scope)
    check_data(scope, (), meter)
    try:
        node = parse_expression(expr, "expression", budget.depth)
        imports = {path.rsplit("/", 1)[-1]: path for path in bi.PACKAGES}
        ev = Evaluator(meter, imports, "expression")
        holder = Vertex(())
        holder.regular = True
        holder.conjuncts = [Conjunct(Data(scope), None, None)]
        env = Env(None, names=frozenset(scope), vertex=holder)
        with meter.active():
            value = ev.eval(node, env)
            try:
                return plain(ev, value)
            except Incomplete as err:
                raise CueError(f"expression: {err}") from None
    except RecursionError:
        raise CueError("expression: nested too deeply") from None
